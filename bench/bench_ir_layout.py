"""IRGraph layout time in headless Chromium, by graph size (no peer: the layout runs in the page).

    .venv/bin/python bench/bench_ir_layout.py [--sizes 60,150,245]

For each size N, a [Differentiable] function of N chained lines (about 4 IR instructions per line)
is compiled, its IRGraph widget rendered in a blank page (the widget's real ES module with a stand-in
model, no JupyterLab) at the blocks and data-flow levels, and the layout time the widget itself
measures (dagre) is printed. The data-flow level falls back to blocks above DATAFLOW_MAX
instructions (widgets/ir_graph.js), which is what these numbers justify.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
from conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

import slang_kernel as sk  # noqa: E402
import slang_kernel.widgets as W  # noqa: E402
from slang_kernel.widgets._esm import bundle_esm  # noqa: E402

RENDER = """async ([esm, state]) => {
  const mod = await import(URL.createObjectURL(new Blob([esm], {type: 'text/javascript'})));
  const host = document.createElement('div'); document.body.replaceChildren(host);
  const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {}, send() {},
                 on() {}, off() {}};
  mod.default.render({model, el: host});
  return state.layout_ms;
}"""


def chain(n: int) -> str:
    return ("[Differentiable]\nfloat big(float x, float y)\n{\n    float t0 = x;\n    float t1 = y;\n"
            + "".join(f"    float t{k} = sin(t{k - 1}) * x + t{k - 2} * y;\n" for k in range(2, n + 2))
            + f"    return t{n + 1};\n}}\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="60,150,245")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    esm = bundle_esm("ir_graph.js")
    print(f"{'lines':>6} {'insts':>6} {'mode':>9} {'nodes':>6} {'layout ms':>10} {'total ms':>9}")
    with sk.Session(backend="cpu") as s, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_content("<html><body></body></html>")
        for n in (int(x) for x in args.sizes.split(",")):
            s.run_cell(chain(n), name="big")
            g = W.IRGraph.of(s, "big", columns="single")
            for mode in ("blocks", "dataflow"):
                state = {k: getattr(g, k) for k in ("data", "view", "function", "height", "selected", "columns")}
                state.update(mode=mode, layout_ms={})
                r = page.evaluate(RENDER, [esm, state])
                print(f"{n:6} {r['insts']:6} {r['mode']:>9} {r['nodes']:6} {r['layout']:10.1f} {r['total']:9.1f}",
                      flush=True)
                print("BENCH_IR", json.dumps({"lines": n, **r}))
        browser.close()


if __name__ == "__main__":
    main()
