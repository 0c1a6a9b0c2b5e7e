"""Slang Playground shaders pasted into cells, in a real JupyterLab + headless Chromium.

A %%slang Playground cell animates (TIME), reacts to its SLIDER (canvas pixels before/after), a live
kernel on the CPU backend streams 512x512 frames (fps measured in the page), and the saved notebook
holds the frame as a PNG (static fallback). The Playground's own circle and volume-slice demos, pasted
unchanged, draw a centred ring and a coloured slice that moves with time; a typo in the playing
volume-slice cell leaves its view in the cell, still playing the last good revision under the error
banner, with %%slang and in the Slang kernel. Screenshots and numbers go to artifacts/.
"""

from __future__ import annotations

import base64
import io
import json
import re

from pathlib import Path

import pytest

from served import SLANG_KERNELSPEC, served_notebook
from tests.waiting import wait_until

from tests.test_playground import SHADER  # the same Playground example as the unit tests

DEMOS = Path(__file__).resolve().parent.parent / "data" / "playground" / "demos"
CIRCLE = (DEMOS / "circle.slang").read_text()
VOLUME = (DEMOS / "volume-slice.slang").read_text()
TYPO = ("frac(time * 0.2)", "frac(tme * 0.2)")   # what the user breaks the playing cell with

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_tools):
    cells = ["%load_ext slang_kernel\n%slang_backend vulkan",
             "%%slang pg\n" + SHADER.strip() + "\n",
             lab_tools.LIVE_CPU_CELL + "\nview"]
    root = tmp_path_factory.mktemp("pglab")
    with lab_tools.jupyterlab(root, cells, "playground.ipynb") as url:
        yield url, root


def _saved_png(path: Path) -> tuple[str, list[dict]] | None:
    """The playground cell's saved PNG (base64) and its outputs, once the saved notebook has them."""
    try:
        nb = json.loads(path.read_text())
    except json.JSONDecodeError:  # read while the server was writing it
        return None
    outs = nb["cells"][1].get("outputs", [])
    pngs = [o["data"]["image/png"] for o in outs if "image/png" in o.get("data", {})]
    return (pngs[0], outs) if pngs else None


def _png_stats(b64: str) -> tuple[tuple[int, int], float]:
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"), np.float32)
    return img.shape[:2], float(img.std())


