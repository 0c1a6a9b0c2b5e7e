"""slang_kernel.views.ir against IR from the real compiler: samples, the seeds corpus, fuzzing."""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from slang_kernel.compiler.client import CompilerProcess
from slang_kernel.compiler.diagnostics import SlangCompilerCrash
from slang_kernel.views.ir import classify_autodiff, decode_name, parse_ir, split_dump
from slang_kernel.views.ir_graph import autodiff_links, to_graph

FUZZ_CHARS = "%[](){}:;=,@\"\\ \t\nletblockparamfunc_x5F0123"
# The seeds' code samples that compile, extracted once from ../shared/seeds (which CI's clean clone
# does not have) by extract_seed_samples() below.
SEED_SAMPLES = os.path.join(os.path.dirname(__file__), "data", "seed_samples")
SEEDS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "seeds")
KERNEL = """
[shader("compute")][numthreads(64,1,1)]
void k(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) {{ {body} }}
"""
SAMPLES = {
    "plain": "float sqr(float x) { return x * x; }\n"
             "float add3(float a, float b, float c) { return sqr(a) + b + c; }",
    "struct": "struct P { float3 pos; float w; float len() { return length(pos) * w; } };\n"
              "float use(P p) { return p.len() + p.pos.x; }",
    "loop": "float sumTo(int n) { float s = 0; for (int i = 0; i < n; i++) { if (i % 2 == 0) s += i; "
            "else s -= 1; } return s; }",
    "diff": "[Differentiable] float f(float x) { return x * x * sin(x); }" + KERNEL.format(
        body="var dp = diffPair(float(tid.x), 1.0); bwd_diff(f)(dp, 1.0);"
             "o[tid.x] = fwd_diff(f)(diffPair(float(tid.x), 1.0)).d + dp.d;"),
    "custom": "float g_primal(float x) { return x*x; }\n"
              "void g_bwd(inout DifferentialPair<float> x, float dOut) { x = diffPair(x.p, 2*x.p*dOut); }\n"
              "[BackwardDerivative(g_bwd)] float g(float x) { return g_primal(x); }\n"
              "DifferentialPair<float> g_fwd(DifferentialPair<float> x) {\n"
              "  return diffPair(x.p*x.p, 2*x.p*x.d); }\n"
              "[ForwardDerivative(g_fwd)] float g2(float x) { return x * x; }\n"
              "[Differentiable] float h(float x) { return g(x) + x; }" + KERNEL.format(
                  body="var dp = diffPair(o[tid.x], 1.0); bwd_diff(h)(dp, 1.0); o[tid.x] = dp.d;"),
    "generic": "interface IShape { float area(); }\n"
               "struct Circle : IShape { float r; float area() { return 3.14*r*r; } }\n"
               "T maxOf<T : IComparable>(T a, T b) { return a < b ? b : a; }\n"
               "float total<S : IShape>(S s) { return s.area() * 2; }\n"
               "float useIt() { Circle c; c.r = 1; return total(c) + maxOf(1.0, 2.0); }",
}


@pytest.fixture(scope="module")
def compiler():
    c = CompilerProcess()
    yield c
    c.close()


def disassemble(c: CompilerProcess, source: str, options: tuple[str, ...] = ()) -> str:
    r = c.call("disassemble", what="cell[1]", module="cell_1", path="cell[1]", source=source, deps=[],
               options=list(options))
    assert r["ok"], r["diagnostics"]
    return r["ir"]


@pytest.fixture(scope="module")
def irs(compiler):
    return {name: disassemble(compiler, src) for name, src in SAMPLES.items()}


