"""Jupyter Notebook 7 and JupyterLab in headless Chromium, with what `pip install` gives them:

- `%%slang` cells of a Python notebook are highlighted as Slang (types, attributes, comments with
  apostrophes) by the labextension, in JupyterLab and in Notebook 7, and the Python cell beside them
  is still highlighted as Python;
- in Notebook 7: the Slang kernel runs a cell and shows a widget from a `%%python` cell; in a Python
  notebook `%%slang` compiles and binds a kernel, and every widget (ImageView, BufferView, a live
  image with a slider, IRGraph, GradientFlow) renders and answers.

The servers (conftest's shared `jupyter lab` and `jupyter notebook`) run from this environment with
the kernelspec and the labextension of this checkout first on JUPYTER_PATH, so a stale copy elsewhere
cannot stand in for them.
Screenshots go to artifacts/ (slang_magic_highlighting_lab.png is the %%slang cell in JupyterLab).
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SLANG_KERNELSPEC = {"name": "slang", "display_name": "Slang", "language": "slang"}

# What issue 18 saw highlighted as Python: the apostrophe turned the rest of the cell into a string,
# `and`/`in`/`not` were keywords inside the comment, `uint` and `void` were plain.
MAGIC_CELL = """%%slang twice --backend cpu
// it's Slang here: and, in, not are plain words in a comment
[shader("compute")][numthreads(64, 1, 1)]
void twice(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> data)
{
    data[t.x] = data[t.x] * 2;  // don't stop
}"""
PYTHON_CELL = "def f(x):\n    return 'text' and x  # a Python comment"

SLANG_KERNEL_CELL = """[shader("compute")][numthreads(64, 1, 1)]
void scale(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float3> data)
{
    data[t.x] = data[t.x] * 2;
}"""

PYTHON_IN_SLANG_KERNEL = ("%%python\nimport numpy as np\nimport slang_kernel.widgets as W\n"
                          "W.BufferView(np.arange(100, dtype=np.float32))")

BUMP = """%%slang bump --backend cpu
[Differentiable]
float bump(float x, no_diff float width) { return exp(-x * x / (width * width)); }"""

WIDGET_CELLS = [
    "%load_ext slang_kernel\nimport numpy as np\nimport slang_kernel.widgets as W",
    MAGIC_CELL,
    "data = np.arange(64, dtype=np.float32)\ntwice(threads=64, data=data)\nprint('twice:', data[:4])",
    BUMP,
    "g = np.linspace(0, 1, 128, dtype=np.float32)\nW.ImageView(np.outer(g, g), colormap='viridis', size=(128, 128))",
    "W.BufferView(np.random.default_rng(0).random((1000, 4), dtype=np.float32))",
    None,  # the live CPU kernel image (lab_tools.LIVE_CPU_CELL), filled in by the fixture
    "%slang_ir bump",
    "%slang_grad bump np.float32(0.5) np.float32(1.2)",
]

# the computed colour of the innermost token span whose text is `word` (or contains it), in `cell`
COLOR_OF = """([cell, word]) => {
  const spans = [...cell.querySelectorAll('.cm-line span')].filter((s) => !s.querySelector('span'));
  const hit = spans.find((s) => s.textContent.trim() === word) || spans.find((s) => s.textContent.includes(word));
  return hit ? getComputedStyle(hit).color : null;
}"""
# per line of the editor: its text and the distinct colours of its characters
LINE_COLORS = """(cell) => [...cell.querySelectorAll('.cm-line')].map((line) => {
  const colors = new Set();
  const walk = (n) => {
    if (n.nodeType === 3) { if (n.textContent.trim()) colors.add(getComputedStyle(n.parentElement).color); }
    else n.childNodes.forEach(walk);
  };
  walk(line);
  return {text: line.textContent, colors: [...colors]};
})"""


def run_cells(page, lab_tools, n: int, timeout: int = 90_000) -> None:
    """Run the notebook's first `n` cells one by one (Shift+Enter), waiting for each; the first is sent
    until the kernel takes it (Notebook 7 has no status bar saying when it is connected)."""
    lab_tools.wait_kernel_idle(page, idle=lab_tools.NOTEBOOK7_IDLE)
    cells = page.locator(".jp-Notebook .jp-Cell")
    lab_tools.run_when_connected(page, cells.nth(0))
    for i in range(n):
        if i:
            cells.nth(i).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
        page.wait_for_function(
            "(c) => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt').textContent)",
            arg=cells.nth(i).element_handle(), timeout=timeout)


@pytest.fixture(params=["lab", "notebook"])
def highlighting_server(request, tmp_path_factory: pytest.TempPathFactory, lab_tools):
    cells = ["%load_ext slang_kernel", MAGIC_CELL, PYTHON_CELL]
    root = tmp_path_factory.mktemp(f"hl-{request.param}")
    with lab_tools.jupyterlab(root, cells, "magic.ipynb", app=request.param) as url:
        yield request.param, url


def test_slang_magic_cells_are_highlighted_as_slang(highlighting_server, lab_tools) -> None:
    app, url = highlighting_server
    with lab_tools.chromium_page(f"slang_magic_highlighting_{app}_failure.png", 1200, 700) as page:
        page.goto(url)
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        cells = page.locator(".jp-Notebook .jp-Cell")
        magic, python = cells.nth(1).element_handle(), cells.nth(2).element_handle()
        page.wait_for_function(f"(c) => ({COLOR_OF})([c, 'RWStructuredBuffer']) !== null", arg=magic, timeout=30_000)
        page.wait_for_function(f"(c) => ({COLOR_OF})([c, 'return']) !== null", arg=python, timeout=30_000)
        lines = page.evaluate(LINE_COLORS, magic)
        color = {w: page.evaluate(COLOR_OF, [magic, w])
                 for w in ("void", "uint3", "RWStructuredBuffer", "float", "uniform", 'shader("compute")', "2")}
        py = {w: page.evaluate(COLOR_OF, [python, w]) for w in ("def", "return", "'text'", "# a Python comment")}
        plain = page.evaluate("(c) => getComputedStyle(c.querySelector('.cm-line')).color", magic)
        lab_tools.dismiss_toasts(page)
        cells.nth(1).screenshot(path=str(lab_tools.ARTIFACTS / f"slang_magic_highlighting_{app}.png"))
        page.screenshot(path=str(lab_tools.ARTIFACTS / f"slang_magic_highlighting_{app}_page.png"))

    comment, attribute_line, signature, body = lines[1], lines[2], lines[3], lines[5]
    # the comment is one colour from `//` to the end: the apostrophe opens no string, `and`/`in`/`not`
    # are no keywords; it is the colour of the Python cell's comment
    assert comment["text"].startswith("// it's") and len(comment["colors"]) == 1, comment
    assert comment["colors"][0] == py["# a Python comment"] != plain, (comment, py, plain)
    # ... and the lines after it are code again (Python would have made them a string)
    assert color["void"] == color["uint3"] == color["RWStructuredBuffer"] == color["float"] != plain, color
    assert color["uniform"] == py["def"] != plain, (color, py)  # a keyword, as Python's keywords
    assert color['shader("compute")'] not in (None, plain, py["'text'"]), (color, py)
    assert len(attribute_line["colors"]) == 1, attribute_line  # the attribute line is one token
    assert body["text"].strip().startswith("data[t.x]") and py["# a Python comment"] in body["colors"], body
    assert len(signature["colors"]) > 2, signature
    # the Python cell beside it is still Python
    assert py["def"] == py["return"] not in (None, plain), py
    assert py["'text'"] not in (None, plain, py["def"]), py


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory, lab_tools):
    """The two notebooks' Notebook 7 pages (name -> URL)."""
    widget_cells = [c if c is not None else lab_tools.LIVE_CPU_CELL + "\nview" for c in WIDGET_CELLS]
    root = tmp_path_factory.mktemp("nb7")
    with ExitStack() as stack:
        yield {"slang.ipynb": stack.enter_context(lab_tools.jupyterlab(
                   root, [SLANG_KERNEL_CELL, PYTHON_IN_SLANG_KERNEL], "slang.ipynb", SLANG_KERNELSPEC, app="notebook")),
               "widgets.ipynb": stack.enter_context(lab_tools.jupyterlab(
                   root, widget_cells, "widgets.ipynb", app="notebook"))}


