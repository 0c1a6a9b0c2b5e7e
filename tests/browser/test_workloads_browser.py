"""The training notebooks (10_gaussian_fit, 11_neural_texture) in JupyterLab, on the CPU backend at
their reduced size: the fit's view is redrawn while the training cell runs, the progress bar
(widgets.Progress, a display output) moves while it runs and ends full, and the saved notebook holds
that last state as text ("120/120 [...]"), where tqdm's widget bar saved nothing readable."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tests.waiting import wait_until

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
SETUP = ('import os\nos.environ["SLANG_KERNEL_BACKEND"] = "cpu"   # %slang_backend reads it\n'
         'os.environ["SLANG_KERNEL_QUICK"] = "1"')

# installed before Run All: every frame a view draws, as [its cell's index, frames drawn, the cell
# running ([*])], recorded by the page itself (polling from here would miss frames on a loaded machine)
RECORD_DRAWN = """() => {
  const nb = document.querySelector('.jp-Notebook');
  window.__drawn = [];
  new MutationObserver((changes) => {
    for (const c of changes) {
      const cell = c.target.closest('.jp-CodeCell');
      if (!cell) continue;
      window.__drawn.push([[...nb.querySelectorAll('.jp-CodeCell')].indexOf(cell), Number(c.target.dataset.frames),
                           /\\[\\*\\]/.test(cell.querySelector('.jp-InputPrompt').textContent)]);
    }
  }).observe(nb, {attributes: true, attributeFilter: ["data-frames"], subtree: true});
}"""


@pytest.fixture(params=["10_gaussian_fit", "11_neural_texture"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, lab_tools) -> object:
    root = tmp_path_factory.mktemp("workloads")
    name = request.param
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "setup", "metadata": {},
                           "outputs": [], "source": SETUP})
    source = root / "source.ipynb"
    source.write_text(json.dumps(nb))
    with lab_tools.jupyterlab(root, notebook=f"{name}.ipynb", source=source) as url:
        yield url, name, root


def test_fit_is_drawn_live_with_a_progress_bar(lab: tuple[str, str, pathlib.Path], lab_tools) -> None:
    url, name, root = lab
    with lab_tools.chromium_page(f"{name}_browser_failure.png") as page:
        page.goto(url)
        lab_tools.wait_kernel_idle(page)
        page.evaluate(RECORD_DRAWN)
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

        # while the training cell runs ([*]), the view's drawn-frame count keeps growing
        training = page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".sk-img")).first
        training.wait_for(timeout=120_000)
        page.wait_for_function("(c) => !/\\[\\*\\]/.test(c.querySelector('.jp-InputPrompt').textContent)",
                               arg=training.element_handle(), timeout=120_000)
        index = training.evaluate("(c) => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].indexOf(c)")
        drawn = page.evaluate("() => window.__drawn")
        assert len({f for i, f, running in drawn if i == index and running and f > 0}) >= 2, \
            f"the view of cell {index} was not redrawn while training: {drawn}"

        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];"
            " return p.length > 0 && p.every((e) => /\\[\\d+\\]/.test(e.textContent)); }", timeout=120_000)
        training.scroll_into_view_if_needed()      # JupyterLab renders only the cells in view
        bar = training.locator(".sk-progress").first
        bar.wait_for(timeout=10_000)
        text = bar.inner_text()
        done = re.search(r"(\d+)/(\d+) \[", text)      # the bar ends full: "120/120 [11.2 s, loss=0.0123]"
        assert done and done.group(1) == done.group(2) and "stopped" not in text, text
        assert bar.locator("progress").evaluate("(p) => p.value === p.max && p.max > 0")
        outputs = training.locator(".jp-OutputArea").text_content() or ""
        assert "Traceback" not in outputs
        training.screenshot(path=str(lab_tools.ARTIFACTS / f"{name}_browser.png"))

        # saved: the bar's last state is in the file as text, for any reader of the notebook
        training.click()
        page.keyboard.press("Control+s")
        wait_until(lambda: "<progress" in (root / f"{name}.ipynb").read_text(), 30,
                   "the notebook to be saved with its progress bar")
    saved = json.loads((root / f"{name}.ipynb").read_text())
    bars = [o["data"]["text/plain"] for c in saved["cells"] for o in c.get("outputs", ())
            if "<progress" in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(bars) == 1, bars
    text = "".join(bars[0])
    done = re.search(r"(\d+)/(\d+) \[", text)
    assert done and done.group(1) == done.group(2), text
