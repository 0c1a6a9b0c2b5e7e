"""IRGraph / GradientFlow data against the real compiler: post-autodiff functions beside the primal,
control flow, source lines, per-input gradient checks that catch a wrong custom derivative."""

from __future__ import annotations

import json

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.views import gradients as G

W = pytest.importorskip("slang_kernel.widgets")

LOOP = """
[Differentiable]
float poly(float x, float y, int n)
{
    float s = 0;
    [MaxIters(8)]
    for (int i = 0; i < n; i++)
    {
        if (x > 0) s += x * y;
        else s -= sin(y);
    }
    return s * s;
}
"""

# The seed's safeDivide with its [BackwardDerivative]; FACTOR breaks the denominator's derivative.
SAFE_DIVIDE = """
[BackwardDerivative(safeDivide_bwd)]
float safeDivide(float numerator, float denominator)
{
    const float epsilon = 1e-8;
    return numerator / max(denominator, epsilon);
}

void safeDivide_bwd(inout DifferentialPair<float> numerator, inout DifferentialPair<float> denominator, float dOut)
{
    const float epsilon = 1e-8;
    const float maxGradient = 1e6;
    float denomStable = denominator.p + epsilon;
    float dNumerator = clamp(dOut / denomStable, -maxGradient, maxGradient);
    float dDenominator = clamp(FACTOR * -dOut * numerator.p / (denomStable * denomStable), -maxGradient, maxGradient);
    numerator = diffPair(numerator.p, dNumerator);
    denominator = diffPair(denominator.p, dDenominator);
}

float helper(float x) { return 3 * x; }

[Differentiable]
float loss(float a, float b, no_diff float w, float3 v)
{
    return safeDivide(a * a, b) * w + a + dot(v, v) * b + no_diff(helper(w));
}
"""
ARGS = (np.float32(1.5), np.float32(2.0), np.float32(3.0), np.array([1.0, 2.0, -0.5], np.float32))


@pytest.fixture(scope="module")
def session(cache_dir: str):
    s = sk.Session(backend="cpu", cache_dir=cache_dir)
    yield s
    s.close()


def test_graph_data_primal_and_generated_functions(session: sk.Session) -> None:
    session.run_cell(LOOP, name="loop")
    data = G.ir_graph_data(session, "poly")
    json.dumps(data)
    views = {v["id"]: v for v in data["views"]}
    assert data["notes"] == []
    assert views["module"]["title"] == "module (-g)"
    post = next(v for v in data["views"] if v["title"] == "AFTER finalizeAutoDiffPass")
    # the primal first, then its generated derivatives, from the post-autodiff IR
    (v0, f0), *derived = data["related"]
    primal = next(f for f in views[v0]["functions"] if f["id"] == f0)
    assert primal["name"] == "poly" and primal["role"] is None
    names = {next(f["name"] for f in views[v]["functions"] if f["id"] == fid) for v, fid in derived}
    assert {"s_fwd_poly", "s_bwdProp_poly"} <= names and any(n.startswith(("s_apply_", "s_primal_")) for n in names)
    assert all(v == post["id"] for v, _ in derived)
    roles = {f["name"]: f["role"] for f in post["functions"]}
    assert roles["s_fwd_poly"] == "forward" and roles["s_bwdProp_poly"] == "backward_propagate"
    # control flow: the loop has a back edge, branches have two successors, in primal and derivatives
    for f in (primal, next(f for f in post["functions"] if f["name"] == "s_fwd_poly")):
        assert len(f["blocks"]) >= 5
        assert any(b["back"] for b in f["blocks"])
        assert any(len(b["succ"]) == 2 for b in f["blocks"])
    # source lines from -g, relative to the cell
    lines = LOOP.split("\n")
    locs = [(i["loc"], i["op"]) for b in primal["blocks"] for i in b["insts"] if i["loc"]]
    assert locs
    mul = next(loc for loc, op in locs if op == "mul")
    assert "x * y" in lines[mul[0] - 1]
    fwd = next(f for f in post["functions"] if f["name"] == "s_fwd_poly")
    assert any(i["loc"] for b in fwd["blocks"] for i in b["insts"])
    # def-use operands resolve inside the function
    ids = {i["id"] for b in primal["blocks"] for i in b["insts"]}
    assert sum(op in ids for b in primal["blocks"] for i in b["insts"] for op in i["ops"]) > 5


