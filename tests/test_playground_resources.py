"""A Playground program's resources (slang_kernel.playground.resources): textures drawn alike on every
backend, 3D and one-channel textures, indirect dispatch from a buffer, and the texel formats that an
explicit `[format(...)]` declares."""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram
from tests.playground_shaders import entry
from tests.test_playground import SHADER


@pytest.fixture(scope="module")
def pg(backend_name: str, open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    """A session on each backend (`--backends`): the Playground cells that must draw alike on every one."""
    s = open_session(backend_name)
    yield s
    s.close()


@pytest.mark.vulkan
def test_texture_cell_draws_the_same_on_cpu_as_on_vulkan(open_session: Callable[..., sk.Session]) -> None:
    images = []
    for backend in ("cpu", "vulkan"):
        with open_session(backend) as s:
            s.run_cell(SHADER, name="shader")
            p = PlaygroundProgram(s, "shader", screen=(96, 64))
            assert p.resources["outputTexture"].shape == (64, 96)
            images.append(p.frame(time=0.25, zoom=0.7).texture().astype(int))
    assert images[0][..., :3].std() > 10
    diff = np.abs(images[0] - images[1]).max(axis=2)
    # only the centre pixel may differ: uv = (0, 0) there, and atan2(0, 0) is up to the math library
    assert [tuple(x) for x in np.argwhere(diff > 2)] in ([], [(32, 48)])


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

''' + entry("fillVolume", 'CALL::SIZE_OF("volume")', r'''
    float3 p = (float3(id) + 0.5) / float3(64, 64, 48) - 0.5;
    volume[id] = max(0.0, 1.0 - 2.5 * length(p));
''', threads="4, 4, 4", once=True) + "\n" + entry("showSlice", 'CALL::SIZE_OF("outputTexture")', r'''
    drawPixel(id.xy, (int2 screenSize) => {
        uint3 v = uint3(id.x * 64 / screenSize.x, id.y * 64 / screenSize.y, min(uint(slice * 48), 47u));
        float d = volume[v];
        return float4(d, d, d, 1.0);
    });
''', threads="16, 16, 1")


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

''' + entry("brush", "CALL(1, 1, 1)", r'''
    uint groups = mousePosition.z < 0 ? 2 : 0;   // a 16 x 16 brush while the button is down
    brushArgs[0] = groups;
    brushArgs[1] = groups;
    brushArgs[2] = 1;
''') + "\n" + entry("paint", 'CALL_INDIRECT("brushArgs", 0)', r'''
    int2 p = mousePosition.xy - 8 + int2(id.xy);
    uint w, h;
    canvas.GetDimensions(w, h);
    if (all(p >= 0) && p.x < int(w) && p.y < int(h))
        canvas[uint2(p)] = canvas[uint2(p)] + 0.25;
''', threads="8, 8, 1") + "\n" + entry("show", 'CALL::SIZE_OF("outputTexture")', r'''
    drawPixel(id.xy, (int2 screenSize) => {
        uint w, h;
        canvas.GetDimensions(w, h);
        float c = all(id.xy < uint2(w, h)) ? canvas[id.xy] : 0.0;
        return float4(c, c, c, 1.0);
    });
''', threads="16, 16, 1")


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


def test_declared_formats_are_read_off_the_source() -> None:
    from slang_kernel.playground.resources import declared_formats, texture_format

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
