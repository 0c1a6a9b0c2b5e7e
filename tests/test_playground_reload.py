"""Hot reload: a running Playground program follows its cell (slang_kernel.playground). An edit shows
the new code and keeps the program's state, changed declarations are made anew, a broken edit keeps the
last good revision until a fix, a dependency's edit reaches the program, other cells leave it alone, and
a backend switch moves its resources."""

from __future__ import annotations

from typing import Iterator

import pytest

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram
from tests.test_playground import PRINTING

# A program with a texture a CALL::ONCE entry point fills (its contents must survive an edit), a frame
# counter buffer, a slider and a clock; COLOR is what the edits change.
LIVE = r'''
import playground;

[playground::BLACK(16, 16)]
RWTexture2D<float4> pattern;

[playground::BLACK(16, 16)]
RWTexture2D<float4> outputTexture;

[playground::ZEROS(1)]
RWStructuredBuffer<float> frames;

[playground::SLIDER(0.5, 0.0, 1.0)]
uniform float gain;

[playground::TIME]
uniform float time;

[shader("compute")][numthreads(16, 16, 1)][playground::CALL(16, 16, 1)][playground::CALL::ONCE]
void fill(uint3 t: SV_DispatchThreadID) { pattern[t.xy] = float4(t.x < 8 ? 1.0 : 0.5, 1.0, 1.0, 1.0); }

[shader("compute")][numthreads(16, 16, 1)][playground::CALL::SIZE_OF("outputTexture")]
void paint(uint3 t: SV_DispatchThreadID)
{
    outputTexture[t.xy] = float4(pattern[t.xy].xyz * COLOR * gain, 1.0);
    if (t.x == 0 && t.y == 0)
        frames[0] += 1.0;
}
'''
RED, GREEN = "float3(1.0, 0.0, 0.0)", "float3(0.0, 1.0, 0.0)"


@pytest.fixture()
def vk_alone(vulkan_session: sk.Session) -> Iterator[sk.Session]:
    """A Vulkan session holding only the cells this test adds (cells see the earlier ones: two tests
    declaring the same globals would be ambiguous)."""
    yield vulkan_session
    for name in reversed(vulkan_session.cells):
        vulkan_session.remove_cell(name)


@pytest.mark.vulkan
def test_edit_while_running_shows_the_new_code_and_keeps_state(vk_alone: sk.Session) -> None:
    vk = vk_alone
    vk.run_cell(LIVE.replace("COLOR", RED), name="live")
    p = PlaygroundProgram(vk, "live")
    a = p.frame(gain=0.8).image()
    assert tuple(a[0, 0]) == (204, 0, 0, 255) and tuple(a[0, 15]) == (102, 0, 0, 255)
    t_before, kept = p.uniforms["time"], (p.resources["pattern"], p.resources["frames"], p.start)

    vk.run_cell(LIVE.replace("COLOR", GREEN), name="live")   # the user edits the cell and re-runs it
    b = p.frame().image()
    assert tuple(b[0, 0]) == (0, 204, 0, 255)       # the new colour, with the slider's value (0.8) kept
    assert tuple(b[0, 15]) == (0, 204, 0, 255)      # ... and the pattern the ONCE kernel drew before
    assert (p.resources["pattern"], p.resources["frames"], p.start) == kept
    assert p.read("frames")[0] == 2                  # the buffer counted on
    assert p.uniforms["time"] > t_before and p.inputs["gain"].value == pytest.approx(0.8)
    assert p.rebinds == 1 and p.error is None and "GREEN" not in p.source and GREEN in p.source


@pytest.mark.vulkan
def test_changed_declarations_are_made_anew(vk_alone: sk.Session) -> None:
    vk = vk_alone
    vk.run_cell(LIVE.replace("COLOR", RED), name="decl")
    p = PlaygroundProgram(vk, "decl").frame(gain=0.8)
    frames = p.resources["frames"]
    edited = (LIVE.replace("COLOR", "tint")
              .replace("[playground::SLIDER(0.5, 0.0, 1.0)]", "[playground::SLIDER(0.25, 0.0, 1.0)]")
              .replace("ZEROS(1)", "ZEROS(2)")
              .replace("[playground::TIME]\nuniform float time;", "[playground::COLOR_PICK(0.0, 0.0, 1.0)]\nuniform float3 tint;"))
    vk.run_cell(edited, name="decl")
    img = p.frame().image()
    assert set(p.inputs) == {"gain", "tint"}           # TIME dropped, the colour picker is new
    assert p.inputs["gain"].value == 0.25               # a changed SLIDER starts at its new default
    assert p.resources["frames"] is not frames and p.read("frames").shape == (2,)
    assert tuple(img[0, 0]) == (0, 0, 64, 255)          # the ONCE kernel ran again: new resources


