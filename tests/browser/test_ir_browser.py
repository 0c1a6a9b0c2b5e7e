"""IRGraph and GradientFlow in a real JupyterLab + headless Chromium: the graph renders (a 200+
instruction function, its derivatives beside it, the data-flow level), clicking an instruction
selects it and shows its source line, search finds nodes; GradientFlow flags the broken input.
Layout times measured in the page are printed and saved to artifacts/ir_numbers.json."""

from __future__ import annotations

import json

import pytest

from served import served_notebook


pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

BIG_LINES = 60
BIG = ("[Differentiable]\nfloat big(float x, float y)\n{\n    float t0 = x;\n    float t1 = y;\n"
       + "".join(f"    float t{k} = sin(t{k - 1}) * x + t{k - 2} * y;\n" for k in range(2, BIG_LINES + 2))
       + f"    if (t{BIG_LINES} > 0) t{BIG_LINES + 1} = t{BIG_LINES + 1} * 2;\n"
       + f"    return t{BIG_LINES + 1};\n}}\n")
SAFE = """
[BackwardDerivative(safeDivide_bwd)]
float safeDivide(float numerator, float denominator) { return numerator / max(denominator, 1e-8); }
void safeDivide_bwd(inout DifferentialPair<float> numerator, inout DifferentialPair<float> denominator, float dOut)
{
    float d = denominator.p + 1e-8;
    numerator = diffPair(numerator.p, dOut / d);
    denominator = diffPair(denominator.p, 2.0 * -dOut * numerator.p / (d * d));  // wrong factor 2
}
float helper(float x) { return 3 * x; }
[Differentiable]
float loss(float a, float b, no_diff float w) { return safeDivide(a * a, b) * w + a + no_diff(helper(w)); }
"""

CELLS = [
    "import numpy as np, slang_kernel as sk\nimport slang_kernel.widgets as W\n"
    f"s = sk.Session(backend='cpu')\ns.run_cell({BIG!r}, name='big')\ns.run_cell({SAFE!r}, name='safe')",
    "g = W.IRGraph.of(s, 'big', columns='single', height=520); g",
    "flow = W.GradientFlow.check(s.function('loss'), np.float32(1.5), np.float32(2.0), np.float32(3.0))\n"
    "for k in range(12):\n    flow.record(k, {'w': np.random.default_rng(k).normal(size=(32, 16)) / (k + 1)})\nflow",
    "g2 = W.IRGraph.of(s, 'loss', height=420)\n"
    "print('python hits', len(g2.search('safeDivide_bwd')), len(g2.find('safeDivide_bwd')))\ng2",
    "s.run_cell('[Differentiable]\\nfloat spread(float a, float b) { float r = sqrt(a - b); return r * 2.0 + b; }', "
    "name='nan_flow')\nnanflow = W.GradientFlow.check(s.function('spread'), np.float32(1.0), np.float32(2.0))\nnanflow",
    "import json\ng3 = W.IRGraph.of(s, 'loss', height=420)\n"
    "print('SEARCH ' + json.dumps(['|'.join((v, f, i or '')) for v, f, i in g3.search('safeDivide')]))\ng3",
]


lab = served_notebook("irlab", CELLS, "ir.ipynb")


