"""Vulkan backend (slangpy's sgl device; Mesa lavapipe in CI): kernels checked against numpy and the CPU backend.

Every test takes a `session` fixture so the suite can later be parametrised over backends; tests that
need textures or device-resident objects say so through the `textures` / `device_objects` checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import slang_kernel as sk

pytestmark = pytest.mark.vulkan


def _make(backend: str, **options: Any) -> sk.Session:
    try:
        return sk.Session(backend=backend, **options)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"{backend} backend unavailable here: {exc}")


@pytest.fixture(scope="module")
def _vk() -> sk.Session:
    s = _make("vulkan")
    yield s
    s.close()


@pytest.fixture(scope="module")
def _cpu() -> sk.Session:
    s = _make("cpu")
    yield s
    s.close()


@pytest.fixture
def session(_vk: sk.Session) -> sk.Session:
    return _vk


@pytest.fixture
def cpu(_cpu: sk.Session) -> sk.Session:
    return _cpu


def _run_both(session: sk.Session, cpu: sk.Session, source: str, name: str) -> None:
    session.run_cell(source, name=name)
    cpu.run_cell(source, name=name)


SAXPY = """
[shader("compute")][numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y,
           uniform StructuredBuffer<float> x, uniform float a, uniform uint n) {
    uint i = tid.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_describe_names_device(session):
    text = session.backend.describe()
    assert session.backend.name == "vulkan" and session.backend.target == "spirv"
    assert text and ("llvmpipe" in text.lower() or "vulkan" in text.lower())


def test_buffers_saxpy(session, cpu):
    _run_both(session, cpu, SAXPY, "t_saxpy")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000).astype(np.float32)
    y0 = rng.standard_normal(1000).astype(np.float32)
    y_vk, y_cpu = y0.copy(), y0.copy()
    session.kernel("saxpy")(threads=1000, y=y_vk, x=x, a=2.5, n=1000)
    cpu.kernel("saxpy")(threads=1000, y=y_cpu, x=x, a=2.5, n=1000)
    np.testing.assert_allclose(y_vk, 2.5 * x + y0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y_vk, y_cpu, rtol=1e-6, atol=1e-6)


STRUCTS = """
struct Particle { float3 pos; float mass; int2 cell; float2x2 m; };
struct Params { float4 tint; uint count; float dt; };
[shader("compute")][numthreads(32, 1, 1)]
void advance(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<Particle> ps, uniform Params p,
          uniform RWStructuredBuffer<float4> outv, uniform float w[3]) {
    uint i = tid.x;
    if (i >= p.count) return;
    Particle q = ps[i];
    q.pos += p.dt * float3(1, 2, 3) * q.mass;
    q.cell = int2(q.pos.xy);
    ps[i] = q;
    outv[i] = p.tint * q.mass + float4(q.m[0][1], q.m[1][0], w[1], w[2]);
}
"""


def test_struct_uniform_and_struct_buffer(session, cpu):
    _run_both(session, cpu, STRUCTS, "t_structs")
    results = {}
    for name, s in (("vk", session), ("cpu", cpu)):
        k = s.kernel("advance")
        # the element layout of this backend, from reflection
        dt = k.dtype("ps")
        ps = np.zeros(40, dt)
        ps["pos"] = np.arange(120, dtype=np.float32).reshape(40, 3)
        ps["mass"] = np.linspace(1, 2, 40)
        ps["m"] = np.array([[0, 5], [7, 0]], np.float32)
        outv = np.zeros((40, 4), np.float32)
        k(threads=40, ps=ps, p={"tint": (1, 2, 3, 4), "count": 37, "dt": 0.5}, outv=outv, w=[0.0, 10.0, 20.0])
        results[name] = (ps, outv)
    ps, outv = results["vk"]
    pos0 = np.arange(120, dtype=np.float32).reshape(40, 3)
    mass = np.linspace(1, 2, 40).astype(np.float32)
    want = pos0 + 0.5 * np.array([1, 2, 3], np.float32) * mass[:, None]
    want[37:] = pos0[37:]
    np.testing.assert_allclose(ps["pos"], want, rtol=1e-6)
    np.testing.assert_array_equal(ps["cell"][:37], want[:37, :2].astype(np.int32))
    exp = np.array([1, 2, 3, 4], np.float32) * mass[:, None] + np.array([5, 7, 10, 20], np.float32)
    exp[37:] = 0
    np.testing.assert_allclose(outv, exp, rtol=1e-6)
    for a, b in zip(results["vk"], results["cpu"]):
        for f in (a.dtype.names or [None]):
            np.testing.assert_allclose(a[f] if f else a, b[f] if f else b, rtol=1e-6)


