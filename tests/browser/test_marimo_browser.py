"""The widgets in marimo (`marimo run`, headless Chromium): a BufferView switched to its heat map by
its tab draws it (it stayed blank: marimo applies a change of several traits one by one, and the
heat map was drawn when its size arrived, before its codes), and an ImageView renders; and the
widgets are styled as in JupyterLab: marimo adopts its page reset (Tailwind's preflight) into each
widget's shadow root, which left tabs and buttons as bare text until widgets/_reset.css put the
browser's defaults back. The computed styles of tabs, buttons, inputs, the play button and the
canvas, and of the Progress bar (an HTML output, restyled by marimo's page styles), are compared with
the same widgets' in JupyterLab. Screenshots: artifacts/marimo_heatmap.png,
artifacts/marimo_widgets.png (marimo), artifacts/marimo_widgets_lab.png (JupyterLab) and
artifacts/marimo_widgets_nb7.png (Notebook 7)."""

from __future__ import annotations

import json
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

# the same widgets in marimo and in JupyterLab: a BufferView, an ImageView, a LiveImage with a slider,
# a colour, a play button, an IRGraph (a CPU session's function) and a training loop's Progress bar
WIDGETS = """import numpy as np
import slang_kernel as sk
import slang_kernel.widgets as W

data = np.sin(np.linspace(0, 12, 64 * 64, dtype=np.float32))
image = np.zeros((32, 48, 4), np.float32)
image[..., 1] = np.linspace(0, 1, 48, dtype=np.float32)
image[..., 3] = 1
live = W.LiveImage(lambda v: np.full((16, 16), v["k"], np.float32),
                   {"k": W.Slider(0, 1, 0.5), "tint": W.Color((1.0, 0.5, 0.0)), "t": W.Time()}, size=(64, 64))
s = sk.Session(backend="cpu")
s.run_cell("float sqr(float x) { return x * x; }")
views = [W.BufferView(data), W.ImageView(image), live, W.IRGraph.of(s, "sqr", height=240)]
bar = W.Progress(10, "fit", display=lambda *a, **k: None)   # shown below as an output, as a loop's would be
bar.update(4)
"""

APP = """import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo
{widgets}
    mo.vstack([mo.ui.anywidget(v) for v in views] + [bar])
    return


if __name__ == "__main__":
    app.run()
""".format(widgets="\n".join("    " + line if line else "" for line in WIDGETS.splitlines()))

LAB_CELLS = [WIDGETS + "for v in views + [bar]:\n    display(v)"]

# what is compared (the first match of each selector, in a widget's shadow root in marimo): controls
# whose look the page reset took away, and the canvas it turned into a block
STYLED = [
    ("active tab", ".sk-buf-tabs button.sk-on", ""),
    ("tab", ".sk-buf-tabs button:not(.sk-on)", ""),
    ("paging button", ".sk-buf-bar button", ""),
    ("go to row", "input.sk-buf-goto", ""),
    ("fit button", "button.sk-img-fit", ""),
    ("exposure slider", ".sk-img-bar input[type=range]", ""),
    ("sRGB box", ".sk-img-bar input[type=checkbox]", ""),
    ("colour", ".sk-ctl input[type=color]", ""),
    ("play button", "button.sk-play", ""),
    ("play glyph", "button.sk-play", "::before"),
    ("image canvas", "canvas.sk-img-canvas", ""),
    ("IR search", "input.sk-irg-search", ""),
    ("IR mode button", "button.sk-irg-mode", ""),
    ("IR select", "select.sk-irg-fn", ""),
    ("progress bar", ".sk-progress progress", ""),
]
# colours and fonts a widget takes from JupyterLab's theme variables, where marimo (which has none)
# shows the widget's own fallbacks, or inherits from the page's text: not compared
THEMED = {"active tab": {"backgroundColor"}, "image canvas": {"color", "borderTopColor", "fontFamily"},
          "progress bar": {"color", "borderTopColor"}}
PROPS = ["display", "boxSizing", "verticalAlign", "appearance", "color", "backgroundColor", "borderTopWidth",
         "borderTopStyle", "borderTopColor", "borderLeftWidth", "borderLeftStyle", "borderTopLeftRadius",
         "paddingTop", "paddingLeft", "marginTop", "marginLeft", "fontSize", "fontWeight", "fontFamily"]
