"""Frame rate of LiveImage / live kernels in a real JupyterLab + headless Chromium, split per stage.

    .venv/bin/python bench/bench_live.py [--seconds 5] [--only numpy|cpu|vulkan|vulkan_inproc]
    .venv/bin/python bench/bench_live.py --frames 300   # the live Vulkan frame alone: worker vs in-process

Starts JupyterLab (tests/browser/conftest.py's helper) on a temp root, runs a notebook with
(1) a LiveImage whose render is light numpy (512x512 RGBA8) and (2) a ``live`` CPU-backend Slang
kernel (512x512 float4 buffer streamed as rgba8), (3) the Playground's shape of ``live`` kernel on
Vulkan (a 512x512 float4 RWTexture2D on the device) with the device in the worker process (the
default) and (4) in this process (isolate=False), and plays each one twice for N seconds:

  attached  Playwright connected, as in the browser tests. Playwright observes every websocket frame
            (it copies each ~35 KB frame, base64, to its driver), which costs the browser and the
            2 CPU cores it shares with the kernel 3-8 frames/s.
  detached  Chromium is our own process (--remote-debugging-port); Playwright sets the page up, then
            disconnects while the loop plays and reconnects to read the page's per-frame records:
            the browser as a user has it.

Per frame, from the timestamps the page keeps (``root.__skStats``; wall clocks of one machine):

  up       browser request sent -> Python comm handler entered   (websocket -> server -> ZMQ, and
           the wait while the kernel renders the previous batch)
  python   handler entered -> frame handed to the comm (render + encode + serialise; a playing loop
           asks for 3 frames per request, so this includes the batch's earlier frames and the
           pacing to 60 frames/s)
  render   the render callback alone
  down     frame handed to the comm -> browser frame handler entered (ZMQ -> server -> websocket)
  draw     browser: JPEG decode + drawImage (raw frames: tone map + putImageData + drawImage)
  kb       frame size on the wire
  gap      frame drawn -> next request sent (negative: the request went out before, as it should)
  period   drawn -> next drawn (1000 / fps)
  machine_busy_pct   CPU use of the whole machine (all processes) while detached: the headroom
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
from conftest import CHROMIUM, CHROMIUM_ARGS, LIVE_CPU_CELL, LabTools, _free_port, run_all_cells  # noqa: E402

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

# The Playground's shape of live kernel: a 512x512 float4 RWTexture2D made (and kept) on the device by
# live(), read back per frame. isolate=True (the default) puts the device in the worker process: the
# frame is read straight into shared memory and streamed from a view on it.
TEXTURE_KERNEL = """
uniform float amp; uniform float t;
[shader("compute")][numthreads(16, 16, 1)]
void shade(uint3 id : SV_DispatchThreadID, uniform RWTexture2D<float4> outputTexture) {
    uint2 p = id.xy; if (p.x >= 512 || p.y >= 512) return;
    float2 uv = float2(p) / 512.0;
    float s = 0.5 + 0.5 * sin(20.0 * uv.x + t * 0.002) * cos(14.0 * uv.y - t * 0.001);
    outputTexture[p] = float4(amp * s, uv.y, 1.0 - s, 1.0);
}"""
VULKAN_CELL = f'''\
import slang_kernel as sk
from slang_kernel.widgets import live, Slider, Time
vk_NAME = sk.Session(backend="vulkan", isolate=ISOLATE)
vk_NAME.run_cell(r"""{TEXTURE_KERNEL}""")
tex_NAME = vk_NAME.backend.texture((512, 512, 4), "float32")   # made here: live() would make it float (1 channel)
view_NAME = live(vk_NAME.kernel("shade"), controls={{"amp": Slider(0, 1, 0.8), "t": Time()}},
                 values={{"outputTexture": tex_NAME}})
view_NAME.lossy = LOSSY
view_NAME'''

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


def summarize(rows: list[dict], frames: int, secs: float) -> dict:
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
    out: dict = {"fps": round(frames / secs, 1)}
    for k, v in stage.items():
        out[k] = {"med": _med(v), "p90": _p90(v)}
    return out


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine (Linux), to report how loaded it was meanwhile."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(v) - v[3] - v[4], sum(v)


def _lab_page(browser):
    return next(pg for ctx in browser.contexts for pg in ctx.pages if "/lab" in pg.url)


def _root(page, i: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(i + 1).locator(".sk-img")


def frame_times(n: int) -> None:
    """--frames: the live Vulkan frame without the browser, 512x512 float4 texture -> rgba8, medians
    of n frames interleaved round-robin (the 2-core machine is shared: interleaving spreads its noise
    over every variant alike). worker_rgba8: dispatch + frame(rgba8=True) (live()'s path: the worker
    converts into 1 MB of shared memory); worker: dispatch + frame() (one copy, by the worker, into shared
    memory); worker_two_copies: dispatch + numpy() (worker -> staging -> a new array: the frame path
    before frame()); in_process: Session(isolate=False). Also the read alone and the dispatch alone,
    and what the worker itself spent on the dispatch (the rest of the worker's dispatch is the boundary)."""
    import numpy as np
    import slang_kernel as sk
    from slang_kernel.playground import to_rgba8

    sessions = {"worker": sk.Session(backend="vulkan"), "in_process": sk.Session(backend="vulkan", isolate=False)}
    texes, kernels = {}, {}
    for name, s in sessions.items():
        s.run_cell("RWTexture2D<float4> outputTexture;\n" + TEXTURE_KERNEL.replace(
            ", uniform RWTexture2D<float4> outputTexture", ""), name="shade")
        texes[name] = s.backend.texture((512, 512, 4), np.float32)   # type: ignore[attr-defined]
        kernels[name] = s.kernel("shade")
    variants = {
        "worker_rgba8": ("worker", lambda t: t.frame(rgba8=True)),   # what live() does: converted in the worker
        "worker": ("worker", lambda t: t.frame()),
        "worker_two_copies": ("worker", lambda t: t.numpy()),
        "in_process": ("in_process", lambda t: t.numpy()),
    }
    rows: dict[str, dict[str, list[float]]] = {
        v: {"frame": [], "dispatch": [], "read": [], "worker_us": [], "worker_read_us": []} for v in variants}
    for i in range(n + 20):
        for v, (sname, read) in variants.items():
            tex, k = texes[sname], kernels[sname]
            t0 = time.perf_counter()
            k(threads=(512, 512, 1), outputTexture=tex, amp=0.8, t=float(i))
            t1 = time.perf_counter()
            worker_us = float(getattr(sessions[sname].backend, "last_worker_us", 0.0))
            to_rgba8(read(tex))
            t2 = time.perf_counter()
            t3 = time.perf_counter()
            read(tex)
            t4 = time.perf_counter()
            read_us = float(getattr(sessions[sname].backend, "last_worker_us", 0.0))
            if i >= 20:   # warm-up: builds, first mappings
                r = rows[v]
                r["frame"].append((t2 - t0) * 1e3)
                r["dispatch"].append((t1 - t0) * 1e3)
                r["read"].append((t4 - t3) * 1e3)
                if sname == "worker":
                    r["worker_us"].append(worker_us)
                    if v.startswith("worker") and v != "worker_two_copies":
                        r["worker_read_us"].append(read_us)
    out = {v: {k: round(statistics.median(x), 3) for k, x in r.items() if x} for v, r in rows.items()}
    for v, r in out.items():
        print(f"{v:18s} frame {r['frame']:.2f} ms = dispatch {r['dispatch']:.2f} + read/encode; read alone "
              f"{r['read']:.2f} ms" + (f"; the worker's own dispatch {r['worker_us'] / 1e3:.2f} ms" if "worker_us" in r else "")
              + (f", its own read {r['worker_read_us'] / 1e3:.2f} ms" if "worker_read_us" in r else ""))
    print("BENCH_FRAMES", json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", choices=["numpy", "cpu", "vulkan", "vulkan_inproc"])
    ap.add_argument("--raw", action="store_true", help="no JPEG previews (LiveImage(lossy=False))")
    ap.add_argument("--size", type=int, default=512, help="numpy case: image side (display stays 512)")
    ap.add_argument("--frames", type=int, default=0, help="no browser: time N live Vulkan frames per variant")
    args = ap.parse_args()
    if args.frames:
        frame_times(args.frames)
        return
    cells = ["import logging"]
    names = []
    if args.only in (None, "numpy"):
        cells.append(NUMPY_CELL.replace("SIZE", str(args.size)).replace("LOSSY", str(not args.raw)))
        names.append("numpy")
    if args.only in (None, "cpu"):
        cells.append(CPU_CELL.replace("LOSSY", str(not args.raw)))
        names.append("cpu")
    for name, isolate in (("vulkan", True), ("vulkan_inproc", False)):   # the worker (default), in-process
        if args.only in (None, name):
            cells.append(VULKAN_CELL.replace("NAME", name).replace("ISOLATE", str(isolate))
                         .replace("LOSSY", str(not args.raw)))
            names.append(name)
    from playwright.sync_api import sync_playwright

    results: dict[str, dict] = {}
    port = _free_port()
    with ExitStack() as stack:   # the browser tests' shared-server helper, on a root of our own
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        tools = LabTools(pathlib.Path(tmp))
        stack.callback(tools.close)
        url = stack.enter_context(tools.jupyterlab(None, cells, "bench.ipynb"))
        chrome = subprocess.Popen(
            [CHROMIUM, "--headless=new", f"--remote-debugging-port={port}", f"--user-data-dir={tmp}/chromium",
             "--window-size=1400,1000", *CHROMIUM_ARGS, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        endpoint = f"http://127.0.0.1:{port}"
        try:
            with sync_playwright() as p:
                for _ in range(100):  # Chromium takes a moment to listen
                    try:
                        browser = p.chromium.connect_over_cdp(endpoint)
                        break
                    except Exception:  # noqa: BLE001
                        time.sleep(0.1)
                page = browser.contexts[0].pages[0]
                page.set_viewport_size({"width": 1400, "height": 1000})
                page.add_init_script(WS_HOOK)
                page.goto(url)
                run_all_cells(page, len(cells), timeout=180_000)
                for i in range(len(names)):
                    root = _root(page, i)
                    root.wait_for(timeout=60_000)
                    page.wait_for_function("(e) => Number(e.dataset.frames) > 0", arg=root.element_handle())
                browser.close()  # connected over CDP: disconnects, Chromium keeps running
            for i, name in enumerate(names):
                with sync_playwright() as p:
                    page = _lab_page(p.chromium.connect_over_cdp(endpoint))
                    root = _root(page, i)
                    root.scroll_into_view_if_needed()
                    root.locator(".sk-play").click()
                    page.wait_for_timeout(1000)  # warm up
                    res = page.evaluate(COLLECT_JS, [root.element_handle(), int(args.seconds * 1000)])
                    attached = summarize(res["rows"], res["frames"], res["secs"])
                # detached: nothing but the page, the server and the kernel run
                t0 = time.time() * 1e3
                time.sleep(0.5)
                c0 = _cpu_times()
                time.sleep(args.seconds)
                c1 = _cpu_times()
                time.sleep(0.5)
                t1 = time.time() * 1e3
                with sync_playwright() as p:
                    page = _lab_page(p.chromium.connect_over_cdp(endpoint))
                    root = _root(page, i)
                    rows = page.evaluate("(e) => e.__skStats.slice()", root.element_handle())
                    # a DOM click: with 1 MB raw frames, Playwright's own websocket-frame events can hold up
                    # its synthetic mouse input for longer than any timeout
                    root.evaluate("(e) => e.querySelector('.sk-play').click()")
                    page.wait_for_timeout(500)  # paused: the exact frame replaces the JPEG preview
                    shown = root.locator(".sk-img-zoom").inner_text().strip()
                win = [r for r in rows if t0 + 500 <= r["drawn"] <= t1 - 500]
                detached = summarize(win, len(win) - 1, (win[-1]["drawn"] - win[0]["drawn"]) / 1e3) if len(win) > 2 \
                    else {"fps": 0.0}
                if c0 and c1:
                    detached["machine_busy_pct"] = round(100 * (c1[0] - c0[0]) / max(1, c1[1] - c0[1]), 1)
                results[name] = {"detached": detached, "attached": attached, "shown_after_pause": shown}
                print(f"{name}: {detached['fps']} fps detached (machine {detached.get('machine_busy_pct', '?')}% "
                      f"busy), {attached['fps']} fps with Playwright attached", flush=True)
                for mode, r in (("detached", detached), ("attached", attached)):
                    print(f"  {mode}:", json.dumps(r), flush=True)
        finally:
            chrome.terminate()
            chrome.wait(timeout=30)
    print("BENCH_LIVE", json.dumps(results))


if __name__ == "__main__":
    main()
