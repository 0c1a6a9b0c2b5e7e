"""Playground views (widgets/playground_view.py): a view follows its cell's edits, inputs and errors;
a re-run cell continues its program; a playing view stays in its cell through a failed edit (both
front ends go through FrontEnd.run, whose failure path shows the cell's view again:
widgets.keep_cell_view)."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.utils.capture import capture_output

import slang_kernel.widgets as W
from slang_kernel.compiler.diagnostics import SlangCompileError
from tests.playground_shaders import image_shader
from slang_kernel.playground import PlaygroundProgram
from tests.test_live_kernel import _frame

GOOD = "%%slang" + image_shader(
    "imageMain", "(int2 screenSize) => float4(float2(id) / float2(screenSize), 0.5 + 0.5 * sin(time), 1.0)",
    thread="uint2 id : SV_DispatchThreadID", at="id")
BROKEN = GOOD.replace("0.5 + 0.5 * sin(time)", "0.5 + 0.5 * sin(tim)")   # the user's typo

WIDGET = "application/vnd.jupyter.widget-view+json"


def _views(outputs: list[Any]) -> list[str]:
    return [o.data[WIDGET]["model_id"] for o in outputs if WIDGET in o.data]


def test_failed_edit_keeps_the_playing_view_in_its_cell(ipython: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("SLANG_KERNEL_BACKEND", "cpu")
    shell = ipython
    with capture_output() as first:
        r = shell.run_cell(GOOD, store_history=True, cell_id="pg")
    assert r.error_in_exec is None
    prog = shell.user_ns["slang_playground"]
    assert isinstance(prog, PlaygroundProgram) and prog.error is None
    shown = _views(first.outputs)
    assert shown, "the playground cell showed no live view"
    good = prog.frame(time=1.0).image()

    with capture_output() as second:   # Jupyter clears the cell's output before this run
        r = shell.run_cell(BROKEN, store_history=True, cell_id="pg")
    assert isinstance(r.error_in_exec, SlangCompileError)
    assert _views(second.outputs) == shown, "the cell's own view is not shown again after the failed edit"
    assert prog.error is not None and "still running the last good revision" in prog.error
    assert "tim" in prog.error   # the banner names the error
    assert (prog.frame(time=1.0).image() == good).all()   # it plays the last good revision

    with capture_output() as third:    # the fix: the view follows the cell again, banner gone
        r = shell.run_cell(GOOD.replace("0.5 * sin", "0.25 * sin"), store_history=True, cell_id="pg")
    assert r.error_in_exec is None and prog.error is None
    assert _views(third.outputs)


@pytest.mark.vulkan
def test_playground_view_follows_edits_inputs_and_errors(open_session) -> None:
    from tests.test_playground_reload import GREEN, LIVE, RED

    vk = open_session("vulkan")
    try:
        vk.run_cell(LIVE.replace("COLOR", RED), name="pgview")
        prog = W.show_cell(vk, "pgview", display=lambda _: None)
        assert prog is not None
        view = W.playground_view(prog)
        image = view.image
        assert isinstance(image, W.PlaygroundImage) and [c["name"] for c in image._controls] == ["gain", "time"]
        assert tuple(_frame(image, 1, gain=1.0, time=10.0)[0, 0]) == (255, 0, 0, 255)

        vk.run_cell(LIVE.replace("COLOR", GREEN), name="pgview")
        assert tuple(_frame(image, 2, time=20.0)[0, 0]) == (0, 255, 0, 255)   # slider value kept

        vk.run_cell(LIVE.replace("COLOR", "tint").replace(
            "[playground::TIME]", "[playground::COLOR_PICK(0.0, 0.0, 1.0)]\nuniform float3 tint;\n[playground::TIME]"),
            name="pgview")
        assert tuple(_frame(image, 3, time=30.0)[0, 0]) == (0, 0, 255, 255)
        assert [c["name"] for c in image._controls] == ["gain", "tint", "time"]   # the new input's control
        assert image.values["gain"] == 1.0

        with pytest.raises(Exception, match="did not compile"):
            vk.run_cell(LIVE.replace("COLOR", "float3(1.0, 1.0, 0.0) oops"), name="pgview")
        assert tuple(_frame(image, 4, time=40.0)[0, 0]) == (0, 0, 255, 255)
        assert "oops" in image._frame_meta["error"] and prog.error == image._frame_meta["error"]
        vk.run_cell(LIVE.replace("COLOR", "float3(1.0, 1.0, 0.0)"), name="pgview")
        assert tuple(_frame(image, 5, time=50.0)[0, 0]) == (255, 255, 0, 255)
        assert image._frame_meta["error"] is None and [c["name"] for c in image._controls] == ["gain", "time"]
    finally:
        vk.close()


def test_an_edit_continues_the_views_clock(open_session) -> None:
    # the view played to t = 7.5 s; the edited cell's new view shows t = 7500 ms, not the program's
    # own clock since it was made (it read ~0 s after a quick edit)
    s = open_session("cpu")
    try:
        s.run_cell(GOOD.split("\n", 1)[1], name="clock")
        shown: list = []
        prog = W.show_cell(s, "clock", display=shown.append)
        assert prog is not None
        shown[0].image._on_msg(None, {"type": "frame", "values": {"time": 7500.0}, "req": 1, "count": 1}, [])
        s.run_cell(GOOD.split("\n", 1)[1].replace("0.5 + 0.5", "0.25 + 0.5"), name="clock")
        assert W.show_cell(s, "clock", display=shown.append) is prog
        (spec,) = shown[1].image._controls
        assert spec["kind"] == "time" and spec["value"] == pytest.approx(7500.0), spec
        assert prog.uniforms["time"] == pytest.approx(7.5)
        # a failed edit: the same view is shown again (keep_cell_view) and its clock goes on from 9 s
        shown[1].image._on_msg(None, {"type": "frame", "values": {"time": 9000.0}, "req": 2, "count": 1}, [])
        with pytest.raises(SlangCompileError):
            s.run_cell(BROKEN.split("\n", 1)[1], name="clock")
        again: list = []
        assert W.keep_cell_view(s, "clock", display=again.append)
        (spec,) = again[0]._controls
        assert spec["value"] == pytest.approx(9000.0) and spec["playing"], spec
    finally:
        s.close()


@pytest.mark.vulkan
def test_rerunning_a_playground_cell_continues_its_program(open_session) -> None:
    from tests.test_playground_reload import GREEN, LIVE, RED

    vk = open_session("vulkan")
    shown: list = []
    try:
        vk.run_cell(LIVE.replace("COLOR", RED), name="again")
        first = W.show_cell(vk, "again", display=shown.append)
        assert first is not None
        first.frame(gain=0.25, time=5000.0)
        vk.run_cell(LIVE.replace("COLOR", GREEN), name="again")   # the notebook cell re-run
        second = W.show_cell(vk, "again", display=shown.append)
        assert second is first and len(shown) == 2
        assert shown[0].image.comm is None                         # the replaced output's widget is closed
        assert shown[1].image.comm is not None
        controls = shown[1].image.controls
        assert controls["gain"].value == 0.25   # the slider goes on, and the clock where it was (ms)
        assert controls["time"].default == pytest.approx(5000.0 * 1000.0)
        assert tuple(shown[1].image.image[0, 0]) == (0, 64, 0, 255)
    finally:
        vk.close()
    import gc
    import weakref

    shown[1].close()   # an open view keeps its program (and session); closed, nothing here does
    gone = weakref.ref(vk)
    del vk, first, second, shown, controls
    gc.collect()
    assert gone() is None, "show_cell keeps the session alive"


TRAINS = r'''
import playground;

[playground::BLACK(8, 8)]
RWTexture2D<float4> outputTexture;

[playground::ZEROS(1)]
RWStructuredBuffer<float> steps;

[shader("compute")][numthreads(1, 1, 1)][playground::CALL(1, 1, 1)]
void trainStep(uint3 t: SV_DispatchThreadID) { steps[0] += 1.0; }

[shader("compute")][numthreads(8, 8, 1)][playground::CALL::SIZE_OF("outputTexture")]
void showSteps(uint3 t: SV_DispatchThreadID) { outputTexture[t.xy] = float4(steps[0] / 255.0, 0.0, 0.0, 1.0); }
'''


def test_a_demo_that_changes_every_frame_without_a_clock_gets_a_play_button(open_session) -> None:
    """gsplat2d-diff's shape: no TIME or FRAME_ID, but an entry point runs (trains) on every frame."""
    s = open_session("cpu")
    try:
        s.run_cell(TRAINS, name="trains")
        prog = W.show_cell(s, "trains", display=lambda _: None)
        assert prog is not None
        image = W.playground_view(prog).image
        assert isinstance(image, W.PlaygroundImage)
        assert [(c["name"], c["kind"], c["playing"]) for c in image._controls] == [("play", "time", False)]
        first = int(_frame(image, 1, play=0.0)[0, 0, 0])
        assert int(_frame(image, 2, play=16.0)[0, 0, 0]) == first + 1     # each played frame is a step

        s.run_cell(TRAINS.replace("[playground::CALL(1, 1, 1)]", "[playground::CALL(1, 1, 1)][playground::CALL::ONCE]")
                   .replace('[playground::CALL::SIZE_OF("outputTexture")]',
                            '[playground::CALL::SIZE_OF("outputTexture")][playground::CALL::ONCE]'), name="still")
        still = W.show_cell(s, "still", display=lambda _: None)
        assert still is not None and not isinstance(W.playground_view(still).image, W.PlaygroundImage)
    finally:
        s.close()
