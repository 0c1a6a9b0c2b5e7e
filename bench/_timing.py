"""Timing helpers shared by the benches (one place, so every bench measures a call the same way)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

__all__ = ["median_ms", "rate"]


def median_ms(fn: Callable[[], object], repeat: int, warm: int = 3) -> float:
    """Median wall time of one call of `fn`, in ms, over `repeat` calls after `warm` untimed ones.
    `fn` waits for its own work where the device runs asynchronously."""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def rate(run: Callable[[int], object], sync: Callable[[], object], warm: int, iters: int, chunk: int = 10) -> float:
    """Iterations per second of `run(k)` (k iterations per call, `chunk` at a time) over `iters`
    timed iterations after `warm` untimed ones; `sync` waits for the device before and after."""
    run(warm)
    sync()
    t0 = time.perf_counter()
    for _ in range(iters // chunk):
        run(chunk)
    if iters % chunk:
        run(iters % chunk)
    sync()
    return iters / (time.perf_counter() - t0)
