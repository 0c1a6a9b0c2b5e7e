"""What Session(checked=True) costs: the checked kernel against the same kernel unchecked, per backend.

    python bench/bench_checked.py [--backends cpu,vulkan,cuda] [--n 4194304] [--repeat 20]

Peer: the unchecked dispatch of the same kernel in the same run, on the same device, with the same
device-resident buffers (Vulkan: backend.buffer(); CUDA: CuPy arrays; CPU: shared arrays), waited for.
Two kernels: a 3-point stencil (memory bound, three checked reads and one checked write per thread)
and an 8-tap gather through an index buffer (indirect reads, each one checked). On Vulkan the checked
variant is the instrumented cell (backends/vulkan/bounds_slang.py) plus its report buffer's round trip; on
CUDA the prelude's bound-check hooks; the CPU checks every dispatch anyway (checked=True only turns
its warning into an error), so its ratio is the noise floor. Prints ms and checked/unchecked.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import slang_kernel as sk  # noqa: E402
from _timing import median_ms  # noqa: E402

KERNELS = """
[shader("compute")][numthreads(256, 1, 1)]
void stencil(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
             uniform StructuredBuffer<float> a, uniform uint n)
{
    uint i = t.x;
    if (i == 0 || i + 1 >= n) return;
    o[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
}

[shader("compute")][numthreads(256, 1, 1)]
void gather8(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o,
             uniform StructuredBuffer<float> a, uniform StructuredBuffer<uint> idx, uniform uint n)
{
    uint i = t.x;
    if (i >= n) return;
    float s = 0;
    for (uint k = 0; k < 8; k++) s += a[idx[(i * 8 + k) % n]];
    o[i] = s;
}
"""


def device_arrays(s: sk.Session, arrays: dict[str, np.ndarray]) -> tuple[dict[str, Any], Callable[[], None]]:
    """The arrays as the backend's device-resident buffers, and how to wait for the device."""
    name = s.backend.name
    if name == "cuda":
        import cupy

        return {k: cupy.asarray(v) for k, v in arrays.items()}, lambda: cupy.cuda.get_current_stream().synchronize()
    if name == "vulkan":
        b: Any = s.backend
        return {k: b.buffer(v) for k, v in arrays.items()}, lambda: None   # dispatches are waited for
    b = s.backend
    return {k: b.shared(v) for k, v in arrays.items()}, lambda: None


def run(backend: str, n: int, repeat: int, cache_dir: str | None) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(1)
    host = {"o": np.zeros(n, np.float32), "a": rng.standard_normal(n).astype(np.float32),
            "idx": rng.integers(0, n, n).astype(np.uint32)}
    out = []
    sessions = [sk.Session(backend=backend, cache_dir=cache_dir, checked=c) for c in (False, True)]
    try:
        for s in sessions:
            s.run_cell(KERNELS, name="bench_checked")
        for kernel, params in (("stencil", ("o", "a")), ("gather8", ("o", "a", "idx"))):
            ms = []
            for s in sessions:
                dev, sync = device_arrays(s, {p: host[p] for p in params})
                k = s.kernel(kernel)

                def call(k: Any = k, dev: dict[str, Any] = dev, sync: Callable[[], None] = sync) -> None:
                    k(threads=n, n=n, **dev)
                    sync()
                ms.append(median_ms(call, repeat))
            out.append((kernel, ms[0], ms[1]))
    finally:
        for s in sessions:
            s.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="cpu,vulkan,cuda")
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()
    print(f"bench_checked: n={args.n}, median of {args.repeat}, {platform.node()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for backend in args.backends.split(","):
        try:
            rows = run(backend, args.n, args.repeat, args.cache_dir)
        except sk.BackendUnavailable as exc:
            print(f"{backend}: unavailable ({str(exc).splitlines()[0]})")
            continue
        with sk.Session(backend=backend, cache_dir=args.cache_dir) as s:
            device = s.backend.describe()
        for kernel, plain, checked in rows:
            print(f"{backend:6s} {kernel:8s} unchecked {plain:8.3f} ms  checked {checked:8.3f} ms  "
                  f"checked/unchecked {checked / plain:5.2f}x   ({device})")


if __name__ == "__main__":
    main()
