"""ImageView and LiveImage, Python side: binary frames and the PNG fallback, lossy (JPEG) frames,
tone mapping, a live image's validated values, batches, errors and snapshot, values set from Python,
pixel clicks. Fast; no browser."""

from __future__ import annotations

import io

import numpy as np
import pytest

import slang_kernel.widgets as W
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Sent:
    """Captures ``widget.send(content, buffers)`` calls."""

    def __init__(self, widget) -> None:
        self.msgs: list[tuple[dict, list]] = []
        widget.send = lambda content, buffers=None: self.msgs.append((content, list(buffers or [])))


def _png_pixels(png: bytes) -> np.ndarray:
    from matplotlib.image import imread

    return (imread(io.BytesIO(png), format="png") * 255).round().astype(np.uint8)


def test_imageview_frames_are_binary_and_png_fallback_matches() -> None:
    g = np.linspace(0, 1, 64, dtype=np.float32)
    img = np.outer(g, g)
    img[5, 5] = np.nan
    iv = W.ImageView(img, colormap="gray")
    assert iv._frame_meta["dtype"] == "f4" and iv._frame_meta["channels"] == 1
    assert len(iv._frame) == 64 * 64 * 4
    data, _ = iv._repr_mimebundle_()
    assert WIDGET_MIME in data and data["image/png"].startswith(b"\x89PNG")
    px = _png_pixels(data["image/png"])
    assert px.shape == (64, 64, 4)
    assert tuple(px[5, 5, :3]) == (255, 0, 255)  # NaN magenta
    assert px[63, 63, 0] == 255 and px[0, 0, 0] == 0
    rgb8 = W.ImageView(np.full((4, 6, 3), 200, np.uint8))
    assert rgb8._frame_meta["dtype"] == "u1" and len(rgb8._frame) == 4 * 6 * 3
    with pytest.raises(ValueError):
        W.ImageView(np.zeros((4, 4, 5)))


def test_lossy_frames_are_jpeg_only_when_opaque() -> None:
    from PIL import Image

    yy, xx = np.mgrid[0:48, 0:64]
    rgba = np.stack([xx * 4, yy * 5, np.full_like(xx, 90), np.full_like(xx, 255)], axis=2).astype(np.uint8)
    iv = W.ImageView()
    for img in (rgba, np.ascontiguousarray(rgba[..., :3]), rgba[::-1]):  # RGBA, RGB, a strided view
        iv.update(img, lossy=True)
        assert iv._frame_meta["dtype"] == "jpeg" and iv._frame_meta["channels"] == 4
        back = np.asarray(Image.open(io.BytesIO(iv._frame)).convert("RGB")).astype(int)
        assert back.shape == (48, 64, 3)
        assert np.abs(back - img[..., :3]).max() <= 8  # quality 90, no chroma subsampling
        assert np.array_equal(iv.image, img)  # the exact pixels stay on the Python side
    see_through = rgba.copy()
    see_through[0, 0, 3] = 7
    iv.update(see_through, lossy=True)
    assert iv._frame_meta["dtype"] == "u1" and iv._frame == see_through.tobytes()
    # floats are tone-mapped here first, as the view shows them (exposure, colormap, range), then JPEG
    hdr = rgba.astype(np.float32) / 510
    hdr[..., 3] = 1.0
    for view, img in ((W.ImageView(exposure=1.0), hdr),
                      (W.ImageView(colormap="magma"), np.outer(np.linspace(-2, 3, 48), np.ones(64)).astype(np.float32))):
        view.update(img, lossy=True)
        meta = view._frame_meta
        assert meta["dtype"] == "jpeg" and meta["toned"]
        assert meta["channels"] == (img.shape[2] if img.ndim == 3 else 1)  # what the exact frame has
        back = np.asarray(Image.open(io.BytesIO(view._frame)).convert("RGB")).astype(int)
        assert np.abs(back - view.to_rgba()[..., :3].astype(int)).max() <= 12
        assert np.array_equal(view.image, img)  # exact values stay for hovering and the PNG
    transparent = np.ones((4, 4, 4), np.float32)
    transparent[0, 0, 3] = 0.5
    iv.update(transparent, lossy=True)
    assert iv._frame_meta["dtype"] == "f4"


