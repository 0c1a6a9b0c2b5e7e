"""A drag over a live view paints a stroke: the positions the pointer passed between two frame
requests come as the request's `path`, and the kernel runs a frame at each before the one it sends
(the Playground's painting demo, on the CPU backend; before, a fast drag painted a dot per frame)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import slang_kernel as sk
import slang_kernel.widgets as W
from slang_kernel.widgets.image_view import MAX_PATH

PAINTING = (Path(__file__).parent / "data" / "playground" / "demos" / "painting.slang").read_text()


def _drag(view, points: list[tuple[float, float]], with_path: bool) -> None:
    """What the browser sends for a drag from points[0] to points[-1]: pointer down, then one
    request, the positions between in its path (or, as before, lost)."""
    x0, y0 = points[0]
    down = [x0, y0, -x0, -y0]
    view._on_msg(None, {"type": "frame", "values": {"mousePosition": down}, "req": 1, "count": 1}, [])
    path = [{"mousePosition": [x, y, -x0, -y0]} for x, y in points[1:-1]]
    msg = {"type": "frame", "values": {"mousePosition": [*points[-1], -x0, -y0]}, "req": 2, "count": 1}
    if with_path:
        msg["path"] = path
    view._on_msg(None, msg, [])


def _painted_columns(prog, row: int) -> np.ndarray:
    img = prog.image(prog.output_name())
    return np.flatnonzero(img[row, :, :3].max(axis=1) > 0)


def test_a_drag_paints_a_stroke(tmp_path: Path) -> None:
    s = sk.Session(backend="cpu")
    try:
        for with_path, name in ((False, "dots"), (True, "stroke")):
            s.run_cell(PAINTING, name=name)
            shown: list = []
            prog = W.show_cell(s, name, display=shown.append)
            assert prog is not None
            view = shown[0].image
            y = 40.0   # (the demo flips y, and rendering flips it back: image row 40)
            points = [(20.0 + 3.0 * i, y) for i in range(41)]   # 20 -> 140, 3 px apart
            _drag(view, points, with_path)
            cols = _painted_columns(prog, 40)
            if with_path:
                # one stroke from x=20 to x=140 (the brush is 10 px wide): no column left unpainted
                assert cols.min() <= 20 and cols.max() >= 140 and np.all(np.diff(cols) == 1), cols
            else:
                # the positions between were lost: two dots, a gap between them
                assert np.any(np.diff(cols) > 1), cols
    finally:
        s.close()


def test_a_path_is_bounded_and_checked() -> None:
    seen: list[dict] = []
    view = W.LiveImage(lambda v: (seen.append(dict(v)), np.zeros((4, 4, 4), np.float32))[1],
                       {"mouse": W.Mouse()}, size=(4, 4))
    seen.clear()
    path = [{"mouse": [i, 0, -1, -1]} for i in range(190)] + [{"mouse": "no"}, "junk"] * 5
    view._on_msg(None, {"type": "frame", "values": {"mouse": [5, 5, -1, -1]}, "req": 1, "count": 1,
                        "path": path}, [])
    # at most MAX_PATH frames before the sent one, spread over the whole path; bad steps skipped
    assert MAX_PATH - 3 <= len(seen) - 1 <= MAX_PATH, len(seen)
    xs = [v["mouse"][0] for v in seen[:-1]]
    assert xs == sorted(xs) and xs[0] <= 4 and xs[-1] >= 185 and tuple(seen[-1]["mouse"][:2]) == (5, 5)
