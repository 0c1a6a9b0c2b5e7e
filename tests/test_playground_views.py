"""A playing Playground view stays in its cell through a failed edit (both front ends go through
FrontEnd.run, whose failure path shows the cell's view again: widgets.keep_cell_view)."""

from __future__ import annotations

from typing import Any

from IPython.utils.capture import capture_output

from slang_kernel.compiler.diagnostics import SlangCompileError
from slang_kernel.playground import PlaygroundProgram

GOOD = r'''%%slang
import playground;
import rendering;

[playground::TIME]
uniform float time;

[shader("compute")]
[numthreads(16, 16, 1)]
[playground::CALL::SIZE_OF("outputTexture")]
void imageMain(uint2 id : SV_DispatchThreadID)
{
    drawPixel(id, (int2 screenSize) => float4(float2(id) / float2(screenSize), 0.5 + 0.5 * sin(time), 1.0));
}
'''
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