def test_ir_graph_and_gradient_flow(lab: str, lab_tools) -> None:
    ARTIFACTS = lab_tools.ARTIFACTS
    run_all_cells = lab_tools.run_all_cells

    numbers: dict[str, object] = {}
    with lab_tools.chromium_page("ir_browser_failure.png", 1500, 1100) as page:
        page.goto(lab)
        run_all_cells(page, len(CELLS), timeout=90_000)
        irg = page.locator(".sk-irg").first
        irg.wait_for(timeout=60_000)
        h = irg.element_handle()
        page.wait_for_function("(e) => Number(e.dataset.nodes) > 0", arg=h, timeout=30_000)

        def measure(tag: str) -> dict:
            d = irg.evaluate("(e) => ({layout: +e.dataset.layoutMs, total: +e.dataset.renderMs,"
                             " nodes: +e.dataset.nodes, insts: +e.dataset.insts})")
            numbers[tag] = d
            return d

        # ---- opens readable (issue 17): the asked-for function alone, its instruction text >= 11 px
        # in a 1000-px-wide notebook, the related functions one click away, bounded wheel zoom
        g2 = page.locator(".sk-irg").nth(1)
        g2.scroll_into_view_if_needed()
        h2 = g2.element_handle()
        page.wait_for_function("(e) => Number(e.dataset.nodes) > 0", arg=h2, timeout=30_000)
        page.set_viewport_size({"width": 1000, "height": 1000})
        lab_tools.painted(page)   # the notebook laid out anew at 1000 px (the graph's resize observer ran)
        g2.locator(".sk-irg-fit").click()
        lab_tools.painted(page)
        assert g2.get_attribute("data-columns") == "1"
        titles = g2.locator(".sk-irg-coltitle").evaluate_all("(els) => els.map((e) => e.textContent)")
        assert len(titles) == 1 and titles[0].startswith("loss"), titles
        px = g2.evaluate("(e) => { const t = e.querySelector('.sk-irg-row text');"
                         " return t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize); }")
        numbers["irgraph_text_px_at_fit_1000"] = round(px, 2)
        assert px >= 11, px
        # the graph gets most of the width, the side panel (source) the rest
        assert g2.locator(".sk-irg-canvas").bounding_box()["width"] >= 0.55 * g2.bounding_box()["width"]
        chips = g2.locator(".sk-irg-chip").evaluate_all("(els) => els.map((e) => e.textContent)")
        assert "loss" in chips and "bwd_diff(loss) propagate" in chips, chips   # demangled (s_bwdProp_loss)
        g2.screenshot(path=str(ARTIFACTS / "ir_graph_opened_1000px.png"))
        zoom0 = g2.get_attribute("data-zoom")
        z0 = float(zoom0)
        g2.locator(".sk-irg-canvas").hover()
        page.mouse.wheel(0, -100)
        lab_tools.wait_js(page, f"(e) => e.dataset.zoom !== '{zoom0}'", g2, 10_000)
        z1 = float(g2.get_attribute("data-zoom"))
        assert 1.0 < z1 / z0 <= 1.1001, (z0, z1)
        for _ in range(60):
            page.mouse.wheel(0, -400)
        lab_tools.wait_js(page, "(e) => Number(e.dataset.zoom) >= 3.999", g2, 10_000)   # zoomed in all the way
        assert float(g2.get_attribute("data-zoom")) <= 4.0
        for _ in range(80):
            page.mouse.wheel(0, 400)
        lab_tools.wait_js(page, "(e) => Number(e.dataset.zoom) <= 0.2005", g2, 10_000)   # ... and out
        assert float(g2.get_attribute("data-zoom")) >= 0.2
        # one click on a chip shows that function alone
        g2.locator(".sk-irg-chip", has_text="bwd_diff(loss) propagate").first.click()
        page.wait_for_function("(e) => [...e.querySelectorAll('.sk-irg-coltitle')].map((t) => t.textContent)"
                               ".join() .startsWith('bwd_diff(loss) propagate')", arg=h2)
        # search finds what Python's search()/find() find, in functions not shown; Enter switches to it
        out = page.locator(".jp-OutputArea-output", has_text="python hits").inner_text().split()
        py_hits, py_find = int(out[2]), int(out[3])
        assert py_find >= 1 and py_hits >= py_find
        g2.locator(".sk-irg-search").fill("safeDivide_bwd")
        page.wait_for_function(f"(e) => Number(e.dataset.hits) === {py_hits}", arg=h2)
        assert g2.locator(".sk-irg-hits").inner_text().startswith(f"{py_hits} hit")
        g2.locator(".sk-irg-search").press("Enter")
        page.wait_for_function("(e) => (e.dataset.current || '').length > 0", arg=h2)
        cur = g2.get_attribute("data-current").split("|")
        shown = g2.evaluate("(e) => [...e.querySelectorAll('.sk-irg-col')].map((c) => c.dataset.view + '|' + c.dataset.fn)")
        assert f"{cur[0]}|{cur[1]}" in shown, (cur, shown)
        if cur[2]:
            assert g2.locator(".sk-irg-current").count() == 1
        page.set_viewport_size({"width": 1500, "height": 1100})

        # blocks level of the 200+ instruction function
        d = measure("big_blocks")
        assert d["insts"] >= 200, d
        # data-flow level (one node per instruction, clustered by block)
        irg.locator("button.sk-irg-mode[data-mode=dataflow]").click()
        page.wait_for_function("(e) => e.dataset.mode === 'dataflow'", arg=h)
        d = measure("big_dataflow")
        assert d["nodes"] >= 200, d
        irg.screenshot(path=str(ARTIFACTS / "ir_graph_dataflow.png"))
        # the primal beside its generated derivatives (s_fwd_big, s_apply_big, s_bwdProp_big ...)
        irg.locator("button.sk-irg-mode[data-mode=blocks]").click()
        irg.locator("select.sk-irg-cols").select_option("derivatives")
        page.wait_for_function("(e) => e.dataset.mode === 'blocks' && Number(e.dataset.columns) >= 3", arg=h)
        d = measure("big_with_derivatives_blocks")
        titles = irg.locator(".sk-irg-coltitle").evaluate_all("(els) => els.map((e) => e.textContent)")
        assert any("bwd_diff(big) propagate" in t for t in titles) and any("fwd_diff(big)" in t for t in titles), titles
        # generated names as written in rows, tooltips and the details; the IR's spelling folded away
        shown = irg.locator(".sk-irg-row").evaluate_all(
            "(els) => els.map((r) => r.textContent)")   # each row's text and its <title> tooltip
        assert shown and not [t for t in shown if "x5F" in t], [t for t in shown if "x5F" in t][:3]
        k = next(k for k, t in enumerate(titles) if "bwd_diff(big) propagate" in t)   # columns in title order
        irg.locator(".sk-irg-col").nth(k).locator(".sk-irg-row").nth(1).dispatch_event("click")   # (panned off screen)
        detail = irg.locator(".sk-irg-detail")
        detail.locator(".sk-irg-itext").wait_for(timeout=10_000)
        text = detail.inner_text()
        assert "bwd_diff(big) propagate" in text and "x5F" not in text and "s_bwdProp" not in text, text
        raw = detail.locator("details.sk-irg-raw")
        assert raw.count() == 1 and not raw.evaluate("(d) => d.open"), "the IR's own names: folded"
        raw.locator("summary").click()
        assert "s_bwdProp_big" in raw.inner_text()
        irg.screenshot(path=str(ARTIFACTS / "ir_details_demangled.png"))
        # module level of the post-autodiff IR: the primal's derivatives and what they call
        irg.locator("button.sk-irg-mode[data-mode=module]").click()
        irg.locator("select.sk-irg-view").select_option(label="AFTER finalizeAutoDiffPass")
        page.wait_for_function("(e) => e.dataset.mode === 'module'", arg=h)
        page.wait_for_function("(e) => e.querySelectorAll('.sk-irg-fnnode').length >= 4", arg=h)
        irg.locator("select.sk-irg-view").select_option(label="module (-g)")
        irg.locator("button.sk-irg-mode[data-mode=blocks]").click()
        irg.locator("select.sk-irg-cols").select_option("single")
        page.wait_for_function("(e) => e.dataset.mode === 'blocks' && e.dataset.columns === '1'", arg=h)
        # search
        irg.locator(".sk-irg-search").fill("sin")
        page.wait_for_function("(e) => Number(e.dataset.hits) >= 60", arg=h)
        irg.locator(".sk-irg-search").press("Enter")
        assert irg.locator(".sk-irg-current").count() == 1
        irg.locator(".sk-irg-search").fill("")
        # click an instruction: selected, and its source line shown
        irg.locator(".sk-irg-fit").click()
        row = irg.locator(".sk-irg-row").nth(12)
        row.click(force=True)
        page.wait_for_function("(e) => e.dataset.selected && e.dataset.selectedLine", arg=h)
        line = int(irg.get_attribute("data-selected-line"))
        hit = irg.locator(".sk-irg-srchit")
        assert hit.count() == 1
        assert hit.inner_text().split(None, 1)[1].strip() == BIG.split("\n")[line - 1].strip()
        assert irg.locator(".sk-irg-sel").count() >= 1
        assert "line" in irg.locator(".sk-irg-loc").inner_text()
        # collapse a block
        n_rows = irg.locator(".sk-irg-row").count()
        irg.locator(".sk-irg-collapse").click()
        assert irg.locator(".sk-irg-row").count() == 0 and n_rows > 0
        irg.locator(".sk-irg-expand").click()
        irg.screenshot(path=str(ARTIFACTS / "ir_graph.png"))

        # ---- GradientFlow: exactly b flagged (the custom derivative's wrong factor)
        gf = page.locator(".sk-gf").first
        gf.scroll_into_view_if_needed()
        gf.wait_for(timeout=30_000)
        assert gf.get_attribute("data-flagged") == "b"
        assert gf.locator("tr.sk-gf-bad").count() == 1
        assert gf.locator("tr.sk-gf-bad").get_attribute("data-input") == "b"
        assert "sk-gf-n-bad" in gf.locator("g[data-input=b]").get_attribute("class")
        assert "sk-gf-n-ok" in gf.locator("g[data-input=a]").get_attribute("class")
        assert "sk-gf-n-nodiff" in gf.locator("g[data-input=w]").get_attribute("class")
        assert gf.locator("g.sk-gf-n-custom").count() >= 1
        assert gf.get_attribute("data-train-steps") == "12"
        assert gf.locator("canvas.sk-gf-heat").count() == 1
        gf.screenshot(path=str(ARTIFACTS / "gradient_flow.png"))
    print("IR NUMBERS", json.dumps(numbers))
    (ARTIFACTS / "ir_numbers.json").write_text(json.dumps(numbers, indent=1))