def test_struct_buffer_in_another_layout_is_repacked(session):
    session.run_cell(STRUCTS, name="t_structs")
    # a plain packed dtype (no padding) with the same field names: repacked and written back by field
    dt = np.dtype({"names": ["pos", "mass", "cell", "m"],
                   "formats": [(np.float32, 3), np.float32, (np.int32, 2), (np.float32, (2, 2))],
                   "offsets": [0, 12, 16, 24], "itemsize": 64})
    ps = np.zeros(4, dt)
    ps["mass"] = 1
    outv = np.zeros((4, 4), np.float32)
    session.kernel("advance")(threads=4, ps=ps, p={"tint": (1, 1, 1, 1), "count": 4, "dt": 1.0}, outv=outv,
                           w=np.zeros(3, np.float32))
    np.testing.assert_allclose(ps["pos"], np.tile([1, 2, 3], (4, 1)))


GLOBALS = """
uniform float g_scale;
uniform float3 g_offset;
RWStructuredBuffer<float> g_out;
StructuredBuffer<float3> g_in;
[shader("compute")][numthreads(16, 1, 1)]
void use_globals(uint3 tid: SV_DispatchThreadID, uniform uint n) {
    if (tid.x < n) g_out[tid.x] = dot(g_in[tid.x] + g_offset, float3(1, 1, 1)) * g_scale;
}
"""


def test_globals(session, cpu):
    _run_both(session, cpu, GLOBALS, "t_globals")
    g_in = np.arange(30, dtype=np.float32).reshape(10, 3)
    outs = []
    for s in (session, cpu):
        g_out = np.zeros(10, np.float32)
        s.kernel("use_globals")(threads=10, n=10, g_scale=2.0, g_offset=[1, 0, -1], g_in=g_in, g_out=g_out)
        outs.append(g_out)
    np.testing.assert_allclose(outs[0], g_in.sum(1) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


CBUF = """
struct Light { float3 dir; float intensity; float4 color; };
ConstantBuffer<Light> light;
[shader("compute")][numthreads(8, 1, 1)]
void lighting(uint3 tid: SV_DispatchThreadID, uniform StructuredBuffer<float3> normals,
         uniform RWStructuredBuffer<float4> result, uniform ConstantBuffer<Light> fill) {
    float3 n = normals[tid.x];
    result[tid.x] = light.color * max(0, dot(n, light.dir)) * light.intensity + fill.color * fill.intensity;
}
"""


def test_constant_buffer(session, cpu):
    _run_both(session, cpu, CBUF, "t_cbuf")
    normals = np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2, 0, 1]]
    key = {"dir": (0, 1, 0), "intensity": 2.0, "color": (1, 0.5, 0.25, 1)}
    fill = {"dir": (0, 0, 0), "intensity": 0.5, "color": (0.1, 0.1, 0.1, 0)}
    outs = []
    for s in (session, cpu):
        result = np.zeros((8, 4), np.float32)
        s.kernel("lighting")(threads=8, normals=normals, result=result, light=key, fill=fill)
        outs.append(result)
    want = np.array(key["color"], np.float32) * 2.0 * normals[:, 1:2] + np.array(fill["color"], np.float32) * 0.5
    np.testing.assert_allclose(outs[0], want, rtol=1e-6)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def test_byte_address_buffer(session, cpu):
    src = """
[shader("compute")][numthreads(4, 1, 1)]
void bab(uint3 tid: SV_DispatchThreadID, uniform RWByteAddressBuffer raw, uniform ByteAddressBuffer inp) {
    raw.Store(tid.x * 4, inp.Load(tid.x * 4) * 3u + 1u);
}
"""
    _run_both(session, cpu, src, "t_bab")
    inp = np.arange(8, dtype=np.uint32)
    outs = []
    for s in (session, cpu):
        raw = np.zeros(8, np.uint32)
        s.kernel("bab")(threads=8, raw=raw, inp=inp)
        outs.append(raw)
    np.testing.assert_array_equal(outs[0], inp * 3 + 1)
    np.testing.assert_array_equal(outs[0], outs[1])