def test_slang_kernel_in_notebook7(notebook7: dict[str, str], lab_tools) -> None:
    with lab_tools.chromium_page("notebook7_slang_kernel_failure.png", 1200, 800) as page:
        page.goto(notebook7["slang.ipynb"])
        run_cells(page, lab_tools, 2)
        cells = page.locator(".jp-Notebook .jp-Cell")
        assert "scale" in cells.nth(0).locator(".jp-OutputArea").text_content()  # the kernel's summary
        bv = cells.nth(1).locator(".sk-buf")
        bv.wait_for(timeout=60_000)
        lab_tools.wait_js(page, "(e) => e.dataset.firstLabel === '0'", bv)
        bv.locator(".sk-next").click()
        lab_tools.wait_js(page, "(e) => e.dataset.firstLabel === '20'", bv)
        # Slang kernel cells are highlighted as Slang here too
        h = cells.nth(0).element_handle()
        assert page.evaluate(COLOR_OF, [h, "float3"]) == page.evaluate(COLOR_OF, [h, "void"])
        lab_tools.dismiss_toasts(page)
        page.screenshot(path=str(lab_tools.ARTIFACTS / "notebook7_slang_kernel.png"))


def test_slang_magic_and_every_widget_in_notebook7(notebook7: dict[str, str], lab_tools) -> None:
    CANVAS_STATS, wait_js = lab_tools.CANVAS_STATS, lab_tools.wait_js
    with lab_tools.chromium_page("notebook7_widgets_failure.png", 1200, 900) as page:
        page.goto(notebook7["widgets.ipynb"])
        run_cells(page, lab_tools, len(WIDGET_CELLS))
        cells = page.locator(".jp-Notebook .jp-Cell")
        def out(i: int):
            return cells.nth(i).locator(".jp-OutputArea")

        # text_content: cells out of view are not rendered (content-visibility), innerText is empty
        assert "twice" in out(1).text_content()  # %%slang's summary
        assert "twice: [0. 2. 4. 6.]" in out(2).text_content()  # the bound kernel ran
        assert "bump" in out(3).text_content()

        # ImageView draws
        iv = lab_tools.drawn_view(page, out(4))
        stats = iv.locator("canvas").evaluate(CANVAS_STATS)
        assert stats["nonbg"] > 1000 and stats["colors"] > 10, stats

        # BufferView pages
        bv = out(5).locator(".sk-buf")
        bv.scroll_into_view_if_needed()
        wait_js(page, "(e) => e.dataset.firstLabel === '0'", bv)
        bv.locator(".sk-next").click()
        wait_js(page, "(e) => e.dataset.firstLabel === '20'", bv)

        # the live kernel image: dragging its slider re-dispatches and redraws
        live = out(6).locator(".sk-img")
        assert "Error" not in out(6).text_content(), out(6).text_content()
        live.scroll_into_view_if_needed()
        wait_js(page, "(e) => Number(e.dataset.frames) > 0", live)
        before = live.locator("canvas").evaluate(CANVAS_STATS)
        frames0 = int(live.get_attribute("data-frames"))
        lab_tools.drag_slider(page, live.locator(".sk-ctl-slider input"), 0.1, 0.9)
        wait_js(page, f"(e) => Number(e.dataset.frames) > {frames0}", live)
        after = lab_tools.wait_redrawn(page, live.locator("canvas"), before)
        assert after["hash"] != before["hash"] and after["nonbg"] > 1000, (before, after)

        # IRGraph lays out the function's IR
        irg = out(7).locator(".sk-irg")
        irg.scroll_into_view_if_needed()
        wait_js(page, "(e) => Number(e.dataset.nodes) > 0", irg)

        # GradientFlow: bump's autodiff gradient agrees with finite differences
        gf = out(8).locator(".sk-gf")
        gf.scroll_into_view_if_needed()
        gf.wait_for(timeout=30_000)
        assert gf.get_attribute("data-flagged") == ""
        assert "sk-gf-n-ok" in gf.locator("g[data-input=x]").get_attribute("class")
        lab_tools.dismiss_toasts(page)
        page.screenshot(path=str(lab_tools.ARTIFACTS / "notebook7_widgets.png"), full_page=True)
