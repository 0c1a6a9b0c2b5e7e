"""Per-call overhead of a tiny CPU dispatch and of a warm cell recompile, against numpy's own call.

    .venv/bin/python bench/bench_dispatch.py [--repeat N]

The figures the model must not slow down (issue 13: "dispatch overhead and warm compile within 10%"):
a 64-thread saxpy dispatched with numpy arrays, in-process (Session(isolate=False)) and through the
worker process, next to numpy's `a * x + y` on the same 64 floats (the floor of any call from Python);
and the warm recompile of a 50-line cell. To compare two trees, run this script from each of them
on the same machine, one after the other (bench/RESULTS.md says which were paired).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from typing import Callable

import numpy as np

import slang_kernel as sk

SAXPY = """
[shader("compute")][numthreads(64, 1, 1)]
void saxpy(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform float a)
{ y[t.x] = a * x[t.x] + y[t.x]; }"""
CELL_50 = "\n".join(f"float f{i}(float x) {{ return x * {i + 1}.0 + sin(x * {i}.0); }}" for i in range(50))


def median_us(fn: Callable[[], object], repeat: int, inner: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    numpy_us = median_us(lambda: 2.0 * x + y, args.repeat, 2000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for isolate in (False, True):
            with sk.Session(backend="cpu", isolate=isolate, cache_dir=tmp) as s:
                s.run_cell(SAXPY)
                k = s.kernel("saxpy")
                us = median_us(lambda: k(threads=64, y=y, x=x, a=2.0), args.repeat, 200)
                rows.append((f"tiny dispatch, {'worker process' if isolate else 'in-process'}", us, numpy_us))
        with sk.Session(backend="cpu", cache=False, cache_dir=tmp) as s:
            s.run_cell(CELL_50, name="big")
            n = iter(range(10**9))
            us = median_us(lambda: s.run_cell(CELL_50 + f"\n// edit {next(n)}", name="big"), args.repeat, 3)
            rows.append(("warm recompile, 50-line cell", us, float("nan")))
    print(f"\n{'benchmark':42s} {'ours us':>10s} {'numpy us':>10s} {'ratio':>8s}")
    for name, ours, peer in rows:
        print(f"{name:42s} {ours:10.1f} {peer:10.2f} {peer / ours if peer == peer else float('nan'):8.3f}")


if __name__ == "__main__":
    main()
