"""Slang's language server in JupyterLab with jupyterlab-lsp (the [lsp] extra), in headless Chromium:
in a Slang-kernel notebook, before any cell runs, hovering `sq` (Ctrl held) shows its signature from two
cells above, Alt+click jumps there, typing `sq(` shows the signature, a typo is underlined, and the
kernel's line magics and a `%%python` cell are not Slang errors; in a Python notebook, the same for
`%%slang` cells. In Notebook 7, Shift-Tab is the kernel's inspect_request, answered by the same
server, before the cell defining the name has run. Hovers name the cell ("Defined in cell 1, line 1",
or In[n] once it ran). Screenshots: artifacts/lsp_*.png."""

from __future__ import annotations

import time

import pytest

from served import SLANG_KERNELSPEC, served_notebook

pytest.importorskip("jupyter_lsp", reason="the [lsp] extra: pip install 'slang-kernel[lsp]'")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

SLANG_CELLS = [
    "float sq(float x)\n{\n    return x * x;\n}",
    "%backend cpu\nstruct Particle { float3 pos; float mass; };",
    "float energy(Particle p) { return sq(p.mass); }",
    "float broken(float y) { return y + undefined_thing; }",
    "%%python\nimport numpy as np\nx = np.zeros(3)",
    "float k = ",
]
PYTHON_CELLS = [
    "%load_ext slang_kernel",
    "%%slang\nfloat sq(float x) { return x * x; }",
    "x = [1, 2, 3]",
    "%%slang\nfloat g(float y) { return sq(y) + nope; }",
]

ERRORS = "(c) => [...c.querySelectorAll('.cm-lintRange-error')].map((e) => e.textContent)"


def _token(cell, word: str, nth: int = 0):
    """The bounding box of the nth occurrence of `word` in the cell's editor (a text range)."""
    return cell.locator(".cm-content").evaluate(
        """(root, [word, nth]) => {
          const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
          let n = 0;
          for (let t = walker.nextNode(); t; t = walker.nextNode()) {
            let i = t.textContent.indexOf(word);
            while (i >= 0) {
              if (n++ === nth) {
                const r = document.createRange(); r.setStart(t, i); r.setEnd(t, i + word.length);
                const b = r.getBoundingClientRect();
                return {x: b.x + b.width / 2, y: b.y + b.height / 2};
              }
              i = t.textContent.indexOf(word, i + 1);
            }
          }
          return null;
        }""", [word, nth])


def _wait_lsp(page, lab_tools) -> None:
    lab_tools.wait_kernel_idle(page, 90)
    page.locator(".lsp-statusbar-item").first.wait_for(timeout=60_000)


def _hover(page, cell, word: str, nth: int = 0) -> str:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    at = _token(cell, word, nth)
    assert at is not None, f"{word!r} not in the cell"
    page.mouse.click(at["x"], at["y"])  # the editor takes the key events
    deadline = time.monotonic() + 30
    while True:   # the hover is asked for once the mouse rests (300 ms), shown with Ctrl: again until it shows
        page.mouse.move(at["x"] + 1, at["y"])
        page.keyboard.down("Control")
        try:
            page.mouse.move(at["x"] + 1, at["y"], steps=2)
            page.wait_for_function("() => [...document.querySelectorAll('.lsp-hover')]"
                                   ".some((e) => e.innerText.trim().length > 0)", timeout=2_000)
            return "\n".join(e.inner_text() for e in page.locator(".lsp-hover").all())
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, f"no hover over {word!r} came in 30 s"
        finally:
            page.keyboard.up("Control")


slang_lab = served_notebook("lsplab", SLANG_CELLS, "lsp.ipynb", kernelspec=SLANG_KERNELSPEC)


python_lab = served_notebook("lsppy", PYTHON_CELLS, "lsp_python.ipynb")


