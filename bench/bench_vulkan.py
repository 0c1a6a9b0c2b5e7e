"""Vulkan backend: per-dispatch overhead and a 1024x1024 shading kernel, against slangpy on the same device.

    python bench/bench_vulkan.py [--repeat N]

Peers, measured in the same run on the same sgl device (the session's):
  * slangpy's functional API: `Module.load_from_source(device, ...)` + `m.func(...)` (numpy in and out);
  * numpy for the shading image; the CPU backend for both kernels.
Prints milliseconds and ratios (ours / peer; < 1 means ours is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import slang_kernel as sk  # noqa: E402
from _timing import median_ms as bench  # noqa: E402


TINY = """
[shader("compute")][numthreads(64, 1, 1)]
void add_k(uint3 tid: SV_DispatchThreadID, uniform StructuredBuffer<float> a, uniform StructuredBuffer<float> b,
           uniform RWStructuredBuffer<float> c, uniform uint n) {
    if (tid.x < n) c[tid.x] = a[tid.x] + b[tid.x];
}
"""
TINY_FN = "float add(float a, float b) { return a + b; }"

SHADE_FN = """
float4 shade_px(int2 pix, float t) {
    float2 uv = (float2(pix) + 0.5) / 1024.0;
    float3 c = 0;
    for (int i = 0; i < 8; i++) {
        float2 p = uv * (3.0 + i) + float2(sin(t + i), cos(t * 0.7 + i));
        c += 0.5 + 0.5 * cos(float3(0, 2, 4) + p.x * 1.3 + p.y * 2.1 + i);
    }
    return float4(c / 8.0, 1.0);
}
"""
SHADE_K = SHADE_FN + """
[shader("compute")][numthreads(16, 16, 1)]
void shade_tex(uint3 tid: SV_DispatchThreadID, uniform RWTexture2D<float4> img, uniform float t) {
    if (tid.x < 1024 && tid.y < 1024) img[tid.xy] = shade_px(int2(tid.xy), t);
}
[shader("compute")][numthreads(16, 16, 1)]
void shade_buf(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float4> img, uniform float t) {
    if (tid.x < 1024 && tid.y < 1024) img[tid.y * 1024 + tid.x] = shade_px(int2(tid.xy), t);
}
"""


def shade_numpy(t: float) -> np.ndarray:
    yy, xx = np.mgrid[0:1024, 0:1024].astype(np.float32)
    u, v = (xx + 0.5) / 1024, (yy + 0.5) / 1024
    c = np.zeros((1024, 1024, 3), np.float32)
    for i in range(8):
        px = u * (3 + i) + np.sin(t + i)
        py = v * (3 + i) + np.cos(t * 0.7 + i)
        base = px * 1.3 + py * 2.1 + i
        c += 0.5 + 0.5 * np.cos(np.array([0, 2, 4], np.float32) + base[..., None])
    return np.concatenate([c / 8, np.ones((1024, 1024, 1), np.float32)], -1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    import slangpy as spy

    s = sk.Session(backend="vulkan", isolate=False)   # reads the sgl device (s.backend.device) directly
    cpu = sk.Session(backend="cpu")
    dev = s.backend.device
    print(f"device: {s.backend.describe()}; cpu backend: {cpu.backend.describe()}; slangpy {spy.__version__}")
    rows: list[tuple[str, float, str, float]] = []

    # -- tiny kernel: 16 floats, numpy in and out ----------------------------------------------------
    for sess in (s, cpu):
        sess.run_cell(TINY, name="tiny")
        sess.run_cell(SHADE_K, name="shade")
    a = np.arange(16, dtype=np.float32)
    b = np.ones(16, np.float32)
    c = np.zeros(16, np.float32)
    k = s.kernel("add_k")
    t0 = time.perf_counter()
    m = spy.Module.load_from_source(dev, "bench_add", TINY_FN)
    first_spy = time.perf_counter() - t0
    r = m.add(a, b, _result="numpy")
    k(threads=16, a=a, b=b, c=c, n=16)
    assert np.allclose(r, a + b) and np.allclose(c, a + b)
    ours = bench(lambda: k(threads=16, a=a, b=b, c=c, n=16), args.repeat * 4)
    peer = bench(lambda: m.add(a, b, _result="numpy"), args.repeat * 4)
    rows.append(("tiny kernel, numpy in/out (ours)", ours, "slangpy m.add(a, b, _result='numpy')", peer))
    da, db, dc = s.backend.buffer(a), s.backend.buffer(b), s.backend.buffer(c)
    ours_dev = bench(lambda: (k(threads=16, a=da, b=db, c=dc, n=16), dev.wait_for_idle()), args.repeat * 4)
    ta = spy.Tensor.from_numpy(dev, a)
    tb = spy.Tensor.from_numpy(dev, b)
    tc = spy.Tensor.empty(dev, shape=(16,), dtype="float")
    peer_dev = bench(lambda: (m.add(ta, tb, _result=tc), dev.wait_for_idle()), args.repeat * 4)
    rows.append(("tiny kernel, device buffers (ours)", ours_dev, "slangpy m.add(tensors, _result=tensor)", peer_dev))
    # a training step's way: the same launch 100 times per call, bound once (slang_kernel.steps.Step:
    # one command buffer) against slangpy's append_to into one command encoder, one submit
    from slang_kernel.steps import Step

    reps = 100
    step = Step([(k, dict(threads=16, a=da, b=db, c=dc, n=16))])
    ours_step = bench(lambda: (step(reps), dev.wait_for_idle()), args.repeat) / reps

    def spy_batch() -> None:
        enc = dev.create_command_encoder()
        for _ in range(reps):
            m.add.append_to(enc, ta, tb, _result=tc)
        dev.submit_command_buffer(enc.finish())
        dev.wait_for_idle()
    peer_step = bench(spy_batch, args.repeat) / reps
    rows.append((f"tiny kernel, device buffers, {reps} per call: replayed Step, per launch", ours_step,
                 f"slangpy m.add.append_to(encoder) x{reps}, one submit", peer_step))
    kc = cpu.kernel("add_k")
    ours_cpu = bench(lambda: kc(threads=16, a=a, b=b, c=c, n=16), args.repeat * 4)
    rows.append(("tiny kernel, vulkan backend", ours, "cpu backend (g++)", ours_cpu))

    # -- 1024x1024 procedural shading ------------------------------------------------------------------
    img = np.zeros((1024, 1024, 4), np.float32)
    kt = s.kernel("shade_tex")
    kt(threads=(1024, 1024), img=img, t=0.5)
    want = shade_numpy(0.5)
    err = float(np.abs(img - want).max())
    ms_tex = bench(lambda: kt(threads=(1024, 1024), img=img, t=0.5), args.repeat // 5 or 3, warm=1)
    buf = np.zeros((1024 * 1024, 4), np.float32)
    kb = s.kernel("shade_buf")
    ms_buf = bench(lambda: kb(threads=(1024, 1024), img=buf, t=0.5), args.repeat // 5 or 3, warm=1)
    dbuf = s.backend.buffer((1024 * 1024, 4), np.float32)
    ms_buf_dev = bench(lambda: (kb(threads=(1024, 1024), img=dbuf, t=0.5), dev.wait_for_idle()),
                       args.repeat // 5 or 3, warm=1)
    tout = spy.Tensor.empty(dev, shape=(1024, 1024), dtype="float4")
    m2 = spy.Module.load_from_source(dev, "bench_shade", SHADE_FN)
    r2 = m2.shade_px(spy.grid((1024, 1024)), 0.5, _result="numpy")
    r2 = np.asarray(r2).reshape(1024, 1024, 4)
    err_spy = min(float(np.abs(r2 - want).max()), float(np.abs(r2 - want.transpose(1, 0, 2)).max()))
    ms_spy = bench(lambda: m2.shade_px(spy.grid((1024, 1024)), 0.5, _result="numpy"), args.repeat // 5 or 3, warm=1)
    ms_spy_dev = bench(lambda: (m2.shade_px(spy.grid((1024, 1024)), 0.5, _result=tout), dev.wait_for_idle()),
                       args.repeat // 5 or 3, warm=1)
    ms_np = bench(lambda: shade_numpy(0.5), 3, warm=1)
    kcs = cpu.kernel("shade_buf")
    cbuf = np.zeros((1024 * 1024, 4), np.float32)
    ms_cpu = bench(lambda: kcs(threads=(1024, 1024), img=cbuf, t=0.5), 5, warm=1)
    rows.append(("shade 1024^2 -> RWTexture2D<float4> -> numpy", ms_tex, "slangpy m.shade_px(grid, _result='numpy')", ms_spy))
    rows.append(("shade 1024^2 -> RWStructuredBuffer<float4> -> numpy", ms_buf, "slangpy m.shade_px(grid, _result='numpy')", ms_spy))
    rows.append(("shade 1024^2 -> device buffer (no readback)", ms_buf_dev, "slangpy m.shade_px(grid, _result=tensor)", ms_spy_dev))
    rows.append(("shade 1024^2 -> RWTexture2D<float4> -> numpy", ms_tex, "numpy (vectorised)", ms_np))
    rows.append(("shade 1024^2, vulkan backend (buffer)", ms_buf, "cpu backend (buffer)", ms_cpu))

    # -- edit -> dispatch latency ----------------------------------------------------------------------
    src = TINY.replace("a[tid.x] + b[tid.x]", "a[tid.x] + b[tid.x] + %d.0")
    ts = []
    for i in range(20):
        t0 = time.perf_counter()
        s.run_cell(src % i, name="tiny")
        k(threads=16, a=a, b=b, c=c, n=16)
        ts.append((time.perf_counter() - t0) * 1e3)
    assert np.allclose(c, a + b + 19)

    print(f"shade max |ours - numpy| = {err:.2e}; |slangpy - numpy| = {err_spy:.2e}")
    print(f"slangpy Module.load_from_source first call: {first_spy * 1e3:.0f} ms")
    print(f"edit cell + dispatch (run_cell + kernel call), median of 20 edits: {statistics.median(ts):.1f} ms")
    w = max(len(r[0]) for r in rows)
    for name, o, peer_name, p in rows:
        print(f"{name:<{w}}  {o:9.3f} ms   vs {peer_name}: {p:9.3f} ms   ratio {o / p:6.2f}")
    s.close()
    cpu.close()


if __name__ == "__main__":
    main()
