"""CPU backend vs numpy and numba on the three cases of issue 16, 1 thread and all threads.

    .venv/bin/python bench/bench_cpu_simd.py [--repeat N]     (numba: pip install -e '.[bench]')

Cases (the same arithmetic on every side):
  arith  o = sqrt(v*v+1)*exp(-v)+sin(v) on 2^22 floats            (8 ops/element, a call counted as 1)
  chain  a fused 32-step polynomial chain + sin on 2^22 floats    (7*32 = 224 flops/element + sin)
  mandel Mandelbrot 1024x768, 256 iterations                      (~10 flops per iteration done)

Sides:
  ours      the CPU backend (Session(backend="cpu"), isolated worker; `k.path` printed: the vector
            path "simd (...)" where g++ vectorised the kernel's lane loop, else "scalar: why")
  lanes     a hand-written C++ lane loop of the same kernel, built the way a vectorised CPU path would
            build it (body inlined into a loop over a slice's thread ids, -O3 -march=native
            -mprefer-vector-width=256 -fno-math-errno, glibc libmvec declared through GCC's simd
            attribute, no -ffast-math, no bounds checks): an upper bound for what issue 16's path can
            reach with GCC on this machine, not the backend
  numpy     one thread
  numba     @njit(parallel=True, fastmath=True) with prange (skipped with a reason when absent)
GFLOP/s next to a nominal FP32 peak: cores x MHz x vector lanes x 2 (FMA) x 2 (FMA pipes).
Medians over --repeat runs. --ulp also measures the max ULP error of sin/cos/exp/log/pow as the
backend's kernels compute them (float32) against float64 numpy on 2^22 inputs each.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

import slang_kernel as sk
from _kernels import ARITH, MANDEL  # noqa: E402   (bench/: the kernels bench_engine times too)

N = 1 << 22
W, H, ITERS = 1024, 768, 256
STEPS = 32

CHAIN = """
[shader("compute")][numthreads(256, 1, 1)]
void chain(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x,
           uniform uint n)
{
    if (t.x >= n) return;
    float v = x[t.x], y = v;
    [unroll] for (int k = 0; k < 32; k++) { y = y * 0.9 + v * 0.1; y = y - 0.05 * y * y * y; }
    o[t.x] = sin(y);
}"""

LANES_CPP = r"""
#include <math.h>
#include <stdint.h>
extern "C" {
__attribute__((simd("notinbranch"))) float sinf(float) noexcept;
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
}
#define HINT_NO_WRAP(g, per) if ((g) > (UINT32_MAX / (per)) - 1) __builtin_unreachable()