def test_playground_cell_in_jupyterlab(lab, lab_tools) -> None:
    ARTIFACTS, wait_js = lab_tools.ARTIFACTS, lab_tools.wait_js
    CANVAS_STATS, FPS_JS = lab_tools.CANVAS_STATS, lab_tools.FPS_JS
    url, root = lab
    numbers: dict[str, object] = {}
    PlaywrightTimeout = pytest.importorskip("playwright.sync_api").TimeoutError
    with lab_tools.chromium_page("playground_browser_failure.png") as page:
        page.goto(url)
        lab_tools.run_all_cells(page, 3, timeout=120_000)
        cells = page.locator(".jp-Notebook .jp-Cell")

        pg = lab_tools.drawn_view(page, cells.nth(1), frames=3)          # TIME plays: it animates
        canvas = pg.locator("canvas")
        a1 = canvas.evaluate(CANVAS_STATS)
        assert a1["nonbg"] > 1000 and a1["colors"] > 10, a1
        try:
            lab_tools.wait_redrawn(page, canvas, a1, timeout=10_000)
        except PlaywrightTimeout:
            raise AssertionError("the playground image does not animate") from None
        loop = pg.evaluate(FPS_JS)
        numbers["playground_vulkan_lavapipe_fps_512"] = round(loop["frames"] / 5.0, 1)
        assert cells.nth(1).locator("a.sk-playground-link").get_attribute("href").startswith(
            "https://shader-slang.org/slang-playground/?target=")

        # pause (the view is re-created to refresh the saved PNG), then the slider alone changes the pixels
        lab_tools.pause(page, pg)
        wait_js(page, "(e) => Number(e.dataset.frames) > 0", pg)
        before = canvas.evaluate(CANVAS_STATS)
        frames0 = int(pg.get_attribute("data-frames"))
        slider = pg.locator(".sk-ctl-slider input")
        assert slider.get_attribute("min") == "0" and slider.get_attribute("max") == "1"
        lab_tools.drag_slider(page, slider, 0.5, 0.95, steps=8)
        wait_js(page, f"(e) => Number(e.dataset.frames) > {frames0}", pg)
        after = lab_tools.wait_redrawn(page, canvas, before)
        assert after["hash"] != before["hash"] and after["nonbg"] > 1000, (before, after)
        pg.screenshot(path=str(ARTIFACTS / "playground_cell.png"))

        # live kernel on the CPU backend: frames per second drawn in the page
        lv = lab_tools.drawn_view(page, cells.nth(2))
        lv.scroll_into_view_if_needed()
        lv.locator(".sk-play").click()
        loop = lv.evaluate(FPS_JS)
        lab_tools.pause(page, lv)  # pausing refreshes the saved PNG: the view is re-created
        wait_js(page, "(e) => Number(e.dataset.frames) > 0", lv)
        numbers["live_kernel_cpu_fps_512_rgba8"] = round(loop["frames"] / 5.0, 1)
        numbers["live_kernel_cpu_request_to_drawn_ms_median"] = loop["rtt_median"]
        numbers["live_kernel_cpu_stage_ms_median"] = loop["stages"]
        assert loop["frames"] >= 10, loop
        lv.screenshot(path=str(ARTIFACTS / "playground_live_kernel_cpu.png"))

        # save: the playground cell's output carries the frame as a PNG (static fallback)
        lab_tools.dismiss_toasts(page)
        page.screenshot(path=str(ARTIFACTS / "playground_browser.png"), full_page=True)
        cells.nth(0).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        wait_until(lambda: _saved_png(root / "playground.ipynb") is not None, 30,
                   "the saved notebook to hold a PNG for the playground cell")
        saved, outs = _saved_png(root / "playground.ipynb") or ("", [])
        shape, std = _png_stats(saved)
        assert shape == (512, 512) and std > 10, (shape, std)
        links = [o for o in outs if "shader-slang.org/slang-playground" in json.dumps(o.get("data", {}))]
        assert links, "the saved notebook lacks the Playground link"
    print("PLAYGROUND NUMBERS", json.dumps(numbers))
    (ARTIFACTS / "playground_numbers.json").write_text(json.dumps(numbers, indent=1))


def _image_of(png: bytes):
    """The image part of a view's canvas screenshot (the canvas around it is #222) as float RGB."""
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), np.float32)
    fg = np.abs(img - 34.0).max(axis=2) > 3
    ys, xs = np.nonzero(fg)
    return img[ys.min():ys.max() + 1, xs.min():xs.max() + 1]


demos_lab = served_notebook("pgdemos", ["%load_ext slang_kernel\n%slang_backend cpu", "%%slang\n" + CIRCLE,
                                        "%%slang\n" + VOLUME], "demos.ipynb")


def _keeps_playing_through_a_typo(page, lab_tools, cell, shot: str) -> None:
    """Break the playing cell with a typo and re-run it: its view stays, keeps playing the last good
    revision and shows the error in its banner; the cell's output also shows the diagnostics."""
    wait_js = lab_tools.wait_js
    view = cell.locator(".sk-img")
    text = cell.locator(".cm-content").evaluate(
        "(e) => [...e.querySelectorAll('.cm-line')].map((l) => l.textContent).join('\\n')")
    assert TYPO[0] in text
    clock = view.locator(".sk-ctl-time .sk-img-val")
    page.wait_for_function("(e) => parseFloat(e.textContent.split('=')[1]) > 1000", arg=clock.element_handle())
    before = float(clock.inner_text().split("=")[1].split()[0])   # "t = 1234 ms" before the edit
    lab_tools.set_cell_text(page, cell, text.replace(*TYPO))
    lab_tools.run_cell(page, cell)
    view = cell.locator(".sk-img")
    view.wait_for(timeout=30_000)   # the view is back in the cell after the failed run cleared it
    banner = view.locator(".sk-img-banner.sk-on")
    banner.wait_for(timeout=30_000)
    said = banner.inner_text()
    assert "still running the last good revision" in said
    # one cell named, the one edited, by the prompt it shows now (not also the name of its first run)
    prompt = cell.locator(".jp-InputPrompt").inner_text().strip().strip(":")   # "[5]"
    named = set(re.findall(r"In\[\d+\]", said))
    assert named == {"In" + prompt}, (named, prompt, said[:200])
    after = float(view.locator(".sk-ctl-time .sk-img-val").inner_text().split("=")[1].split()[0])
    assert after >= before, (before, after)    # the clock goes on, not back to 0
    assert "tme" in cell.locator(".jp-OutputArea").inner_text()   # the diagnostics name the typo
    if "pause" not in view.locator(".sk-play").inner_text():   # a re-displayed view plays on; if not, play
        view.locator(".sk-play").click()
    f0 = int(view.get_attribute("data-frames") or 0)
    wait_js(page, f"(e) => Number(e.dataset.frames) > {f0 + 3}", view)        # it plays
    a = view.locator("canvas").evaluate(lab_tools.CANVAS_STATS)
    assert a["colors"] > 10, a
    lab_tools.wait_redrawn(page, view.locator("canvas"), a, timeout=10_000)  # ... the slice moving
    lab_tools.dismiss_toasts(page)
    cell.screenshot(path=str(lab_tools.ARTIFACTS / shot))