GRID = """
[shader("compute")][numthreads(8, 8, 1)]
void grid(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> ids, uniform uint2 size) {
    if (tid.x < size.x && tid.y < size.y) ids[tid.y * size.x + tid.x] = tid.y * 1000 + tid.x;
}
"""


def test_2d_dispatch_threads_and_groups(session, cpu):
    _run_both(session, cpu, GRID, "t_grid")
    h, w = 37, 50
    want = (np.arange(h)[:, None] * 1000 + np.arange(w)[None, :]).astype(np.uint32)
    for s in (session, cpu):
        ids = np.zeros((h, w), np.uint32)
        s.kernel("grid")(threads=(w, h), ids=ids, size=(w, h))
        np.testing.assert_array_equal(ids, want)
        ids2 = np.zeros((h, w), np.uint32)
        s.kernel("grid")(groups=(2, 1, 1), ids=ids2, size=(w, h))   # only a 16x8 corner
        np.testing.assert_array_equal(ids2[:8, :16], want[:8, :16])
        assert not ids2[8:].any() and not ids2[:, 16:].any()


SHADE = """
[shader("compute")][numthreads(8, 8, 1)]
void shade(uint3 tid: SV_DispatchThreadID, uniform RWTexture2D<float4> img, uniform float t) {
    uint w, h;
    img.GetDimensions(w, h);
    if (tid.x >= w || tid.y >= h) return;
    float2 uv = (float2(tid.xy) + 0.5) / float2(w, h);
    img[tid.xy] = float4(uv, 0.5 + 0.5 * sin(t + uv.x * 10.0), 1.0);
}
"""


def test_rwtexture2d_float4_512(session):
    session.run_cell(SHADE, name="t_shade")
    img = np.zeros((512, 512, 4), np.float32)
    session.kernel("shade")(threads=(512, 512), img=img, t=1.0)
    yy, xx = np.mgrid[0:512, 0:512]
    u, v = (xx + 0.5) / 512, (yy + 0.5) / 512
    want = np.stack([u, v, 0.5 + 0.5 * np.sin(1.0 + u * 10), np.ones_like(u)], -1)
    assert img.shape == (512, 512, 4)
    np.testing.assert_allclose(img, want, atol=2e-5)


def test_textures_sampler_texture3d_and_uint8(session):
    session.run_cell("""
[shader("compute")][numthreads(8, 8, 1)]
void sample_it(uint3 tid: SV_DispatchThreadID, uniform Texture2D<float4> src, uniform SamplerState samp,
               uniform RWTexture2D<float> dst, uniform Texture3D<float> vol, uniform RWTexture2D<float4> ldr) {
    uint w, h;
    dst.GetDimensions(w, h);
    if (tid.x >= w || tid.y >= h) return;
    float2 uv = (float2(tid.xy) + 0.5) / float2(w, h);
    dst[tid.xy] = src.SampleLevel(samp, uv, 0).y + vol.Load(int4(1, 0, 1, 0));
    ldr[tid.xy] = float4(uv, 0, 1);
}
""", name="t_sample")
    h, w = 16, 8
    yy, xx = np.mgrid[0:h, 0:w]
    src = np.zeros((h, w, 4), np.uint8)           # uint8 in -> rgba8_unorm, read as 0..1
    src[..., 1] = (yy * 16).astype(np.uint8)
    vol = np.zeros((2, 3, 4), np.float32)         # (D, H, W), one channel
    vol[1, 0, 1] = 7.0
    dst = np.zeros((h, w), np.float32)            # RWTexture2D<float>: (H, W) or (H, W, 1)
    ldr = np.zeros((h, w, 4), np.uint8)           # uint8 out: 0..1 scaled to 0..255
    session.kernel("sample_it")(threads=(w, h), src=src, samp="point", dst=dst, vol=vol, ldr=ldr)
    np.testing.assert_allclose(dst, yy * 16 / 255.0 + 7.0, atol=1e-5)
    np.testing.assert_array_equal(ldr[..., 0], np.rint((xx + 0.5) / w * 255).astype(np.uint8))
    assert (ldr[..., 3] == 255).all()