def test_slang_notebook_gets_the_language_server(slang_lab: str, lab_tools) -> None:
    shots = lab_tools.ARTIFACTS
    with lab_tools.chromium_page("lsp_slang_failure.png", 1300, 900) as page:
        page.goto(slang_lab)
        _wait_lsp(page, lab_tools)
        lab_tools.dismiss_toasts(page)
        cells = page.locator(".jp-Notebook .jp-Cell")
        # a red squiggle under the typo, before anything ran; none in the other cells (a cell sees the
        # cells above it; %backend and the %%python cell are not Slang)
        page.wait_for_function(f"(c) => ({ERRORS})(c).length > 0", arg=cells.nth(3).element_handle(),
                               timeout=60_000)
        assert cells.nth(3).evaluate(ERRORS) == ["undefined_thing"]
        for i in (0, 1, 2, 4):
            assert cells.nth(i).evaluate(ERRORS) == [], (i, cells.nth(i).evaluate(ERRORS))
        assert "[" not in cells.nth(0).locator(".jp-InputPrompt").inner_text().replace("[ ]", "")
        page.screenshot(path=str(shots / "lsp_squiggle.png"))

        # hover: the signature of sq, defined two cells above
        text = _hover(page, cells.nth(2), "sq")
        # named as the user sees the cell: the first, not run yet (the saved notebook says which)
        assert "sq(float x)" in text and "Defined in cell 1, line 1" in text, text
        page.screenshot(path=str(shots / "lsp_hover.png"))
        page.mouse.move(5, 5)

        # Alt+click on sq jumps to its definition in the first cell
        at = _token(cells.nth(2), "sq")
        page.keyboard.down("Alt")
        page.mouse.click(at["x"], at["y"])
        page.keyboard.up("Alt")
        page.wait_for_function("(c) => c.classList.contains('jp-mod-active')",
                               arg=cells.nth(0).element_handle(), timeout=30_000)
        page.screenshot(path=str(shots / "lsp_jump.png"))

        # typing `sq(` in the last cell shows the signature
        editor = cells.nth(5).locator(".jp-InputArea-editor")
        editor.click()
        page.keyboard.press("End")
        page.keyboard.type("sq(", delay=80)
        sig = page.locator(".lsp-signature-help").first
        sig.wait_for(state="visible", timeout=30_000)
        assert "sq" in sig.inner_text() and "float x" in sig.inner_text(), sig.inner_text()
        page.screenshot(path=str(shots / "lsp_signature.png"))


def test_slang_cells_of_a_python_notebook_get_the_language_server(python_lab: str, lab_tools) -> None:
    with lab_tools.chromium_page("lsp_python_failure.png", 1300, 800) as page:
        page.goto(python_lab)
        _wait_lsp(page, lab_tools)
        lab_tools.dismiss_toasts(page)
        cells = page.locator(".jp-Notebook .jp-Cell")
        # without a Python language server JupyterLab reads the cells for other languages only once
        # the notebook changes: type the end of the last cell, as its writer would
        cells.nth(3).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+End")
        page.keyboard.type(" // g", delay=50)
        page.wait_for_function(f"(c) => ({ERRORS})(c).length > 0", arg=cells.nth(3).element_handle(),
                               timeout=60_000)
        assert cells.nth(3).evaluate(ERRORS) == ["nope"]
        assert cells.nth(1).evaluate(ERRORS) == [] and cells.nth(2).evaluate(ERRORS) == []
        text = _hover(page, cells.nth(3), "sq")
        # named as the editor shows it (line 1 is %%slang), though the last cell was edited since the save
        assert "sq(float x)" in text and "Defined in cell 2, line 2" in text, text
        page.screenshot(path=str(lab_tools.ARTIFACTS / "lsp_python_hover.png"))


notebook7 = served_notebook("lspnb7", ["float sq(float x) { return x * x; }", "float k = sq("], "lsp_nb7.ipynb",
                            kernelspec=SLANG_KERNELSPEC, app="notebook")


def test_shift_tab_in_notebook7_is_answered_by_the_server(notebook7: str, lab_tools) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with lab_tools.chromium_page("lsp_nb7_failure.png", 1200, 700) as page:
        page.goto(notebook7)
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        cells = page.locator(".jp-Notebook .jp-Cell")
        # nothing runs: the kernel reads sq from the saved notebook
        lab_tools.wait_kernel_idle(page, 90, idle=lab_tools.NOTEBOOK7_IDLE)
        editor = cells.nth(1).locator(".jp-InputArea-editor")
        editor.click()
        page.keyboard.press("End")
        tip = page.locator(".jp-Tooltip").first
        deadline = time.monotonic() + 90
        while True:   # a loaded machine may start the server late: no answer or the kernel's own comes, ask again
            page.keyboard.press("Shift+Tab")
            try:
                page.wait_for_function("() => /func sq/.test(document.querySelector('.jp-Tooltip')?.innerText)",
                                       timeout=10_000)
                break
            except PlaywrightTimeout:
                assert time.monotonic() < deadline, "the server never answered Shift-Tab: " + (
                    tip.inner_text() if tip.count() else "no tooltip")
                page.keyboard.press("Escape")
                editor.click()
                page.keyboard.press("End")
        text = tip.inner_text()
        page.screenshot(path=str(lab_tools.ARTIFACTS / "lsp_notebook7_shift_tab.png"))
        assert "[" not in cells.nth(0).locator(".jp-InputPrompt").inner_text().replace("[ ]", "")
    assert "func sq(float x) -> float" in text and "Defined in cell 1, line 1" in text, text
