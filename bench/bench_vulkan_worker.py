"""What the Vulkan worker process costs: the same dispatches in-process (isolate=False) and in the worker.

    python bench/bench_vulkan_worker.py [--repeat N]

Peers, measured in the same run: our in-process Vulkan backend, and slangpy's functional API
(`Module.load_from_source` + `m.add(tensors, _result=tensor)`) on that in-process device. Both sides
wait for the device every call (the worker always does: a crash or hang must be its dispatch's own).
Prints microseconds per call and ratios (worker / peer).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout's slang_kernel
sys.path.insert(0, str(Path(__file__).resolve().parent))       # bench/'s _timing and bench_vulkan

import slang_kernel as sk  # noqa: E402
from _timing import median_ms  # noqa: E402
from bench_vulkan import TINY as TINY_ADD, TINY_FN  # noqa: E402

TINY = TINY_ADD + """
[shader("compute")][numthreads(256, 1, 1)]
void saxpy_k(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
             uniform float a, uniform uint n) {
    if (tid.x < n) y[tid.x] = a * x[tid.x] + y[tid.x];
}
"""
N_SAXPY = 1 << 22


def bench(fn: Callable[[], Any], repeat: int, warm: int = 3) -> float:
    """Median microseconds per call."""
    return median_ms(fn, repeat, warm) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    import slangpy as spy

    inproc = sk.Session(backend="vulkan", isolate=False)
    worker = sk.Session(backend="vulkan")
    dev = inproc.backend.device  # type: ignore[attr-defined]
    print(f"device: {worker.backend.describe()}; slangpy {spy.__version__}")
    for s in (inproc, worker):
        s.run_cell(TINY, name="tiny")
    a = np.arange(16, dtype=np.float32)
    b = np.ones(16, np.float32)
    c = np.zeros(16, np.float32)
    rows: list[tuple[str, float, float, float | None]] = []   # (case, in-process us, worker us, slangpy us)

    def wait_in() -> None:
        dev.wait_for_idle()

    # tiny kernel, numpy in and out
    k_in, k_wk = inproc.kernel("add_k"), worker.kernel("add_k")
    us_in = bench(lambda: k_in(threads=16, a=a, b=b, c=c, n=16), args.repeat)
    us_wk = bench(lambda: k_wk(threads=16, a=a, b=b, c=c, n=16), args.repeat)
    assert np.allclose(c, a + b)
    m = spy.Module.load_from_source(dev, "bench_add_w", TINY_FN)
    us_spy = bench(lambda: m.add(a, b, _result="numpy"), args.repeat)
    rows.append(("tiny kernel (16 floats), numpy in/out", us_in, us_wk, us_spy))

    # tiny kernel, device buffers
    bi = [inproc.backend.buffer(x) for x in (a, b, c)]  # type: ignore[attr-defined]
    bw = [worker.backend.buffer(x) for x in (a, b, c)]  # type: ignore[attr-defined]
    us_in = bench(lambda: (k_in(threads=16, a=bi[0], b=bi[1], c=bi[2], n=16), wait_in()), args.repeat)
    us_wk = bench(lambda: k_wk(threads=16, a=bw[0], b=bw[1], c=bw[2], n=16), args.repeat)
    assert np.allclose(bw[2].numpy(), a + b)
    ta, tb = spy.Tensor.from_numpy(dev, a), spy.Tensor.from_numpy(dev, b)
    tc = spy.Tensor.empty(dev, shape=(16,), dtype="float")
    us_spy = bench(lambda: (m.add(ta, tb, _result=tc), wait_in()), args.repeat)
    rows.append(("tiny kernel, device buffers (waited)", us_in, us_wk, us_spy))

    # saxpy over 2^22 floats, numpy in and out
    x = np.random.default_rng(0).random(N_SAXPY, dtype=np.float32)
    y = np.ones(N_SAXPY, np.float32)
    s_in, s_wk = inproc.kernel("saxpy_k"), worker.kernel("saxpy_k")
    reps = max(5, args.repeat // 20)
    us_in = bench(lambda: s_in(threads=N_SAXPY, y=y, x=x, a=0.5, n=N_SAXPY), reps, warm=2)
    us_wk = bench(lambda: s_wk(threads=N_SAXPY, y=y, x=x, a=0.5, n=N_SAXPY), reps, warm=2)
    rows.append(("saxpy 2^22 floats, numpy in/out", us_in, us_wk, None))
    ys, xs = worker.backend.shared(y), worker.backend.shared(x)  # type: ignore[attr-defined]
    us_sh = bench(lambda: s_wk(threads=N_SAXPY, y=ys, x=xs, a=0.5, n=N_SAXPY), reps, warm=2)
    rows.append(("saxpy 2^22 floats, backend.shared arrays (worker)", us_in, us_sh, None))
    check = np.ones(N_SAXPY, np.float32)
    s_wk(threads=N_SAXPY, y=check, x=x, a=0.5, n=N_SAXPY)
    assert np.allclose(check, 0.5 * x + 1)

    print(f"{'case':52s} {'in-process':>11s} {'worker':>11s} {'worker/in':>9s} {'slangpy':>9s} {'worker/spy':>10s}")
    for case, i, w, p in rows:
        extra = f" {p:8.0f}us {w / p:9.2f}x" if p else ""
        print(f"{case:52s} {i:9.0f}us {w:9.0f}us {w / i:8.2f}x{extra}")
    worker.close()
    inproc.close()


if __name__ == "__main__":
    main()
