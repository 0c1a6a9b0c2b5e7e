"""CUDA-only behaviour (run on a machine with an NVIDIA GPU; skipped with a reason elsewhere)."""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pytest

import slang_kernel as sk

pytestmark = pytest.mark.cuda

KERNEL = """
RWStructuredBuffer<float> g_acc;
[shader("compute")][numthreads(128, 1, 1)]
void axpy_cuda(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
               uniform float a, uniform uint n)
{
    if (t.x < n) { y[t.x] = a * x[t.x] + y[t.x]; }
    if (t.x == 0) g_acc[0] = a;
}"""


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory, open_session: Callable[..., sk.Session]) -> Iterator[sk.Session]:
    s = open_session("cuda", cache_dir=str(tmp_path_factory.mktemp("cuda-cache")))
    s.run_cell(KERNEL, name="cuda_kernels")
    yield s
    s.close()


def test_cupy_arrays_stay_on_device(cuda: sk.Session) -> None:
    import cupy as cp

    n = 1000
    x, y = cp.arange(n, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
    acc = cp.zeros(1, cp.float32)
    ptr = y.data.ptr
    cuda.kernel("axpy_cuda")(threads=n, y=y, x=x, a=3.0, n=n, g_acc=acc)
    assert y.data.ptr == ptr  # written in place, no copy
    cp.testing.assert_allclose(y, 3 * cp.arange(n) + 1)
    assert float(acc[0]) == 3.0


def test_numpy_round_trip(cuda: sk.Session) -> None:
    n = 300
    x, y = np.random.rand(n).astype(np.float32), np.zeros(n, np.float32)
    acc = np.zeros(1, np.float32)
    cuda.kernel("axpy_cuda")(threads=n, y=y, x=x, a=2.0, n=n, g_acc=acc)
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
    assert acc[0] == 2.0


def test_repeated_calls_relaunch_what_changed(cuda: sk.Session) -> None:
    """A call with the very objects of the previous one is one cuLaunchKernel (no packing); any
    other value (a new array, another float, a 0-d numpy array changed in place) is packed again."""
    import cupy as cp

    cuda.run_cell("""
[shader("compute")][numthreads(32, 1, 1)]
void add_first(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform float a)
{
    if (t.x == 0) y[0] += a;
}""", name="relaunch")
    k = cuda.kernel("add_first")
    y, other, a = cp.zeros(1, cp.float32), cp.zeros(1, cp.float32), 1.5
    for _ in range(3):
        k(threads=32, y=y, a=a)
    k(threads=32, y=other, a=a)
    k(threads=32, y=y, a=2.0)
    box = np.array(1.0, np.float32)
    k(threads=32, y=y, a=box)
    box[...] = 10.0
    k(threads=32, y=y, a=box)
    assert float(y[0]) == 3 * 1.5 + 2.0 + 1.0 + 10.0
    assert float(other[0]) == 1.5
    k(threads=0, y=y, a=a)   # no threads: nothing runs, on either path
    assert float(y[0]) == 17.5


def test_torch_tensors_without_copy(cuda: sk.Session) -> None:
    torch = pytest.importorskip("torch")
    n = 256
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    y = torch.zeros(n, dtype=torch.float32, device="cuda")
    acc = torch.zeros(1, dtype=torch.float32, device="cuda")
    cuda.kernel("axpy_cuda")(threads=n, y=y, x=x, a=0.5, n=n, g_acc=acc)
    torch.cuda.synchronize()
    assert torch.allclose(y, 0.5 * x)


def test_functions_fwd_bwd_on_cuda(cuda: sk.Session) -> None:
    cuda.run_cell("[Differentiable] float cube_c(float x) { return x * x * x; }", name="cube_c")
    f = cuda.function("cube_c")
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    np.testing.assert_allclose(f(x), x**3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f.bwd(x), 3 * x**2, rtol=1e-5, atol=1e-6)
    _, d = f.fwd((x, np.ones_like(x)))
    np.testing.assert_allclose(d, 3 * x**2, rtol=1e-5, atol=1e-6)


SQUARE = """
[AutoPyBindCUDA]
[CUDAKernel]
[Differentiable]
void square(DiffTensorView input, DiffTensorView output)
{
    uint3 dispatchIdx = cudaThreadIdx() + cudaBlockIdx() * cudaBlockDim();
    if (dispatchIdx.x >= input.size(0))
        return;
    output[dispatchIdx.x] = input[dispatchIdx.x] * input[dispatchIdx.x];
}
"""


def test_slangtorch_guide_square_line_for_line() -> None:
    """The seed's slangtorch example, with `slangtorch` replaced by `slang_kernel.slangtorch`."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here (CPU-only torch or no GPU); slangtorch launches need one")
    from slang_kernel import slangtorch

    try:
        m = slangtorch.loadModule(SQUARE)
    except sk.BackendUnavailable as exc:
        pytest.skip(f"cuda backend unavailable here: {exc}")
    input = torch.tensor((0, 1, 2, 3, 4, 5), dtype=torch.float).cuda()
    output = torch.zeros_like(input).cuda()
    m.square(input=input, output=output).launchRaw(blockSize=(6, 1, 1), gridSize=(1, 1, 1))
    torch.cuda.synchronize()
    assert torch.allclose(output, input * input)

    input_grad = torch.zeros_like(input).cuda()
    output = torch.zeros_like(input)
    output_grad = torch.ones_like(output)
    m.square.bwd(input=(input, input_grad), output=(output, output_grad)).launchRaw(
        blockSize=(6, 1, 1), gridSize=(1, 1, 1))
    torch.cuda.synchronize()
    assert torch.allclose(input_grad, 2 * input)

    dx = torch.ones_like(input)
    out, dout = torch.zeros_like(input), torch.zeros_like(input)
    m.square.fwd(input=(input, dx), output=(out, dout)).launchRaw(blockSize=(6, 1, 1), gridSize=(1, 1, 1))
    torch.cuda.synchronize()
    assert torch.allclose(dout, 2 * input) and torch.allclose(out, input * input)


OOB = """
[shader("compute")][numthreads(64, 1, 1)]
void cuda_oob(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{
    o[t.x * 4] = x[t.x];
}"""


def test_checked_session_names_kernel_buffer_and_index(tmp_path_factory: pytest.TempPathFactory, open_session: Callable[..., sk.Session]) -> None:
    s = open_session("cuda", checked=True, cache_dir=str(tmp_path_factory.mktemp("cuda-checked")))
    try:
        s.run_cell(OOB, name="oob")
        o, x = np.zeros(64, np.float32), np.ones(64, np.float32)
        with pytest.raises(sk.BoundsError, match=r"cuda_oob: 48 out-of-range.* of `o` \(64 elements\)") as info:
            s.kernel("cuda_oob")(threads=64, o=o, x=x)
        assert info.value.buffer == "o" and info.value.index >= 64 and info.value.index % 4 == 0
        o2 = np.zeros(256, np.float32)  # in range now: the context is fine
        s.kernel("cuda_oob")(threads=64, o=o2, x=x)
        assert o2[::4].sum() == 64
    finally:
        s.close()


def test_sticky_cuda_error_says_what_to_do(tmp_path) -> None:
    """Unchecked, a far out-of-range write breaks the CUDA context: the error says so and what to do
    (in a subprocess: the broken context must not leak into the other tests)."""
    pytest.importorskip("cupy")
    import subprocess
    import sys

    script = tmp_path / "sticky.py"
    script.write_text(
        "import numpy as np, slang_kernel as sk\n"
        "s = sk.Session(backend='cuda')\n"
        "s.run_cell('''[shader(\"compute\")][numthreads(64,1,1)] void far(uint3 t: SV_DispatchThreadID, "
        "uniform RWStructuredBuffer<float> o) { o[t.x * 1000000000u] = 1; }''')\n"
        "try:\n    s.kernel('far')(threads=64, o=np.zeros(4, np.float32))\n"
        "except sk.DeviceLost as e:\n    print('DEVICELOST', e)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    if "cuda backend" in out.stderr and "unavailable" in out.stderr:
        pytest.skip(out.stderr[-300:])
    assert "DEVICELOST" in out.stdout and "restart the notebook's kernel" in out.stdout, out.stdout + out.stderr


def test_timeout_reports_a_long_kernel(tmp_path_factory: pytest.TempPathFactory, open_session: Callable[..., sk.Session]) -> None:
    s = open_session("cuda", timeout=0.5, cache_dir=str(tmp_path_factory.mktemp("cuda-timeout")))
    try:
        s.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void slow_cuda(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform uint n)
{ float a = 0; for (uint i = 0; i < n; i++) { a = a * 0.9999999f + 1.0f; } o[0] = a; }""", name="slow")
        o = np.zeros(1, np.float32)
        with pytest.raises(sk.KernelTimeout, match="slow_cuda ran past the session's timeout of 0.5 s"):
            s.kernel("slow_cuda")(threads=1, o=o, n=2_000_000_000)  # a few seconds of one GPU thread
        assert o[0] == 0  # unchanged
        import cupy

        cupy.cuda.Device().synchronize()  # let it finish; the session works on
        s.kernel("slow_cuda")(threads=1, o=o, n=10)
        assert o[0] != 0
    finally:
        s.close()


# -- textures, surfaces, samplers, half, ParameterBlock on CUDA (issue 15) -------------------------

CUDA_TEXTURES = r"""
[shader("compute")][numthreads(1, 1, 1)]
void ctx_sample(uint3 id: SV_DispatchThreadID, uniform Texture2D<float> tex, uniform SamplerState samp,
                uniform RWStructuredBuffer<float> out_v, uniform float2 uv)
{
    out_v[0] = tex.SampleLevel(samp, uv, 0);
}

[shader("compute")][numthreads(1, 1, 1)]
void ctx_two_samplers(uint3 id: SV_DispatchThreadID, uniform Texture2D<float> tex, uniform SamplerState a,
                      uniform SamplerState b, uniform RWStructuredBuffer<float> out_v)
{
    out_v[0] = tex.SampleLevel(a, float2(0.5), 0) + tex.SampleLevel(b, float2(0.5), 0);
}

[shader("compute")][numthreads(4, 4, 1)]
void ctx_layers(uint3 id: SV_DispatchThreadID, uniform Texture2DArray<float4> layers, uniform SamplerState samp,
                uniform RWTexture2D<float4> out_img, uniform uint layer)
{
    out_img[id.xy] = layers.SampleLevel(samp, float3((float2(id.xy) + 0.5) / 4.0, layer), 0);
}

struct CtxMaterial { Texture2D<float4> albedo; float gain; RWStructuredBuffer<float4> result; };
ParameterBlock<CtxMaterial> ctx_mat;

[shader("compute")][numthreads(4, 4, 1)]
void ctx_pblock_texture(uint3 id: SV_DispatchThreadID)
{
    ctx_mat.result[id.y * 4 + id.x] = ctx_mat.albedo.Load(int3(id.xy, 0)) * ctx_mat.gain;
}

[shader("compute")][numthreads(32, 1, 1)]
void ctx_half_math(uint3 id: SV_DispatchThreadID, uniform RWStructuredBuffer<half4> v, uniform half k)
{
    v[id.x] = v[id.x] * k + half4(0.5h);
}
"""


@pytest.fixture(scope="module")
def cuda_tex(cuda: sk.Session) -> sk.Session:
    cuda.run_cell(CUDA_TEXTURES, name="cuda_textures")
    return cuda


def test_sampler_address_modes_wrap_clamp(cuda_tex: sk.Session) -> None:
    from slang_kernel.backends import textures

    t = textures(cuda_tex.backend)
    tex = np.array([[1.0, 0.0, 0.0, 5.0]], np.float32)
    out_v = np.zeros(1, np.float32)
    k = cuda_tex.kernel("ctx_sample")
    k(threads=1, tex=tex, samp=t.sampler("point"), out_v=out_v, uv=np.float32([-0.1, 0.5]))
    assert out_v[0] == 5.0   # wrap: u = -0.1 reads the last texel
    k(threads=1, tex=tex, samp=t.sampler("point_clamp"), out_v=out_v, uv=np.float32([-0.1, 0.5]))
    assert out_v[0] == 1.0
    k(threads=1, tex=tex, samp=t.sampler({"filter": "point", "address": "clamp"}), out_v=out_v,
      uv=np.float32([1.5, 0.5]))
    assert out_v[0] == 5.0
    with pytest.raises(sk.ParameterError, match="SamplerState on CUDA"):
        t.sampler("bilinear-ish")


def test_two_different_samplers_in_one_dispatch_are_refused(cuda_tex: sk.Session) -> None:
    from slang_kernel.backends import textures

    t = textures(cuda_tex.backend)
    tex = np.ones((2, 2), np.float32)
    out_v = np.zeros(1, np.float32)
    k = cuda_tex.kernel("ctx_two_samplers")
    with pytest.raises(sk.ParameterError, match="one sampler setting"):
        k(threads=1, tex=tex, a=t.sampler("point"), b=t.sampler("linear"), out_v=out_v)
    k(threads=1, tex=tex, a=t.sampler("point"), b=t.sampler("point"), out_v=out_v)
    assert out_v[0] == 2.0


def test_texture2d_array_layers(cuda_tex: sk.Session) -> None:
    from slang_kernel.backends import textures

    rng = np.random.default_rng(5)
    layers = rng.random((3, 4, 4, 4)).astype(np.float32)   # (L, H, W, C)
    out_img = np.zeros((4, 4, 4), np.float32)
    k = cuda_tex.kernel("ctx_layers")
    k(threads=(4, 4, 1), layers=layers, samp=textures(cuda_tex.backend).sampler("point"), out_img=out_img, layer=2)
    np.testing.assert_array_equal(out_img, layers[2])
    dev = cuda_tex.backend.texture(layers, layered=True)   # a device-resident Texture2DArray
    k(threads=(4, 4, 1), layers=dev, samp=textures(cuda_tex.backend).sampler(), out_img=out_img, layer=1)
    np.testing.assert_allclose(out_img, layers[1], atol=1e-6)


def test_cupy_arrays_as_textures_written_in_place(cuda_tex: sk.Session) -> None:
    import cupy as cp

    img = cp.zeros((4, 4, 4), cp.float32)
    layers = cp.asarray(np.random.default_rng(2).random((2, 4, 4, 4)).astype(np.float32))
    cuda_tex.kernel("ctx_layers")(threads=(4, 4, 1), layers=layers, samp="point", out_img=img, layer=0)
    cp.testing.assert_array_equal(img, layers[0])


def test_texture_inside_a_parameter_block(cuda_tex: sk.Session) -> None:
    albedo = np.random.default_rng(4).random((4, 4, 4)).astype(np.float32)
    result = np.zeros((16, 4), np.float32)
    cuda_tex.kernel("ctx_pblock_texture")(threads=(4, 4, 1), ctx_mat={"albedo": albedo, "gain": 2.0, "result": result})
    np.testing.assert_allclose(result.reshape(4, 4, 4), albedo * 2.0, rtol=1e-6)


def test_half_arithmetic_compiles_with_cuda_fp16(cuda_tex: sk.Session) -> None:
    v = np.linspace(-2, 2, 128, dtype=np.float16).reshape(32, 4)
    want = v.astype(np.float32) * 3.0 + 0.5
    cuda_tex.kernel("ctx_half_math")(threads=32, v=v, k=np.float16(3.0))
    np.testing.assert_allclose(v.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_texture1d_load_is_refused_with_the_workaround(cuda: sk.Session) -> None:
    cuda.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void ctx_load1d(uint3 id: SV_DispatchThreadID, uniform Texture1D<float4> line, uniform RWStructuredBuffer<float4> o)
{ o[0] = line.Load(int2(1, 0)); }""", name="ctx_load1d")
    with pytest.raises(NotImplementedError, match="Texture1D.*SampleLevel"):
        cuda.kernel("ctx_load1d")(threads=1, line=np.ones((4, 4), np.float32), o=np.zeros((1, 4), np.float32))
    out = np.zeros(1, np.float32)   # the session goes on
    cuda.kernel("axpy_cuda")(threads=1, y=out, x=np.ones(1, np.float32), a=2.0, n=1, g_acc=np.zeros(1, np.float32))
    assert out[0] == 2.0


HALF_TEXTURES = r"""
[shader("compute")][numthreads(4, 4, 1)]
void ctx_half_tex(uint3 id: SV_DispatchThreadID, uniform Texture2D<half4> t, uniform RWStructuredBuffer<float4> o)
{
    o[id.y * 4 + id.x] = float4(t.Load(int3(id.xy, 0)));
}

[shader("compute")][numthreads(4, 4, 1)]
void ctx_half_surface(uint3 id: SV_DispatchThreadID, uniform RWTexture2D<half4> o)
{
    o[id.xy] = half4(half(id.x), half(id.y), 0.5h, 1.0h);
}

[shader("compute")][numthreads(4, 4, 1)]
void ctx_float_from_half(uint3 id: SV_DispatchThreadID, uniform Texture2D<float4> t, uniform RWStructuredBuffer<float4> o)
{
    o[id.y * 4 + id.x] = t.Load(int3(id.xy, 0));
}
"""


@pytest.fixture(scope="module")
def cuda_half_tex(cuda: sk.Session) -> sk.Session:
    cuda.run_cell(HALF_TEXTURES, name="cuda_half_textures")
    return cuda


def test_float16_data_in_a_float_texture(cuda_half_tex: sk.Session) -> None:
    img = np.random.default_rng(6).random((4, 4, 4)).astype(np.float16)
    o = np.zeros((16, 4), np.float32)
    cuda_half_tex.kernel("ctx_float_from_half")(threads=(4, 4, 1), t=img, o=o)
    np.testing.assert_array_equal(o.reshape(4, 4, 4), img.astype(np.float32))


def test_half_texture_read_is_refused_with_the_workaround(cuda_half_tex: sk.Session) -> None:
    img = np.random.default_rng(6).random((4, 4, 4)).astype(np.float16)
    o = np.zeros((16, 4), np.float32)
    with pytest.raises(NotImplementedError, match=r"ctx_half_tex.*half texture.*Texture2D<float4>"):
        cuda_half_tex.kernel("ctx_half_tex")(threads=(4, 4, 1), t=img, o=o)


def test_half_rw_texture_store(cuda_half_tex: sk.Session) -> None:
    o = np.zeros((4, 4, 4), np.float16)
    cuda_half_tex.kernel("ctx_half_surface")(threads=(4, 4, 1), o=o)
    y, x = np.mgrid[0:4, 0:4]
    np.testing.assert_array_equal(o[..., 0], x)
    np.testing.assert_array_equal(o[..., 1], y)
    assert (o[..., 2] == 0.5).all() and (o[..., 3] == 1).all()


def test_device_texture_from_cupy_and_checked_session(tmp_path_factory: pytest.TempPathFactory, open_session: Callable[..., sk.Session]) -> None:
    cp = pytest.importorskip("cupy", reason="the cuda backend needs CuPy")
    s = open_session("cuda", checked=True, cache_dir=str(tmp_path_factory.mktemp("cuda-checked-tex")))
    try:
        s.run_cell(CUDA_TEXTURES, name="cuda_textures")
        data = cp.asarray(np.random.default_rng(8).random((4, 4, 4)).astype(np.float32))
        tex = s.backend.texture(data)
        cp.testing.assert_array_equal(cp.asarray(tex.numpy()), data)
        result = np.zeros((16, 4), np.float32)
        s.kernel("ctx_pblock_texture")(threads=(4, 4, 1), ctx_mat={"albedo": tex, "gain": 0.5, "result": result})
        np.testing.assert_allclose(result.reshape(4, 4, 4), data.get() * 0.5, rtol=1e-6)
    finally:
        s.close()


def test_unsupported_texture_shapes_say_so(cuda: sk.Session) -> None:
    cuda.run_cell("""
[shader("compute")][numthreads(1, 1, 1)]
void ctx_cube(uint3 id: SV_DispatchThreadID, uniform TextureCube<float4> cube, uniform SamplerState samp,
              uniform RWStructuredBuffer<float4> o)
{ o[0] = cube.SampleLevel(samp, float3(1, 0, 0), 0); }""", name="ctx_cube")
    with pytest.raises(sk.ParameterError, match="`cube`.*cube maps"):
        cuda.kernel("ctx_cube")(threads=1, cube=np.zeros((6, 4, 4, 4), np.float32), samp=cuda.backend.sampler(),
                                o=np.zeros((1, 4), np.float32))