def test_unrelated_cells_leave_a_program_alone(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell(PRINTING, name="printing")
    p = PlaygroundProgram(s, "printing").frame()
    compiled = dict(p.compiled)
    for i in range(3):  # other cells, one of them broken
        s.run_cell(f"float other{i}(float x) {{ return x * {i}; }}", name=f"other{i}")
    with pytest.raises(sk.SlangCompileError):
        s.run_cell("float nope(float x) { return x +; }", name="nope")
    p.frame()
    assert all(compiled[k] is ck for k, ck in p.compiled.items())   # the same compiled revisions
    assert p.rebinds == 0 and p.error is None and "result[5] = 10.0" in p.printed


BUFFERS = r'''
import playground;
[playground::ZEROS(4)] RWStructuredBuffer<float> out;
[playground::SLIDER(2.0, 0.0, 10.0)] uniform float k;
[shader("compute")][numthreads(4, 1, 1)][playground::CALL(4, 1, 1)]
void fillOut(uint3 t: SV_DispatchThreadID) { out[t.x] = EXPR; }
'''


def test_broken_edit_keeps_the_last_good_revision_until_a_fix(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell(BUFFERS.replace("EXPR", "k * t.x"), name="buf")
    p = PlaygroundProgram(s, "buf")
    assert p.frame(k=3.0).read("out").tolist() == [0, 3, 6, 9]
    with pytest.raises(sk.SlangCompileError):
        s.run_cell(BUFFERS.replace("EXPR", "k * t.x +"), name="buf")
    assert p.frame().read("out").tolist() == [0, 3, 6, 9]     # the last good revision keeps running
    assert p.error is not None and "still running the last good revision" in p.error
    assert "buf" in p.error and "error" in p.error and "k * t.x +" in p.error   # the diagnostic, with the line
    s.run_cell(BUFFERS.replace("EXPR", "k + t.x"), name="buf")
    assert p.frame().read("out").tolist() == [3, 4, 5, 6] and p.error is None   # fixed: the new code, k kept


def test_the_banner_names_the_one_cell_the_user_edited(cpu_session: sk.Session) -> None:
    # as the front ends run it: the cell keeps its first name (In[1]) and shows its latest prompt (In[3])
    s = cpu_session
    s.run_cell(BUFFERS.replace("EXPR", "k * t.x"), name="In[1]", label="In[1]")
    p = PlaygroundProgram(s, "In[1]")
    p.frame()
    with pytest.raises(sk.SlangCompileError):
        s.run_cell(BUFFERS.replace("EXPR", "k * t.x +"), name="In[1]", label="In[3]")
    p.frame()
    assert p.error is not None
    head = p.error.splitlines()[0]
    assert head == "In[3] did not compile: still running the last good revision.", p.error
    assert "In[1]" not in p.error and "k * t.x +" in p.error


def test_a_dependency_edit_reaches_the_program_and_a_break_is_shown(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float shade(float x) { return x + 1.0; }", name="lib")
    s.run_cell(BUFFERS.replace("EXPR", "shade(k * t.x)"), name="user")
    p = PlaygroundProgram(s, "user")
    assert p.frame().read("out").tolist() == [1, 3, 5, 7]
    s.run_cell("float shade(float x) { return x * 10.0; }", name="lib")      # a body edit
    assert p.frame().read("out").tolist() == [0, 20, 40, 60] and p.error is None
    s.run_cell("float shade(float x, float y) { return x * y; }", name="lib")  # breaks `user`
    assert p.frame().read("out").tolist() == [0, 20, 40, 60]
    assert p.error is not None and "user" in p.error and "no longer compiles" in p.error
    s.run_cell("float shade(float x) { return -x; }", name="lib")
    assert p.frame().read("out").tolist() == [0, -2, -4, -6] and p.error is None


def test_backend_switch_makes_resources_on_the_new_backend(cache_dir: str) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir) as s:
        s.run_cell(BUFFERS.replace("EXPR", "k * t.x"), name="moving")
        p = PlaygroundProgram(s, "moving")
        p.frame(k=5.0)
        old_out, old_backend = p.resources["out"], p.backend
        try:
            s.set_backend("vulkan")
        except sk.BackendUnavailable as exc:
            pytest.skip(f"no Vulkan here: {exc}")
        assert p.frame().read("out").tolist() == [0, 5, 10, 15]   # k survived; new buffer, new device
        assert p.backend is s.backend and p.backend is not old_backend and p.resources["out"] is not old_out
        s.set_backend("cpu")
        assert p.frame().read("out").tolist() == [0, 5, 10, 15] and p.error is None
