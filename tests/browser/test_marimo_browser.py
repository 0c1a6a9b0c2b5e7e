"""The widgets in marimo (`marimo run`, headless Chromium): a BufferView switched to its heat map by
its tab draws it (it stayed blank: marimo applies a change of several traits one by one, and the
heat map was drawn when its size arrived, before its codes), and an ImageView renders. Screenshot:
artifacts/marimo_heatmap.png."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.waiting import wait_until

pytest.importorskip("marimo", reason="marimo: pip install 'marimo>=0.9' (in the [test] extra)")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

APP = '''import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
    import numpy as np
    import slang_kernel.widgets as W

    data = np.sin(np.linspace(0, 12, 64 * 64, dtype=np.float32))
    image = np.zeros((32, 48, 4), np.float32)
    image[..., 1] = np.linspace(0, 1, 48, dtype=np.float32)
    image[..., 3] = 1
    mo.vstack([mo.ui.anywidget(W.BufferView(data)), mo.ui.anywidget(W.ImageView(image))])
    return


if __name__ == "__main__":
    app.run()
'''

# the sk-buf-plot canvas, wherever marimo put it (its widgets live in shadow roots): size and how
# many of its pixels are drawn (opaque)
CANVAS = """(sel) => {
  const found = [];
  const walk = (n) => { for (const c of n.querySelectorAll(sel)) found.push(c);
                        for (const e of n.querySelectorAll('*')) if (e.shadowRoot) walk(e.shadowRoot); };
  walk(document);
  return found.map((c) => {
    if (!c.width || !c.height) return [0, 0, 0];
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let drawn = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) drawn++;
    return [c.width, c.height, drawn];
  });
}"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("marimo")
    (root / "app.py").write_text(APP)
    port = _port()
    log = (root / "marimo.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "marimo", "run", str(root / "app.py"), "--headless",
                             "--port", str(port), "--no-token"], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, SLANG_KERNEL_BACKEND="cpu"), start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        def answers() -> bool:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                return True
            except OSError:
                assert proc.poll() is None, (root / "marimo.log").read_text()
                return False

        wait_until(answers, 60, f"marimo to answer at {url} (its log: {root / 'marimo.log'})")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)   # the server and the app's kernel it started
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_buffer_view_heat_map_and_image_view_in_marimo(marimo_app: str, lab_tools) -> None:
    with lab_tools.chromium_page("marimo_failure.png", 1200, 1000) as page:
        page.goto(marimo_app)
        page.wait_for_function(f"() => ({CANVAS})('canvas.sk-img-canvas').some((c) => c[2] > 0)",
                               timeout=90_000)
        page.get_by_text("heatmap", exact=True).first.click()
        page.wait_for_function(f"() => ({CANVAS})('canvas.sk-buf-plot').some((c) => c[2] > 0)", timeout=30_000)
        (heat,) = page.evaluate(CANVAS, "canvas.sk-buf-plot")
        assert heat == [64, 64, 64 * 64], heat          # every cell of the 64 x 64 grid drawn
        lab_tools.painted(page)
        page.screenshot(path=str(Path(lab_tools.ARTIFACTS) / "marimo_heatmap.png"))
