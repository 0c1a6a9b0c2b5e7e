"""Session.compare: one kernel on every backend that works here, output buffers diffed (ULP and
absolute), backends that cannot run listed with the reason; Session.replica follows cell edits."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.views.compare import Comparison, ulp_difference

# sin of large arguments: g++'s libm and llvmpipe's own approximation round some results differently
# (deterministic: 162 of these 1000 elements differ by 1 ulp on the dev machine, run after run);
# a + 1.5 is exact in IEEE arithmetic everywhere.
_CELL = r"""
[shader("compute")][numthreads(64, 1, 1)]
void cmp_plant(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
               uniform RWStructuredBuffer<uint> same, uniform StructuredBuffer<float> x, uniform uint n)
{
    if (tid.x >= n) return;
    o[tid.x] = sin(x[tid.x] * SCALE);
    same[tid.x] = tid.x * 3u;
}
[shader("compute")][numthreads(64, 1, 1)]
void cmp_agree(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
               uniform StructuredBuffer<float> x, uniform uint n)
{
    if (tid.x < n) o[tid.x] = x[tid.x] + 1.5;
}
"""


def _needs_two(c: Comparison) -> None:
    if len(c.ran) < 2:
        pytest.skip(f"fewer than two backends run here: {dict(c.unavailable)}")


def test_compare_flags_a_planted_difference(session: sk.Session) -> None:
    session.run_cell(_CELL, name="t_cmp", defines={"SCALE": "1000.0"})
    x = np.linspace(-3, 3, 1000).astype(np.float32)
    o = np.zeros(1000, np.float32)
    c = session.compare("cmp_plant", ("cpu", "vulkan", "cuda", "nosuch"), threads=1000, o=o,
                        same=np.zeros(1000, np.uint32), x=x, n=1000)
    assert not o.any()  # each backend ran on its own copy
    assert "nosuch" in c.unavailable and "unknown backend" in c.unavailable["nosuch"]
    _needs_two(c)
    assert c.reference == c.ran[0] and session.backend.name in c.ran
    d = c.diff("o")
    assert d.differs and d.max_ulp >= 1 and 0 < d.max_abs <= 2 and len(d.first) == min(8, d.count)
    if {"cpu", "vulkan"} <= set(c.ran) and "llvmpipe" in session.replica("vulkan").backend.describe():
        assert c.diff("o", "vulkan").max_ulp < 64  # lavapipe: a rounding difference, not a wrong result
    np.testing.assert_array_equal(c.difference("o")[list(i[0] for i in d.first)] != 0, True)
    assert not c.diff("same").differs and c.diff("same").max_ulp == 0
    again = session.compare("cmp_plant", ("cpu", "vulkan"), threads=1000, o=o, same=np.zeros(1000, np.uint32),
                            x=x, n=1000)
    assert again.diff("o").count == d.count and again.diff("o").first == d.first  # stable, run after run
    html = c._repr_html_()
    differing = sum(d.differs for d in c.diffs)   # 1 here (vulkan), 2 where cuda runs too
    assert html.count("class='sk-differs'") == differing >= 1 and "cmp_plant" in html and "nosuch" in html
    assert "DIFFERS" in str(c)
    if importlib.util.find_spec("anywidget") is not None:   # the engine runs without widgets (the GPU machine)
        from slang_kernel.widgets.buffer_view import BufferView

        view = BufferView.of_comparison(c, "o")
        assert type(view).__name__ == "BufferView"

    agree = session.compare("cmp_agree", ("cpu", "vulkan"), threads=1000, o=o, x=x, n=1000)
    assert not agree.differs and agree.diff("o").count == 0


def test_replica_follows_edits(session: sk.Session) -> None:
    session.run_cell(_CELL.replace("cmp_", "rep_"), name="t_rep", defines={"SCALE": "0.0"})
    x = np.linspace(-3, 3, 256).astype(np.float32)
    kw = dict(threads=256, o=np.zeros(256, np.float32), same=np.zeros(256, np.uint32), x=x, n=256)
    c = session.compare("rep_plant", ("cpu", "vulkan"), **kw)  # type: ignore[arg-type]
    _needs_two(c)
    assert not c.differs  # sin(0) is 0 everywhere
    session.run_cell(_CELL.replace("cmp_", "rep_").replace("tid.x * 3u", "tid.x * 5u"), name="t_rep",
                     defines={"SCALE": "0.0"})
    c2 = session.compare("rep_plant", ("cpu", "vulkan"), **kw)  # type: ignore[arg-type]
    other = next(b for b in c2.ran if b != session.backend.name)
    assert c2.outputs[other]["same"][7] == 35  # the replica replayed the edited cell
    assert session.replica(other) is session.replica(other)


def test_ulp_difference() -> None:
    one = np.float32(1.0)
    assert ulp_difference(np.array([one]), np.array([np.nextafter(one, np.float32(2))]))[0] == 1
    assert ulp_difference(np.array([-0.0], np.float32), np.array([0.0], np.float32))[0] == 0
    tiny = np.float32(1e-45)
    assert ulp_difference(np.array([-tiny]), np.array([tiny]))[0] == 2
    assert ulp_difference(np.array([np.nan], np.float32), np.array([np.nan], np.float32))[0] == 0
    assert ulp_difference(np.array([3], np.int32), np.array([-2], np.int32))[0] == 5


def test_compare_struct_buffers_by_field(session: sk.Session) -> None:
    session.run_cell("""
struct CmpP { float w; float2x2 m; float3 p; uint id; };   // m: offset 4 on cpu/vulkan, 8 on cuda
[shader("compute")][numthreads(32, 1, 1)]
void cmp_struct(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<CmpP> ps)
{
    ps[tid.x].p = float3(tid.x, 2 * tid.x, 0.5);
    ps[tid.x].w = ps[tid.x].w * 2;
    ps[tid.x].id = tid.x + 7;
    ps[tid.x].m = float2x2(1, 2, 3, tid.x);
}""", name="t_cmp_struct")
    ps = np.zeros(64, session.kernel("cmp_struct").dtype("ps"))
    ps["w"] = np.arange(64)
    c = session.compare("cmp_struct", ("cpu", "vulkan", "cuda"), threads=64, ps=ps)
    _needs_two(c)
    assert {d.buffer for d in c.diffs} == {"ps.p", "ps.w", "ps.id", "ps.m"} and not c.differs
    assert (ps["id"] == 0).all()  # the caller's array is untouched
    for b in c.ran:
        np.testing.assert_array_equal(c.outputs[b]["ps"]["w"], 2 * np.arange(64))
        np.testing.assert_array_equal(c.outputs[b]["ps"]["m"][:, 1, 1], np.arange(64))