STYLES = """([targets, props]) => {
  const roots = [];
  const walk = (n) => { roots.push(n); for (const e of n.querySelectorAll('*')) if (e.shadowRoot) walk(e.shadowRoot); };
  walk(document);
  const out = {};
  for (const [name, sel, pseudo] of targets) {
    const e = roots.map((r) => r.querySelector(sel)).find((x) => x);
    if (!e) { out[name] = null; continue; }
    const cs = getComputedStyle(e, pseudo || null), r = e.getBoundingClientRect();
    const o = {};
    for (const p of props) o[p] = cs[p];
    if (!pseudo) { o.width = Math.round(r.width); o.height = Math.round(r.height); }
    out[name] = o;
  }
  return out;
}"""


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


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_tools) -> Iterator[str]:
    with lab_tools.jupyterlab(tmp_path_factory.mktemp("marimo_lab"), LAB_CELLS, "styled.ipynb") as url:
        yield url


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory, lab_tools) -> Iterator[str]:
    with lab_tools.jupyterlab(tmp_path_factory.mktemp("marimo_nb7"), LAB_CELLS, "styled.ipynb",
                              app="notebook") as url:
        yield url


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


def _styles(page) -> dict[str, dict[str, object] | None]:
    page.wait_for_function(f"() => Object.values(({STYLES})([{json.dumps(STYLED)}, []])).every((s) => s)",
                           timeout=90_000)
    styles: dict[str, dict[str, object] | None] = page.evaluate(STYLES, [STYLED, PROPS])
    return styles


def _differ(ref: dict[str, dict[str, object] | None], other: dict[str, dict[str, object] | None]) -> dict[str, object]:
    """{target: {property: (in ref, in other)}} where they differ, THEMED left out."""
    return {name: d for name, style in other.items() if style is not None and (d := {
        p: (ref[name][p], v) for p, v in style.items()  # type: ignore[index]
        if p not in THEMED.get(name, ()) and ref[name][p] != v})}  # type: ignore[index]


def test_widgets_styled_in_marimo_as_in_jupyterlab(marimo_app: str, lab: str, notebook7: str, lab_tools) -> None:
    """Tabs, buttons, inputs, the play button, the image canvas and the progress bar have the computed
    styles (and sizes) they have in JupyterLab, in marimo and in Notebook 7: bordered buttons with
    padding, the active tab bold on its tint, the play glyph a CSS triangle, the canvas inline with a
    1px frame, the browser's own progress bar."""
    ARTIFACTS = Path(lab_tools.ARTIFACTS)
    with lab_tools.chromium_page("marimo_widgets_lab_failure.png", 1200, 2000) as page:
        page.goto(lab)
        lab_tools.run_all_cells(page, len(LAB_CELLS), timeout=120_000)
        in_lab = _styles(page)
        lab_tools.dismiss_toasts(page)
        lab_tools.painted(page)   # the dismissed toast and the styles are drawn before the screenshot
        page.locator(".jp-OutputArea").first.screenshot(path=str(ARTIFACTS / "marimo_widgets_lab.png"))
    with lab_tools.chromium_page("marimo_widgets_nb7_failure.png", 1200, 2000) as page:
        page.goto(notebook7)
        lab_tools.wait_kernel_idle(page, idle=lab_tools.NOTEBOOK7_IDLE)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        lab_tools.run_when_connected(page, cell)
        page.wait_for_function("(c) => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt').textContent)",
                               arg=cell.element_handle(), timeout=120_000)
        in_notebook7 = _styles(page)
        lab_tools.painted(page)   # the styles are drawn before the screenshot
        page.locator(".jp-OutputArea").first.screenshot(path=str(ARTIFACTS / "marimo_widgets_nb7.png"))
    with lab_tools.chromium_page("marimo_widgets_failure.png", 1200, 2000) as page:
        page.goto(marimo_app)
        in_marimo = _styles(page)
        lab_tools.painted(page)   # the styles are drawn before the screenshot
        page.screenshot(path=str(ARTIFACTS / "marimo_widgets.png"), full_page=True)

    # what the page reset had taken away, stated once here (so that two equally bare pages cannot pass)
    for where in (in_lab, in_notebook7, in_marimo):
        tab, active, glyph = where["tab"], where["active tab"], where["play glyph"]
        assert tab and active and glyph
        assert tab["borderTopStyle"] != "none" and float(str(tab["borderTopWidth"])[:-2]) >= 1, tab
        assert float(str(tab["paddingLeft"])[:-2]) >= 4, tab
        assert active["fontWeight"] == "700" and active["backgroundColor"] != tab["backgroundColor"], active
        assert glyph["borderLeftWidth"] == "9px" and glyph["borderLeftStyle"] == "solid", glyph
    differ = _differ(in_lab, in_marimo)
    assert not differ, f"styles in marimo differ from JupyterLab's as (JupyterLab, marimo): {differ}"
    differ = _differ(in_lab, in_notebook7)
    assert not differ, f"styles in Notebook 7 differ from JupyterLab's as (JupyterLab, Notebook 7): {differ}"
