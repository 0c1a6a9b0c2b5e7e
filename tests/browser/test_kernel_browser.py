"""The Slang kernel in a real JupyterLab + headless Chromium: its cells are highlighted as Slang (the
labextension that `python -m slang_kernel install` puts next to the kernelspec), and a cell runs."""

from __future__ import annotations

import pytest

from served import SLANG_KERNELSPEC, served_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

CELL = """[shader("compute")][numthreads(64, 1, 1)]
void twice(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float3> data)
{
    float3 v = data[t.x];
    data[t.x] = v * 2;
}"""

# the computed colour of the innermost token span whose text is `word` (or contains it: adjacent
# tokens of one style share a span), within the first cell's editor
COLOR_OF = """([cell, word]) => {
  const spans = [...cell.querySelectorAll('.cm-line span')].filter((s) => !s.querySelector('span'));
  const hit = spans.find((s) => s.textContent.trim() === word) || spans.find((s) => s.textContent.includes(word));
  return hit ? getComputedStyle(hit).color : null;
}"""


# the shared server has this checkout's kernelspec and labextension first on JUPYTER_PATH
lab = served_notebook("kernellab", [CELL], "slang.ipynb", kernelspec=SLANG_KERNELSPEC)


def test_slang_cells_are_highlighted_as_slang(lab: str, lab_tools) -> None:
    with lab_tools.chromium_page("slang_kernel_highlighting_failure.png", 1200, 800) as page:
        page.goto(lab)
        lab_tools.run_all_cells(page, 1, timeout=90_000)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        assert "twice" in cell.locator(".jp-OutputArea").inner_text()  # the kernel's summary
        h = cell.element_handle()
        page.wait_for_function(f"(c) => ({COLOR_OF})([c, 'float3']) !== null", arg=h, timeout=30_000)
        color = {w: page.evaluate(COLOR_OF, [h, w]) for w in ("float3", "RWStructuredBuffer", "uniform", "void")}
        attribute = page.evaluate(COLOR_OF, [h, 'shader("compute")'])
        plain = cell.locator(".cm-line").first.evaluate("(e) => getComputedStyle(e).color")
        page.screenshot(path=str(lab_tools.ARTIFACTS / "slang_kernel_highlighting.png"))
    # C++ highlighting (what JupyterLab falls back to) leaves float3 and RWStructuredBuffer plain and
    # splits the attribute into punctuation and a string
    assert color["float3"] == color["RWStructuredBuffer"] == color["void"] != plain, (color, plain)
    assert color["uniform"] not in (None, plain), color
    assert attribute not in (None, plain), attribute
