"""Loops with a per-thread trip count on the CPU vector path (issue 16; _cpu_simd_loops).

A row of threads runs such a loop together with a live mask. Every kernel here is checked against
a reference computed here, and `k.path` says which path it took; the ones g++ still refuses keep
the scalar path with both reasons.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends.cpu import simd_loops as _cpu_simd_loops

CELL = """
[shader("compute")][numthreads(64, 1, 1)]
void collatz(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o)
{
    uint i = 0, v = t.x + 1;
    while (v != 1 && i < 500) { v = (v & 1) != 0 ? 3 * v + 1 : v / 2; i++; }
    o[t.x] = i;
}

[shader("compute")][numthreads(64, 1, 1)]
void unrolled(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o)
{
    uint v = t.x, i = 0;
    [unroll] for (int k = 0; k < 4; k++) v = v * 3 + 1;   // peeled by g++: stays in a straight phase
    while (v > 1 && i < 300) { v = (v & 1) != 0 ? 3 * v + 1 : v / 2; i++; }
    o[t.x] = i;
}

[shader("compute")][numthreads(32, 1, 1)]
void wrapped(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform uint n)
{
    if (t.x < n) {                       // the loop inside the tail guard
        float x = t.x * 0.25, y = 0;
        uint k = 0;
        while (x > 1.0 && k < 100) { x = x * 0.5 + sin(x); y += x; k++; }
        o[t.x] = y + k;
    }
}

[shader("compute")][numthreads(16, 1, 1)]
void spill(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o)
{
    uint v = t.x, k = 0;
    while (v > 0) { v = v / 2; k++; }
    o[t.x + 3] = k;                      // past the end for the last three threads
}


