"""The cost of WebGPU's clamped indices for Playground programs (slang_kernel.playground.robust).

Peer: the same demo, the same frames, built without the clamps (`PlaygroundProgram(webgpu_bounds=False)`),
in the same run. gsplat2d-diff is measured (its tile list overflows too, but only into other groupshared
arrays, so it runs either way); gsplat2d without the clamps writes past its groupshared memory (lavapipe's
heap is corrupted, CUDA raises an illegal address), so only its clamped frame time is printed.

    python bench/bench_playground_robust.py [--backend vulkan|cuda|cpu] [--frames N] [--size WxH]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import slang_kernel as sk
from slang_kernel.playground import PlaygroundProgram

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "playground"


def frames(s: sk.Session, demo: str, bounds: bool, n: int, size: tuple[int, int]) -> float:
    name = f"{demo.replace('-', '_')}_{int(bounds)}"
    s.run_cell((DATA / "demos" / f"{demo}.slang").read_text(), name=name)
    try:
        p = PlaygroundProgram(s, name, screen=size, base_dir=DATA, webgpu_bounds=bounds)
        p.frame()
        p.read("outputTexture")   # the first frame built the kernels; wait for it
        times = []
        for f in range(n):
            t0 = time.perf_counter()
            p.frame()
            p.read("outputTexture")
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1000.0
    finally:
        s.remove_cell(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--size", default="512x512")
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    with sk.Session(backend=a.backend) as s:
        print(f"{a.backend}: {s.backend.describe()}, {a.size}, median of {a.frames} frames (read back included)")
        clamped = frames(s, "gsplat2d-diff", True, a.frames, size)   # type: ignore[arg-type]
        plain = frames(s, "gsplat2d-diff", False, a.frames, size)    # type: ignore[arg-type]
        print(f"gsplat2d-diff frame: clamped {clamped:.2f} ms, unclamped {plain:.2f} ms, "
              f"ratio {clamped / plain:.3f}x")
        g = frames(s, "gsplat2d", True, a.frames, size)   # type: ignore[arg-type]
        print(f"gsplat2d frame: clamped {g:.2f} ms (unclamped it is not safe to run)")


if __name__ == "__main__":
    main()