def test_tonemap_exposure_and_colormaps() -> None:
    from slang_kernel.widgets._encode import colormap_lut, tonemap  # loaded by _load_widgets

    x = np.full((2, 2, 3), 0.25, np.float32)
    assert tonemap(x, exposure=1.0)[0, 0, 0] == 128
    assert tonemap(x, exposure=-10)[0, 0, 0] == 0
    assert tonemap(x, srgb=True)[0, 0, 0] == 137
    lut = np.frombuffer(colormap_lut("viridis"), np.uint8).reshape(256, 3)
    one = tonemap(np.array([[0.0, 1.0]], np.float32), colormap="viridis")
    assert tuple(one[0, 0, :3]) == tuple(lut[0]) and tuple(one[0, 1, :3]) == tuple(lut[255])
    assert len(colormap_lut("magma")) == 768
    # alpha as the browser reads it: exposure scales colour only; NaN anywhere marks the pixel
    rgba = np.array([[[0.25, 0.5, 2.0, 0.5], [0.1, np.nan, 0.1, 1.0], [0.1, 0.1, 0.1, np.nan]]], np.float32)
    out = tonemap(rgba, exposure=1.0)
    assert tuple(out[0, 0]) == (128, 255, 255, 128)
    assert tuple(out[0, 1]) == tuple(out[0, 2]) == (255, 0, 255, 255)
    u8 = tonemap(np.array([[[10, 20, 30, 40]]], np.uint8), exposure=1.0)
    assert tuple(u8[0, 0]) == (20, 40, 60, 40)


def test_liveimage_renders_validated_values_and_reports_errors() -> None:
    seen: list[dict] = []

    def render(v: dict) -> np.ndarray:
        seen.append(v)
        if v["speed"] == 7:
            raise RuntimeError("boom")
        return np.full((8, 8, 3), v["speed"] / 10, np.float32) * np.array(v["tint"], np.float32)

    live = W.LiveImage(render, {"speed": W.Slider(0, 10, 1), "tint": W.Color((1, 0, 0)), "time": W.Time()},
                       size=(64, 64))
    assert seen[0] == {"speed": 1.0, "tint": (1.0, 0.0, 0.0), "time": 0.0}
    assert [c["kind"] for c in live._controls] == ["slider", "color", "time"]
    seq = live._frame_meta["seq"]
    sent = Sent(live)
    live._on_msg(live, {"type": "frame", "values": {"speed": 5, "time": 100, "nope": 1, "tint": "red"}}, [])
    assert seen[-1] == {"speed": 5.0, "tint": (1.0, 0.0, 0.0), "time": 100.0}
    assert live._frame_meta["seq"] == seq + 1
    assert np.frombuffer(live._frame, "<f4")[0] == pytest.approx(0.5)
    live._on_msg(live, {"type": "frame", "values": {"speed": 7}}, [])
    assert sent.msgs and sent.msgs[-1][0]["type"] == "error" and "boom" in sent.msgs[-1][0]["message"]
    live._on_msg(live, {"type": "exec", "code": "x"}, [])  # ignored
    data, _ = live._repr_mimebundle_()
    px = _png_pixels(data["image/png"])  # the last good frame
    assert px.shape == (8, 8, 4) and px[0, 0, 0] == 128


def test_liveimage_batch_advances_time_and_frame_and_paces() -> None:
    """A playing loop asks for several frames per request: each is rendered with time moved on and
    the frame counter advanced; only the last completes the request."""
    seen: list[dict] = []
    metas: list[dict] = []

    def render(v: dict) -> np.ndarray:
        seen.append(dict(v))
        if v["frame"] == 13:
            raise RuntimeError("frame 13")
        return np.zeros((4, 4, 3), np.uint8)

    live = W.LiveImage(render, {"t": W.Time(), "frame": W.Frame(), "k": W.Slider(0, 1, 0.5)}, size=(4, 4))
    live.observe(lambda ch: metas.append(dict(ch["new"])), "_frame_meta")
    seen.clear()
    live._on_msg(live, {"type": "frame", "values": {"t": 1000, "frame": 6, "k": 1}, "req": 4, "count": 3,
                        "interval_ms": 30}, [])
    assert [v["frame"] for v in seen] == [6, 7, 8] and all(v["k"] == 1 for v in seen)
    assert seen[0]["t"] == 1000 and seen[1]["t"] >= 1000 + 30 and seen[2]["t"] >= seen[1]["t"] + 30
    assert [m.get("part") for m in metas] == [4, 4, None]
    assert [m["reqs"] for m in metas] == [[], [], [4]]
    # bad counts are clamped, not trusted; a failing frame ends the batch with an error for the request
    sent = Sent(live)
    seen.clear()
    live._on_msg(live, {"type": "frame", "values": {"frame": 11}, "req": 5, "count": 1e9}, [])
    assert [v["frame"] for v in seen] == [11, 12, 13]
    (err, _), = sent.msgs
    assert err["type"] == "error" and err["reqs"] == [5] and "frame 13" in err["message"]
    seen.clear()
    live._on_msg(live, {"type": "frame", "values": {}, "req": 6, "count": "3", "interval_ms": -5}, [])
    assert len(seen) == 1


