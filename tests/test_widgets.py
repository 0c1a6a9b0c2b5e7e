"""Python side of the notebook widgets: paging messages, histogram, heat map, NaN detection, diff,
control validation, static fallbacks; and live views following their cells (hot reload: an edit
reaches the next frame, an unrelated cell changes nothing, a broken edit keeps the last good
revision with the error in each frame's header). Fast; no browser."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pytest

import slang_kernel.widgets as W
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Sent:
    """Captures ``widget.send(content, buffers)`` calls."""

    def __init__(self, widget) -> None:
        self.msgs: list[tuple[dict, list]] = []
        widget.send = lambda content, buffers=None: self.msgs.append((content, list(buffers or [])))


def _decode(reply: dict, buffers: list, columns: list[dict]) -> list[np.ndarray]:
    return [np.frombuffer(b, dtype=np.uint8 if c["wire"] == "|b1" else c["wire"])
            for b, c in zip(buffers, [c for c in columns if c["wire"] != "text"])]


# ---------------------------------------------------------------- BufferView


def test_vector_columns_and_paging_message_is_binary() -> None:
    a = np.arange(1000 * 4, dtype=np.float32).reshape(1000, 4)
    bv = W.BufferView(a)
    assert [c["name"] for c in bv._columns] == ["x", "y", "z", "w"]
    assert bv.rows == 1000
    sent = Sent(bv)
    bv._on_msg(bv, {"type": "page", "view": "v1", "req": 7, "start": 500, "count": 10}, [])
    (reply, buffers), = sent.msgs
    assert reply["req"] == 7 and reply["view"] == "v1" and reply["start"] == 500 and reply["count"] == 10
    assert len(json.dumps(reply)) < 300  # header only; data goes as buffers
    cols = _decode(reply, buffers, bv._columns)
    assert all(isinstance(b, bytes) and len(b) == 40 for b in buffers)
    np.testing.assert_array_equal(np.stack(cols, axis=1), a[500:510])


def test_paging_clips_and_rejects_garbage(caplog: pytest.LogCaptureFixture) -> None:
    bv = W.BufferView(np.arange(50, dtype=np.int64))
    reply, buffers = bv.page(45, 100)
    assert (reply["start"], reply["count"]) == (45, 5)
    np.testing.assert_array_equal(np.frombuffer(buffers[0], "<i8"), np.arange(45, 50))
    reply, _ = bv.page(10, 10**9)
    assert reply["count"] == 40
    sent = Sent(bv)
    with caplog.at_level(logging.WARNING, logger="slang_kernel.widgets"):
        bv._on_msg(bv, {"type": "page", "start": "x", "count": 3}, [])
        bv._on_msg(bv, {"type": "bogus"}, [])
        bv._on_msg(bv, ["not", "a", "dict"], [])
    assert sent.msgs == []
    assert "ignored" in caplog.text


def test_struct_fields_names_and_nd_labels() -> None:
    dt = np.dtype([("pos", "<f4", (3,)), ("id", "<u4"), ("ok", "?"), ("h", "<f2")])
    s = np.zeros((2, 3), dt)
    s["pos"][1, 2] = (1, 2, 3)
    s["id"] = np.arange(6).reshape(2, 3)
    bv = W.BufferView(s)
    assert [(c["name"], c["wire"]) for c in bv._columns] == [
        ("pos.x", "<f4"), ("pos.y", "<f4"), ("pos.z", "<f4"), ("id", "<u4"), ("ok", "|b1"), ("h", "<f4")]
    reply, buffers = bv.page(0, 6)
    assert reply["labels"][5] == "1,2"
    cols = _decode(reply, buffers, bv._columns)
    assert cols[2][5] == 3 and cols[3].tolist() == list(range(6))
    named = W.BufferView(np.zeros((4, 2)), columns=["u", "v"])
    assert [c["name"] for c in named._columns] == ["u", "v"]
    with pytest.raises(ValueError):
        W.BufferView(np.zeros((4, 2)), columns=["only_one"])
    image = W.BufferView(np.zeros((8, 16, 4), np.float32))
    assert image.rows == 128 and len(image._columns) == 4


def test_nan_inf_detection_and_seek() -> None:
    a = np.ones((100, 2), np.float32)
    a[3, 1] = np.nan
    a[70, 0] = np.inf
    a[71, 0] = -np.inf
    bv = W.BufferView(a)
    assert bv._summary["nan"] == 1 and bv._summary["inf"] == 2
    assert bv.seek("nonfinite", -1) == 3
    assert bv.seek("nonfinite", 3) == 70
    assert bv.seek("nonfinite", 71) == 3  # wraps around
    sent = Sent(bv)
    bv._on_msg(bv, {"type": "seek", "view": "v", "what": "nonfinite", "after": 10}, [])
    assert sent.msgs[0][0] == {"type": "seek", "view": "v", "what": "nonfinite", "row": 70}
    assert W.BufferView(np.ones(10)).seek("nonfinite", 0) == -1


def test_histogram_compact_and_counts_nonfinite() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=100_000).astype(np.float32)
    v[:5] = np.nan
    v[5:7] = np.inf
    v[7] = -np.inf
    bv = W.BufferView(v, mode="histogram")
    h = bv._hist
    assert (h["nan"], h["posinf"], h["neginf"]) == (5, 2, 1)
    assert sum(h["counts"]) == 100_000 - 8 and len(h["counts"]) == 64
    assert len(json.dumps(h)) < 4000
    ints = W.BufferView(np.array([0, 1, 1, 2, 2, 2])).histogram()
    assert ints["counts"] == [1, 2, 3]


def test_heatmap_codes_mark_nan_blocks() -> None:
    a = np.tile(np.linspace(0, 1, 2000, dtype=np.float32), (1200, 1))  # 2-D leading shape
    a[600, 1000] = np.nan
    bv = W.BufferView(a, components=0)
    bv.mode = "heatmap"
    m = bv._heat_meta
    assert (m["grid_h"], m["grid_w"]) == (1200, 2000)
    assert m["width"] <= 512 and m["height"] <= 512
    codes = np.frombuffer(bv._heat, np.uint8).reshape(m["height"], m["width"])
    assert (codes == 254).sum() == 1
    assert codes[0, 0] < 10 and codes[0, -1] > 240
    one_d = W.BufferView(np.arange(10, dtype=np.float32), mode="heatmap")
    m1 = one_d._heat_meta
    codes1 = np.frombuffer(one_d._heat, np.uint8)
    assert m1["grid_w"] * m1["grid_h"] >= 10 and (codes1 == 253).sum() == m1["grid_w"] * m1["grid_h"] - 10


def test_diff_mode() -> None:
    a = np.zeros((50, 3), np.float32)
    b = a.copy()
    b[10, 2] = 1.0
    b[40, 0] = 1e-9  # within atol
    bv = W.BufferView(a, compare=b)
    s = bv._summary
    assert s["diff"] and s["diff_count"] == 1 and s["diff_rows"] == 1 and s["max_abs"] == 1.0
    assert bv.seek("diff", 0) == 10
    reply, buffers = bv.page(8, 4)
    assert reply["diff"] and len(buffers) == 6
    assert np.frombuffer(buffers[5], "<f4")[2] == 1.0  # compare column z, row 10
    bv2 = W.BufferView(a).diff(b)
    assert bv2._summary["diff_count"] == 1
    with pytest.raises(ValueError):
        bv2.diff(np.zeros((49, 3), np.float32))


def test_update_bumps_version() -> None:
    bv = W.BufferView(np.zeros(10))
    v0 = bv._version
    bv.update(np.ones((20, 2)))
    assert bv._version == v0 + 1 and bv.rows == 20 and bv.shape == [20, 2]


def test_buffer_static_html_fallback() -> None:
    a = np.arange(100, dtype=np.float32)
    a[2] = np.nan
    data, _meta = W.BufferView(a)._repr_mimebundle_()
    assert list(data)[:2] == ["text/plain", WIDGET_MIME]
    html = data["text/html"]
    assert "<table>" in html and "<td>nan</td>" in html and "90 more rows" in html and "1 NaN" in html


# ---------------------------------------------------------------- ImageView / tone mapping


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


# ---------------------------------------------------------------- controls / LiveImage


def test_control_validation(caplog: pytest.LogCaptureFixture) -> None:
    controls = {"speed": W.Slider(0, 10, 1), "tint": W.Color((1, 0, 0)), "time": W.Time(),
                "frame": W.Frame(), "mouse": W.Mouse()}
    ok = W.validate_values(controls, {"speed": 2.5, "tint": [0, 0.5, 1], "time": 16.7, "frame": 3,
                                      "mouse": [1, 2, 3, -4]})
    assert ok == {"speed": 2.5, "tint": (0.0, 0.5, 1.0), "time": 16.7, "frame": 3,
                  "mouse": (1.0, 2.0, 3.0, -4.0)}
    bad = {"speed": 11, "tint": [0, 2, 0], "time": -1, "frame": 1.5, "mouse": [1, 2],
           "evil": "__import__('os')"}
    with caplog.at_level(logging.WARNING, logger="slang_kernel.widgets"):
        assert W.validate_values(controls, bad) == {}
        assert W.validate_values(controls, {"speed": True}) == {}
        assert W.validate_values(controls, {"speed": float("nan")}) == {}
        assert W.validate_values(controls, {"speed": "3"}) == {}
        assert W.validate_values(controls, ["speed", 3]) == {}
    assert "undeclared control 'evil'" in caplog.text and "outside [0, 10]" in caplog.text
    with pytest.raises(ValueError):
        W.Slider(1, 0)
    with pytest.raises(ValueError):
        W.Color((2, 0, 0))
    assert W.Slider(0, 10, 1).spec("s") == {"name": "s", "kind": "slider", "min": 0, "max": 10,
                                            "step": 0.1, "value": 1.0}


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


def test_key_control_takes_only_0_or_1() -> None:
    key = W.Key("Space")
    assert key.spec("jump")["code"] == "Space" and key.default == 0.0
    assert W.validate_values({"jump": key}, {"jump": 1}) == {"jump": 1.0}
    assert W.validate_values({"jump": key}, {"jump": 0.5, "other": 1}) == {}



def test_set_controls_keeps_values_of_the_same_name() -> None:
    live = W.LiveImage(lambda v: np.zeros((2, 2, 3), np.uint8), {"a": W.Slider(0, 1, 0.5), "t": W.Time()})
    live.set_values({"a": 0.75, "t": 900.0})
    live.set_controls({"a": W.Slider(0, 0.5, 0.1), "b": W.Color((0.0, 1.0, 0.0)), "t": W.Time()})
    assert live.values == {"a": 0.1, "b": (0.0, 1.0, 0.0), "t": 900.0}   # 0.75 is out of the new range
    assert [c["name"] for c in live._controls] == ["a", "b", "t"] and live._controls[2]["value"] == 900.0
    assert W.Time(value=250.0).spec("t")["value"] == 250.0 and W.Frame(value=7).default == 7


# ---------------------------------------------------------------- live views follow their cells

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
        assert controls["gain"].value == 0.25 and controls["time"].default > 0   # the slider and the clock go on
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