[shader("compute")][numthreads(64, 1, 1)]
void jumps(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o, uniform uint n)
{
    if (t.x >= n) return;
    uint v = t.x, s = 0;
    for (uint k = 0; k < 40; k++) {
        v = (v * 5 + 1) & 1023;
        if ((v & 3) == 3) continue;
        if (v == 7) { o[t.x] = 100000 + k; return; }
        s += v;
        if (s > 5000) break;
    }
    o[t.x] = s;
}
"""
CELL += (Path(__file__).parent / "data" / "mandel.slang").read_text()   # test_conformance's Mandelbrot
MASKED = "simd ("


@pytest.fixture(scope="module")
def s(cache_dir: str) -> Iterator[sk.Session]:
    session = sk.Session(backend="cpu", cache_dir=cache_dir, isolate=False)
    session.run_cell(CELL, name="simd_loops")
    yield session
    session.close()


def masked(path: str) -> bool:
    return path.startswith(MASKED) and path.endswith(", 1 loop masked")


def test_collatz_runs_masked_and_exact(s: sk.Session) -> None:
    k = s.kernel("collatz")
    assert masked(k.path), k.path
    o = np.zeros(200, np.uint32)    # not a multiple of the group: the last 56 threads write past the end
    with pytest.warns(sk.OutOfRangeWarning, match="56 out-of-range.*index 200 of `o`"):
        k(threads=200, o=o)

    def steps(v: int) -> int:
        i = 0
        while v != 1 and i < 500:
            v, i = (3 * v + 1 if v & 1 else v // 2), i + 1
        return i
    assert o.tolist() == [steps(v + 1) for v in range(200)]


def test_an_unrolled_loop_before_the_masked_one(s: sk.Session) -> None:
    k = s.kernel("unrolled")
    assert masked(k.path), k.path
    o = np.zeros(64, np.uint32)
    k(threads=64, o=o)
    ref = []
    for t in range(64):
        v, i = t, 0
        for _ in range(4):
            v = (v * 3 + 1) & 0xFFFFFFFF
        while v > 1 and i < 300:
            v, i = ((3 * v + 1) & 0xFFFFFFFF if v & 1 else v // 2), i + 1
        ref.append(i)
    assert o.tolist() == ref


def test_a_loop_inside_the_tail_guard(s: sk.Session) -> None:
    k = s.kernel("wrapped")
    assert masked(k.path), k.path
    n = 70
    o = np.full(96, -1, np.float32)
    k(threads=96, o=o, n=n)
    ref = []
    for i in range(n):
        x, y, c = np.float32(i * 0.25), np.float32(0), 0
        while x > 1.0 and c < 100:
            x = np.float32(x * np.float32(0.5) + np.sin(x, dtype=np.float32))
            y, c = np.float32(y + x), c + 1
        ref.append(y + c)
    np.testing.assert_allclose(o[:n], ref, rtol=1e-4)
    assert (o[n:] == -1).all()       # threads past n returned before the loop


def test_out_of_range_after_a_masked_loop_is_counted_and_reported(cache_dir: str) -> None:
    for isolate in (True, False):
        with sk.Session(backend="cpu", cache_dir=cache_dir, isolate=isolate) as c:
            c.run_cell(CELL, name="simd_loops")
            k = c.kernel("spill")
            assert masked(k.path), k.path
            o = np.zeros(16, np.uint32)
            with pytest.warns(sk.OutOfRangeWarning, match="3 out-of-range"):
                k(threads=16, o=o)
            assert o[3:].tolist() == [int(v).bit_length() for v in range(13)]
        with sk.Session(backend="cpu", cache_dir=cache_dir, isolate=isolate, checked=True) as c:
            c.run_cell(CELL, name="simd_loops")
            with pytest.raises(sk.BoundsError) as info:
                c.kernel("spill")(threads=16, o=np.zeros(16, np.uint32))
            e = info.value
            assert (e.buffer, e.size, e.count, e.index) == ("o", 16, 3, 16)


def test_mandelbrot_agrees_with_float32_iteration(s: sk.Session) -> None:
    k = s.kernel("mandel")
    assert masked(k.path), k.path
    w, h = 80, 40
    it = np.zeros((h, w), np.uint32)
    k(threads=(w, h), it=it, w=w, h=h)
    f = np.float32
    cx = (f(-2.0) + f(2.5) * np.arange(w, dtype=f) / f(w))[None, :].repeat(h, 0)
    cy = (f(-1.25) + f(2.5) * np.arange(h, dtype=f) / f(h))[:, None].repeat(w, 1)
    zx, zy, n = np.zeros_like(cx), np.zeros_like(cx), np.zeros((h, w), np.uint32)
    for _ in range(64):
        live = zx * zx + zy * zy < 4
        zx, zy = np.where(live, zx * zx - zy * zy + cx, zx), np.where(live, f(2) * zx * zy + cy, zy)
        n += live
    # g++ contracts a*b+c into FMA (the scalar build too, in other places): a pixel on the set's
    # edge may take another count; a broken mask would change whole rows
    assert (it != n).mean() < 0.01, int((it != n).sum())
    assert it.max() == 64 and it.min() >= 1


def test_a_loop_g_plus_plus_still_refuses_keeps_the_scalar_path(s: sk.Session) -> None:
    k = s.kernel("jumps")
    assert k.path.startswith("scalar: g++ did not vectorise the lane loop ("), k.path
    assert "; g++ did not vectorise the masked loops (" in k.path, k.path
    o = np.zeros(64, np.uint32)
    k(threads=64, o=o, n=64)
    assert o.tolist() == jumps_reference(64)


def jumps_reference(n: int) -> list[int]:
    ref = []
    for t in range(n):
        v, acc, out = t, 0, None
        for step in range(40):
            v = (v * 5 + 1) & 1023
            if v & 3 == 3:
                continue
            if v == 7:
                out = 100000 + step
                break
            acc += v
            if acc > 5000:
                break
        ref.append(acc if out is None else out)
    return ref


THREAD = """void {body}(void* _S1, void* entryPointParams_0, void* _S2)
{{
{code}
}}
void k_Thread(ComputeThreadVaryingInput* varyingInput, void* entryPointParams, void* globalParams)
{{
    {body}(varyingInput, entryPointParams, globalParams);
}}
"""


def test_the_rewrite_turns_jumps_into_flags() -> None:
    code = """    uint32_t x_0 = 0U;
    for(;;)
    {
        if(x_0 < 3U)
        {
        }
        else
        {
            break;
        }
        x_0 = x_0 + 1U;
    }
    return;"""
    g = _cpu_simd_loops.gang(THREAD.format(body="_k", code=code), "k", 16)
    assert not g.blocked and g.loops == 1 and len(g.loop_lines) == 1
    assert "{ sk_brk = 1; sk_stop = 1; }" in g.code and "if (!sk_stop) {" in g.code
    assert "uint32_t sk_a_x_0[16]" in g.code       # the loop's state lives in per-lane arrays


def test_the_rewrite_refuses_what_it_does_not_know() -> None:
    plain = _cpu_simd_loops.gang(THREAD.format(body="_k", code="    uint32_t x_0 = 1U;\n    return;"), "k", 16)
    assert plain.blocked == "no loop at the top level of the thread's body"
    do_loop = "    uint32_t x_0 = 1U;\n    do { x_0 = x_0 + 1U; } while(x_0 < 9U);"
    assert _cpu_simd_loops.gang(THREAD.format(body="_k", code=do_loop), "k", 16).blocked == "a do-while loop"
    pointer = ("    float a_0 = 1.0f;\n    float * p_0 = &a_0;\n    for(;;)\n    {\n        break;\n    }\n"
               "    *p_0 = 2.0f;")
    assert "pointer to a local" in _cpu_simd_loops.gang(THREAD.format(body="_k", code=pointer), "k", 16).blocked


def test_an_interrupt_while_g_plus_plus_builds_loses_nothing(tmp_path: Path) -> None:
    """The stop button during the (up to three) g++ runs of a loop kernel: KernelInterrupted, as
    during a dispatch, and the next call builds and runs it."""
    with sk.Session(backend="cpu", cache_dir=str(tmp_path)) as c:
        c.run_cell(CELL, name="simd_loops")
        k = c.kernel("jumps")        # three g++ runs from a fresh cache: plain, masked, scalar
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(sk.KernelInterrupted, match="while g\\+\\+ built it; nothing ran"):
                k(threads=64, o=np.zeros(64, np.uint32), n=64)
        finally:
            timer.cancel()
        o = np.zeros(64, np.uint32)
        k(threads=64, o=o, n=64)
        assert o.tolist() == jumps_reference(64) and k.path.startswith("scalar: g++ did not vectorise")
