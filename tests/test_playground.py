"""Slang Playground compatibility (slang_kernel.playground): a Playground cell's attributes reflected,
its frames drawn and printed, the %%slang magic running it. Hot reload: test_playground_reload.py;
resources and texture formats: test_playground_resources.py; uniform values: test_playground_values.py;
share links and print decoding: test_playground_text.py. SHADER and PRINTING serve those too."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.playground import PlaygroundError, PlaygroundProgram
from slang_kernel.widgets import controls_for, playground_view
from tests.playground_shaders import entry, image_shader

# A Playground-style animated procedural image with a slider and a colour picker.
SHADER = image_shader("imageMain", '''(int2 screenSize) => {
        float2 uv = float2(dispatchThreadID.xy) / float2(screenSize) - 0.5;
        float t = time;   // seconds
        float r = length(uv) * (4.0 + 40.0 * zoom);
        float v = 0.5 + 0.5 * sin(r - 3.0 * t) * cos(6.0 * atan2(uv.y, uv.x) + t);
        return float4(v * tint, 1.0);
    }''', '''
[playground::SLIDER(0.5, 0.0, 1.0)]
uniform float zoom;

[playground::COLOR_PICK(0.9, 0.5, 0.2)]
uniform float3 tint;
''')


PRINTING = r'''
import playground;
import printing;

[playground::ZEROS(8)]
RWStructuredBuffer<float> result;

[playground::RAND(8)]
RWStructuredBuffer<float> noise;

''' + entry("computeMain", "CALL(8, 1, 1)", r'''
    result[id.x] = id.x * 2.0 + noise[id.x] * 0.0;
    if (id.x == 5)
        printf("result[%d] = %.1f (%s)\n", int(id.x), result[id.x], "done");
''', threads="8, 1, 1") + "\n" + entry("hello", "CALL(1, 1, 1)", r'''
    printf("hello %u %x\n", 7u, 255u);
''', once=True)


@pytest.mark.vulkan
def test_attributes_are_reflected(vulkan_session: sk.Session) -> None:
    vulkan_session.run_cell(SHADER, name="shader")
    ck = vulkan_session.kernel("imageMain").compiled()
    assert ("playground_CALL_SIZE_OF", ("outputTexture",)) in ck.entry_point.attributes
    g = {p.name: p.attributes for p in ck.reflection.globals}
    assert g["zoom"][0][0] == "playground_SLIDER" and g["zoom"][0][1] == pytest.approx((0.5, 0.0, 1.0))
    assert g["time"] == (("playground_TIME", ()),)
    assert g["outputTexture"] == (("playground_BLACK_SCREEN", (1.0, 1.0)),)


@pytest.mark.vulkan
def test_playground_shader_renders_and_reacts_to_slider(vulkan_session: sk.Session) -> None:
    vulkan_session.run_cell(SHADER, name="shader")
    p = PlaygroundProgram(vulkan_session, "shader")
    assert [k for k, _ in p.kernels] == ["imageMain"]
    assert set(p.inputs) == {"time", "zoom", "tint"}
    assert p.resources["outputTexture"].shape == (512, 512)
    assert p.output_name() == "outputTexture"
    a = p.frame(time=0.0).image()
    assert a.shape == (512, 512, 4) and a.dtype == np.uint8
    assert a[..., :3].std() > 10, "the frame is blank"
    b = p.frame(time=0.0, zoom=0.9).image()
    assert np.abs(a.astype(int) - b).mean() > 5, "the slider did not change the pixels"
    c = p.frame(time=0.5, zoom=0.9).image()
    assert np.abs(c.astype(int) - b).mean() > 1, "time did not animate"
    controls = controls_for(p)  # from the attribute; a new view starts at the value the program holds
    assert controls["zoom"].min == 0.0 and controls["zoom"].max == 1.0 and controls["zoom"].value == 0.9


@pytest.mark.vulkan
def test_printing_and_buffers_vulkan(vulkan_session: sk.Session) -> None:
    vulkan_session.run_cell(PRINTING, name="printing")
    p = PlaygroundProgram(vulkan_session, "printing").frame()
    assert "result[5] = 10.0 (done)" in p.printed and "hello 7 ff" in p.printed
    assert p.read("result").tolist() == [i * 2.0 for i in range(8)]
    assert p.output_name() is None and p.buffers() == ["result", "noise"]
    p.frame()  # CALL::ONCE: hello runs on the first frame only
    assert "hello" not in p.printed and "result[5]" in p.printed


def test_printing_and_buffers_cpu() -> None:
    with sk.Session(backend="cpu") as s:
        s.run_cell(PRINTING, name="printing")
        p = PlaygroundProgram(s, "printing").frame()
        assert "result[5] = 10.0 (done)" in p.printed and "hello 7 ff" in p.printed
        n = p.read("noise")
        assert n.shape == (8,) and (n >= 0).all() and (n < 1).all() and n.std() > 0
        assert p.read("result")[5] == 10.0


def test_missing_attribute_is_a_clear_error() -> None:
    with sk.Session(backend="cpu") as s:
        s.run_cell('import playground;\nRWStructuredBuffer<float> b;\n[shader("compute")][numthreads(1,1,1)]'
                   '[playground::CALL(1,1,1)] void k(uint3 i: SV_DispatchThreadID) { b[0] = 1; }')
        with pytest.raises(PlaygroundError, match="`b`.*ZEROS"):
            PlaygroundProgram(s)


@pytest.mark.vulkan
def test_magic_runs_playground_cell(ipython, open_session: Callable[..., sk.Session]) -> None:
    shell = ipython
    with open_session("vulkan") as vk:   # its own: SHADER's globals would clash with the module session's
        shell.user_ns["slang_session"] = vk
        shell.run_cell_magic("slang", "pgcell", SHADER)
        prog = shell.user_ns.get("slang_playground")
        assert isinstance(prog, PlaygroundProgram)
        assert "image/png" in playground_view(prog).image._repr_mimebundle_()[0]
        shell.run_cell_magic("slang", "plain", "float sq(float x) { return x * x; }")
        assert shell.user_ns["slang_playground"] is prog  # the plain cell is not run