def test_playground_demos_draw_as_in_the_playground(demos_lab, lab_tools) -> None:
    import numpy as np

    ARTIFACTS = lab_tools.ARTIFACTS
    with lab_tools.chromium_page("playground_demos_failure.png") as page:
        page.goto(demos_lab)
        lab_tools.run_all_cells(page, 3, timeout=180_000)
        cells = page.locator(".jp-Notebook .jp-Cell")

        circle = lab_tools.drawn_view(page, cells.nth(1), frames=2)
        lab_tools.dismiss_toasts(page)
        circle.scroll_into_view_if_needed()
        img = _image_of(circle.locator("canvas").screenshot())
        h, w = img.shape[:2]
        lum = img.mean(axis=2)
        yy, xx = np.mgrid[0:h, 0:w]
        r = np.hypot(xx - w / 2, yy - h / 2) / h                      # the ring: radius h / 3, centred
        ring, inner, outer = lum[np.abs(r - 1 / 3) < 0.01].mean(), lum[r < 0.2].mean(), lum[r > 0.45].mean()
        assert ring > 4 * inner and ring > 4 * outer, (ring, inner, outer)
        sides = [lum[(np.abs(r - 1 / 3) < 0.01) & q].mean() for q in (xx < w / 2, xx > w / 2, yy < h / 2, yy > h / 2)]
        assert max(sides) < 2 * min(sides), sides
        circle.screenshot(path=str(ARTIFACTS / "playground_circle.png"))

        volume = lab_tools.drawn_view(page, cells.nth(2), frames=2)
        volume.scroll_into_view_if_needed()
        shots = []   # the slice moves through the volume: some moments are nearly uniform, so look at several
        for _ in range(5):
            shots.append(_image_of(volume.locator("canvas").screenshot()))
            lab_tools.wait_clock(page, volume, 700)
        assert any(s[..., 2].std() > 20 and s[..., 0].max() > 200 for s in shots), "the slice is not coloured"
        assert max(np.abs(s - shots[0]).mean() for s in shots[1:]) > 1, "the slice does not move with time"
        volume.screenshot(path=str(ARTIFACTS / "playground_volume_slice.png"))

        _keeps_playing_through_a_typo(page, lab_tools, cells.nth(2), "playground_failed_edit_magic.png")


def test_failed_edit_keeps_the_view_in_the_slang_kernel(tmp_path_factory: pytest.TempPathFactory, lab_tools) -> None:
    root = tmp_path_factory.mktemp("pgkernel")
    with lab_tools.jupyterlab(root, ["%backend cpu", VOLUME], "kernel.ipynb", kernelspec=SLANG_KERNELSPEC) as url, \
            lab_tools.chromium_page("playground_failed_edit_kernel_failure.png") as page:
        page.goto(url)
        lab_tools.run_all_cells(page, 2, timeout=180_000)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
        lab_tools.drawn_view(page, cell, frames=2)
        _keeps_playing_through_a_typo(page, lab_tools, cell, "playground_failed_edit_kernel.png")
