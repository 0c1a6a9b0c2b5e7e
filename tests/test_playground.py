"""Slang Playground compatibility: our playground/printing/rendering modules, attributes, frames, links."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.playground import (PlaygroundError, PlaygroundProgram, decode_playground_link, decode_prints,
                                     is_playground, playground_link, string_hash)
from slang_kernel.widgets import controls_for, playground_view

# A Playground-style animated procedural image with a slider, pasted as written for the Playground.
SHADER = r'''
import playground;
import rendering;

[playground::TIME]
uniform float time;

[playground::SLIDER(0.5, 0.0, 1.0)]
uniform float zoom;

[playground::COLOR_PICK(0.9, 0.5, 0.2)]
uniform float3 tint;

[shader("compute")]
[numthreads(16, 16, 1)]
[playground::CALL::SIZE_OF("outputTexture")]
void imageMain(uint3 dispatchThreadID : SV_DispatchThreadID)
{
    drawPixel(dispatchThreadID.xy, (int2 screenSize) => {
        float2 uv = float2(dispatchThreadID.xy) / float2(screenSize) - 0.5;
        float t = time;   // seconds
        float r = length(uv) * (4.0 + 40.0 * zoom);
        float v = 0.5 + 0.5 * sin(r - 3.0 * t) * cos(6.0 * atan2(uv.y, uv.x) + t);
        return float4(v * tint, 1.0);
    });
}
'''

PRINTING = r'''
import playground;
import printing;

[playground::ZEROS(8)]
RWStructuredBuffer<float> result;

[playground::RAND(8)]
RWStructuredBuffer<float> noise;

[shader("compute")]
[numthreads(8, 1, 1)]
[playground::CALL(8, 1, 1)]
void computeMain(uint3 id : SV_DispatchThreadID)
{
    result[id.x] = id.x * 2.0 + noise[id.x] * 0.0;
    if (id.x == 5)
        printf("result[%d] = %.1f (%s)\n", int(id.x), result[id.x], "done");
}

[shader("compute")]
[numthreads(1, 1, 1)]
[playground::CALL(1, 1, 1)]
[playground::CALL::ONCE]
void hello(uint3 id : SV_DispatchThreadID)
{
    printf("hello %u %x\n", 7u, 255u);
}
'''


def _vulkan_session() -> sk.Session:
    try:
        return sk.Session(backend="vulkan")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no Vulkan here: {exc}")


@pytest.fixture(scope="module")
def vk():
    s = _vulkan_session()
    yield s
    s.close()


@pytest.fixture(scope="module")
def cpu_textures(cache_dir: str):
    """A CPU session for the texture cells (CPU textures are numpy arrays in shared memory)."""
    s = sk.Session(backend="cpu", cache_dir=cache_dir)
    yield s
    s.close()


@pytest.fixture(scope="module")
def cu(cache_dir: str):
    try:
        s = sk.Session(backend="cuda", cache_dir=cache_dir)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"no CUDA here: {exc}")
    yield s
    s.close()


@pytest.fixture(params=["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan),
                        pytest.param("cuda", marks=pytest.mark.cuda)])
def pg(request: pytest.FixtureRequest) -> sk.Session:
    """The Playground cells that must draw alike on every backend run on each."""
    return request.getfixturevalue({"cpu": "cpu_textures", "vulkan": "vk", "cuda": "cu"}[request.param])


@pytest.mark.vulkan
def test_attributes_are_reflected(vk: sk.Session) -> None:
    vk.run_cell(SHADER, name="shader")
    ck = vk.compile_entry("imageMain")
    assert ("playground_CALL_SIZE_OF", ("outputTexture",)) in ck.entry_point.attributes
    g = {p.name: p.attributes for p in ck.reflection.globals}
    assert g["zoom"][0][0] == "playground_SLIDER" and g["zoom"][0][1] == pytest.approx((0.5, 0.0, 1.0))
    assert g["time"] == (("playground_TIME", ()),)
    assert g["outputTexture"] == (("playground_BLACK_SCREEN", (1.0, 1.0)),)


@pytest.mark.vulkan
def test_playground_shader_renders_and_reacts_to_slider(vk: sk.Session) -> None:
    vk.run_cell(SHADER, name="shader")
    p = PlaygroundProgram(vk, "shader")
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
def test_printing_and_buffers_vulkan(vk: sk.Session) -> None:
    vk.run_cell(PRINTING, name="printing")
    p = PlaygroundProgram(vk, "printing").frame()
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


@pytest.mark.vulkan
def test_texture_cell_draws_the_same_on_cpu_as_on_vulkan(vk: sk.Session, cpu_textures: sk.Session) -> None:
    images = []
    for s in (cpu_textures, vk):
        s.run_cell(SHADER, name="shader")
        p = PlaygroundProgram(s, "shader", screen=(96, 64))
        assert p.resources["outputTexture"].shape == (64, 96)
        images.append(p.frame(time=0.25, zoom=0.7).texture().astype(int))
    assert images[0][..., :3].std() > 10
    diff = np.abs(images[0] - images[1]).max(axis=2)
    # only the centre pixel may differ: uv = (0, 0) there, and atan2(0, 0) is up to the math library
    assert [tuple(x) for x in np.argwhere(diff > 2)] in ([], [(32, 48)])


def test_missing_attribute_is_a_clear_error() -> None:
    with sk.Session(backend="cpu") as s:
        s.run_cell('import playground;\nRWStructuredBuffer<float> b;\n[shader("compute")][numthreads(1,1,1)]'
                   '[playground::CALL(1,1,1)] void k(uint3 i: SV_DispatchThreadID) { b[0] = 1; }')
        with pytest.raises(PlaygroundError, match="`b`.*ZEROS"):
            PlaygroundProgram(s)


def test_share_link_round_trip() -> None:
    link = playground_link(SHADER)
    assert link.startswith("https://shader-slang.org/slang-playground/?target=")
    code = link.split("code=", 1)[1]
    assert "=" not in code and "+" not in code and "/" not in code
    raw = base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))
    assert zlib.decompress(raw).decode() == SHADER
    assert decode_playground_link(link) == SHADER


def test_decode_prints_and_hash() -> None:
    strings = {string_hash("a=%d b=%.2f %s\n"): "a=%d b=%.2f %s\n", string_hash("x"): "x"}
    words = [8, 3, string_hash("a=%d b=%.2f %s\n"), 1, np.int32(-4).view(np.uint32), 3,
             np.float32(2.5).view(np.uint32), 4, string_hash("x")]
    assert decode_prints(np.array(words, np.uint32), strings) == "a=-4 b=2.50 x\n"
    assert is_playground(SHADER) and not is_playground("float f(float x) { return x; }")


@pytest.mark.vulkan
def test_magic_runs_playground_cell(ipython) -> None:
    from slang_kernel.playground import PlaygroundProgram

    shell = ipython
    vk = _vulkan_session()
    shell.user_ns["slang_session"] = vk
    try:
        shell.run_cell_magic("slang", "pgcell", SHADER)
        prog = shell.user_ns.get("slang_playground")
        assert isinstance(prog, PlaygroundProgram)
        assert "image/png" in playground_view(prog).image._repr_mimebundle_()[0]
        shell.run_cell_magic("slang", "plain", "float sq(float x) { return x * x; }")
        assert shell.user_ns["slang_playground"] is prog  # the plain cell is not run
    finally:
        vk.close()


def test_key_input_becomes_a_key_control(cpu_session: sk.Session) -> None:
    from slang_kernel.widgets import Key

    cpu_session.run_cell("""