extern "C" void arith(uint32_t g0, uint32_t g1, float* o, const float* x, uint32_t n) {
    for (uint32_t g = g0; g < g1; ++g) {
        HINT_NO_WRAP(g, 256);
#pragma GCC ivdep
        for (uint32_t l = 0; l < 256; ++l) {
            uint32_t i = g * 256u + l;
            if (i < n) { float v = x[i]; o[i] = sqrtf(v * v + 1.0f) * expf(-v) + sinf(v); }
        }
    }
}
extern "C" void chain(uint32_t g0, uint32_t g1, float* o, const float* x, uint32_t n) {
    for (uint32_t g = g0; g < g1; ++g) {
        HINT_NO_WRAP(g, 256);
#pragma GCC ivdep
        for (uint32_t l = 0; l < 256; ++l) {
            uint32_t i = g * 256u + l;
            if (i < n) {
                float v = x[i], y = v;
#pragma GCC unroll 32
                for (int k = 0; k < 32; k++) { y = y * 0.9f + v * 0.1f; y = y - 0.05f * y * y * y; }
                o[i] = sinf(y);
            }
        }
    }
}
// Masked lanes of 8 pixels: every lane iterates until all 8 are done (a vector path's masks).
extern "C" void mandel(uint32_t r0, uint32_t r1, uint32_t* it, uint32_t w, uint32_t h) {
    for (uint32_t y = r0; y < r1; ++y) {
        for (uint32_t x0 = 0; x0 < w; x0 += 8) {
            float cx[8], cy[8], zx[8] = {0}, zy[8] = {0};
            uint32_t cnt[8] = {0};
            for (int l = 0; l < 8; l++) { cx[l] = -2.0f + 2.5f * (float)(x0 + l) / (float)w; cy[l] = -1.25f + 2.5f * (float)y / (float)h; }
            for (int k = 0; k < 256; k++) {
                int any = 0;
#pragma GCC ivdep
                for (int l = 0; l < 8; l++) {
                    int live = zx[l] * zx[l] + zy[l] * zy[l] < 4.0f;
                    float nx = zx[l] * zx[l] - zy[l] * zy[l] + cx[l], ny = 2.0f * zx[l] * zy[l] + cy[l];
                    zx[l] = live ? nx : zx[l]; zy[l] = live ? ny : zy[l];
                    cnt[l] += live; any |= live;
                }
                if (!any) break;
            }
            for (int l = 0; l < 8 && x0 + l < w; l++) it[y * w + x0 + l] = cnt[l];
        }
    }
}
"""


def _ulp_kernel(fn: str, params: str, call: str) -> str:
    """One kernel per math function of the ULP table: `o[i] = fn(args)`, one thread an element."""
    return (f'[shader("compute")][numthreads(256, 1, 1)]\n'
            f"void ulp_{fn}(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, {params})\n"
            f"{{ o[t.x] = {fn}({call}); }}\n")


_ULP_X = "uniform StructuredBuffer<float> x"
ULP_CELL = "".join([*(_ulp_kernel(fn, _ULP_X, "x[t.x]") for fn in ("sin", "cos", "exp", "log")),
                    _ulp_kernel("pow", _ULP_X + ", uniform StructuredBuffer<float> y", "x[t.x], y[t.x]")])


def ulp_table(fast_math: bool) -> None:
    """Max ULP of each math function on the backend's path (vector: libmvec) vs float64."""
    rng = np.random.default_rng(1)
    n = N
    inputs = {
        "sin": (rng.uniform(-1000, 1000, n), None, np.sin),
        "cos": (rng.uniform(-1000, 1000, n), None, np.cos),
        "exp": (rng.uniform(-87, 88, n), None, np.exp),
        "log": (np.exp(rng.uniform(-80, 80, n)), None, np.log),
        "pow": (rng.uniform(0.01, 10, n), rng.uniform(-30, 30, n), np.power),
    }
    with tempfile.TemporaryDirectory() as tmp, sk.Session(backend="cpu", cache=False, cache_dir=tmp,
                                                          fast_math=fast_math) as s:
        s.run_cell(ULP_CELL, name="ulp")
        for name, (x, y, ref_fn) in inputs.items():
            k = s.kernel(f"ulp_{name}")
            x32 = x.astype(np.float32)
            o = np.zeros(n, np.float32)
            args: dict[str, Any] = {"o": o, "x": x32}
            if y is not None:
                args["y"] = y.astype(np.float32)
            k(threads=n, **args)
            x64 = x32.astype(np.float64)
            ref = ref_fn(x64, args["y"].astype(np.float64)) if y is not None else ref_fn(x64)
            ok = np.isfinite(ref) & (np.abs(ref) < 3e38) & (np.abs(ref) > 1e-37)
            ulp = np.abs(o[ok].astype(np.float64) - ref[ok]) / np.spacing(np.abs(ref[ok]).astype(np.float32)).astype(np.float64)
            print(f"# ulp {name}: max {ulp.max():.2f} ULP, mean {ulp.mean():.3f} ({k.path}{', fast_math' if fast_math else ''})")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def cpu_peak() -> tuple[float, str]:
    flags, mhz = "", 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = line
            if line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":")[1])
    except OSError:
        pass
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    cores = os.cpu_count() or 1
    peak = cores * mhz * 1e-3 * lanes * 2 * 2
    return peak, f"{cores} cores x {mhz:.0f} MHz x {lanes} FP32 lanes x 2 (FMA) x 2 pipes"


def build_lanes(tmp: str) -> Any:
    src = Path(tmp) / "lanes.cpp"
    src.write_text(LANES_CPP)
    so = Path(tmp) / "lanes.so"
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-std=c++17", "-O3", "-march=native", "-mprefer-vector-width=256", "-fno-math-errno",
                    "-fno-trapping-math", "-fPIC", "-shared", str(src), "-o", str(so), "-lmvec"], check=True)
    lib = ctypes.CDLL(str(so))
    for f in (lib.arith, lib.chain, lib.mandel):
        f.restype = None
    return lib