def test_pass_before_after_and_widget(session: sk.Session) -> None:
    session.run_cell(LOOP, name="loop")
    g = W.IRGraph.of(session, "poly", "simplifyIR")
    titles = [v["title"] for v in g.data["views"]]
    assert "BEFORE simplifyIR" in titles and "AFTER simplifyIR" in titles
    assert g.columns == "compare" and len(g.data["compare"]) == 2
    hits = g.find("mul")
    assert hits
    sel = g.select(*next(h for h in hits if h[0] == "module"))
    assert sel["line"] and "x * y" in LOOP.split("\n")[sel["line"] - 1]
    bundle = g._repr_mimebundle_()
    assert "poly" in bundle[0]["text/html"]
    bad = G.ir_views(session, "poly", "noSuchPass")
    assert any("noSuchPass" in n for n in bad.notes)
    assert "dagre" in W.IRGraph._esm and "./vendor/" not in W.IRGraph._esm.split("\n", 3)[0]


@pytest.mark.parametrize("factor,flagged", [("1.0", []), ("2.0", ["b"]), ("0.5", ["b"])])
def test_gradient_flow_flags_exactly_the_broken_input(session: sk.Session, factor: str, flagged: list[str]) -> None:
    session.run_cell(SAFE_DIVIDE.replace("FACTOR", factor), name="safe")
    fn = session.function("loss")
    flow = W.GradientFlow.check(fn, *ARGS)
    assert flow.flagged == flagged
    rep = flow.result
    kinds = {i.name: i.kind for i in rep.inputs}
    assert kinds == {"a": "diff", "b": "diff", "w": "no_diff", "v": "diff"}
    v = rep.input("v")  # a float3: checked per component
    assert v.bwd.shape == (3,) and v.ok and np.allclose(v.bwd, 2 * 2.0 * ARGS[3], rtol=1e-4)
    assert v.fwd_ok  # fwd_diff directional derivatives agree with bwd_diff
    assert rep.input("a").ok and np.isclose(rep.input("a").bwd, 2 * 1.5 / 2.0 * 3.0 + 1, rtol=1e-4)
    b = rep.input("b")
    assert b.ok is (factor == "1.0")
    assert np.isclose(b.numeric, -(1.5 ** 2) / 4.0 * 3.0 + 5.25, rtol=1e-2)
    # the data-flow graph marks the no_diff parameter and call, the custom derivative and the output
    marks = {m for n in flow.graph["nodes"] for m in n["marks"]}
    assert {"no_diff", "custom_derivative", "output"} <= marks
    params = {n["name"]: n for n in flow.graph["nodes"] if "param" in n}
    assert set(params) == {"a", "b", "w", "v"} and "no_diff" in params["w"]["marks"]
    custom = next(n for n in flow.graph["nodes"] if "custom_derivative" in n["marks"])
    assert custom["callee"] == "safeDivide" and custom["loc"]
    json.dumps(flow.report), json.dumps(flow.graph)
    html = flow._repr_mimebundle_()[0]["text/html"]
    assert ("MISMATCH" in html) == bool(flagged)
    # every node's value and derivative at these inputs: through the compiler's own derivatives they
    # add up to bwd_diff's gradients; where they disagree with finite differences is where the custom
    # derivative breaks: its call's operand b
    for name in ("a", "b", "v"):
        node = flow.node(params[name]["id"])
        assert np.allclose(node["value"], rep.input(name).value)
        assert np.allclose(node["grad"], rep.input(name).bwd, rtol=1e-4, atol=1e-5), name
    assert flow.node(params["w"]["id"])["grad"] is None and "no_diff" in flow.node(params["w"]["id"])["note"]
    out = next(n["id"] for n in flow.graph["nodes"] if "output" in n["marks"])
    assert np.isclose(flow.node(out)["value"], rep.result, rtol=1e-5) and flow.node(out)["grad"] == 1.0
    assert flow.bad_nodes == ([params["b"]["id"]] if flagged else [])
    if flagged:
        assert np.isclose(flow.node(params["b"]["id"])["numeric"], b.numeric, rtol=1e-2)
    with pytest.raises(KeyError, match="no node 'nope'"):
        flow.node("nope")


def test_check_grad_agrees_on_scalars(session: sk.Session) -> None:
    session.run_cell(SAFE_DIVIDE.replace("FACTOR", "2.0"), name="safe")
    # SlangFunction.check_grad (scalar inputs) and gradient_report agree on which input is wrong
    session.run_cell("[Differentiable] float lossS(float a, float b) { return safeDivide(a * a, b) + a; }", name="s2")
    fn = session.function("lossS")
    cg = fn.check_grad(np.float32(1.5), np.float32(2.0))
    rep = G.gradient_report(fn, np.float32(1.5), np.float32(2.0))
    assert [n for n, ok in zip(cg.names, cg.ok) if not ok] == rep.flagged == ["b"]


