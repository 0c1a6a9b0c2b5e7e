"""Painting with the mouse in a live view, in JupyterLab + headless Chromium: the Playground's
painting demo (CPU backend) under a fast drag draws one unbroken stroke, as the Playground does
(before, the positions the pointer passed while frames were on their way were lost: a dot per frame
that came back); the play button's icon is drawn by CSS (no U+23F8 glyph, a box in fonts that lack
it). Screenshots: artifacts/paint_stroke.png, artifacts/paint_play_button.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from served import served_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PAINTING = (Path(__file__).resolve().parent.parent / "data" / "playground" / "demos" / "painting.slang").read_text()

# canvas pixels of one client-space row, as painted (magenta) or not, between two client x
ROW = """(c, [y, x0, x1]) => {
  const r = c.getBoundingClientRect(), k = c.width / r.width;
  const cy = Math.round((y - r.top) * k), a = Math.round((x0 - r.left) * k), b = Math.round((x1 - r.left) * k);
  const d = c.getContext('2d').getImageData(a, cy, b - a, 1).data;
  const out = [];
  for (let i = 0; i < d.length; i += 4) out.push(d[i] > 128 && d[i + 2] > 128 && d[i + 1] < 100 ? 1 : 0);
  return out;
}"""


lab = served_notebook("paintlab", ["%load_ext slang_kernel\n%slang_backend cpu", "%%slang paint\n" + PAINTING],
                      "paint.ipynb")


def test_a_fast_drag_paints_one_stroke(lab: str, lab_tools) -> None:
    with lab_tools.chromium_page("paint_failure.png") as page:
        page.goto(lab)
        lab_tools.run_all_cells(page, 2, timeout=120_000)
        lab_tools.dismiss_toasts(page)
        cells = page.locator(".jp-Notebook .jp-Cell")
        view = lab_tools.drawn_view(page, cells.nth(1))
        view.scroll_into_view_if_needed()
        canvas = view.locator("canvas").first
        box = canvas.bounding_box()
        assert box is not None
        y = box["y"] + box["height"] * 0.3
        x0, x1 = box["x"] + box["width"] * 0.15, box["x"] + box["width"] * 0.85
        frames = int(view.get_attribute("data-frames") or 0)
        # a fast drag: 40 moves in a row, no waiting for frames between them
        page.mouse.move(x0, y)
        page.mouse.down()
        page.mouse.move(x1, y, steps=40)
        page.mouse.up()
        lab_tools.wait_js(page, f"(e) => Number(e.dataset.frames) > {frames + 1}", view)
        # the last requests come back: the stroke reaches the drag's end
        page.wait_for_function(f"([c, a]) => {{ const r = ({ROW})(c, a); return r.lastIndexOf(1) > 0.95 * r.length; }}",
                               arg=[canvas.element_handle(), [y, x0, x1]], timeout=30_000)
        row = canvas.evaluate(ROW, [y, x0, x1])
        view.screenshot(path=str(lab_tools.ARTIFACTS / "paint_stroke.png"))
        painted = [i for i, v in enumerate(row) if v]
        assert painted, "nothing painted"
        gaps = [b - a for a, b in zip(painted, painted[1:]) if b - a > 1]
        assert painted[0] < 0.05 * len(row) and painted[-1] > 0.95 * len(row) and not gaps, (len(row), gaps)

        # the play button (the demo changes every frame: a paused play control) shows a CSS icon
        play = view.locator(".sk-play")
        assert play.get_attribute("data-state") == "paused" and play.inner_text().strip() == "play"
        icon = play.evaluate("(b) => { const s = getComputedStyle(b, '::before');"
                             " return [s.content, s.borderLeftWidth, s.width]; }")
        assert icon[0] in ('""', "none", "''") and icon[1] == "9px", icon
        play.screenshot(path=str(lab_tools.ARTIFACTS / "paint_play_button.png"))
        play.click()
        page.wait_for_function("(b) => b.dataset.state === 'playing'", arg=play.element_handle())
        assert play.inner_text().strip() == "pause"
        play.screenshot(path=str(lab_tools.ARTIFACTS / "paint_pause_button.png"))