def split(fn: Callable[[int, int], object], total: int, threads: int, pool: ThreadPoolExecutor) -> None:
    parts = max(1, threads * 8)  # like the backend: more slices than threads, taken in turn
    cuts = [total * k // parts for k in range(parts + 1)]
    if threads == 1:
        fn(0, total)
        return
    list(pool.map(lambda k: fn(cuts[k], cuts[k + 1]), range(parts)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--ulp", action="store_true", help="also measure the math functions' max ULP")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    peak, how = cpu_peak()
    load = os.getloadavg()
    print(f"# machine: {platform.processor() or platform.machine()}, {cores} cores, {platform.platform()}")
    print(f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"# nominal FP32 peak: {peak:.0f} GFLOP/s ({how})")
    try:
        import numba

        numba_why = ""
    except ImportError as exc:
        numba, numba_why = None, f"numba not installed ({exc}); pip install -e '.[bench]' to compare"
        print(f"# numba skipped: {numba_why}")

    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    o = np.zeros(N, np.float32)
    it = np.zeros((H, W), np.uint32)

    def np_arith() -> np.ndarray:
        return np.sqrt(x * x + np.float32(1)) * np.exp(-x) + np.sin(x)

    def np_chain() -> np.ndarray:
        y = x.copy()
        for _ in range(STEPS):
            y = y * np.float32(0.9) + x * np.float32(0.1)
            y = y - np.float32(0.05) * y * y * y
        return np.sin(y)

    results: list[tuple[str, str, float]] = []  # (case, side, ms)
    flops = {"arith": 8.0 * N, "chain": 7.0 * STEPS * N}

    with tempfile.TemporaryDirectory() as tmp:
        s = sk.Session(backend="cpu", cache=False, cache_dir=tmp)
        for src, name in ((ARITH, "arith"), (CHAIN, "chain"), (MANDEL, "mandel")):
            s.run_cell(src, name=name)
        ka, kc, km = s.kernel("arith"), s.kernel("chain"), s.kernel("mandel")
        for k in (ka, kc, km):
            print(f"# ours: {k.name} takes the path {k.path}")
        xs, os_, its = s.backend.shared(x), s.backend.zeros(N, np.float32), s.backend.zeros((H, W), np.uint32)
        lib = build_lanes(tmp)
        pool = ThreadPoolExecutor(cores)
        xp, op, ip = x.ctypes.data_as(ctypes.c_void_p), o.ctypes.data_as(ctypes.c_void_p), it.ctypes.data_as(ctypes.c_void_p)
        groups = N // 256

        # correctness of each side against numpy first
        ka(threads=N, o=os_, x=xs, n=N)
        ref = np_arith()
        assert np.allclose(os_, ref, atol=1e-4), "ours: arith"
        lib.arith(0, groups, op, xp, N)
        assert np.allclose(o, ref, atol=1e-4), "lanes: arith"
        kc(threads=N, o=os_, x=xs, n=N)
        ref = np_chain()
        assert np.allclose(os_, ref, atol=1e-3), "ours: chain"
        lib.chain(0, groups, op, xp, N)
        assert np.allclose(o, ref, atol=1e-3), "lanes: chain"
        km(threads=(W, H), it=its, w=W, h=H)
        lib.mandel(0, H, ip, W, H)
        mandel_iters = float(its.astype(np.int64).sum())
        flops["mandel"] = 10.0 * mandel_iters
        print(f"# mandel: lanes differ from ours on {int((it != its).sum())} of {W * H} pixels (float rounding)")

        for threads in (1, cores):
            tag = f"{threads}t"
            s.backend.workers = threads
            rep = args.repeat
            results.append(("arith", f"ours {tag}", median_ms(lambda: ka(threads=N, o=os_, x=xs, n=N), rep)))
            results.append(("chain", f"ours {tag}", median_ms(lambda: kc(threads=N, o=os_, x=xs, n=N), rep)))
            results.append(("mandel", f"ours {tag}", median_ms(lambda: km(threads=(W, H), it=its, w=W, h=H), rep)))
            results.append(("arith", f"lanes {tag}", median_ms(
                lambda: split(lambda a, b: lib.arith(a, b, op, xp, N), groups, threads, pool), rep)))
            results.append(("chain", f"lanes {tag}", median_ms(
                lambda: split(lambda a, b: lib.chain(a, b, op, xp, N), groups, threads, pool), rep)))
            results.append(("mandel", f"lanes {tag}", median_ms(
                lambda: split(lambda a, b: lib.mandel(a, b, ip, W, H), H, threads, pool), rep)))
        s.backend.workers = cores
        results.append(("arith", "numpy 1t", median_ms(np_arith, args.repeat)))
        results.append(("chain", "numpy 1t", median_ms(np_chain, max(3, args.repeat // 2))))
        if numba is not None:
            from numba import njit, prange

            @njit(parallel=True, fastmath=True, cache=False)
            def nb_arith(o: np.ndarray, x: np.ndarray) -> None:
                for i in prange(x.shape[0]):
                    v = x[i]
                    o[i] = np.sqrt(v * v + np.float32(1)) * np.exp(-v) + np.sin(v)

            @njit(parallel=True, fastmath=True, cache=False)
            def nb_chain(o: np.ndarray, x: np.ndarray) -> None:
                for i in prange(x.shape[0]):
                    v = x[i]
                    y = v
                    for _ in range(32):
                        y = y * np.float32(0.9) + v * np.float32(0.1)
                        y = y - np.float32(0.05) * y * y * y
                    o[i] = np.sin(y)

            @njit(parallel=True, fastmath=True, cache=False)
            def nb_mandel(it: np.ndarray, w: int, h: int) -> None:
                for py in prange(h):
                    for px in range(w):
                        cx = np.float32(-2.0) + np.float32(2.5) * np.float32(px) / np.float32(w)
                        cy = np.float32(-1.25) + np.float32(2.5) * np.float32(py) / np.float32(h)
                        zx = np.float32(0)
                        zy = np.float32(0)
                        i = 0
                        while i < 256 and zx * zx + zy * zy < np.float32(4):
                            zx, zy = zx * zx - zy * zy + cx, np.float32(2) * zx * zy + cy
                            i += 1
                        it[py, px] = i

            nb_arith(o, x)
            assert np.allclose(o, np_arith(), atol=1e-4), "numba: arith"
            for threads in (1, cores):
                numba.set_num_threads(threads)
                tag = f"{threads}t"
                results.append(("arith", f"numba {tag}", median_ms(lambda: nb_arith(o, x), args.repeat)))
                results.append(("chain", f"numba {tag}", median_ms(lambda: nb_chain(o, x), args.repeat)))
                results.append(("mandel", f"numba {tag}", median_ms(lambda: nb_mandel(it, W, H), args.repeat)))
        pool.shutdown()
        s.close()

    table = {(c, side): ms for c, side, ms in results}
    print(f"\n{'case':8} {'side':10} {'ms':>9} {'GFLOP/s':>8} {'% peak':>7}  {'vs numpy 1t':>11} {'vs numba (same threads)':>24}")
    for c, side, ms in results:
        gf = flops[c] / ms / 1e6
        vs_np = table.get((c, "numpy 1t"))
        th = side.split()[-1]
        vs_nb = table.get((c, f"numba {th}"))
        np_s = f"{vs_np / ms:10.2f}x" if vs_np else f"{'-':>11}"
        nb_s = f"{vs_nb / ms:23.2f}x" if vs_nb and not side.startswith("numba") else f"{'-':>24}"
        print(f"{c:8} {side:10} {ms:9.2f} {gf:8.2f} {100 * gf / peak if peak else 0:6.1f}%  {np_s} {nb_s}")
    if numba is None:
        print(f"# numba columns empty: {numba_why}")
    for c in ("arith", "chain", "mandel"):
        one, many = table.get((c, "ours 1t")), table.get((c, f"ours {cores}t"))
        if one and many:
            print(f"# scaling {c}: ours {one / many:.2f}x from 1 to {cores} threads")
    if args.ulp:
        ulp_table(False)
        ulp_table(True)


if __name__ == "__main__":
    main()
