"""One conformance suite, run on every backend (`--backends`): kernels checked against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slang_kernel as sk

rng = np.random.default_rng()
MANDEL = (Path(__file__).parent / "data" / "mandel.slang").read_text()


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_saxpy(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y,
           uniform StructuredBuffer<float> x, uniform float a, uniform uint n)
{
    if (tid.x < n) y[tid.x] = a * x[tid.x] + y[tid.x];
}""", name="t_saxpy")
    n = 1000
    x, y = f32(n), f32(n)
    expect = 2.5 * x + y
    session.kernel("saxpy")(threads=n, y=y, x=x, a=2.5, n=n)
    np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)  # GPUs may fuse a*x+y (FMA)


def test_vectors(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(32, 1, 1)]
void vec_ops(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float3> o,
             uniform StructuredBuffer<float3> a, uniform StructuredBuffer<float3> b, uniform float4 w)
{
    o[tid.x] = cross(a[tid.x], b[tid.x]) * w.x + a[tid.x] * w.w;
}""", name="t_vec")
    a, b = f32(64, 3), f32(64, 3)
    o = np.zeros((64, 3), np.float32)
    session.kernel("vec_ops")(threads=64, o=o, a=a, b=b, w=(2.0, 0.0, 0.0, -1.0))
    np.testing.assert_allclose(o, np.cross(a, b) * 2 - a, rtol=1e-5, atol=1e-5)


def test_matrix_uniform(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(16, 1, 1)]
void xform(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float3> o,
           uniform StructuredBuffer<float3> p, uniform float3x3 m)
{
    o[tid.x] = mul(m, p[tid.x]);
}""", name="t_mat")
    m, p = f32(3, 3), f32(16, 3)
    o = np.zeros((16, 3), np.float32)
    session.kernel("xform")(threads=16, o=o, p=p, m=m)
    np.testing.assert_allclose(o, p @ m.T, rtol=1e-5, atol=1e-5)


def test_struct_buffer_and_uniform(session: sk.Session) -> None:
    session.run_cell("""
struct Particle { float3 pos; float mass; float3 vel; };
struct Step { float dt; float3 gravity; };
[shader("compute")][numthreads(8, 1, 1)]
void integrate(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<Particle> ps, uniform Step step)
{
    Particle p = ps[tid.x];
    p.vel += step.gravity * step.dt / p.mass;
    p.pos += p.vel * step.dt;
    ps[tid.x] = p;
}""", name="t_struct")
    k = session.kernel("integrate")
    dt = k.dtype("ps")
    assert dt.names == ("pos", "mass", "vel") and dt["pos"].shape == (3,)
    ps = np.zeros(24, dt)
    ps["pos"], ps["mass"], ps["vel"] = f32(24, 3), rng.uniform(1, 2, 24), f32(24, 3)
    pos, mass, vel = ps["pos"].copy(), ps["mass"].copy(), ps["vel"].copy()
    g = np.array([0, -9.8, 0], np.float32)
    k(threads=24, ps=ps, step={"dt": 0.1, "gravity": g})
    vel2 = vel + g * 0.1 / mass[:, None]
    np.testing.assert_allclose(ps["vel"], vel2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ps["pos"], pos + vel2 * 0.1, rtol=1e-5, atol=1e-6)


def test_globals(session: sk.Session) -> None:
    session.run_cell("""
RWStructuredBuffer<float> g_out;
uniform float g_scale;
[shader("compute")][numthreads(64, 1, 1)]
void fill_global(uint3 tid: SV_DispatchThreadID)
{
    g_out[tid.x] = tid.x * g_scale;
}""", name="t_globals")
    out = np.zeros(128, np.float32)
    session.kernel("fill_global")(threads=128, g_out=out, g_scale=0.5)
    np.testing.assert_allclose(out, np.arange(128) * 0.5)


