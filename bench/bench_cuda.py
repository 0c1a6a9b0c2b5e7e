"""CUDA benchmarks on one GPU, each against a named peer in the same run (H200 machine).

    python3 bench/bench_cuda.py

1. saxpy over 2^28 floats (Slang, our launch)  vs the same kernel hand-written in CUDA (cupy.RawKernel)
                                               and vs a device-to-device copy (bandwidth ceiling)
2. host overhead per launch, tiny kernel        vs cupy.RawKernel
3. compute-bound kernel (polynomial/trig loop)  vs CuPy ElementwiseKernel with the same arithmetic
Bandwidth = bytes moved / median kernel time (CUDA events). Prints ratios.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Callable

import cupy as cp
import numpy as np

import slang_kernel as sk

SAXPY_SLANG = """
[shader("compute")][numthreads(256, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform float a, uniform uint n)
{
    uint i = tid.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
[shader("compute")][numthreads(32, 1, 1)]
void tiny(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform float a)
{
    if (tid.x == 0) y[0] += a;
}
[shader("compute")][numthreads(256, 1, 1)]
void heavy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform uint n)
{
    uint i = tid.x;
    if (i >= n) return;
    float v = x[i], acc = 0;
    for (int k = 0; k < 64; k++) { acc = acc * 0.999f + sin(v * k) * cos(v + k); }
    y[i] = acc;
}
"""
SAXPY_CUDA = r"""
extern "C" __global__ void saxpy_cuda(float* y, const float* x, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void tiny_cuda(float* y, float a) { if (threadIdx.x == 0 && blockIdx.x == 0) y[0] += a; }
"""
HEAVY_CUPY = cp.ElementwiseKernel(
    "float32 v", "float32 y",
    "float acc = 0; for (int k = 0; k < 64; k++) { acc = acc * 0.999f + sinf(v * k) * cosf(v + k); } y = acc;",
    "heavy_cupy")


def gpu_ms(fn: Callable[[], object], repeat: int = 20) -> float:
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def host_us(fn: Callable[[], object], n: int = 2000) -> float:
    for _ in range(100):
        fn()
    cp.cuda.Device().synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
        cp.cuda.Device().synchronize()
    return statistics.median(runs)


def main() -> None:
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(f"# device: {props['name'].decode()}, CuPy {cp.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        s = sk.Session(backend="cuda", cache_dir=tmp)
        print(f"# session: {s!r}")
        s.run_cell(SAXPY_SLANG, name="bench")
        raw = cp.RawModule(code=SAXPY_CUDA)
        saxpy_cuda, tiny_cuda = raw.get_function("saxpy_cuda"), raw.get_function("tiny_cuda")
        n = 1 << 28
        x = cp.random.random(n, dtype=cp.float32)
        y = cp.random.random(n, dtype=cp.float32)
        y0 = y.copy()
        k = s.kernel("saxpy")
        k(threads=n, y=y, x=x, a=2.0, n=n)
        cp.testing.assert_allclose(y, 2.0 * x + y0, rtol=1e-6)
        nbytes = 3 * 4 * n
        ours = gpu_ms(lambda: k(threads=n, y=y, x=x, a=2.0, n=n))
        hand = gpu_ms(lambda: saxpy_cuda(((n + 255) // 256,), (256,), (y, x, np.float32(2.0), np.uint32(n))))
        dst = cp.empty_like(x)
        copy = gpu_ms(lambda: dst.__setitem__(Ellipsis, x))
        gbs = lambda ms, b: b / ms / 1e6  # noqa: E731
        print(f"\n{'benchmark':44} {'ours':>12} {'peer':>12} {'ratio':>8}  peer")
        print(f"{'saxpy 2^28 floats, GB/s':44} {gbs(ours, nbytes):12.0f} {gbs(hand, nbytes):12.0f} "
              f"{hand / ours:8.3f}  hand-written CUDA via cupy.RawKernel")
        print(f"{'saxpy vs device-to-device copy, GB/s':44} {gbs(ours, nbytes):12.0f} {gbs(copy, 2 * 4 * n):12.0f} "
              f"{gbs(ours, nbytes) / gbs(copy, 2 * 4 * n):8.3f}  cupy d2d copy")
        t = cp.zeros(1, cp.float32)
        kt = s.kernel("tiny")
        ours_us = host_us(lambda: kt(threads=32, y=t, a=1.0))
        raw_us = host_us(lambda: tiny_cuda((1,), (32,), (t, np.float32(1.0))))
        print(f"{'host overhead per launch, us':44} {ours_us:12.2f} {raw_us:12.2f} {ours_us / raw_us:8.2f}x cupy.RawKernel")
        # what bounds it: the same launch one layer down (the backend's dispatch, no ComputeKernel), and
        # the floor of the launch API we use (cupy.cuda.driver.launchKernel of a prepared argument block)
        build = kt.compiled()
        groups = kt.checked_groups(build, 32, None, {"y": t, "a": 1.0})
        values = {"y": t, "a": 1.0}
        dispatch_us = host_us(lambda: s.backend.dispatch(build, groups, values))
        plan = s.backend.plan(build)
        launch, stream = cp.cuda.driver.launchKernel, cp.cuda.get_current_stream()
        floor_us = host_us(lambda: launch(plan.fn_ptr, 1, 1, 1, 32, 1, 1, 0, stream.ptr, plan.params_ptr, 0))
        print(f"{'  of it: backend.dispatch alone, us':44} {dispatch_us:12.2f} {raw_us:12.2f} {dispatch_us / raw_us:8.2f}x cupy.RawKernel")
        print(f"{'  of it: driver.launchKernel alone, us':44} {floor_us:12.2f} {raw_us:12.2f} {floor_us / raw_us:8.2f}x cupy.RawKernel")
        # a training step's way: 100 launches per call, bound once (slang_kernel.steps.Step: a CUDA graph,
        # else cached argument blocks), against the same 100 launches through cupy.RawKernel
        from slang_kernel.steps import Step

        reps = 100
        step = Step([(kt, dict(threads=32, y=t, a=1.0))])
        step_us = host_us(lambda: step(reps), n=200) / reps

        def raw_batch() -> None:
            for _ in range(reps):
                tiny_cuda((1,), (32,), (t, np.float32(1.0)))
        raw_batch_us = host_us(raw_batch, n=200) / reps
        print(f"{'host time per launch, 100 per call, us':44} {step_us:12.2f} {raw_batch_us:12.2f} "
              f"{step_us / raw_batch_us:8.2f}x cupy.RawKernel ({step.mode})")
        m = 1 << 24
        xv = cp.random.random(m, dtype=cp.float32)
        yo, yc = cp.zeros(m, cp.float32), cp.zeros(m, cp.float32)
        kh = s.kernel("heavy")
        ours = gpu_ms(lambda: kh(threads=m, y=yo, x=xv, n=m))
        theirs = gpu_ms(lambda: HEAVY_CUPY(xv, yc))
        cp.testing.assert_allclose(yo, yc, rtol=1e-3, atol=1e-3)
        print(f"{'compute-bound 2^24 x 64 sin/cos, ms':44} {ours:12.3f} {theirs:12.3f} {theirs / ours:8.3f}  CuPy ElementwiseKernel")
        s.close()


if __name__ == "__main__":
    main()
