"""Session behaviour against the real compiler: diagnostics, cross-cell use, invalidation, crashes."""

from __future__ import annotations

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends.common.packing import ParameterError
from slang_kernel.frontend.display import summary

SEED_CRASH = """
interface IFoo
{
    [Differentiable]
    float bar(float);
};

interface IFoo_after_checking_and_lowering
{
    [BackwardDerivative(bar_bwd)]
    [ForwardDerivative(bar_fwd)]
    float bar(float);

    void bar_bwd(inout DifferentialPair<float>, float);

    DifferentialPair<float> bar_fwd(DifferentialPair<float>);
};
"""

KERNEL_USING_F = """
[shader("compute")][numthreads(32, 1, 1)]
void apply_f(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{
    o[t.x] = f(x[t.x]);
}"""


def run_apply(s: sk.Session, x: np.ndarray) -> np.ndarray:
    o = np.zeros_like(x)
    s.kernel("apply_f")(threads=x.size, o=o, x=x)
    return o


def test_diagnostic_points_at_cell_and_line(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("float helper(float x) { return x; }")
    with pytest.raises(sk.SlangCompileError) as info:
        cpu_session.run_cell("float g(float x)\n{\n    return helpr(x);\n}\n", name="typo")
    err = info.value.errors[0]
    assert (err.cell, err.line, err.column) == ("typo", 3, 12)
    assert "helpr" in err.message
    rendered = info.value.render()
    assert "    return helpr(x);" in rendered and "           ^^^^^" in rendered
    assert "typo" not in cpu_session.cells  # a cell with errors changes nothing


@pytest.mark.parametrize("line", ["\treturn helpr(x);", "\t\treturn helpr(x);", "    return\thelpr(x);",
                                  "\tfloat y =\t\tx; return helpr(y);"],
                         ids=["tab-start", "two-tabs", "tab-middle", "tabs-both"])
def test_caret_sits_under_the_token_with_tabs(cpu_session: sk.Session, line: str) -> None:
    """The compiler counts a tab as one column; the line is shown with tabs expanded, so the caret
    must be placed by the expanded text."""
    with pytest.raises(sk.SlangCompileError) as info:
        cpu_session.run_cell(f"float g(float x)\n{{\n{line}\n}}\n", name="tabs")
    rendered = info.value.render().splitlines()
    shown = next(i for i, r in enumerate(rendered) if r.startswith("     3 | "))
    text, caret = rendered[shown][len("     3 | "):], rendered[shown + 1][len("       | "):]
    assert "\t" not in text
    assert caret.index("^") == text.index("helpr") and caret.strip() == "^" * len("helpr")


def test_error_in_imported_cell_points_there(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("float a(float x) { return x; }", name="A")
    cpu_session.run_cell("float b(float x) { return a(x) + 1; }", name="B")
    with pytest.raises(sk.SlangCompileError):
        cpu_session.run_cell("float a(float x) { return x +; }", name="A")
    assert cpu_session.function("b")(np.float32(1)) == 2.0  # old A still in force


def test_warnings_come_back_with_success(cpu_session: sk.Session) -> None:
    r = cpu_session.run_cell("float w(float x) { int unused; return x; }\nfloat v() { float y; return y; }")
    assert r.diagnostics == [] or all(d.severity != "error" for d in r.diagnostics)


def test_edit_first_cell_changes_second(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float f(float x) { return x * 2; }", name="defs")
    s.run_cell(KERNEL_USING_F, name="use")
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_allclose(run_apply(s, x), x * 2)
    r = s.run_cell("float f(float x) { return x + 100; }", name="defs")
    assert r.recompiled == ("use",)
    np.testing.assert_allclose(run_apply(s, x), x + 100)


def test_only_users_are_recompiled(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float one(float x) { return x; }", name="c1")
    s.run_cell("float two(float x) { return x * 2; }", name="c2")
    s.run_cell("float uses_one(float x) { return one(x) + 1; }", name="c3")
    s.run_cell("float uses_two(float x) { return two(x) + 1; }", name="c4")
    s.run_cell("float uses_three(float x) { return uses_one(x) * 3; }", name="c5")
    r = s.run_cell("float one(float x) { return -x; }", name="c1")
    assert r.recompiled == ("c3", "c5")
    assert s.function("uses_three")(np.float32(2)) == pytest.approx(-3.0)


def test_later_definition_wins(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float k2(float x) { return 1; }")
    s.run_cell("float k2(float x) { return 2; }")
    r = s.run_cell("float k2_user(float x) { return k2(x); }")
    assert r.diagnostics == []
    assert s.function("k2_user")(np.float32(0)) == 2.0
    assert s.function("k2")(np.float32(0)) == 2.0


def test_a_cell_that_redefines_a_name_does_not_import_the_old_one(cpu_session: sk.Session) -> None:
    """A kernel named like an earlier cell's function: the cell defines the name itself, so the earlier
    cell is not imported for it (its function would overload the kernel and hide the entry point)."""
    s = cpu_session
    s.run_cell("struct Mat1 { float a; };\nfloat paint(Mat1 m, float x) { return m.a * x; }\n"
               "float helper1(float x) { return x + 1; }", name="old_paint")
    s.run_cell("[shader(\"compute\")][numthreads(4, 1, 1)]\n"
               "void paint(uint3 i: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[i.x] = i.x * 2; }",
               name="new_paint")
    o = np.zeros(4, np.float32)
    s.kernel("paint")(threads=4, o=o)
    np.testing.assert_array_equal(o, [0, 2, 4, 6])
    # using another name of that cell imports it after all: then the clash is explained
    s.run_cell("[shader(\"compute\")][numthreads(4, 1, 1)]\n"
               "void paint(uint3 i: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[i.x] = helper1(i.x); }",
               name="new_paint")
    with pytest.raises(sk.SlangCompileError, match="old_paint also defines `paint`.*rename one of them"):
        s.kernel("paint")(threads=4, o=o)


def test_overloads_across_cells_still_work(cpu_session: sk.Session) -> None:
    """A cell that defines an overload and calls the earlier one keeps importing it."""
    s = cpu_session
    s.run_cell("float lum3(float x) { return 2 * x; }", name="lum_a")
    r = s.run_cell("float lum3(float2 v) { return lum3(v.x) + lum3(v.y); }\n"
                   "float lum3_user(float a, float b) { return lum3(float2(a, b)); }", name="lum_b")
    assert r.diagnostics == [] and s.cell("lum_b").imports == ("lum_a",)
    assert s.function("lum3_user")(np.float32(1), np.float32(2)) == pytest.approx(6.0)
    s.run_cell("float lum3(float x) { return 3 * x; }", name="lum_a")  # lum_b is rechecked against it
    assert s.function("lum3_user")(np.float32(1), np.float32(2)) == pytest.approx(9.0)


def test_python_calls_pick_the_overload_as_slang_does(cpu_session: sk.Session) -> None:
    """A later cell's overload adds to the earlier forms: Python reaches each of them by argument count,
    then by argument types; the summary says so, naming the earlier cell."""
    s = cpu_session
    s.run_cell("float ov2(float a, float b) { return a * 10 + b; }", name="ov_two")
    r = s.run_cell("float ov2(float a) { return a + 100; }", name="ov_one")
    f = s.function("ov2")
    assert [len(fn.params) for fn in f.overloads()] == [1, 2]
    assert f(1.0, 2.0) == pytest.approx(12.0) and f(1.0) == pytest.approx(101.0)
    assert "adds an overload of ov2 (ov_two has ov2(float, float))" in str(summary(s, r))
    s.run_cell("int ov2(int a) { return a * 1000; }", name="ov_int")
    f = s.function("ov2")
    assert f(3) == 3000 and f(np.int32(3)) == 3000                      # an int argument: int ov2(int)
    assert f(3.0) == pytest.approx(103.0) and f(np.float32(3)) == pytest.approx(103.0)
    with pytest.raises(TypeError, match=r"takes 1 or 2 argument\(s\), got 3"):
        f(1.0, 2.0, 3.0)
    r = s.run_cell("float ov2(float a) { return a + 200; }", name="ov_one_again")  # same signature: replaces
    assert ("ov2", "ov_int") not in r.shadows and ("ov2", "ov_one") in r.shadows
    assert s.function("ov2")(1.0) == pytest.approx(201.0) and s.function("ov2")(1.0, 2.0) == pytest.approx(12.0)


def test_dependent_that_breaks_is_reported(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float base_fn(float x) { return x; }", name="base")
    s.run_cell("float dep_fn(float x) { return base_fn(x); }", name="dep")
    r = s.run_cell("float renamed(float x) { return x; }", name="base")
    assert r.broken == ("dep",)
    with pytest.raises(sk.SlangCompileError, match="no longer compiles"):
        s.function("dep_fn")
    s.run_cell("float dep_fn(float x) { return renamed(x) * 3; }", name="dep")
    assert s.function("dep_fn")(np.float32(2)) == 6.0


def test_use_of_later_cell_gets_a_hint(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float early(float x) { return x; }", name="early")
    s.run_cell("float late(float x) { return x; }", name="late")
    with pytest.raises(sk.SlangCompileError, match="defined in late, which comes after early"):
        s.run_cell("float early(float x) { return late(x); }", name="early")


def test_compiler_crash_costs_one_cell(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("float f(float x) { return x * 3; }", name="before")
    s.run_cell(KERNEL_USING_F, name="kernel")
    with pytest.raises(sk.SlangCompilerCrash, match=r"the Slang compiler crashed while compiling cell\[\d+\]"):
        s.run_cell(SEED_CRASH)
    # Every other cell keeps working, including new cells that need the restarted compiler.
    s.run_cell("float after(float x) { return f(x) + 1; }")
    assert s.function("after")(np.float32(1)) == 4.0
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_allclose(run_apply(s, x), 3 * x)


def test_reflection_offsets_match_packed_bytes(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("""
struct MyStruct { float a, b; float3 v; float2x2 m; };
[shader("compute")][numthreads(1, 1, 1)]
void refl(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> output,
          uniform StructuredBuffer<float> inp, uniform float scale, uniform MyStruct s)
{
    output[0] = s.a; output[1] = s.b; output[2] = s.v.z; output[3] = s.m[1][0]; output[4] = scale;
}""")
    k = s.kernel("refl")
    p = {q.name: q for q in k.params}
    assert [(p[n].offset, p[n].type.size) for n in ("output", "inp", "scale", "s")] == [
        (0, 16), (16, 16), (32, 4), (36, 36)]  # SLANG_FACTS.md: the CPU layout
    fields = {f.name: f.offset for f in p["s"].type.fields}
    assert fields == {"a": 0, "b": 4, "v": 8, "m": 20}
    ck = k.compiled()
    out = np.zeros(5, np.float32)
    values = {"output": out, "inp": np.zeros(1, np.float32), "scale": 7.0,
              "s": {"a": 1.0, "b": 2.0, "v": (0, 0, 3.0), "m": [[0, 0], [4.0, 0]]}}
    _, entry, _ = s.backend.pack(ck, values)
    assert np.frombuffer(bytes(entry[32:36]), np.float32)[0] == 7.0
    assert np.frombuffer(bytes(entry[36 + 16:36 + 20]), np.float32)[0] == 3.0
    k(threads=1, **values)
    np.testing.assert_array_equal(out, [1, 2, 3, 4, 7])


def test_parameter_errors_name_the_parameter(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("""
[shader("compute")][numthreads(8, 1, 1)]
void pe(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform float3 c)
{ o[t.x] = c.x; }""")
    k = s.kernel("pe")
    with pytest.raises(TypeError, match=r"missing `c` \(float3\)"):
        k(threads=8, o=np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="unknown `oops`"):
        k(threads=8, o=np.zeros(8, np.float32), c=(1, 2, 3), oops=1)
    with pytest.raises(ParameterError, match="`o`.*float64"):
        k(threads=8, o=np.zeros(8), c=(1, 2, 3))
    with pytest.raises(ParameterError, match="`c` is float3"):
        k(threads=8, o=np.zeros(8, np.float32), c=(1, 2))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ParameterError, match="read-only"):
        k(threads=8, o=ro, c=(1, 2, 3))
    with pytest.raises(ParameterError, match="not C-contiguous"):
        k(threads=8, o=np.zeros(16, np.float32)[::2], c=(1, 2, 3))
    o = np.zeros(8, np.float32)
    k(threads=8, o=o, c=(5, 0, 0))  # the session is fine after all of that
    assert (o == 5).all()


def test_out_of_range_writes_do_not_corrupt_memory(cpu_session: sk.Session) -> None:
    s = cpu_session
    s.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void oob(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x * 1000000] = 1; }""")
    o = np.zeros(4, np.float32)
    with pytest.warns(sk.OutOfRangeWarning, match=r"oob: 4095 out-of-range access\(es\); the first .* of `o`"):
        s.kernel("oob")(threads=4096, o=o)
    assert o[0] == 1 and (o[1:] == 0).all()


def test_barriers_get_a_clear_error_on_cpu(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("""
groupshared float tile[64];
[shader("compute")][numthreads(64, 1, 1)]
void shared_sum(uint3 t: SV_DispatchThreadID, uint3 l: SV_GroupThreadID, uniform RWStructuredBuffer<float> o)
{
    tile[l.x] = 1; GroupMemoryBarrierWithGroupSync(); o[t.x] = tile[63 - l.x];
}""")
    with pytest.raises(sk.SlangCompileError, match="no group barriers") as info:
        cpu_session.kernel("shared_sum")(threads=64, o=np.zeros(64, np.float32))
    notes = [d for d in info.value.diagnostics if d.severity == "note"]
    assert any("GroupMemoryBarrierWithGroupSync" in d.message and d.line == 6 for d in notes)


def test_printf_shows_in_the_cell(cpu_session: sk.Session, capsys: pytest.CaptureFixture[str]) -> None:
    cpu_session.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void hello(uint3 t: SV_DispatchThreadID, uniform float v) { printf("hello %d %.2f\\n", int(t.x), v); }""")
    cpu_session.kernel("hello")(threads=1, v=1.5)
    assert "hello 0 1.50" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp"])
def test_code_for_every_target(cpu_session: sk.Session, target: str) -> None:
    cpu_session.run_cell("""
[shader("compute")][numthreads(4, 1, 1)]
void tgt(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x] = t.x; }""")
    code = cpu_session.code("tgt", target)
    assert len(code) > 50
    assert {"spirv-asm": "OpEntryPoint", "cuda": "__global__", "cpp": "tgt", "metal": "kernel",
            "wgsl": "@compute", "glsl": "#version", "hlsl": "numthreads"}[target] in code


def test_ir_text(cpu_session: sk.Session) -> None:
    cpu_session.run_cell("[Differentiable] float irf(float x) { return x * x; }")
    text = cpu_session.ir("irf")
    assert "irf" in text and "func" in text


def test_disk_cache_corruption_is_rebuilt(tmp_path) -> None:
    s = sk.Session(backend="cpu", cache_dir=str(tmp_path))
    s.run_cell("float cc(float x) { return x + 1; }")
    s.close()
    for f in (tmp_path / "cells").rglob("*"):
        if f.is_file():
            f.write_bytes(f.read_bytes()[:40])  # truncate every entry
    s = sk.Session(backend="cpu", cache_dir=str(tmp_path))
    s.run_cell("float cc(float x) { return x + 1; }")
    assert s.function("cc")(np.float32(1)) == 2.0
    s.close()
