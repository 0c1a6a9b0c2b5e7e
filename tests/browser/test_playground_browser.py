"""A Slang Playground shader pasted into a %%slang cell, in a real JupyterLab + headless Chromium.

It animates (TIME), reacts to its SLIDER (canvas pixels before/after), a live kernel on the CPU
backend streams 512x512 frames (fps measured in the page), and the saved notebook holds the frame
as a PNG (static fallback). Screenshots and numbers go to artifacts/.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

REPO = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

sys.path.insert(0, str(REPO / "tests"))
from test_playground import SHADER  # noqa: E402  (the same Playground example as the unit tests)

sys.path.pop(0)

LIVE_CPU = '''\
import numpy as np, slang_kernel as sk
from slang_kernel.playground import live
from slang_kernel.widgets import Slider, Time
cpu = sk.Session(backend="cpu")
cpu.run_cell(r"""
uniform float amp; uniform float t;
RWStructuredBuffer<float4> pixels;
[shader("compute")][numthreads(16, 16, 1)]
void shade(uint3 id : SV_DispatchThreadID) {
    uint2 p = id.xy; if (p.x >= 512 || p.y >= 512) return;
    float2 uv = float2(p) / 512.0;
    float s = 0.5 + 0.5 * sin(20.0 * uv.x + t * 0.002) * cos(14.0 * uv.y - t * 0.001);
    pixels[p.y * 512 + p.x] = float4(amp * s, uv.y, 1.0 - s, 1.0);
}""")
pixels = cpu.backend.zeros((512, 512, 4), np.float32)
view = live(cpu.kernel("shade"), image="pixels", controls={"amp": Slider(0, 1, 0.8), "t": Time()},
            values={"pixels": pixels}, threads=(512, 512, 1))
view'''

CELLS = [
    "%load_ext slang_kernel\n%slang_backend vulkan",
    "%%slang pg\n" + SHADER.strip() + "\n",
    LIVE_CPU,
]

CANVAS_STATS = """(c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let h = 0, nonbg = 0; const colors = new Set();
  for (let i = 0; i < d.length; i += 4) {
    if (!(d[i] === 34 && d[i+1] === 34 && d[i+2] === 34)) nonbg++;
    if (i % 64 === 0) colors.add((d[i] << 16) | (d[i+1] << 8) | d[i+2]);
    h = (h * 31 + d[i] + 7 * d[i+1] + 13 * d[i+2]) >>> 0;
  }
  return {hash: h, nonbg, colors: colors.size};
}"""

# frames drawn in 5 s, and per-stage medians (ms) from the page's per-frame timestamps
# (root.__skStats; Python and the page share one wall clock): up = request -> Python handler,
# python = render + encode, down = Python -> page, draw = (JPEG decode +) tone map + draw.
FPS_JS = """(root) => new Promise((done) => {
  const f0 = Number(root.dataset.frames), rtt = [], s = root.__skStats || [], n0 = s.length;
  const poll = setInterval(() => rtt.push(Number(root.dataset.rttMs)), 100);
  const med = (xs) => { xs = xs.filter((x) => x === x).sort((a, b) => a - b); return xs.length ? Math.round(10 * xs[xs.length >> 1]) / 10 : null; };
  setTimeout(() => {
    clearInterval(poll);
    const r = s.slice(n0);
    done({frames: Number(root.dataset.frames) - f0, rtt_median: med(rtt),
          stages: {up: med(r.map((x) => x.pyRecv - x.req)), python: med(r.map((x) => x.pySent - x.pyRecv)),
                   render: med(r.map((x) => x.render)), down: med(r.map((x) => x.recv - x.pySent)),
                   draw: med(r.map((x) => x.drawn - x.start)), kb: med(r.map((x) => x.bytes / 1024))}});
  }, 5000);
})"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    if not pathlib.Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("pglab")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                     "outputs": [], "source": src} for i, src in enumerate(CELLS)],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (root / "playground.ipynb").write_text(json.dumps(nb))
    settings = root / ".settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"))
    jupyter = shutil.which("jupyter", path=str(pathlib.Path(sys.executable).parent)) or "jupyter"
    log = open(root / "lab.log", "w")
    proc = subprocess.Popen(
        [jupyter, "lab", "--no-browser", f"--port={port}", f"--ServerApp.token={token}",
         "--ServerApp.ip=127.0.0.1", "--allow-root", f"--ServerApp.root_dir={root}"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (root / "lab.log").read_text()[-3000:])
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/lab/tree/playground.ipynb?token={token}", root
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _png_stats(b64: str) -> tuple[tuple[int, int], float]:
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"), np.float32)
    return img.shape[:2], float(img.std())


def test_playground_cell_in_jupyterlab(lab) -> None:
    from playwright.sync_api import sync_playwright

    url, root = lab
    ARTIFACTS.mkdir(exist_ok=True)
    numbers: dict[str, object] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def wait_js(predicate: str, loc, timeout: int = 60_000) -> None:
            page.wait_for_function(predicate, arg=loc.element_handle(), timeout=timeout)
        try:
            page.goto(url)
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            page.get_by_text("| Idle").first.wait_for(timeout=60_000)
            cells = page.locator(".jp-Notebook .jp-Cell")
            for i in range(len(CELLS)):
                cells.nth(i).locator(".jp-InputArea-editor").click()
                page.keyboard.press("Shift+Enter")
                page.wait_for_function(
                    "(c) => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt').textContent)",
                    arg=cells.nth(i).element_handle(), timeout=120_000)

            pg = cells.nth(1).locator(".sk-img")
            pg.wait_for(timeout=60_000)
            canvas = pg.locator("canvas")
            wait_js("(e) => Number(e.dataset.frames) > 3", pg)          # TIME plays: it animates
            a1 = canvas.evaluate(CANVAS_STATS)
            page.wait_for_timeout(500)
            a2 = canvas.evaluate(CANVAS_STATS)
            assert a1["nonbg"] > 1000 and a1["colors"] > 10, a1
            assert a1["hash"] != a2["hash"], "the playground image does not animate"
            loop = pg.evaluate(FPS_JS)
            numbers["playground_vulkan_lavapipe_fps_512"] = round(loop["frames"] / 5.0, 1)
            assert cells.nth(1).locator("a.sk-playground-link").get_attribute("href").startswith(
                "https://shader-slang.org/slang-playground/?target=")

            # pause, then the slider alone changes the pixels
            pg.locator(".sk-play").click()
            page.wait_for_timeout(500)
            before = canvas.evaluate(CANVAS_STATS)
            frames0 = int(pg.get_attribute("data-frames"))
            slider = pg.locator(".sk-ctl-slider input")
            assert slider.get_attribute("min") == "0" and slider.get_attribute("max") == "1"
            slider.scroll_into_view_if_needed()
            box = slider.bounding_box()
            y = box["y"] + box["height"] / 2
            page.mouse.move(box["x"] + box["width"] * 0.5, y)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.95, y, steps=8)
            page.mouse.up()
            wait_js(f"(e) => Number(e.dataset.frames) > {frames0}", pg)
            page.wait_for_timeout(500)
            after = canvas.evaluate(CANVAS_STATS)
            assert after["hash"] != before["hash"] and after["nonbg"] > 1000, (before, after)
            pg.screenshot(path=str(ARTIFACTS / "playground_cell.png"))

            # live kernel on the CPU backend: frames per second drawn in the page
            lv = cells.nth(2).locator(".sk-img")
            lv.wait_for(timeout=60_000)
            wait_js("(e) => Number(e.dataset.frames) > 0", lv)
            lv.scroll_into_view_if_needed()
            lv.locator(".sk-play").click()
            loop = lv.evaluate(FPS_JS)
            lv.locator(".sk-play").click()
            numbers["live_kernel_cpu_fps_512_rgba8"] = round(loop["frames"] / 5.0, 1)
            numbers["live_kernel_cpu_request_to_drawn_ms_median"] = loop["rtt_median"]
            numbers["live_kernel_cpu_stage_ms_median"] = loop["stages"]
            assert loop["frames"] >= 10, loop
            lv.screenshot(path=str(ARTIFACTS / "playground_live_kernel_cpu.png"))

            # save: the playground cell's output carries the frame as a PNG (static fallback)
            for b in page.locator(".jp-toast-button:has-text('No')").all():
                b.click()
            page.screenshot(path=str(ARTIFACTS / "playground_browser.png"), full_page=True)
            cells.nth(0).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Escape")
            page.keyboard.press("Control+s")
            deadline = time.time() + 30
            saved = None
            while time.time() < deadline:
                nb = json.loads((root / "playground.ipynb").read_text())
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
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "playground_browser_failure.png"))
            raise
        finally:
            browser.close()
    print("PLAYGROUND NUMBERS", json.dumps(numbers))
    (ARTIFACTS / "playground_numbers.json").write_text(json.dumps(numbers, indent=1))
