"""Frame rate of LiveImage / live kernels in a real JupyterLab + headless Chromium, split per stage.

    .venv/bin/python bench/bench_live.py [--seconds 5] [--only numpy|cpu]

Starts JupyterLab (tests/browser/conftest.py's helper) on a temp root, runs a notebook with
(1) a LiveImage whose render is light numpy (512x512 RGBA8) and (2) a ``live`` CPU-backend Slang
kernel (512x512 float4 texture streamed as rgba8), plays each for N seconds and prints, from the
per-frame timestamps the page keeps (``root.__skStats``; wall clocks of one machine):

  up       browser request sent -> Python comm handler entered   (websocket -> server -> ZMQ)
  python   handler entered -> frame handed to the comm (render + encode + serialise)
  render   the render callback alone
  down     frame handed to the comm -> browser frame handler entered (ZMQ -> server -> websocket)
  draw     browser: (JPEG decode +) tone map + putImageData + drawImage
  kb       frame size on the wire
  gap      frame drawn -> next request sent (browser pacing)
  period   drawn -> next drawn (1000 / fps)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
from conftest import CHROMIUM, CHROMIUM_ARGS, LIVE_CPU_CELL, jupyterlab, run_all_cells  # noqa: E402

NUMPY_CELL = '''\
import numpy as np
from slang_kernel.widgets import LiveImage, Slider, Time
yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) / SIZE
out = np.empty((SIZE, SIZE, 4), np.uint8); out[..., 3] = 255
def render(v):
    t = v['t'] / 1000.0
    s = 0.5 + 0.5 * np.sin(12 * xx + t) * np.cos(9 * yy - 0.7 * t)
    out[..., 0] = s * 255; out[..., 1] = s * 128; out[..., 2] = 64
    return out
np_view = LiveImage(render, {'amp': Slider(0, 1, 0.5), 't': Time()}, size=(512, 512), lossy=LOSSY)
np_view'''

CPU_CELL = LIVE_CPU_CELL + "\ncpu_view = view\ncpu_view.lossy = LOSSY\ncpu_view"

WS_HOOK = """(() => {
  const Orig = window.WebSocket;
  window.WebSocket = function (...a) {
    const ws = new Orig(...a);
    ws.addEventListener("message", (ev) => {
      const d = ev.data;
      if ((d && d.byteLength > 20000) || (d && d.size > 20000))
        window.__skWs = performance.timeOrigin + performance.now();
    });
    return ws;
  };
  window.WebSocket.prototype = Orig.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""

COLLECT_JS = """([root, ms]) => new Promise((done) => {
  const s = root.__skStats, n0 = s.length, f0 = Number(root.dataset.frames), t0 = performance.now();
  setTimeout(() => done({frames: Number(root.dataset.frames) - f0, secs: (performance.now() - t0) / 1000,
                         rows: s.slice(n0)}), ms);
})"""


def _med(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return round(statistics.median(xs), 1) if xs else float("nan")


def _p90(xs: list[float]) -> float:
    xs = sorted(x for x in xs if x == x)
    return round(xs[int(0.9 * (len(xs) - 1))], 1) if xs else float("nan")


def summarize(res: dict) -> dict:
    rows = res["rows"]
    stage = {k: [] for k in ("up", "python", "render", "down", "down_py_to_ws", "down_ws_to_js", "draw", "kb",
                             "gap", "period")}
    for i, r in enumerate(rows):
        stage["up"].append(r["pyRecv"] - r["req"])
        stage["python"].append(r["pySent"] - r["pyRecv"])
        stage["render"].append(r["render"])
        stage["down"].append(r["recv"] - r["pySent"])
        if r.get("ws"):
            stage["down_py_to_ws"].append(r["ws"] - r["pySent"])
            stage["down_ws_to_js"].append(r["recv"] - r["ws"])
        stage["draw"].append(r["drawn"] - r.get("start", r["recv"]))
        stage["kb"].append(r.get("bytes", 0) / 1024)
        if i:
            stage["gap"].append(r["req"] - rows[i - 1]["drawn"])
            stage["period"].append(r["drawn"] - rows[i - 1]["drawn"])
    out = {"fps": round(res["frames"] / res["secs"], 1)}
    for k, v in stage.items():
        out[k] = {"med": _med(v), "p90": _p90(v)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", choices=["numpy", "cpu"])
    ap.add_argument("--headed", action="store_true")
    ap.add_argument("--raw", action="store_true", help="no JPEG previews (LiveImage(lossy=False))")
    ap.add_argument("--size", type=int, default=512, help="numpy case: image side (display stays 512)")
    args = ap.parse_args()
    cells = ["import logging"]
    names = []
    if args.only in (None, "numpy"):
        cells.append(NUMPY_CELL.replace("SIZE", str(args.size)).replace("LOSSY", str(not args.raw)))
        names.append("numpy")
    if args.only in (None, "cpu"):
        cells.append(CPU_CELL.replace("LOSSY", str(not args.raw)))
        names.append("cpu")
    from playwright.sync_api import sync_playwright

    results = {}
    with tempfile.TemporaryDirectory() as tmp, jupyterlab(pathlib.Path(tmp), cells, "bench.ipynb") as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=not args.headed)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(WS_HOOK)
            try:
                page.goto(url)
                run_all_cells(page, len(cells), timeout=180_000)
                nbcells = page.locator(".jp-Notebook .jp-Cell")
                for i, name in enumerate(names):
                    root = nbcells.nth(i + 1).locator(".sk-img")
                    root.wait_for(timeout=60_000)
                    page.wait_for_function("(e) => Number(e.dataset.frames) > 0", arg=root.element_handle())
                    root.scroll_into_view_if_needed()
                    root.locator(".sk-play").click()
                    page.wait_for_timeout(1000)  # warm up
                    res = page.evaluate(COLLECT_JS, [root.element_handle(), int(args.seconds * 1000)])
                    root.locator(".sk-play").click()
                    results[name] = summarize(res)
                    page.wait_for_timeout(500)  # paused: the exact frame replaces the JPEG preview
                    results[name]["shown_after_pause"] = root.locator(".sk-img-zoom").inner_text().strip()
                    print(name, json.dumps(results[name]), flush=True)
            finally:
                browser.close()
    print("BENCH_LIVE", json.dumps(results))


if __name__ == "__main__":
    main()