def test_batched_inputs_and_training_history() -> None:
    flow = W.GradientFlow()
    rng = np.random.default_rng(0)
    for step in range(20):
        g = rng.normal(size=(64, 32)) / (step + 1)
        if step == 7:
            g[3, 3] = np.nan
        flow.record(step, {"weights": g, "bias": np.full(8, 0.5)})
    meta = flow._train
    assert meta["steps"] == list(range(20))
    p = {q["name"]: q for q in meta["params"]}
    assert p["weights"]["norms"][7] is None and p["weights"]["norms"][0] > p["weights"]["norms"][19]
    assert p["weights"]["rows"] == 20 and p["weights"]["cols"] == 128
    assert len(flow._heat) == sum(q["rows"] * q["cols"] for q in meta["params"])
    heat = np.frombuffer(flow._heat, np.uint8, p["weights"]["rows"] * p["weights"]["cols"], p["weights"]["offset"])
    assert (heat.reshape(20, 128)[7] == 254).any() and (heat.reshape(20, 128)[0] < 253).all()
    assert p["bias"]["hist"]["counts"] and "weights" in flow._repr_mimebundle_()[0]["text/html"]
    json.dumps(meta)


def test_magics(session: sk.Session, ipython) -> None:
    shell = ipython
    shell.user_ns["slang_session"] = session
    session.run_cell(SAFE_DIVIDE.replace("FACTOR", "2.0"), name="safe")
    shell.user_ns["vv"] = ARGS[3]
    flow = shell.run_line_magic("slang_grad", "loss 1.5 2.0 3.0 vv")
    assert isinstance(flow, W.GradientFlow) and flow.flagged == ["b"]
    g = shell.run_line_magic("slang_ir", "loss --pass simplifyIR")
    assert isinstance(g, W.IRGraph) and g.columns == "compare"


def test_irgraph_opens_on_the_asked_function_and_search_finds_functions(session) -> None:
    """issue 17: one column (the asked-for function) by default; search() covers function names,
    %ids and opcodes, find() its instructions."""
    src = (SAFE_DIVIDE.replace("FACTOR", "1.0").replace("safeDivide_bwd", "safeDivide17Bwd")
           .replace("safeDivide(", "safeDivide17(").replace("loss(", "loss17(").replace("helper", "helper17"))
    session.run_cell(src, name="safe17")
    g = W.IRGraph.of(session, "loss17")
    assert g.columns == "single" and len(g.data["related"]) > 1
    v, f = g.data["related"][0]
    assert (g.view, g.function) == (v, f)
    names = {(vv["id"], ff["id"]): ff["name"] for vv in g.data["views"] for ff in vv["functions"]}
    assert names[(g.view, g.function)] == "loss17"
    hits = g.search("safeDivide17Bwd")
    assert g.find("safeDivide17Bwd") and set(g.find("safeDivide17Bwd")) <= set(hits)
    assert any(i is None and names[(vv, ff)] == "safeDivide17Bwd" for vv, ff, i in hits)
    some = next(i for b in g.data["views"][0]["functions"][0]["blocks"] for i in b["insts"])
    assert (g.data["views"][0]["id"], g.data["views"][0]["functions"][0]["id"], some["id"]) in g.find("%" + some["id"])
    assert g.search("") == [] and g.find("no-such-thing-xyz") == []
    assert W.IRGraph.of(session, "loss17", columns="derivatives").columns == "derivatives"


def test_gradient_flow_node_values_of_a_function_with_control_flow_say_why_not(session: sk.Session) -> None:
    session.run_cell(LOOP, name="loop")
    vals = G.flow_values(session.function("poly"), np.float32(0.5), np.float32(2.0), np.int32(3))
    assert vals["nodes"] == {} and "control flow" in vals["note"] and "straight-line" in vals["note"]


def test_gradient_flow_node_values_through_swizzles_and_vectors(session: sk.Session) -> None:
    session.run_cell("[Differentiable] float sw(float3 v, float k)\n"
                     "{ float3 w = float3(v.x, 2 * v.y, v.z); return w.x * w.y + length(w) * k + v.yz.x; }",
                     name="swizzles")
    args = (np.array([[1, 2, 3], [0.5, -1, 2]], np.float32), np.float32([0.5, 2.0]))
    flow = W.GradientFlow.check(session.function("sw"), *args)
    vals = flow.graph["values"]
    assert vals and all(v["value"] is not None for v in vals.values()), flow.graph["values"]
    params = {n["name"]: n["id"] for n in flow.graph["nodes"] if "param" in n}
    for name in ("v", "k"):
        assert np.allclose(flow.node(params[name])["grad"], flow.result.input(name).bwd, rtol=1e-4), name
    assert flow.bad_nodes == [] and flow.flagged == []