def test_plain_functions_and_calls(irs):
    m = parse_ir(irs["plain"])
    assert not m.errors
    sqr, add3 = m.function("sqr"), m.function("add3")
    assert sqr.kind == "func" and sqr.type == "Func(Float, Float)"
    assert sqr.mangled_name.startswith("_S6cell_1")
    assert [p.name for p in add3.blocks[0].params] == ["a", "b", "c"]
    call = next(i for i in add3.insts if i.opcode == "call")
    assert call.callee == sqr.id and call.type == "Float"
    g = to_graph(m)
    assert {"source": sqr.id, "target": sqr.id} not in g["edges"]
    assert any(e["kind"] == "call" and e["source"] == add3.id and e["target"] == sqr.id for e in g["edges"])
    gi = to_graph(m, "add3", level="instruction")
    assert len([e for e in gi["edges"] if e["kind"] == "use"]) > 0
    json.dumps(g), json.dumps(gi)


def test_loop_back_edge_and_structure(irs):
    m = parse_ir(irs["loop"])
    f = m.function("sumTo")
    assert len(f.blocks) >= 5
    assert any(k == "break" for b in f.blocks for k, _ in b.structure)
    g = to_graph(m, "sumTo", level="block")
    back = [e for e in g["edges"] if e.get("back")]
    assert len(back) == 1 and back[0]["kind"] == "flow"
    ends = {e["source"] for e in g["edges"]} | {e["target"] for e in g["edges"]}
    assert {n["id"] for n in g["nodes"]} >= ends
    gi = to_graph(m, "sumTo", level="instruction")
    assert sum(e["kind"] == "use" for e in gi["edges"]) > 5


def test_struct_and_generics(irs):
    m = parse_ir(irs["struct"])
    p = m.function("P")
    assert p.kind == "struct" and [i.opcode for i in p.body] == ["field", "field"]
    m = parse_ir(irs["generic"])
    max_of = m.function("maxOf")
    assert max_of.kind == "func" and m.function(max_of.parent).kind == "generic"
    assert max_of.mangled_name and "maxOf" in max_of.mangled_name
    assert any(f.kind == "witness_table" for f in m.functions)
    edges = to_graph(m, "useIt")["edges"]
    assert {(e["source"], e["target"]) for e in edges} >= {("useIt", "total"), ("useIt", "maxOf")}


def test_autodiff_links_and_decorations(irs):
    m = parse_ir(irs["diff"])
    k = m.function("k")
    assert k.decoration("numThreads") == "64 : Int, 1 : Int, 1 : Int"
    assert k.decoration("entryPoint") is not None
    links = autodiff_links(m)
    assert ("fwdx5Fdiff", "f", "forward") in links
    assert any(dst == "f" and role == "backward" for _, dst, role in links)
    g = to_graph(m, "k")
    labels = {n["label"] for n in g["nodes"]}
    assert {"k", "fwd_diff(f)", "bwd_diff(f)", "f"} <= labels
    m = parse_ir(irs["custom"])
    links = autodiff_links(m)
    assert (m.function("g_fwd").id, m.function("g2").id, "forward") in links  # [ForwardDerivative(g_fwd)]
    copy = next(i for i in m.globals if i.opcode == "FunctionCopy")
    assert copy.operands == (m.function("g_bwd").id,)  # [BackwardDerivative(g_bwd)]
    assert (copy.id, "g", "backward") in links


def test_post_autodiff_dump(compiler):
    # The dump goes to the compiler's diagnostic writer, so it comes back in "diagnostics".
    r = compiler.call("compile", what="cell[1]", module="cell_1", path="cell[1]", source=SAMPLES["diff"],
                      deps=[], target="cuda", entry_points=["k"], reflect=False,
                      options=["-dump-ir-after", "finalizeAutoDiffPass"])
    assert r["ok"]
    sections = dict(split_dump(r["diagnostics"]))
    m = parse_ir(sections["AFTER finalizeAutoDiffPass"])
    roles = {f.name: classify_autodiff(f.name) for f in m.funcs if classify_autodiff(f.name)}
    assert roles["s_fwd_f"] == ("forward", "f") and roles["s_bwdProp_f"] == ("backward_propagate", "f")
    fwd = m.function("s_fwd_f").id
    assert any(e["kind"] == "call" and e["target"] == fwd for e in to_graph(m, "k")["edges"])
    assert decode_name("sx5Ffwdx5Ff") == "s_fwd_f"