def test_ir_search_walk(lab: str, lab_tools) -> None:
    """Issue 30: stepping through the hits of `safeDivide` (in the module IR and the post-autodiff
    IR, in functions not shown) visits each hit once, in the order IRGraph.search gives, then wraps;
    each one is highlighted in its own function, the detail panel follows the shown function, and
    generated names read as written (bwd_diff(...)) with the IR's name on hover."""
    with lab_tools.chromium_page("ir_search_failure.png", 1500, 1100) as page:
        page.goto(lab)
        lab_tools.run_all_cells(page, len(CELLS), timeout=90_000)
        out = page.locator(".jp-OutputArea-output", has_text="SEARCH ").inner_text()
        expect = json.loads(out.split("SEARCH ", 1)[1].splitlines()[0])
        assert len(expect) >= 5 and len(set(expect)) == len(expect), expect
        g = page.locator(".sk-irg").nth(2)
        g.scroll_into_view_if_needed()
        h = g.element_handle()
        page.wait_for_function("(e) => Number(e.dataset.nodes) > 0", arg=h, timeout=30_000)
        g.locator(".sk-irg-search").fill("safeDivide")
        page.wait_for_function(f"(e) => Number(e.dataset.hits) === {len(expect)}", arg=h)
        seen = []
        for k in range(len(expect) + 2):
            if k % 2:
                g.locator(".sk-irg-next").click()            # the arrow and Enter step alike
            else:
                g.locator(".sk-irg-search").press("Enter")
            page.wait_for_function(f"(e) => e.dataset.hitIndex === '{k % len(expect)}'", arg=h)
            cur = g.get_attribute("data-current")
            seen.append(cur)
            view, fn, inst = cur.split("|")
            cols = g.evaluate("(e) => [...e.querySelectorAll('.sk-irg-col')].map((c) => c.dataset.view + '|' + c.dataset.fn)")
            assert f"{view}|{fn}" in cols or (not inst and g.get_attribute("data-mode") == "module"), (cur, cols)
            assert g.locator(".sk-irg-current").count() == 1, cur          # highlighted where it is
            if inst:
                assert g.locator(".sk-irg-current").get_attribute("data-inst") == inst
            assert g.get_attribute("data-detail-fn") == f"{view}|{fn}", (cur, g.get_attribute("data-detail-fn"))
            assert int(g.get_attribute("data-hits-shown")) >= 1
        assert seen[:len(expect)] == expect                # each hit once, in order
        assert seen[len(expect):] == expect[:2]            # then round again from the first
        # generated names demangled, the IR's own name on hover
        rows = g.locator(".sk-irg-row").evaluate_all(
            "(els) => els.map((r) => [r.querySelector('text').textContent, (r.querySelector('title') || {}).textContent])")
        mangled = [r for r in rows if "x5F" in r[0] or "x5F" in (r[1] or "")]   # text and tooltip
        assert not mangled, mangled[:3]
        renamed = [r for r in rows if r[1] and r[0] != r[1] and "_diff(" in r[0]]
        chips = g.locator(".sk-irg-chip").evaluate_all("(els) => els.map((e) => [e.textContent, e.title])")
        assert any(t.startswith("bwd_diff(") and "s_" in title for t, title in chips), chips
        g.screenshot(path=str(lab_tools.ARTIFACTS / "ir_search_walk.png"))
        # the gradient-flow view marks where the NaN starts (the sqrt of a negative number)
        gf = page.locator(".sk-gf").nth(1)
        gf.scroll_into_view_if_needed()
        marked = gf.locator("g.sk-gf-n-nonfinite")
        marked.wait_for(timeout=30_000)
        assert marked.count() == 1 and gf.get_attribute("data-first-nonfinite") == marked.get_attribute("data-node")
        assert "NaN starts here (its value)" in (marked.text_content() or "")
        gf.screenshot(path=str(lab_tools.ARTIFACTS / "gradient_flow_nan.png"))
        print("IR SEARCH WALK", len(expect), "hits;", len(renamed), "rows demangled on screen")