def test_numpy_textures_of_odd_sizes_round_trip(session):
    """RW array, 1D-array and 3D textures of odd sizes go up and come back through staging buffers at
    the device's row pitch: every texel the kernel leaves alone keeps its value."""
    session.run_cell("""
[shader("compute")][numthreads(4, 4, 1)]
void bump(uint3 t: SV_DispatchThreadID, RWTexture2DArray<float> o, RWTexture1DArray<float2> p, RWTexture3D<float4> q) {
    uint w, h, n; o.GetDimensions(w, h, n);
    if (t.x < w && t.y < h) for (uint l = 0; l < n; l++) o[uint3(t.xy, l)] += 1.0 + l;
    uint pw, pn; p.GetDimensions(pw, pn);
    if (t.y == 0 && t.x < pw) for (uint l = 0; l < pn; l++) p[uint2(t.x, l)] += float2(10, 20);
    uint qw, qh, qd; q.GetDimensions(qw, qh, qd);
    if (t.x < qw - 1 && t.y < qh) for (uint z = 0; z < qd; z++) q[uint3(t.xy, z)] *= 2;
}""", name="t_odd_textures")
    rng = np.random.default_rng(1)
    o, p, q = (rng.random(shape).astype(np.float32) for shape in ((3, 7, 5, 1), (2, 5, 2), (3, 6, 5, 4)))
    o0, p0, q0 = o.copy(), p.copy(), q.copy()
    session.kernel("bump")(threads=(8, 8), o=o, p=p, q=q)
    np.testing.assert_allclose(o, o0 + (1 + np.arange(3, dtype=np.float32))[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(p, p0 + np.array([10, 20], np.float32), rtol=1e-6)
    np.testing.assert_allclose(q[..., :4, :], q0[..., :4, :] * 2, rtol=1e-6)
    np.testing.assert_array_equal(q[..., 4, :], q0[..., 4, :])   # the column the kernel skips


def test_device_resident_buffers_iterate(session):
    session.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void relax(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> v, uniform uint n) {
    if (tid.x < n) v[tid.x] = v[tid.x] * 0.5 + 1.0;
}
""", name="t_relax")
    dev = session.backend.buffer(np.zeros(256, np.float32))
    k = session.kernel("relax")
    for _ in range(30):
        k(threads=256, v=dev, n=256)
    np.testing.assert_allclose(dev.numpy(), np.full(256, 2 - 2.0 ** -29, np.float32), rtol=1e-6)
    empty = session.backend.buffer((10,), np.float32)
    assert (empty.numpy() == 0).all()
    tex = session.backend.texture((32, 32, 4), np.float32)
    session.run_cell(SHADE, name="t_shade")
    session.kernel("shade")(threads=(32, 32), img=tex, t=0.0)
    assert tex.numpy().shape == (32, 32, 4) and tex.numpy()[0, 0, 3] == 1.0


def test_another_sessions_buffer_or_texture_is_refused():
    """A device object lives on its own session's device: another session's kernel names the parameter."""
    mine, other = _make("vulkan", isolate=False), _make("vulkan", isolate=False)
    try:
        mine.run_cell(SHADE, name="t_shade")
        mine.run_cell("""
[shader("compute")][numthreads(64, 1, 1)]
void fill(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> v) { v[tid.x] = 1.0; }
""", name="t_fill")
        with pytest.raises(sk.ParameterError, match=r"`v`: that buffer belongs to another Vulkan session"):
            mine.kernel("fill")(threads=4, v=other.backend.buffer((4,), np.float32))
        with pytest.raises(sk.ParameterError, match=r"`img`: that texture belongs to another Vulkan session"):
            mine.kernel("shade")(threads=(4, 4), img=other.backend.texture((4, 4, 4), np.float32), t=0.0)
        own = mine.backend.buffer((4,), np.float32)
        mine.kernel("fill")(threads=4, v=own)
        assert (own.numpy() == 1).all()
    finally:
        mine.close()
        other.close()


def test_edit_cell_50_times(session):
    src = """
[shader("compute")][numthreads(64, 1, 1)]
void edited(uint3 tid: SV_DispatchThreadID, uniform StructuredBuffer<float> a, uniform RWStructuredBuffer<float> c) {
    if (tid.x < 16) c[tid.x] = a[tid.x] * 2 + %d;
}
"""
    a = np.arange(16, dtype=np.float32)
    for i in range(50):
        session.run_cell(src % i, name="t_edited")
        c = np.zeros(16, np.float32)
        session.kernel("edited")(threads=16, a=a, c=c)
        np.testing.assert_array_equal(c, a * 2 + i)


def test_cells_import_earlier_cells_and_edits_propagate(session):
    session.run_cell("float bump(float x) { return x + 1.0; }", name="t_lib")
    session.run_cell("""
[shader("compute")][numthreads(4, 1, 1)]
void use_lib(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> c) { c[tid.x] = bump(tid.x); }
""", name="t_user")
    c = np.zeros(4, np.float32)
    session.kernel("use_lib")(threads=4, c=c)
    np.testing.assert_array_equal(c, np.arange(4) + 1)
    session.run_cell("float bump(float x) { return x + 100.0; }", name="t_lib")
    session.kernel("use_lib")(threads=4, c=c)
    np.testing.assert_array_equal(c, np.arange(4) + 100)


def test_printf_shows_in_stdout(session, capsys):
    session.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void say(uint3 tid: SV_DispatchThreadID, uniform float x, uniform RWStructuredBuffer<float> o) {
    printf("x=%.2f n=%d 100%%\\n", x, 42);
    o[0] = x;
}
""", name="t_printf")
    o = np.zeros(1, np.float32)
    session.kernel("say")(threads=1, x=1.5, o=o)
    assert "x=1.50 n=42 100%" in capsys.readouterr().out


def test_bad_parameters_are_clear(session):
    session.run_cell(SAXPY, name="t_saxpy")
    k = session.kernel("saxpy")
    with pytest.raises(TypeError, match="missing `n`"):
        k(threads=4, y=np.zeros(4, np.float32), x=np.zeros(4, np.float32), a=1.0)
    with pytest.raises(sk.ParameterError, match="`y`"):
        k(threads=4, y=np.zeros(4, np.float64), x=np.zeros(4, np.float32), a=1.0, n=4)
    with pytest.raises(sk.ParameterError, match="`n`"):
        k(threads=4, y=np.zeros(4, np.float32), x=np.zeros(4, np.float32), a=1.0, n=1.5)
    y = np.zeros(4, np.float32)
    k(threads=4, y=y, x=np.ones(4, np.float32), a=1.0, n=4)     # still usable afterwards
    np.testing.assert_array_equal(y, 1)


def test_no_driver_raises_backend_unavailable_naming_the_package():
    import os
    import subprocess
    import sys

    env = dict(os.environ, VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    code = ("import slang_kernel as sk\n"
            "try:\n    sk.Session(backend='vulkan')\nexcept sk.BackendUnavailable as e:\n    print('UNAVAILABLE', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "UNAVAILABLE" in out and "mesa-vulkan-drivers" in out and "bookworm-backports" in out


@pytest.mark.parametrize("bad", [np.zeros((16, 16, 3), np.float32), np.zeros((16, 16), np.float32),
                                 np.zeros((16, 16, 4), np.int32), [1, 2, 3]],
                         ids=["3-channels", "no-channels", "int32", "list"])
def test_texture_of_the_wrong_format_is_refused(session: sk.Session, bad) -> None:
    session.run_cell('[shader("compute")][numthreads(8, 8, 1)]\n'
                     "void paint_tex(uint3 t: SV_DispatchThreadID, uniform RWTexture2D<float4> img)\n"
                     "{ img[t.xy] = float4(1, 0, 0, 1); }", name="paint_tex")
    with pytest.raises(sk.ParameterError, match=r"`img` is RWTexture2D<float4>: pass a numpy array of shape \(H, W, C\)"):
        session.kernel("paint_tex")(threads=(16, 16), img=bad)
    good = np.zeros((16, 16, 4), np.float32)
    session.kernel("paint_tex")(threads=(16, 16), img=good)
    assert (good[..., 0] == 1).all()


@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
def test_timeout_reports_a_long_dispatch(isolate: bool) -> None:
    s = _make("vulkan", timeout=0.5, isolate=isolate)
    try:
        s.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void slow_vk(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform uint n)
{ float a = 0; for (uint i = 0; i < n; i++) { a += sin(float(i) * 0.001); } o[0] = a; }""", name="slow")
        o = np.zeros(1, np.float32)
        # in the worker the dispatch is stopped (the worker ended); in-process it runs on to its end
        want = "slow_vk did not finish within 0.5 s" if isolate else "slow_vk ran past the session's timeout of 0.5 s"
        with pytest.raises(sk.KernelTimeout, match=want):
            s.kernel("slow_vk")(threads=1, o=o, n=400_000_000)
        assert o[0] == 0  # unchanged
        if not isolate:
            s.backend.device.wait_for_idle()  # let it finish; the session works on
        s.kernel("slow_vk")(threads=1, o=o, n=10)
        assert o[0] != 0
    finally:
        s.close()