def test_source_locations_with_debug_info(compiler):
    m = parse_ir(disassemble(compiler, SAMPLES["loop"], ("-g",)))
    locs = [i.loc for i in m.function("sumTo").insts if i.loc]
    assert locs and all(loc.path == "cell[1]" and loc.line == 1 for loc in locs)
    assert not any(n["opcode"].startswith("Debug") for n in to_graph(m, "sumTo", "instruction")["nodes"])


def seed_samples() -> list[tuple[str, str]]:
    return [(os.path.basename(p), open(p, encoding="utf-8").read())
            for p in sorted(glob.glob(os.path.join(SEED_SAMPLES, "*.slang")))]


def seed_blocks() -> list[tuple[str, str]]:
    """Fenced code blocks of the seed documents (used to refresh tests/data/seed_samples)."""
    out = []
    for path in sorted(glob.glob(os.path.join(SEEDS, "*.txt"))):
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^([ \t]*)```(\w*)[ \t]*\n(.*?)^[ \t]*```", text, re.M | re.S):
            if m.group(2).lower() in ("", "csharp", "hlsl", "slang"):
                body = re.sub(rf"^{m.group(1)}", "", m.group(3), flags=re.M) if m.group(1) else m.group(3)
                out.append((f"{os.path.basename(path)}:{text[:m.start()].count(chr(10)) + 1}", body))
    return out


@pytest.fixture(scope="module")
def seed_irs(compiler):
    out = {}
    for where, src in seed_samples():
        try:
            r = compiler.call("disassemble", what=where, module="cell_1", path="cell[1]", source=src, deps=[])
        except SlangCompilerCrash:
            continue
        if r["ok"]:
            out[where] = r["ir"]
    return out


def test_seed_corpus(seed_irs):
    assert len(seed_samples()) >= 50 and len(seed_irs) == len(seed_samples())
    for where, ir in seed_irs.items():
        m = parse_ir(ir)
        assert not m.errors, (where, m.errors[:3])
        lets = [ln for ln in ir.splitlines() if re.match(r"\s*(@\w+\s+)?let\s", ln)]
        insts = [*m.globals, *(i for f in m.functions for i in f.insts)]
        assert len(lets) == sum(i.text.startswith(("let", "@")) for i in insts), where
        assert sum(bool(re.match(r"\s*func\s", ln)) for ln in ir.splitlines()) == len(m.funcs), where
        for level in ("function", "block", "instruction"):
            json.dumps(to_graph(m, level=level))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from(list(FUZZ_CHARS)), max_size=400))
def test_fuzz_random_text(text):
    m = parse_ir(text)
    assert not any("internal error" in e for e in m.errors)
    for level in ("function", "block", "instruction"):
        json.dumps(to_graph(m, level=level))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_real_ir(irs, data):
    lines = irs[data.draw(st.sampled_from(sorted(irs)))].splitlines()
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
        op = data.draw(st.sampled_from(["drop", "dup", "cut", "swap", "junk"]))
        if not lines:
            break
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(i, data.draw(st.text(max_size=40)))
    m = parse_ir("\n".join(lines))
    assert not any("internal error" in e for e in m.errors)
    for level in ("function", "block", "instruction"):
        json.dumps(to_graph(m, level=level))
    json.dumps(to_graph(m, "k", level="block")), json.dumps(to_graph(m, "sumTo", level="instruction"))


def test_bad_input_regressions():
    cyclic = ("generic %a\t: Generic\n{\nblock %1:\n\tfunc %a\t: Func(Float)\n\t{\n"
              "block %2:\n\treturn_val(%a)\n}\n}\n")
    m = parse_ir(cyclic)  # a nested func with its parent's id once made the mangled-name walk loop
    assert [f.kind for f in m.functions] == ["generic", "func"] and not m.errors
    for text in ("", "}", "{", "@ x", "block %1:", "let %x : = ", "[", "call (", '"%a', "param _ : Void):"):
        m = parse_ir(text)
        assert not any("internal error" in e for e in m.errors), text
        json.dumps(to_graph(m, level="block"))
