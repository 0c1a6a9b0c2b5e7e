"""BufferView's Python side: paging messages (binary columns), struct and n-d labels, NaN/Inf
detection and seek, histogram, heat map, diff, the static fallback. Fast; no browser."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import slang_kernel.widgets as W
from tests.test_image_view import WIDGET_MIME, Sent


def _decode(reply: dict, buffers: list, columns: list[dict]) -> list[np.ndarray]:
    return [np.frombuffer(b, dtype=np.uint8 if c["wire"] == "|b1" else c["wire"])
            for b, c in zip(buffers, [c for c in columns if c["wire"] != "text"])]


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
