"""The CPU backend's vector path (issue 16): which kernels take it, and that it means the scalar path's results.

Every kernel here is checked against numpy; `k.path` says which path it took. The vector path is the
default, so the conformance suite covers it too; these are the cases specific to lanes: masked
branches and early returns, a thread count that is not a multiple of the lanes, out-of-range
accesses (robust and reported), fast_math, and kernels that must stay scalar.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends.cpu import simd as _cpu_simd

BRANCHY = """
[shader("compute")][numthreads(64, 1, 1)]
void branchy(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x,
             uniform uint n)
{
    if (t.x >= n) return;                      // early return: the tail lanes are masked
    float v = x[t.x];
    float r = v > 1 ? exp(-v) : sin(v) * v;     // masked branches
    o[t.x] = v < 0 ? -1 : r + (v < 0.5 ? 1 : 0);
}"""
GATHER = """
[shader("compute")][numthreads(32, 1, 1)]
void gather(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{
    o[t.x] = x[t.x] + 1;
}"""
CELL = BRANCHY + GATHER + """

[shader("compute")][numthreads(32, 1, 1)]
void bump(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{
    o[t.x] += x[t.x] + 1;   // read-modify-write
}

[shader("compute")][numthreads(8, 8, 1)]
void grid(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o, uniform uint w, uniform uint h)
{
    if (t.x >= w || t.y >= h) return;
    o[t.y * w + t.x] = t.x * 1000 + t.y;
}

groupshared float tile[64];
[shader("compute")][numthreads(64, 1, 1)]
void shared_tile(uint3 t: SV_DispatchThreadID, uint3 l: SV_GroupThreadID, uniform RWStructuredBuffer<float> o)
{
    tile[l.x] = t.x;
    o[t.x] = tile[(l.x + 63) % 64] * 2;   // the previous lane's value (threads run in order on the CPU)
}

[shader("compute")][numthreads(16, 1, 1)]
void talk(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o)
{
    if (t.x == 0) printf("hello from %d\\n", t.x);
    o[t.x] = 3;
}

[shader("compute")][numthreads(64, 1, 1)]
void loopy(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o)
{
    uint i = 0, v = t.x + 1;
    while (v != 1 && i < 500) { v = (v & 1) != 0 ? 3 * v + 1 : v / 2; i++; }   // data-dependent trip count
    o[t.x] = i;
}
"""


@pytest.fixture(scope="module", params=[True, False], ids=["worker", "in-process"])
def s(request: pytest.FixtureRequest, cache_dir: str) -> Iterator[sk.Session]:
    session = sk.Session(backend="cpu", cache_dir=cache_dir, isolate=request.param)
    session.run_cell(CELL, name="simd_cases")
    yield session
    session.close()


def simd(path: str) -> bool:
    return path.startswith("simd (") and "lanes)" in path


def test_masked_branches_early_returns_and_a_tail(s: sk.Session) -> None:
    k = s.kernel("branchy")
    assert simd(k.path), k.path
    n = 1000  # not a multiple of 64 nor of the vector lanes; the dispatch has 1024 threads
    x = np.linspace(-1.5, 3.0, 1024, dtype=np.float32)
    o = np.full(1024, 7, np.float32)
    k(threads=1024, o=o, x=x, n=n)
    v = x[:n].astype(np.float64)
    ref = np.where(v < 0, -1, np.where(v > 1, np.exp(-v), np.sin(v) * v) + (v < 0.5))
    np.testing.assert_allclose(o[:n], ref, rtol=1e-5, atol=1e-6)
    assert (o[n:] == 7).all()  # the masked tail lanes wrote nothing


def test_two_dimensional_groups(s: sk.Session) -> None:
    k = s.kernel("grid")
    # whichever path g++ allows (8 lanes of x per row of the group); the result is the same
    assert simd(k.path) or k.path.startswith("scalar: g++ did not vectorise"), k.path
    w, h = 29, 13  # partial groups along both axes
    o = np.zeros(w * h, np.uint32)
    k(threads=(w, h), o=o, w=w, h=h)
    yy, xx = np.mgrid[0:h, 0:w]
    np.testing.assert_array_equal(o, (xx * 1000 + yy).ravel())


def test_out_of_range_reads_are_zero_and_reported(s: sk.Session) -> None:
    k = s.kernel("gather")
    assert simd(k.path), k.path
    x = np.arange(90, dtype=np.float32)
    o = np.zeros(96, np.float32)
    # only the last group's row reads past the end: the probe names its first out-of-range access
    with pytest.warns(sk.OutOfRangeWarning, match=r"gather: 6 out-of-range access\(es\); the first read or wrote "
                                                   r"index 90 of `x` \(90 elements\)"):
        k(threads=96, o=o, x=x)
    np.testing.assert_array_equal(o, np.r_[np.arange(90), np.zeros(6)] + 1)
    short = np.zeros(40, np.float32)  # writes past the end dropped, the rest written
    with pytest.warns(sk.OutOfRangeWarning, match=r"gather: 56 out-of-range access\(es\).* of `o` \(40 elements\)"):
        k(threads=96, o=short, x=np.ones(96, np.float32))
    assert (short == 2).all()


def test_the_probe_writes_nothing(s: sk.Session) -> None:
    # the lane loop only counts; the row that counted is re-run by the probe (a scalar copy of the
    # kernel that records the first out-of-range access and writes no buffer) to name it
    k = s.kernel("bump")
    assert simd(k.path), k.path
    o = np.arange(1000, dtype=np.float32)  # 1024 threads: 24 past the end, all in the last group
    with pytest.warns(sk.OutOfRangeWarning, match=r"bump: 48 out-of-range access\(es\); the first read or wrote "
                                                   r"index 1000 of `o` \(1000 elements\)"):
        k(threads=1024, o=o, x=np.ones(1024, np.float32))
    np.testing.assert_array_equal(o, np.arange(1000) + 2)  # each element updated once


def test_checked_raises_bounds_error_on_the_vector_path(cache_dir: str) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir, checked=True) as c:
        c.run_cell(GATHER, name="simd_gather")
        k = c.kernel("gather")
        assert simd(k.path), k.path
        o = np.zeros(64, np.float32)
        with pytest.raises(sk.BoundsError) as info:
            k(threads=64, o=o, x=np.arange(61, dtype=np.float32))
        e = info.value
        assert (e.kernel, e.buffer, e.size, e.count, e.index) == ("gather", "x", 61, 3, 61)
        np.testing.assert_array_equal(o, np.r_[np.arange(61), [0, 0, 0]] + 1)


def test_kernels_that_keep_the_scalar_path_say_why(s: sk.Session) -> None:
    assert s.kernel("shared_tile").path == "scalar: groupshared memory"
    assert s.kernel("talk").path.startswith("scalar: printf")
    loopy = s.kernel("loopy").path   # its loop runs masked (test_cpu_simd_loops.py has the scalar reasons)
    assert simd(loopy) and loopy.endswith(", 1 loop masked"), loopy
    steps = np.zeros(64, np.uint32)
    s.kernel("loopy")(threads=64, o=steps)
    assert steps[0] == 0 and steps[1] == 1 and steps[26] == 111  # Collatz steps of 1, 2, 27


def test_fast_math_builds_and_agrees(cache_dir: str) -> None:
    with sk.Session(backend="cpu", cache_dir=cache_dir, fast_math=True) as f:
        assert f.config.fast_math
        f.run_cell(BRANCHY, name="simd_branchy")
        k = f.kernel("branchy")
        assert simd(k.path), k.path
        x = np.linspace(0.1, 3.0, 256, dtype=np.float32)
        o = np.zeros(256, np.float32)
        k(threads=256, o=o, x=x, n=256)
        v = x.astype(np.float64)
        np.testing.assert_allclose(o, np.where(v > 1, np.exp(-v), np.sin(v) * v) + (v < 0.5), rtol=1e-4, atol=1e-6)


def test_gcc_report_parsing() -> None:
    lane = f"{_cpu_simd.LANE_FILE}:14:31"
    assert _cpu_simd.lanes_of(f"{lane}: missed: couldn't vectorize loop\n"
                              f"{lane}: optimized: loop vectorized using 32 byte vectors\n", 14) == (32, "")
    assert _cpu_simd.lanes_of(f"{lane}: missed: couldn't vectorize loop\n"
                              f"{lane}: missed: not vectorized: control flow in loop.\n", 14) == (0, "control flow in loop")
    assert _cpu_simd.describe_vector(32) == "simd (avx2, 8 lanes)"


def test_rewrite_of_buffer_accesses() -> None:
    src = "    *(&(p->o)[i + f(a[2])]) = *(&(p->x)[i]) * 2;\n    float * q = (&(p->o)[i]);\n"
    out = _cpu_simd.rewrite_accesses(src)
    assert out == "    sk_st(p->o, i + f(a[2]), sk_ld(p->x, i) * 2);\n    float * q = (&(p->o)[i]);\n"
