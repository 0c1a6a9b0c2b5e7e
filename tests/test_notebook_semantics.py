"""Notebook semantics as a user lives them: redeclaring names, dependencies the compiler resolved,
lines as the editor counts them.

A later cell may redeclare any top-level name; the cells after it see the latest declaration, the
cells before it keep what they saw, nothing is ambiguous, and the result says what it replaced.
"""

from __future__ import annotations

import random
import tarfile
from pathlib import Path

import numpy as np
import pytest

import slang_kernel as sk

KERNEL = ('[shader("compute")][numthreads(4, 1, 1)]\n'
          "void {name}(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) {{ o[tid.x] = {expr}; }}\n")


def run(s: sk.Session, kernel: str, **params: object) -> list[float]:
    o = np.zeros(4, np.float32)
    s.kernel(kernel)(threads=4, o=o, **params)
    return o.tolist()


def test_two_playground_demos_both_declare_time(session: sk.Session) -> None:
    """Two Playground-style demos pasted into one notebook: both declare `uniform float time;` (every
    backend)."""
    s = session
    s.run_cell("import playground;\nuniform float time;\nfloat wave(float x) { return sin(x + time); }\n"
               + KERNEL.format(name="demoA", expr="wave(tid.x) + time"), name="In[1]")
    r = s.run_cell("import playground;\nuniform float time;\n" + KERNEL.format(name="demoB", expr="time * 10 + tid.x"),
                   name="In[2]")
    assert r.shadows == (("time", "In[1]"),)
    assert s.cell("In[2]").imports == ()   # it references nothing of In[1]
    np.testing.assert_allclose(run(s, "demoA", time=0.5), [np.sin(i + 0.5) + 0.5 for i in range(4)], rtol=1e-6)
    assert run(s, "demoB", time=0.5) == [5.0, 6.0, 7.0, 8.0]
    assert {p.name for p in s.kernel("demoB").params} == {"o", "time"}
    # a third cell uses In[1]'s function and the latest `time`: In[1]'s own `time` is hidden from it
    s.run_cell(KERNEL.format(name="both", expr="wave(0) + time"), name="In[3]")
    assert s.cell("In[3]").imports == ("In[1]", "In[2]")
    if s.backend.name == "vulkan":   # two globals named `time` in one kernel: sgl binds by name
        with pytest.raises(sk.ParameterError, match="2 globals named `time` \\(In\\[1\\], In\\[2\\]\\).*Rename one"):
            run(s, "both", time=1.0)
    else:                            # one keyword fills both
        np.testing.assert_allclose(run(s, "both", time=1.0), [np.sin(1.0) + 1.0] * 4, rtol=1e-6)