def test_constant_buffer(session: sk.Session) -> None:
    session.run_cell("""
struct Params { float4 color; float gain; uint count; };
ConstantBuffer<Params> cb;
[shader("compute")][numthreads(32, 1, 1)]
void shade(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float4> o)
{
    if (tid.x < cb.count) o[tid.x] = cb.color * cb.gain * float(tid.x);
}""", name="t_cb")
    o = np.zeros((40, 4), np.float32)
    session.kernel("shade")(threads=40, o=o, cb={"color": (1, 2, 3, 4), "gain": 0.5, "count": 30})
    expect = np.outer(np.arange(40), [1, 2, 3, 4]).astype(np.float32) * 0.5
    expect[30:] = 0
    np.testing.assert_allclose(o, expect)


def test_dispatch_2d(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(8, 8, 1)]
void image2d(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> img, uniform uint2 size)
{
    if (any(tid.xy >= size)) return;
    img[tid.y * size.x + tid.x] = sin(tid.x * 0.1) * cos(tid.y * 0.2);
}""", name="t_2d")
    h, w = 37, 53
    img = np.zeros((h, w), np.float32)
    session.kernel("image2d")(threads=(w, h), img=img, size=(w, h))
    yy, xx = np.mgrid[0:h, 0:w]
    np.testing.assert_allclose(img, np.sin(xx * 0.1) * np.cos(yy * 0.2), atol=1e-5)


def test_dispatch_3d_groups(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(4, 4, 4)]
void vol(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> v)
{
    v[(tid.z * 8 + tid.y) * 8 + tid.x] = tid.x + 10 * tid.y + 100 * tid.z;
}""", name="t_3d")
    v = np.zeros((8, 8, 8), np.uint32)
    session.kernel("vol")(groups=(2, 2, 2), v=v)
    z, y, x = np.mgrid[0:8, 0:8, 0:8]
    np.testing.assert_array_equal(v, x + 10 * y + 100 * z)


def test_several_entry_points(session: sk.Session) -> None:
    r = session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void ep_add(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> a,
            uniform StructuredBuffer<float> b) { o[t.x] = a[t.x] + b[t.x]; }
[shader("compute")][numthreads(64, 1, 1)]
void ep_mul(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> a,
            uniform StructuredBuffer<float> b) { o[t.x] = a[t.x] * b[t.x]; }
""", name="t_multi")
    assert set(r.kernels) == {"ep_add", "ep_mul"}
    a, b = f32(64), f32(64)
    o = np.zeros(64, np.float32)
    session.kernel("ep_add")(threads=64, o=o, a=a, b=b)
    np.testing.assert_allclose(o, a + b, rtol=1e-6)
    session.kernel("ep_mul")(threads=64, o=o, a=a, b=b)
    np.testing.assert_allclose(o, a * b, rtol=1e-6)


def test_fixed_array_uniform(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(16, 1, 1)]
void poly(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x,
          uniform float coeffs[4])
{
    float v = 0;
    for (int i = 3; i >= 0; i--) v = v * x[t.x] + coeffs[i];
    o[t.x] = v;
}""", name="t_array")
    x, o = f32(16), np.zeros(16, np.float32)
    c = [1.0, -2.0, 0.5, 3.0]
    session.kernel("poly")(threads=16, o=o, x=x, coeffs=c)
    np.testing.assert_allclose(o, np.polyval(c[::-1], x), rtol=1e-5, atol=1e-5)


