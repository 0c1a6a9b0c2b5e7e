"""Timings where people look: k.profile() splits a dispatch on every backend (a split where the
backend states "timing", else the wall clock, said so); the cell result says compile time and cache.
Numbers are only checked for being there and consistent, never for their size."""

from __future__ import annotations

import math

import numpy as np

import slang_kernel as sk
from slang_kernel.frontend.display import summary
from slang_kernel.views.profiling import Profile


def test_profile_splits_a_dispatch(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void prof_scale(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
                uniform StructuredBuffer<float> x, uniform uint n)
{
    if (tid.x < n) o[tid.x] = 2.0 * x[tid.x];
}""", name="t_prof")
    x = np.arange(4096, dtype=np.float32)
    o = np.zeros_like(x)
    p = session.kernel("prof_scale").profile(threads=4096, o=o, x=x, n=4096)
    np.testing.assert_array_equal(o, 2 * x)  # the dispatch ran as a call does
    print(p)  # what was measured (-s shows it; the numbers are never asserted)
    assert isinstance(p, Profile) and p.kernel == "prof_scale" and p.backend == session.backend.name
    assert p.groups == (64, 1, 1) and p.total_ms > 0 and p.run_ms >= 0
    if "timing" in session.backend.capabilities:
        assert p.bind_upload_ms >= 0 and p.readback_ms >= 0 and p.note
        assert p.bind_upload_ms + p.readback_ms <= p.total_ms
        assert p.device_timestamps == (session.backend.name in ("vulkan", "cuda"))
    else:
        assert math.isnan(p.bind_upload_ms) and "no timing split" in p.note
    assert "run" in str(p) and "<table" in p._repr_html_()


def test_cell_result_says_compile_time_and_cache(cpu_session: sk.Session) -> None:
    src = "float prof_sq(float v) { return v * v; }"
    first = cpu_session.run_cell(src, name="prof_cell")
    assert not first.cached and 0 < first.compile_ms <= first.elapsed_ms
    assert "(compiler " in summary(cpu_session, first)._repr_mimebundle_()["text/plain"]
    again = cpu_session.run_cell(src, name="prof_cell")  # the same revision: its check is cached
    assert again.cached and again.compile_ms == 0
    assert "(from the compile cache)" in summary(cpu_session, again)._repr_mimebundle_()["text/plain"]