def test_redeclaring_every_kind_of_name(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("struct P { float a; };\nstatic const int N = 3;\ntypealias T = float;\ninterface I { float v(); }\n"
               "float f(float x) { return x; }\nenum E { One, Two };\ncbuffer CB { float cbv; }\n"
               "RWStructuredBuffer<float> buf;\nTexture2D<float4> tex;\nSamplerState samp;\nuniform float u;\n"
               + KERNEL.format(name="old", expr="P(1).a + N + T(1.5) + f(1) + (int)E.One"), name="first")
    r = s.run_cell("struct P { int b; };\nstatic const int N = 4;\ntypealias T = int;\ninterface I { int w(); }\n"
                   "float f(float x) { return 2 * x; }\nenum E { Two, One };\ncbuffer CB { float cbv; }\n"
                   "RWStructuredBuffer<float> buf;\nTexture2D<float4> tex;\nSamplerState samp;\nuniform int u;", name="second")
    assert dict(r.shadows) == {n: "first" for n in
                               ("P", "N", "T", "I", "f", "E", "CB", "cbv", "buf", "tex", "samp", "u")}
    s.run_cell(KERNEL.format(name="fresh", expr="P(3).b + N + T(1.5) + f(1) + (int)E.One + u"), name="third")
    assert run(s, "fresh", u=10) == [3 + 4 + 1 + 2 + 1 + 10] * 4
    assert run(s, "old") == [1 + 3 + 1.5 + 1 + 0] * 4   # the first cell keeps what it saw


def test_overloads_still_add_and_same_signature_replaces(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float h(float x) { return x; }\nfloat h(int x) { return 100; }", name="a")
    r = s.run_cell("float h(float x) { return -x; }", name="b")      # same signature: replaces
    assert r.shadows == (("h", "a"),)
    s.run_cell(KERNEL.format(name="uses_h", expr="h(2.0)"), name="c")
    assert run(s, "uses_h") == [-2.0] * 4


def test_members_fields_locals_and_parameters_never_pull_in_globals(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("uniform int x;\nuniform float y;\nstatic const int z = 7;\nfloat w(float q) { return q; }", name="globals")
    s.run_cell("struct S { float x; float z; };\nfloat twice(float y) { float w = y; return 2 * w; }\n"
               + KERNEL.format(name="indep", expr="twice(tid.x) + S(1, 2).x"), name="user")
    assert s.cell("user").imports == ()
    assert {p.name for p in s.kernel("indep").params} == {"o"}
    assert run(s, "indep") == [1.0, 3.0, 5.0, 7.0]


def test_a_later_cell_does_not_change_what_an_earlier_one_saw(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float scale() { return 2; }", name="one")
    s.run_cell(KERNEL.format(name="k1", expr="scale() * tid.x"), name="two")
    r = s.run_cell("float scale() { return 3; }", name="three")
    assert r.recompiled == () and r.shadows == (("scale", "one"),)
    assert run(s, "k1") == [0.0, 2.0, 4.0, 6.0]
    s.run_cell(KERNEL.format(name="k2", expr="scale() * tid.x"), name="four")
    assert run(s, "k2") == [0.0, 3.0, 6.0, 9.0]
    s.run_cell("float scale() { return 5; }", name="one")        # editing the first reaches `two` only
    assert run(s, "k1") == [0.0, 5.0, 10.0, 15.0] and run(s, "k2") == [0.0, 3.0, 6.0, 9.0]


def test_the_result_names_what_it_replaced(cpu_session: sk.Session) -> None:
    from slang_kernel.frontend.display import summary

    s = cpu_session
    s.run_cell("uniform float time;", name="In[1]")
    r = s.run_cell("uniform float time;\n" + KERNEL.format(name="t", expr="time"), name="In[2]")
    assert "replaces for later cells: time (from In[1])" in summary(s, r)._repr_mimebundle_()["text/plain"]


@pytest.mark.slow
def test_a_thousand_cell_messy_session_keeps_every_kernel_right() -> None:
    """1,000 cells redeclaring uniforms, buffers, constants, structs, typealiases and functions at
    random; every 50th cell a kernel whose expected value is computed from the declarations it sees
    (the latest before it). At the end every kernel still gives its value."""
    rng = random.Random(28)
    names = [f"n{i}" for i in range(12)]
    latest: dict[str, tuple[str, float]] = {}    # name -> (kind, value it contributes)
    kernels: list[tuple[str, float, dict[str, float]]] = []
    with sk.Session("cpu", cache=False) as s:
        for i in range(1000):
            n = rng.choice(names)
            kind = rng.choice(["const", "func", "struct", "alias", "uniform"])
            v = float(rng.randint(1, 9))
            if kind == "const":
                src = f"static const float {n} = {v};"
            elif kind == "func":
                src = f"float {n}() {{ return {v}; }}"
            elif kind == "struct":
                src = f"struct {n} {{ float a; float b; static float get() {{ return {v}; }} }};"
            elif kind == "alias":
                src = f"typealias {n} = float{int(v) % 3 + 2};"
                v = float(int(v) % 3 + 2)
            else:
                src = f"uniform float {n};"
            if i % 50 == 49 and latest:
                picks = rng.sample(sorted(latest), min(3, len(latest)))
                terms, want, params = [], 0.0, {}
                for p in picks:
                    k, val = latest[p]
                    terms.append({"const": p, "func": f"{p}()", "struct": f"{p}.get()",
                                  "alias": f"float({p}(0).x) + {int(val)}", "uniform": p}[k])
                    if k == "uniform":
                        params[p] = float(rng.randint(1, 9))
                        want += params[p]
                    else:
                        want += val
                name = f"k{i}"
                s.run_cell(KERNEL.format(name=name, expr=" + ".join(terms) + " + 0 * tid.x"), name=f"c{i}")
                kernels.append((name, want, params))
                continue
            s.run_cell(src, name=f"c{i}")
            latest[n] = (kind, v)
        assert len(kernels) == 20
        for name, want, params in kernels:
            o = np.zeros(4, np.float32)
            s.kernel(name)(threads=4, o=o, **params)
            assert o.tolist() == [want] * 4, name


CORPUS = Path(__file__).parent / "data" / "slang_diagnostics" / "diagnostics-v2026.16.tar.xz"


@pytest.mark.slow
def test_slang_diagnostics_corpus_leaves_the_session_working(tmp_path: Path) -> None:
    """Slang's own diagnostics tests (newest release tag, unchanged; see data/slang_diagnostics) run
    through run_cell in one session: each compiles or raises a compile error (or a compiler crash),
    never anything else; then independent kernels that use common names (`x`, `i`, `value`, `result`)
    as members, fields, locals and parameters import nothing and run right."""
    with tarfile.open(CORPUS) as tar:
        files = sorted((m.name, tar.extractfile(m).read().decode("utf-8", "replace"))  # type: ignore[union-attr]
                       for m in tar.getmembers() if m.isfile())
    assert len(files) == 550
    outcomes: dict[str, int] = {"ok": 0, "error": 0, "crash": 0}
    with sk.Session("cpu", cache_dir=str(tmp_path)) as s:
        for path, text in files:
            try:
                s.run_cell(text, name=path.removeprefix("tests/diagnostics/"))
                outcomes["ok"] += 1
            except sk.SlangCompilerCrash:
                outcomes["crash"] += 1
            except sk.SlangCompileError:
                outcomes["error"] += 1
        assert outcomes["error"] > 300 and outcomes["ok"] > 20, outcomes
        r = s.run_cell("struct Sample { float x; float value; };\n"
                       "float result(float value) { float i = value; return i * 2; }\n"
                       + KERNEL.format(name="diagCheckMain", expr="result(tid.x) + Sample(tid.x, 1).value"))
        assert s.cell(r.name).imports == ()
        assert {p.name for p in s.kernel("diagCheckMain").params} == {"o"}
        assert run(s, "diagCheckMain") == [1.0, 3.0, 5.0, 7.0]


def test_a_kernel_redeclared_in_a_cell_that_imports_the_earlier_one(cpu_session: sk.Session) -> None:
    """Two Playground demos both named `printMain`, the second using an extension method of the first
    (so it imports that cell): the earlier kernel is hidden, entry-point lookup included."""
    s = cpu_session
    s.run_cell("interface IMyPrintable { int twice(); }\n"
               "extension int : IMyPrintable { int twice() { return this * 2; } }\n"
               + KERNEL.format(name="printMain", expr="1"), name="variadic")
    r = s.run_cell(KERNEL.format(name="printMain", expr="int(tid.x).twice()"), name="atomics")
    assert s.cell("atomics").imports == ("variadic",) and r.shadows == (("printMain", "variadic"),)
    assert run(s, "printMain") == [0.0, 2.0, 4.0, 6.0]