def test_integer_ops(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void bits(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o, uniform StructuredBuffer<uint> a,
          uniform StructuredBuffer<int> b)
{
    o[t.x] = ((a[t.x] << 3) ^ (a[t.x] >> 2)) + uint(abs(b[t.x]) % 7) + countbits(a[t.x]);
}""", name="t_int")
    a = rng.integers(0, 2**31, 256, dtype=np.uint32)
    b = rng.integers(-1000, 1000, 256, dtype=np.int32)
    o = np.zeros(256, np.uint32)
    session.kernel("bits")(threads=256, o=o, a=a, b=b)
    pop = np.array([bin(int(v)).count("1") for v in a], np.uint32)
    expect = ((a << np.uint32(3)) ^ (a >> np.uint32(2))) + (np.abs(b) % 7).astype(np.uint32) + pop
    np.testing.assert_array_equal(o, expect)


def test_byte_address_buffer(session: sk.Session) -> None:
    session.run_cell("""
[shader("compute")][numthreads(32, 1, 1)]
void raw(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> o, uniform ByteAddressBuffer data)
{
    o[t.x] = data.Load(t.x * 8) + data.Load(t.x * 8 + 4);
}""", name="t_bab")
    data = rng.integers(0, 1000, 64, dtype=np.uint32)
    o = np.zeros(32, np.uint32)
    session.kernel("raw")(threads=32, o=o, data=data)
    np.testing.assert_array_equal(o, data[0::2] + data[1::2])


def test_cross_cell_autodiff_kernel(session: sk.Session) -> None:
    session.run_cell("[Differentiable] float energy(float x, no_diff float k) { return k * x * x * x + sin(x); }",
                     name="t_ad_fn")
    session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void grad_energy(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> g, uniform StructuredBuffer<float> x)
{
    var p = diffPair(x[t.x]);
    bwd_diff(energy)(p, 2.0, 1.0);
    g[t.x] = p.d;
}""", name="t_ad_kernel")
    x, g = f32(64), np.zeros(64, np.float32)
    session.kernel("grad_energy")(threads=64, g=g, x=x)
    np.testing.assert_allclose(g, 6 * x * x + np.cos(x), rtol=1e-5, atol=1e-5)


def test_compute_bound_loop(session: sk.Session) -> None:
    session.run_cell(MANDEL, name="t_mandel")
    w, h = 64, 48
    it = np.zeros((h, w), np.uint32)
    session.kernel("mandel")(threads=(w, h), it=it, w=w, h=h)
    yy, xx = np.mgrid[0:h, 0:w]
    c = (-2.0 + 2.5 * xx / w).astype(np.float32) + 1j * (-1.25 + 2.5 * yy / h).astype(np.float32)
    z = np.zeros_like(c)
    ref = np.zeros((h, w), np.uint32)
    for _ in range(64):
        alive = np.abs(z) ** 2 < 4.0
        z[alive] = z[alive] ** 2 + c[alive]
        ref += alive
    assert np.mean(ref == it) > 0.98  # float rounding may differ at the set's boundary


def test_function_call_broadcast(session: sk.Session) -> None:
    session.run_cell("float3 lerp3(float3 a, float3 b, float t) { return a + (b - a) * t; }", name="t_fn")
    a, b = f32(5, 3), f32(5, 3)
    t = np.linspace(0, 1, 5, dtype=np.float32)
    out = session.function("lerp3")(a, b, t)
    np.testing.assert_allclose(out, a + (b - a) * t[:, None], rtol=1e-5, atol=1e-6)
    out2 = session.function("lerp3")(a[0], b[0], t)  # one (a, b) pair broadcast over five t
    np.testing.assert_allclose(out2, a[0] + (b[0] - a[0]) * t[:, None], rtol=1e-5, atol=1e-6)