def test_snapshot_makes_the_saved_png_the_last_frame() -> None:
    """A static viewer shows the output's stored bundle: snapshot() makes it the current frame."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    frame = {"n": 0}

    def render(values: dict) -> np.ndarray:
        img = np.zeros((8, 8, 4), np.uint8)
        img[..., 0] = 40 * frame["n"]
        img[..., 3] = 255
        return img

    InteractiveShell.instance()  # display() needs a shell
    try:
        view = W.LiveImage(render, {"t": W.Time()}, size=(8, 8), lossy=False)
        with capture_output() as cap:
            display(view)
            frame["n"] = 5
            view.refresh()
            view.set_values({"t": 1234.0})
            view._on_msg(view, {"type": "paused"}, [])  # what the browser sends on pause
        first, last = cap.outputs[0].data["image/png"], cap.outputs[-1].data["image/png"]
        assert len(cap.outputs) == 2 and first != last
        assert view._controls[0]["value"] == 1234.0 and view._controls[0]["playing"] is False
        assert "application/vnd.jupyter.widget-view+json" in cap.outputs[-1].data
    finally:
        InteractiveShell.clear_instance()


def test_set_controls_keeps_values_of_the_same_name() -> None:
    live = W.LiveImage(lambda v: np.zeros((2, 2, 3), np.uint8), {"a": W.Slider(0, 1, 0.5), "t": W.Time()})
    live.set_values({"a": 0.75, "t": 900.0})
    live.set_controls({"a": W.Slider(0, 0.5, 0.1), "b": W.Color((0.0, 1.0, 0.0)), "t": W.Time()})
    assert live.values == {"a": 0.1, "b": (0.0, 1.0, 0.0), "t": 900.0}   # 0.75 is out of the new range
    assert [c["name"] for c in live._controls] == ["a", "b", "t"] and live._controls[2]["value"] == 900.0
    assert W.Time(value=250.0).spec("t")["value"] == 250.0 and W.Frame(value=7).default == 7


def test_set_values_from_python_moves_the_browser_controls() -> None:
    """issue 17: the synced control specs carry the values set from Python; browser messages merge only."""
    live = W.LiveImage(lambda v: np.zeros((2, 2, 3), np.uint8),
                       {"gain": W.Slider(0, 1, 0.25), "tint": W.Color((1.0, 0.5, 0.0))})
    assert live.set_values({"gain": 0.75, "tint": (0.0, 0.0, 1.0), "nope": 3}) == {"gain": 0.75, "tint": (0.0, 0.0, 1.0)}
    specs = {c["name"]: c for c in live._controls}
    assert specs["gain"]["value"] == 0.75 and specs["tint"]["value"] == (0.0, 0.0, 1.0)
    assert specs["gain"]["min"] == 0 and specs["gain"]["max"] == 1          # the rest of the spec is kept
    live.set_values({"gain": 5.0})                                         # refused: nothing changes
    assert {c["name"]: c["value"] for c in live._controls}["gain"] == 0.75
    before = live._controls
    live._on_msg(live, {"type": "frame", "values": {"gain": 0.5}, "req": 1}, [])
    assert live.values["gain"] == 0.5 and live._controls is before          # a browser value is not echoed


def test_pixel_click_runs_on_pixel_and_answers_with_text_or_a_clear_error() -> None:
    clicks: list[tuple[int, int]] = []

    def who(x: int, y: int) -> str:
        clicks.append((x, y))
        if x == 7:
            raise RuntimeError("no such thread")
        return f"thread {x},{y}"

    iv = W.ImageView(np.zeros((8, 16), np.float32), on_pixel=who)
    assert iv.pixel_debug and not W.ImageView(np.zeros((2, 2))).pixel_debug
    sent = Sent(iv)
    iv._on_view_msg(iv, {"type": "pixel", "req": 3, "x": 5, "y": 2}, [])
    reply = sent.msgs[-1][0]
    assert reply == {"type": "pixel", "req": 3, "x": 5, "y": 2, "text": "pixel (5, 2)\nthread 5,2", "error": None}
    assert iv.last_pixel == "thread 5,2" and iv.pixel_text == reply["text"]
    for bad in ({"x": 16, "y": 0}, {"x": -1, "y": 0}, {"x": True, "y": 0}, {"x": "1", "y": 0}):
        iv._on_view_msg(iv, {"type": "pixel", "req": 4, **bad}, [])
        assert sent.msgs[-1][0]["text"] == "" and "pixel (" in sent.msgs[-1][0]["error"], bad
    iv._on_view_msg(iv, {"type": "pixel", "req": 5, "x": 7, "y": 1}, [])
    assert "RuntimeError: no such thread" in sent.msgs[-1][0]["error"]
    assert clicks == [(5, 2), (7, 1)]   # out-of-range clicks never reach on_pixel
    assert iv.pixel(1, 1) == "thread 1,1"   # the same from Python
    with pytest.raises(RuntimeError, match="no on_pixel"):
        W.ImageView(np.zeros((2, 2))).pixel(0, 0)
    with pytest.raises(TypeError, match="on_pixel= or debug="):
        W.ImageView(np.zeros((2, 2)), on_pixel=who, debug=object())
    with pytest.raises(TypeError, match="ComputeKernel"):
        W.ImageView(np.zeros((2, 2)), debug=object())
    with pytest.raises(TypeError, match="must be a function"):
        iv.on_pixel = 3  # type: ignore[assignment]
