"""Host overhead of one ComputeKernel call (no GPU needed): the CPU backend in-process, a 1-thread
kernel, so nearly all of the time is Python. Rows: numpy's smallest ufunc call (the named peer),
the backend's own dispatch (the floor a call cannot go under), the full call; the call's overhead
above the dispatch is what kernels.py adds (groups, parameter check, currency check, finite hook).

Run: .venv/bin/python bench/bench_call_overhead.py [--n 20000]"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np

from slang_kernel import Session

SRC = '[shader("compute")] [numthreads(1, 1, 1)]\nvoid tiny(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> b) { b[0] = 1; }\n'


def per_call_us(fs: list[Callable[[], Any]], n: int, repeat: int = 9) -> list[float]:
    """Per function, the fastest of `repeat` loops of n calls, in µs per call. The loops of the
    functions alternate and the minimum is kept: on a shared machine, noise only adds time."""
    best = [float("inf")] * len(fs)
    for _ in range(repeat):
        for i, f in enumerate(fs):
            t = time.perf_counter()
            for _ in range(n):
                f()
            best[i] = min(best[i], (time.perf_counter() - t) / n * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    n = ap.parse_args().n
    s = Session("cpu", isolate=False)
    s.run_cell(SRC)
    k = s.kernel("tiny")
    b = np.zeros(1, np.float32)
    k(threads=1, b=b)
    ck, backend, g = k.compiled(), s.backend, (1, 1, 1)
    a = np.zeros(1, np.float32)
    peer, floor, call = per_call_us([lambda: np.add(a, a, out=a), lambda: backend.dispatch(ck, g, {"b": b}),
                                     lambda: k(threads=1, b=b)], n)
    print(f"numpy np.add(a, a, out=a), 1 float (peer): {peer:7.2f} µs")
    print(f"backend.dispatch (cpu, in-process):        {floor:7.2f} µs  {floor / peer:5.2f}x peer")
    print(f"k(threads=1, b=b):                         {call:7.2f} µs  {call / peer:5.2f}x peer")
    print(f"call overhead above the dispatch:          {call - floor:7.2f} µs  {(call - floor) / peer:5.2f}x peer;"
          f" call/dispatch {call / floor:.2f}x")
    s.close()


if __name__ == "__main__":
    main()