def test_fwd_bwd_match_finite_differences(session: sk.Session) -> None:
    session.run_cell("""
[Differentiable] float smooth(float x, float y) { return exp(-x * x) * y + x * y * y; }""", name="t_fd")
    f = session.function("smooth")
    x, y = f32(50), f32(50)
    eps = 1e-3
    fd_x = (f(x + eps, y) - f(x - eps, y)) / (2 * eps)
    fd_y = (f(x, y + eps) - f(x, y - eps)) / (2 * eps)
    gx, gy = f.bwd(x, y)
    np.testing.assert_allclose(gx, fd_x, rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(gy, fd_y, rtol=2e-2, atol=2e-3)
    _, d = f.fwd((x, np.ones_like(x)), (y, np.zeros_like(y)))
    np.testing.assert_allclose(d, gx, rtol=1e-5, atol=1e-6)


def test_results_agree_with_cpu(session: sk.Session, cache_dir: str) -> None:
    if session.backend.name == "cpu":
        pytest.skip("reference backend itself")
    src = """
[shader("compute")][numthreads(64, 1, 1)]
void agree(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{ o[t.x] = tanh(x[t.x]) * 3 + pow(abs(x[t.x]), 0.3); }"""
    x = f32(256)
    cpu = sk.Session(backend="cpu", cache_dir=cache_dir)
    try:
        cpu.run_cell(src)
        a = np.zeros(256, np.float32)
        cpu.kernel("agree")(threads=256, o=a, x=x)
    finally:
        cpu.close()
    session.run_cell(src, name="t_agree")
    b = np.zeros(256, np.float32)
    session.kernel("agree")(threads=256, o=b, x=x)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_unused_globals_of_other_cells_may_be_left_out(session: sk.Session) -> None:
    session.run_cell("RWStructuredBuffer<float> g_first; RWStructuredBuffer<float> g_second; uniform float g_gain;",
                     name="t_globs")
    session.run_cell("""
[shader("compute")][numthreads(16, 1, 1)]
void use_first(uint3 t: SV_DispatchThreadID) { g_first[t.x] = g_gain * t.x; }
[shader("compute")][numthreads(16, 1, 1)]
void use_second(uint3 t: SV_DispatchThreadID) { g_second[t.x] = 3; }""", name="t_globs_use")
    a, b = np.zeros(16, np.float32), np.zeros(16, np.float32)
    session.kernel("use_first")(threads=16, g_first=a, g_gain=2.0)
    session.kernel("use_second")(threads=16, g_second=b)
    np.testing.assert_array_equal(a, 2 * np.arange(16))
    np.testing.assert_array_equal(b, 3)
    with pytest.raises(TypeError, match=r"missing `g_gain` \(float\)"):
        session.kernel("use_first")(threads=16, g_first=a)


def test_function_out_and_inout_parameters(session: sk.Session) -> None:
    session.run_cell("void twice_io(inout float x) { x *= 2; }\n"
                     "void split_out(float x, out float a, out float b) { a = x + 1; b = -x; }", name="t_outs")
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(session.function("twice_io")(x), 2 * x)
    a, b = session.function("split_out")(x)
    np.testing.assert_array_equal(a, x + 1)
    np.testing.assert_array_equal(b, -x)


def test_arrays_of_vectors_and_matrices_take_natural_shapes(session: sk.Session) -> None:
    session.run_cell("""
struct Sv { float2 c[2]; float3x3 m[2]; float k; };
[shader("compute")][numthreads(1, 1, 1)]
void arrvm(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform float2 u[2],
           uniform float3x3 um[2], uniform Sv s)
{
    o[0] = u[0].x; o[1] = u[0].y; o[2] = u[1].x; o[3] = u[1].y;
    o[4] = um[1][1][2]; o[5] = um[0][2][0]; o[6] = s.c[1].y; o[7] = s.m[1][0][2]; o[8] = s.k;
}""", name="t_arrvm")
    o = np.zeros(9, np.float32)
    um = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    session.kernel("arrvm")(threads=1, o=o, u=np.array([[1, 2], [3, 4]], np.float32), um=um,
                            s={"c": np.array([[5, 6], [7, 8]], np.float32), "m": um + 100, "k": 9.0})
    np.testing.assert_array_equal(o, [1, 2, 3, 4, 14, 6, 8, 111, 9])
    with pytest.raises(TypeError, match=r"`u`.*float2\[2\].*(shape \(3, 2\)|got 3)"):
        session.kernel("arrvm")(threads=1, o=o, u=np.zeros((3, 2), np.float32), um=um,
                                s={"c": np.zeros((2, 2)), "m": um, "k": 0.0})
