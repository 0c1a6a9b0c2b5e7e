"""A Slang Playground shader pasted into a %%slang cell, in a real JupyterLab + headless Chromium.

It animates (TIME), reacts to its SLIDER (canvas pixels before/after), a live kernel on the CPU
backend streams 512x512 frames (fps measured in the page), and the saved notebook holds the frame
as a PNG (static fallback). Screenshots and numbers go to artifacts/.
"""

from __future__ import annotations

import base64
import io
import json
import time

import pytest

from tests.test_playground import SHADER  # the same Playground example as the unit tests

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_tools):
    cells = ["%load_ext slang_kernel\n%slang_backend vulkan",
             "%%slang pg\n" + SHADER.strip() + "\n",
             lab_tools.LIVE_CPU_CELL + "\nview"]
    root = tmp_path_factory.mktemp("pglab")
    with lab_tools.jupyterlab(root, cells, "playground.ipynb") as url:
        yield url, root


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
    with lab_tools.chromium_page("playground_browser_failure.png") as page:
        page.goto(url)
        lab_tools.run_all_cells(page, 3, timeout=120_000)
        cells = page.locator(".jp-Notebook .jp-Cell")

        pg = cells.nth(1).locator(".sk-img")
        pg.wait_for(timeout=60_000)
        canvas = pg.locator("canvas")
        wait_js(page, "(e) => Number(e.dataset.frames) > 3", pg)          # TIME plays: it animates
        a1 = canvas.evaluate(CANVAS_STATS)
        page.wait_for_timeout(500)
        a2 = canvas.evaluate(CANVAS_STATS)
        assert a1["nonbg"] > 1000 and a1["colors"] > 10, a1
        assert a1["hash"] != a2["hash"], "the playground image does not animate"
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
        page.wait_for_timeout(500)
        after = canvas.evaluate(CANVAS_STATS)
        assert after["hash"] != before["hash"] and after["nonbg"] > 1000, (before, after)
        pg.screenshot(path=str(ARTIFACTS / "playground_cell.png"))

        # live kernel on the CPU backend: frames per second drawn in the page
        lv = cells.nth(2).locator(".sk-img")
        lv.wait_for(timeout=60_000)
        wait_js(page, "(e) => Number(e.dataset.frames) > 0", lv)
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
        deadline = time.time() + 30
        saved = None
        while time.time() < deadline:
            try:
                nb = json.loads((root / "playground.ipynb").read_text())
            except json.JSONDecodeError:  # read while the server was writing it
                time.sleep(0.2)
                continue
            outs = nb["cells"][1].get("outputs", [])
            pngs = [o["data"]["image/png"] for o in outs if "image/png" in o.get("data", {})]
            if pngs:
                saved = pngs[0]
                break
            time.sleep(0.5)
        assert saved is not None, "the saved notebook has no PNG for the playground cell"
        shape, std = _png_stats(saved)
        assert shape == (512, 512) and std > 10, (shape, std)
        links = [o for o in outs if "shader-slang.org/slang-playground" in json.dumps(o.get("data", {}))]
        assert links, "the saved notebook lacks the Playground link"
    print("PLAYGROUND NUMBERS", json.dumps(numbers))
    (ARTIFACTS / "playground_numbers.json").write_text(json.dumps(numbers, indent=1))
