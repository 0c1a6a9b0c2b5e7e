"""The thread debugger (ComputeKernel.debug) on every backend: printf filtered to one thread, values
marked with debug_value, buffers written as by a call, threads outside the dispatch refused."""

from __future__ import annotations

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.views.thread_debug import ThreadDebug, instrument

_HELPERS = r"""
import debug;
float shade(float v) { printf("shade %d\n", int(v)); debug_value("inner", v + 0.5); return v * 2; }
[shader("compute")][numthreads(4, 4, 1)]
void dbg_img(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> img, uniform uint w)
{
    float v = shade(float(tid.x + 10 * tid.y));   // printf("not this one");
    debug_value("v", v);
    debug_value("tid", tid.xy);
    debug_value("m", float2x2(1, 2, 3, v));
    debug_value("flag", tid.x > 2);
    for (int i = 0; i < 3; i++) debug_value("i", i * int(tid.y));
    if (tid.x == 2) printf("x is two, y=%u\n", tid.y); else printf("x=%u y=%u\n", tid.x, tid.y);
    img[tid.y * w + tid.x] = v;
}
"""


def test_debug_one_thread(session: sk.Session) -> None:
    session.run_cell(_HELPERS, name="t_dbg_img")
    k = session.kernel("dbg_img")
    img = np.zeros(8 * 8, np.float32)
    d = k.debug((3, 5, 0), threads=(8, 8, 1), img=img, w=8)
    assert isinstance(d, ThreadDebug)
    assert (d.kernel, d.thread, d.backend) == ("dbg_img", (3, 5, 0), session.backend.name)
    assert d.printed == ("shade 53", "x=3 y=5")
    assert d.values["v"] == np.float32(106.0) and d.values["inner"] == np.float32(53.5)
    assert d.values["tid"].tolist() == [3, 5] and d.values["tid"].dtype == np.uint32
    np.testing.assert_array_equal(d.values["m"], np.array([[1, 2], [3, 106]], np.float32))
    assert d.values["flag"] == np.bool_(True)
    assert [int(v) for v in d.values["i"]] == [0, 5, 10]
    # the dispatch wrote every pixel, as a call does
    xs, ys = np.meshgrid(np.arange(8), np.arange(8))
    np.testing.assert_array_equal(img, (2.0 * (xs + 10 * ys)).ravel())
    assert "x=3 y=5" in d.text() and "v = 106.0" in str(d) and "<table" in d._repr_html_()

    other = k.debug((2, 1), threads=(8, 8, 1), img=img, w=8)  # another thread: the same debug build
    assert other.printed == ("shade 12", "x is two, y=1") and other.values["flag"] == np.bool_(False)


def test_debug_refuses_outside_and_leaves_calls_alone(session: sk.Session) -> None:
    session.run_cell(_HELPERS.replace("dbg_img", "dbg_img2"), name="t_dbg_img2")
    k = session.kernel("dbg_img2")
    img = np.zeros(64, np.float32)
    with pytest.raises(sk.ParameterError, match=r"thread \(8, 0, 0\) is outside the dispatch \(threads=\(8, 8, 1\)\)"):
        k.debug((8, 0, 0), threads=(8, 8, 1), img=img, w=8)
    with pytest.raises(sk.ParameterError, match=r"groups=\(1, 1, 1\) x numthreads=\(4, 4, 1\)"):
        k.debug((0, 4, 0), groups=(1, 1, 1), img=img, w=8)
    with pytest.raises(sk.ParameterError, match="missing `w`"):
        k.debug((0, 0, 0), threads=(8, 8, 1), img=img)
    assert k.debug((1, 1, 0), groups=(1, 1, 1), img=img, w=8).values["v"] == np.float32(22.0)
    assert "sk_debug" not in k.code("hlsl")  # ordinary builds are not instrumented


def test_debug_filters_printf_of_imported_cells(session: sk.Session) -> None:
    session.run_cell('import debug;\nfloat dbg_lib(float v) { printf("lib %d\\n", int(v)); debug_value("lib", v); return v * 3; }',
                     name="t_dbg_lib", defines={"UNUSED_HERE": "1"})
    session.run_cell("""
[shader("compute")][numthreads(8, 1, 1)]
void dbg_user(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x] = dbg_lib(float(t.x)); }
""", name="t_dbg_user")
    o = np.zeros(16, np.float32)
    d = session.kernel("dbg_user").debug((9, 0, 0), threads=16, o=o)
    assert d.printed == ("lib 9",) and d.values["lib"] == np.float32(9.0)
    np.testing.assert_array_equal(o, 3 * np.arange(16, dtype=np.float32))

    session.run_cell('module dbg_mod;\npublic float dbg_mod_f(float v) { printf("mod %d\\n", int(v)); return v; }',
                     name="t_dbg_mod")  # a cell that declares a module is inlined too
    session.run_cell("""
[shader("compute")][numthreads(4, 1, 1)]
void dbg_mod_user(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x] = dbg_mod_f(float(t.x)); }
""", name="t_dbg_mod_user")
    d = session.kernel("dbg_mod_user").debug((1, 0, 0), threads=4, o=o)
    assert d.printed == ("mod 1",)


def test_instrument_keeps_lines_and_skips_comments() -> None:
    src = 'void k(uint3 t : SV_DispatchThreadID)\n{\n  // printf("no");\n  printf("a %d", 1);\n  debug_value("x", 2.0);\n}\n'
    text, names = instrument(src, "k")
    body = text[:text.index("\n// slang-kernel thread debugger")]
    assert body.count("\n") == src.count("\n") and names == ("x",)
    assert '// printf("no");' in body and '{ if (sk_debug_on_) printf("a %d", 1); }' in body
    assert "sk_debug_value_(0u, 2.0)" in body and "SV_DispatchThreadID, uint3 sk_debug_tid_" in body