import playground;
[playground::ZEROS(4)] RWStructuredBuffer<float> keyOut;
[playground::KEY("KeyA")] uniform float keyA;
[shader("compute")][numthreads(4, 1, 1)][playground::CALL(4, 1, 1)]
void keyed(uint3 t: SV_DispatchThreadID) { keyOut[t.x] = keyA; }""", name="keyed")
    prog = PlaygroundProgram(cpu_session, "keyed")
    ctl = controls_for(prog)["keyA"]
    assert isinstance(ctl, Key) and ctl.code == "KeyA"


# -- hot reload: a running program follows its cell -------------------------------------------------

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


@pytest.fixture(scope="module")
def vk_own():
    s = _vulkan_session()
    yield s
    s.close()


@pytest.fixture()
def vk_alone(vk_own: sk.Session):
    """A Vulkan session holding only the cells this test adds (cells see the earlier ones: two tests
    declaring the same globals would be ambiguous)."""
    yield vk_own
    for name in reversed(vk_own.cells):
        vk_own.remove_cell(name)


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


def test_int4_mouse_position_cpu() -> None:
    with sk.Session(backend="cpu") as s:
        s.run_cell("""
import playground;
[playground::MOUSE_POSITION] uniform int4 mousePosition;
[playground::ZEROS(4)] RWStructuredBuffer<int> mouseOut;
[shader("compute")][numthreads(1, 1, 1)][playground::CALL(1, 1, 1)]
void copyMouse(uint3 t: SV_DispatchThreadID) { for (int i = 0; i < 4; i++) mouseOut[i] = mousePosition[i]; }
""", name="int_mouse")
        p = PlaygroundProgram(s, "int_mouse")
        assert p.frame().read("mouseOut").tolist() == [0, 0, 0, 0]
        p.frame(mousePosition=(12.4, 7.6, -3.0, 0))
        assert p.read("mouseOut").tolist() == [12, 8, -3, 0]


# A volume viewer as a Playground user writes it: a one-channel 3D texture filled once, one z slice
# (chosen with a slider) drawn into outputTexture.
VOLUME = r'''
import playground;
import rendering;

[format("r32f")]
[playground::BLACK_3D(64, 64, 48)]
RWTexture3D<float> volume;

[playground::SLIDER(0.5, 0.0, 1.0)]
uniform float slice;

[shader("compute")]
[numthreads(4, 4, 4)]
[playground::CALL::SIZE_OF("volume")]
[playground::CALL::ONCE]
void fillVolume(uint3 id : SV_DispatchThreadID)
{
    float3 p = (float3(id) + 0.5) / float3(64, 64, 48) - 0.5;
    volume[id] = max(0.0, 1.0 - 2.5 * length(p));
}

[shader("compute")]
[numthreads(16, 16, 1)]
[playground::CALL::SIZE_OF("outputTexture")]
void showSlice(uint3 id : SV_DispatchThreadID)
{
    drawPixel(id.xy, (int2 screenSize) => {
        uint3 v = uint3(id.x * 64 / screenSize.x, id.y * 64 / screenSize.y, min(uint(slice * 48), 47u));
        float d = volume[v];
        return float4(d, d, d, 1.0);
    });
}
'''


def _density(x: int, y: int, z: int) -> float:
    p = (np.array([x, y, z]) + 0.5) / np.array([64, 64, 48]) - 0.5
    return float(max(0.0, 1.0 - 2.5 * np.linalg.norm(p)))


def test_volume_slice_viewer_shows_the_slice_written(pg: sk.Session) -> None:
    vk = pg
    vk.run_cell(VOLUME, name="volume_viewer")
    p = PlaygroundProgram(vk, "volume_viewer", screen=(128, 128))
    vol = p.read("volume")
    assert vol.shape == (48, 64, 64, 1) and vol.dtype == np.float32   # [format("r32f")]: one channel
    img = p.frame().texture()   # as stored: row 0 first (image() is the canvas, flipped)
    vol = p.read("volume")
    assert vol[24, 32, 32, 0] == pytest.approx(_density(32, 32, 24), abs=1e-6)
    # the Playground shows outputTexture: pixel (x, y) is voxel (x / 2, y / 2, slice * 48)
    for x, y in [(64, 64), (40, 70), (0, 0), (100, 30)]:
        want = round(_density(x // 2, y // 2, 24) * 255)
        assert abs(int(img[y, x, 0]) - want) <= 1 and img[y, x, 3] == 255, (x, y, img[y, x], want)
    assert img[64, 64, 0] > 200 and img[0, 0, 0] == 0
    img2 = p.frame(slice=0.1).texture()   # another slice: smaller disc
    assert abs(int(img2[64, 64, 0]) - round(_density(32, 32, 4) * 255)) <= 1
    assert (img2[..., 0] > 0).sum() < (img[..., 0] > 0).sum()


# Painting as in the Playground: the mouse (int4: xy position, z < 0 while the button is down) sizes an
# indirect dispatch that adds paint to a one-channel canvas, and the canvas is drawn into outputTexture.
PAINTER = r'''
import playground;
import rendering;

[format("r32f")]
[playground::BLACK(128, 96)]
RWTexture2D<float> canvas;

[playground::MOUSE_POSITION]
uniform int4 mousePosition;

[playground::ZEROS(3)]
RWStructuredBuffer<uint> brushArgs;

[shader("compute")]
[numthreads(1, 1, 1)]
[playground::CALL(1, 1, 1)]
void brush(uint3 id : SV_DispatchThreadID)
{
    uint groups = mousePosition.z < 0 ? 2 : 0;   // a 16 x 16 brush while the button is down
    brushArgs[0] = groups;
    brushArgs[1] = groups;
    brushArgs[2] = 1;
}

[shader("compute")]
[numthreads(8, 8, 1)]
[playground::CALL_INDIRECT("brushArgs", 0)]
void paint(uint3 id : SV_DispatchThreadID)
{
    int2 p = mousePosition.xy - 8 + int2(id.xy);
    uint w, h;
    canvas.GetDimensions(w, h);
    if (all(p >= 0) && p.x < int(w) && p.y < int(h))
        canvas[uint2(p)] = canvas[uint2(p)] + 0.25;
}

[shader("compute")]
[numthreads(16, 16, 1)]
[playground::CALL::SIZE_OF("outputTexture")]
void show(uint3 id : SV_DispatchThreadID)
{
    drawPixel(id.xy, (int2 screenSize) => {
        uint w, h;
        canvas.GetDimensions(w, h);
        float c = all(id.xy < uint2(w, h)) ? canvas[id.xy] : 0.0;
        return float4(c, c, c, 1.0);
    });
}
'''


def test_painting_with_int4_mouse_call_indirect_and_a_float_canvas(pg: sk.Session) -> None:
    vk = pg
    vk.run_cell(PAINTER, name="painter")
    p = PlaygroundProgram(vk, "painter", screen=(128, 96))
    assert p.read("canvas").shape == (96, 128, 1)
    assert p.frame().image()[..., :3].max() == 0          # button up: nothing painted
    p.frame(mousePosition=(40, 30, -40, -30))               # down at (40, 30) for two frames
    img = p.frame(mousePosition=(40, 30, -40, -30)).image()
    p.frame(mousePosition=(100, 80, 40, -30))               # released elsewhere: no paint there
    assert (p.image() == p.texture()[::-1]).all()           # shown flipped, as the Playground shows it
    img = p.texture()
    assert p.read("canvas")[30, 40, 0] == 0.5
    assert abs(int(img[30, 40, 0]) - 128) <= 1 and img[30, 40, 3] == 255      # 0.5 -> 128 in rgba8
    brush = img[22:38, 32:48, 0]
    assert (abs(brush.astype(int) - 128) <= 1).all()          # the 16 x 16 brush, centred on the mouse
    outside = img[..., 0].copy()
    outside[22:38, 32:48] = 0
    assert outside.max() == 0 and p.read("canvas")[80, 100, 0] == 0


def test_time_and_frame_id_in_every_scalar_type(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("""
import playground;
[playground::TIME] uniform uint timeU;
[playground::TIME] uniform int timeI;
[playground::TIME] uniform float timeF;
[playground::FRAME_ID] uniform uint frameU;
[playground::FRAME_ID] uniform int frameI;
[playground::FRAME_ID] uniform float frameF;
[playground::ZEROS(6)] RWStructuredBuffer<float> clocks;
[shader("compute")][numthreads(1, 1, 1)][playground::CALL(1, 1, 1)]
void readClocks(uint3 t: SV_DispatchThreadID)
{
    clocks[0] = float(timeU); clocks[1] = float(timeI); clocks[2] = timeF;
    clocks[3] = float(frameU); clocks[4] = float(frameI); clocks[5] = frameF;
}
""", name="clocks")
    p = PlaygroundProgram(cpu_session, "clocks")
    for _ in range(3):
        p.frame()
    c = p.read("clocks")
    assert c[3:].tolist() == [2, 2, 2]
    assert isinstance(p.uniforms["timeU"], int) and isinstance(p.uniforms["frameI"], int)
    assert isinstance(p.uniforms["timeF"], float)
    assert c[0] == float(p.uniforms["timeU"]) and c[0] == np.floor(c[0]) and abs(c[2] - c[0]) < 1000


def test_declared_formats_are_read_off_the_source() -> None:
    from slang_kernel.playground_resources import declared_formats, texture_format

    src = '''
[playground::URL("https://example.org/a.png")] // [format("r8")] in a comment is not one
Texture2D<float4> photo;
/* [format("rg32f")] */ [format("rgba16f")]
[playground::BLACK(4, 4)] globallycoherent RWTexture2D<float4> hdr;
''' + VOLUME + PAINTER
    assert declared_formats(src) == {"hdr": "rgba16f", "volume": "r32f", "canvas": "r32f"}
    assert texture_format("r32f") == (np.dtype(np.float32), 1)
    assert texture_format("rg32f") == (np.dtype(np.float32), 2)
    assert texture_format("rgba8") == (np.dtype(np.uint8), 4)
    assert texture_format("r32ui") == (np.dtype(np.uint32), 1)
    assert texture_format("r11f_g11f_b10f") is None   # then the texel type decides


def test_explicit_formats_give_channels_and_storage(pg: sk.Session) -> None:
    vk = pg
    vk.run_cell("""
