"""Slang over Dask: a CPU-bound SlangFunction over 2^24 floats on 1 vs 2 worker processes, and the
overhead per task against calling the function in-process.

Peers, measured in the same run: the same function in this process (Session(threads=1) for one
core, threads=2 for two), and for the per-task overhead, one in-process call of the same tiny size.
The input is made on the workers (da.linspace) and the result reduced there (.sum()), as a dataset
job would; the in-process runs are given a numpy array and reduce with numpy.

    .venv/bin/python bench/bench_dask.py [--log2n 24] [--repeat 3] [--backend cpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from typing import Any, Callable

import numpy as np

import slang_kernel as sk

try:
    import dask.array as da
    from distributed import Client, LocalCluster

    from slang_kernel import distributed as skd
except ImportError as exc:
    raise SystemExit(f"{exc}: pip install 'slang-kernel[dask]'") from None

SOURCE = """
float busy(float x)
{
    float acc = x;
    for (int i = 0; i < 8; i++)
        acc = sin(acc) * 0.75 + cos(acc * 1.5) * 0.25 + x;
    return acc;
}
"""


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    fn()   # warm: builds, session starts on the workers
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--chunks", type=int, default=8, help="blocks of the big array")
    ap.add_argument("--tiny-tasks", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cpu", help="the workers' backend (cuda: see local_cuda_cluster)")
    args = ap.parse_args()
    n = 1 << args.log2n
    cache = os.environ.get("SLANG_KERNEL_CACHE_DIR") or tempfile.mkdtemp(prefix="sk-bench-dask-")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; load average "
          f"{os.getloadavg()[0]:.1f} at start")
    x_np = np.linspace(0, 1, n, dtype=np.float32)
    rows = []

    local: dict[int, float] = {}
    for threads in (1, 2):
        with sk.Session(backend=args.backend, cache_dir=cache, threads=threads) as s:
            s.run_cell(SOURCE, name="busy")
            f = s.function("busy")
            local[threads] = median_time(lambda: float(f(x_np).sum()), args.repeat)
            if threads == 1:
                tiny_np = x_np[:16]
                tiny_local = median_time(lambda: [f(tiny_np) for _ in range(args.tiny_tasks)], args.repeat) \
                    / args.tiny_tasks
                expected = float(f(x_np).sum(dtype=np.float64))
    print(f"in-process, 2^{args.log2n} floats: 1 thread {local[1]:.3f} s, 2 threads {local[2]:.3f} s "
          f"({local[1] / local[2]:.2f}x)")

    remote: dict[int, float] = {}
    tiny_remote = 0.0
    with sk.Session(backend="cpu", cache_dir=cache, threads=1) as s:
        s.run_cell(SOURCE, name="busy")
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                              dashboard_address=":0") as cluster, Client(cluster):
                f_d = skd.function(s, "busy", backend=args.backend, threads=1)
                x = da.linspace(0, 1, n, chunks=n // args.chunks, dtype=np.float32)
                got = float(f_d(x).sum(dtype=np.float64).compute())
                assert abs(got - expected) <= 1e-6 * abs(expected), (got, expected)
                remote[workers] = median_time(lambda: float(f_d(x).sum().compute()), args.repeat)
                print(f"dask, {workers} worker(s) x 1 thread, {args.chunks} blocks: {remote[workers]:.3f} s")
                if workers == 2:
                    tiny = da.linspace(0, 1, 16 * args.tiny_tasks, chunks=16, dtype=np.float32)
                    tiny_remote = median_time(lambda: f_d(tiny).sum().compute(), args.repeat) / args.tiny_tasks
    rows.append(("2^%d floats, 1 worker vs in-process 1 thread" % args.log2n, remote[1], local[1]))
    rows.append(("2^%d floats, 2 workers vs in-process 1 thread" % args.log2n, remote[2], local[1]))
    rows.append(("2^%d floats, 2 workers vs 1 worker (scaling)" % args.log2n, remote[2], remote[1]))
    rows.append(("2^%d floats, 2 workers vs in-process 2 threads" % args.log2n, remote[2], local[2]))
    rows.append((f"per task, 16 floats ({args.tiny_tasks} tasks on 2 workers) vs one in-process call",
                 tiny_remote, tiny_local))
    print()
    print("| benchmark | ours (dask) | peer | peer / ours |")
    print("|---|---|---|---|")
    for what, ours, peer in rows:
        unit = (lambda t: f"{t * 1e3:.2f} ms") if ours < 1 else (lambda t: f"{t:.3f} s")
        print(f"| {what} | {unit(ours)} | {unit(peer)} | {peer / ours:.2f}x |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
