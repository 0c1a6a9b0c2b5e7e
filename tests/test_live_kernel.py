"""live(kernel): a view of a kernel's image follows its cell (hot reload: an edit reaches the next
frame, an unrelated cell changes nothing, a broken edit keeps the last good revision with the error in
each frame's header); a pixel click debugs that pixel's thread. Fast; no browser."""

from __future__ import annotations

import numpy as np
import pytest

import slang_kernel.widgets as W
from tests.test_image_view import Sent

IMAGE_KERNEL = """
[shader("compute")][numthreads(4, 4, 1)]
void paint(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float4> image, uniform float gain)
{ image[t.y * 4 + t.x] = float4(COLOR * gain, 1.0); }
"""


def _frame(view: W.LiveImage, req: int, **values: object) -> np.ndarray:
    view._on_msg(view, {"type": "frame", "values": values, "req": req}, [])
    assert view._frame_meta["reqs"] == [req]
    return np.asarray(view.image)


def test_live_kernel_follows_its_cell(cpu_session) -> None:
    s = cpu_session
    s.run_cell(IMAGE_KERNEL.replace("COLOR", "float3(1, 0, 0)"), name="painter")
    image = np.zeros((4, 4, 4), np.float32)
    view = W.live(s.kernel("paint"), image="image", controls={"gain": W.Slider(0, 1, 1.0)},
                  values={"image": image}, threads=(4, 4, 1), display_size=(4, 4))
    assert tuple(view.image[0, 0]) == (255, 0, 0, 255) and view._frame_meta["error"] is None
    assert tuple(_frame(view, 1, gain=0.5)[0, 0]) == (128, 0, 0, 255)
    good = view.follower.good

    s.run_cell("float unrelated(float x) { return x; }", name="elsewhere")
    assert tuple(_frame(view, 2)[0, 0]) == (128, 0, 0, 255) and view.follower.good is good

    s.run_cell(IMAGE_KERNEL.replace("COLOR", "float3(0, 1, 0)"), name="painter")   # the edit
    assert tuple(_frame(view, 3)[0, 0]) == (0, 128, 0, 255)                      # on the next frame
    assert view._frame_meta["error"] is None and view.follower.good is not good

    with pytest.raises(Exception, match="did not compile"):
        s.run_cell(IMAGE_KERNEL.replace("COLOR", "float3(0, 0, 1) +"), name="painter")
    assert tuple(_frame(view, 4)[0, 0]) == (0, 128, 0, 255)                      # the last good one
    error = view._frame_meta["error"]
    assert error and "still running the last good revision" in error and "painter" in error
    assert _frame(view, 5) is not None and view._frame_meta["error"] == error    # every frame says so

    s.run_cell(IMAGE_KERNEL.replace("COLOR", "float3(0, 0, 1)"), name="painter")   # the fix
    assert tuple(_frame(view, 6)[0, 0]) == (0, 0, 128, 255) and view._frame_meta["error"] is None


def test_live_kernel_keeps_the_last_good_revision_when_parameters_change(cpu_session) -> None:
    s = cpu_session
    s.run_cell(IMAGE_KERNEL.replace("COLOR", "float3(1, 1, 1)"), name="params")
    image = np.zeros((4, 4, 4), np.float32)
    view = W.live(s.kernel("paint"), image="image", controls={"gain": W.Slider(0, 1, 1.0)},
                  values={"image": image}, threads=(4, 4, 1))
    s.run_cell(IMAGE_KERNEL.replace("uniform float gain", "uniform float gain, uniform float bias")
               .replace("COLOR", "float3(bias)"), name="params")
    assert tuple(_frame(view, 1, gain=0.5)[0, 0]) == (128, 128, 128, 255)   # the old code, the new value
    assert "bias" in view._frame_meta["error"] and "still running" in view._frame_meta["error"]


PIXEL_KERNEL = """
import debug;
[shader("compute")][numthreads(4, 4, 1)]
void tint(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float4> image, uniform float gain)
{
    float r = gain * float(t.x) / 4.0;
    printf("r=%f\\n", r);
    debug_value("r", r);
    image[t.y * 4 + t.x] = float4(r, float(t.y) / 4.0, 0.0, 1.0);
}
"""


def test_pixel_click_of_a_kernel_image_debugs_that_thread(cpu_session) -> None:
    """ImageView(debug=k, params=...) and live(k): pixel (x, y) is thread (x, y, 0), run through
    k.debug with the view's parameters (a live view's current control values)."""
    s = cpu_session
    s.run_cell(PIXEL_KERNEL, name="tinter")
    k = s.kernel("tint")
    image = np.zeros((4, 4, 4), np.float32)
    iv = W.ImageView(image, debug=k, params={"image": image, "gain": 2.0, "threads": (4, 4, 1)})
    d = iv.pixel(3, 1)
    assert d.thread == (3, 1, 0) and d.printed == ("r=1.500000",) and float(d.values["r"]) == 1.5
    assert "thread (3, 1, 0)" in iv.pixel_text and "r=1.500000" in iv.pixel_text

    view = W.live(k, image="image", controls={"gain": W.Slider(0, 4, 1.0)}, values={"image": image},
                  threads=(4, 4, 1), display_size=(4, 4))
    assert view.pixel_debug
    _frame(view, 1, gain=3.0)
    sent = Sent(view)
    view._on_msg(view, {"type": "pixel", "req": 1, "x": 2, "y": 3}, [])   # LiveImage leaves it to the view
    view._on_view_msg(view, {"type": "pixel", "req": 1, "x": 2, "y": 3}, [])
    reply = sent.msgs[-1][0]
    assert reply["error"] is None and "thread (2, 3, 0)" in reply["text"] and "r=1.500000" in reply["text"]
    assert float(view.last_pixel.values["r"]) == 1.5   # gain 3 (the slider's value) * 2 / 4


def test_live_kernel_makes_its_texture_with_the_texel_channels(cpu_session) -> None:
    """Without values={"image": ...}, live() makes the texture: an RWTexture2D<float4> gets 4
    channels (reflection names the texel type only as text), so red stays red, not grey."""
    s = cpu_session
    s.run_cell("""
[shader("compute")][numthreads(4, 4, 1)]
void paint_texture(uint3 t: SV_DispatchThreadID, uniform RWTexture2D<float4> image, uniform float gain)
{ image[t.xy] = float4(gain, 0, 0, 1); }""", name="own_texture")
    view = W.live(s.kernel("paint_texture"), image="image", controls={"gain": W.Slider(0, 1, 1.0)}, size=(4, 4),
                  display_size=(4, 4))
    assert view.image.shape[:2] == (4, 4) and tuple(view.image[0, 0]) == (255, 0, 0, 255)