import playground;
[format("rg32f")] [playground::BLACK(8, 4)] RWTexture2D<float2> twoChannels;
[format("rgba8")] [playground::BLACK(8, 4)] RWTexture2D<float4> bytes;
[format("r32f")] [playground::BLACK_3D(4, 4, 2)] RWTexture3D<float> cube;
[shader("compute")][numthreads(8, 4, 1)][playground::CALL(8, 4, 1)]
void fmts(uint3 t: SV_DispatchThreadID)
{
    twoChannels[t.xy] = float2(t.x, t.y);
    bytes[t.xy] = float4(t.x / 7.0, 0.5, 0, 1);
    if (t.x < 4) cube[uint3(t.x, t.y, 1)] = t.x + 10 * t.y;
}
""", name="formats")
    p = PlaygroundProgram(vk, "formats").frame()
    two, b, cube = p.read("twoChannels"), p.read("bytes"), p.read("cube")
    assert two.shape == (4, 8, 2) and two[3, 5].tolist() == [5, 3]
    # CUDA surfaces store texels as written (no UNORM conversion), so rgba8 is kept as floats there
    assert b.shape == (4, 8, 4) and b.dtype == (np.float32 if vk.backend.target == "cuda" else np.uint8)
    as_bytes = np.rint(b * 255) if b.dtype == np.float32 else b
    # 0.5 -> 127.5: lavapipe rounds to 128, NVIDIA's Vulkan to 127 (both within Vulkan's UNORM rules)
    assert as_bytes[2, 7, [0, 2, 3]].tolist() == [255, 0, 255] and as_bytes[2, 7, 1] in (127, 128)
    assert cube.shape == (2, 4, 4, 1) and cube[1, 3, 2, 0] == 32 and cube[0].max() == 0
