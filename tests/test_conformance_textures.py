"""Conformance over backends: textures (1D/2D/3D, RW, device-resident), samplers, a Playground
outputTexture cell, half types and ParameterBlock. Backends without textures (cpu) skip those cases
with the reason; everything else runs on every backend the `session` fixture gives (cuda on a GPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import slang_kernel as sk
from slang_kernel.backends import textures
from slang_kernel.errors import ParameterError
from tests.playground_shaders import image_shader

TEXTURES = r"""
[shader("compute")][numthreads(4, 4, 1)]
void tx_load2d(uint3 id: SV_DispatchThreadID, uniform Texture2D<float4> tex, uniform SamplerState samp,
               uniform RWStructuredBuffer<float4> loaded, uniform RWStructuredBuffer<float4> sampled,
               uniform uint w, uniform uint h)
{
    if (id.x >= w || id.y >= h) return;
    uint i = id.y * w + id.x;
    loaded[i] = tex.Load(int3(id.xy, 0));
    sampled[i] = tex.SampleLevel(samp, (float2(id.xy) + 0.5) / float2(w, h), 0);
}

[shader("compute")][numthreads(1, 1, 1)]
void tx_between(uint3 id: SV_DispatchThreadID, uniform Texture2D<float> tex, uniform SamplerState samp,
                uniform RWStructuredBuffer<float> out_v, uniform float2 uv)
{
    out_v[0] = tex.SampleLevel(samp, uv, 0);
}

[shader("compute")][numthreads(4, 4, 1)]
void tx_store2d(uint3 id: SV_DispatchThreadID, uniform RWTexture2D<float4> img, uniform RWTexture2D<float> mono)
{
    img[id.xy] = float4(id.x, id.y, id.x * 10 + id.y, 1.0) + img[id.xy];
    mono[id.xy] = id.x + 100.0 * id.y;
}

[shader("compute")][numthreads(2, 2, 2)]
void tx_3d(uint3 id: SV_DispatchThreadID, uniform Texture3D<float> vol, uniform RWTexture3D<float2> rw,
           uniform SamplerState samp, uniform uint3 size)
{
    float3 uvw = (float3(id) + 0.5) / float3(size);
    rw[id] = float2(vol.Load(int4(id, 0)), vol.SampleLevel(samp, uvw, 0));
}

[shader("compute")][numthreads(8, 1, 1)]
void tx_1d(uint3 id: SV_DispatchThreadID, uniform Texture1D<float4> line, uniform RWTexture1D<float> rw,
           uniform SamplerState samp)
{
    float4 c = line.SampleLevel(samp, (id.x + 0.5) / 8.0, 0);   // (Texture1D.Load: not on CUDA, see test_cuda.py)
    rw[id.x] = c.x + c.y + c.z + c.w;
}

[shader("compute")][numthreads(4, 4, 1)]
void tx_uint(uint3 id: SV_DispatchThreadID, uniform Texture2D<uint> ids, uniform RWTexture2D<uint> doubled)
{
    doubled[id.xy] = ids.Load(int3(id.xy, 0)) * 2 + 1;
}
"""


@pytest.fixture(scope="module")
def tex_session(session: sk.Session) -> sk.Session:
    if "textures" not in session.backend.capabilities:
        pytest.skip(f"the {session.backend.name} backend has no textures (capability 'textures'): "
                    "texture parameters need vulkan or cuda")
    session.run_cell(TEXTURES, name="conf_textures")
    return session


def _image(h: int, w: int, c: int) -> np.ndarray:
    return np.random.default_rng(7).random((h, w, c)).astype(np.float32)


def test_texture2d_load_and_sample_at_texel_centres(tex_session: sk.Session) -> None:
    s = tex_session
    h, w = 6, 8
    img = _image(h, w, 4)
    for spec in ("point", "linear"):
        loaded = np.zeros((h * w, 4), np.float32)
        sampled = np.zeros((h * w, 4), np.float32)
        samp = textures(s.backend).sampler(spec)
        s.kernel("tx_load2d")(threads=(w, h, 1), tex=img, samp=samp, loaded=loaded, sampled=sampled, w=w, h=h)
        np.testing.assert_array_equal(loaded.reshape(h, w, 4), img)
        np.testing.assert_allclose(sampled.reshape(h, w, 4), img, atol=2e-3, err_msg=f"sampler {spec}")


def test_linear_and_point_filtering_between_texels(tex_session: sk.Session) -> None:
    s = tex_session
    tex = np.array([[0.0, 1.0, 0.0, 0.0]], np.float32)[..., None]   # (1, 4, 1): one row
    out_v = np.zeros(1, np.float32)
    k = s.kernel("tx_between")
    k(threads=1, tex=tex, samp=textures(s.backend).sampler("linear"), out_v=out_v, uv=np.float32([0.25, 0.5]))
    assert out_v[0] == pytest.approx(0.5, abs=1e-2)   # halfway between texel 0 (0.0) and texel 1 (1.0)
    k(threads=1, tex=tex, samp=textures(s.backend).sampler("point"), out_v=out_v, uv=np.float32([0.3, 0.5]))
    assert out_v[0] == 1.0
    # wrap addressing (the default): u = 1.3 reads where u = 0.3 does
    k(threads=1, tex=tex, samp=textures(s.backend).sampler("point"), out_v=out_v, uv=np.float32([1.3, 0.5]))
    assert out_v[0] == 1.0


def test_rw_texture2d_written_back(tex_session: sk.Session) -> None:
    h, w = 4, 8
    img = np.full((h, w, 4), 0.5, np.float32)
    mono = np.zeros((h, w), np.float32)   # (H, W) for one channel
    tex_session.kernel("tx_store2d")(threads=(w, h, 1), img=img, mono=mono)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    np.testing.assert_array_equal(img, np.stack([x, y, x * 10 + y, np.ones_like(x)], -1) + 0.5)
    np.testing.assert_array_equal(mono, x + 100 * y)


def test_texture3d_and_rw_texture3d(tex_session: sk.Session) -> None:
    d, h, w = 4, 2, 6
    vol = np.random.default_rng(3).random((d, h, w)).astype(np.float32)
    rw = np.zeros((d, h, w, 2), np.float32)
    tex_session.kernel("tx_3d")(threads=(w, h, d), vol=vol, rw=rw, samp=textures(tex_session.backend).sampler("point"),
                                size=np.uint32([w, h, d]))
    np.testing.assert_array_equal(rw[..., 0], vol)
    np.testing.assert_allclose(rw[..., 1], vol, atol=1e-6)


def test_texture1d_and_rw_texture1d(tex_session: sk.Session) -> None:
    line = np.arange(32, dtype=np.float32).reshape(8, 4)
    rw = np.zeros(8, np.float32)
    tex_session.kernel("tx_1d")(threads=8, line=line, rw=rw, samp=textures(tex_session.backend).sampler("point"))
    np.testing.assert_array_equal(rw, line.sum(1))


def test_integer_textures_load_and_store(tex_session: sk.Session) -> None:
    ids = np.arange(32, dtype=np.uint32).reshape(4, 8) * 1000
    doubled = np.zeros((4, 8), np.uint32)
    tex_session.kernel("tx_uint")(threads=(8, 4, 1), ids=ids, doubled=doubled)
    np.testing.assert_array_equal(doubled, ids * 2 + 1)


def test_device_textures_round_trip_and_stay_on_device(tex_session: sk.Session) -> None:
    s = tex_session
    t = textures(s.backend)
    h, w = 4, 8
    img = _image(h, w, 4)
    dev = t.texture(img)
    assert dev.shape == (h, w, 4)
    np.testing.assert_array_equal(dev.numpy(), img)
    loaded = np.zeros((h * w, 4), np.float32)
    sampled = np.zeros((h * w, 4), np.float32)
    s.kernel("tx_load2d")(threads=(w, h, 1), tex=dev, samp=t.sampler("point"), loaded=loaded, sampled=sampled,
                          w=w, h=h)
    np.testing.assert_array_equal(loaded.reshape(h, w, 4), img)
    out = t.texture(np.zeros((h, w, 4), np.float32))   # the kernel adds to what is there
    mono = t.texture((h, w, 1), np.float32)
    s.kernel("tx_store2d")(threads=(w, h, 1), img=out, mono=mono)   # written in place on the device
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    np.testing.assert_array_equal(out.numpy()[..., 2], x * 10 + y)
    np.testing.assert_array_equal(mono.numpy()[..., 0], x + 100 * y)
    rgb = t.texture(img[..., :3].copy())   # 3 channels are stored padded to 4, read back as 3
    np.testing.assert_array_equal(rgb.numpy(), img[..., :3])


def test_uint8_texels_read_as_unit_floats(tex_session: sk.Session) -> None:
    h, w = 2, 4
    img = np.arange(h * w * 4, dtype=np.uint8).reshape(h, w, 4) * 7
    loaded = np.zeros((h * w, 4), np.float32)
    sampled = np.zeros((h * w, 4), np.float32)
    tex_session.kernel("tx_load2d")(threads=(w, h, 1), tex=img, samp=textures(tex_session.backend).sampler("point"),
                                    loaded=loaded, sampled=sampled, w=w, h=h)
    np.testing.assert_allclose(loaded.reshape(h, w, 4), img / 255.0, atol=1e-6)


def test_texture_bad_input_names_the_parameter(tex_session: sk.Session) -> None:
    k = tex_session.kernel("tx_store2d")
    with pytest.raises(ParameterError, match=r"`img`.*\(H, W, C\) with C = 4"):
        k(threads=(4, 4, 1), img=np.zeros((4, 4, 3), np.float32), mono=np.zeros((4, 4), np.float32))
    ro = np.zeros((4, 4, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ParameterError, match="`img`.*written by the kernel"):
        k(threads=(4, 4, 1), img=ro, mono=np.zeros((4, 4), np.float32))
    out = np.zeros((4, 4), np.float32)   # the session still works after the errors
    k(threads=(4, 4, 1), img=np.zeros((4, 4, 4), np.float32), mono=out)
    assert out[3, 2] == 302.0


PLAYGROUND = image_shader("conf_image", """(int2 screenSize) => {   // the Playground passes the canvas size
        float2 uv = float2(dispatchThreadID.xy) / float2(screenSize);
        return float4(uv.x, uv.y, 0.5 + 0.5 * sin(time), 1.0);
    }""")


def test_playground_output_texture_cell(session: sk.Session) -> None:
    from slang_kernel.playground import PlaygroundError, PlaygroundProgram

    session.run_cell(PLAYGROUND, name="conf_playground")
    if "textures" not in session.backend.capabilities:
        with pytest.raises(PlaygroundError, match="no textures"):
            PlaygroundProgram(session, "conf_playground", screen=(64, 32))
        pytest.skip(f"the {session.backend.name} backend has no textures (checked: the Playground says so)")
    p = PlaygroundProgram(session, "conf_playground", screen=(64, 32))
    a = p.frame(time=0.0).texture()   # as stored (image() is the canvas, shown flipped)
    assert a.shape == (32, 64, 4) and a.dtype == np.uint8
    # what the Playground draws: red = x / width, green = y / height, blue 0.5, opaque
    x = np.arange(64) / 64.0
    y = np.arange(32) / 32.0
    np.testing.assert_allclose(a[..., 0], np.broadcast_to(x * 255, (32, 64)), atol=1.01)
    np.testing.assert_allclose(a[..., 1], np.broadcast_to(y[:, None] * 255, (32, 64)), atol=1.01)
    assert abs(int(a[5, 5, 2]) - 128) <= 1 and (a[..., 3] == 255).all()


VOLUME = r"""
import playground;
import rendering;

[format("r32f")]
[playground::BLACK_3D(16, 8, 4)]
RWTexture3D<float> conf_volume;

[shader("compute")]
[numthreads(4, 4, 4)]
[playground::CALL(16, 8, 4)]
void conf_fill(uint3 id : SV_DispatchThreadID)
{
    conf_volume[id] = (id.x + id.y * 16 + id.z * 128) / 512.0;
}

[shader("compute")]
[numthreads(16, 16, 1)]
[playground::CALL::SIZE_OF("outputTexture")]
void conf_slice(uint3 id : SV_DispatchThreadID)
{
    drawPixel(id.xy, (int2 screenSize) => {
        float v = conf_volume[int3(id.x % 16, id.y % 8, 2)];
        return float4(v, v, v, 1.0);
    });
}
"""


def test_playground_volume_slice_viewer(session: sk.Session) -> None:
    from slang_kernel.playground import PlaygroundProgram

    if "textures" not in session.backend.capabilities:
        pytest.skip(f"the {session.backend.name} backend has no textures")
    session.run_cell(VOLUME, name="conf_volume")
    p = PlaygroundProgram(session, "conf_volume", screen=(32, 16))
    assert p.resources["conf_volume"].shape == (4, 8, 16)
    vol = p.frame().read("conf_volume")
    z, y, x = np.mgrid[0:4, 0:8, 0:16]
    np.testing.assert_allclose(vol.reshape(4, 8, 16), (x + 16 * y + 128 * z) / 512.0, atol=1e-6)
    a = p.texture()
    want = np.tile(np.rint((x[2] + 16 * y[2] + 256) / 512.0 * 255), (2, 2))
    np.testing.assert_allclose(a[..., 0], want, atol=1.01)


HALF = r"""
[shader("compute")][numthreads(32, 1, 1)]
void conf_half(uint3 id: SV_DispatchThreadID, uniform RWStructuredBuffer<half4> v, uniform StructuredBuffer<half> s,
               uniform half k, uniform uint n)
{
    if (id.x < n) v[id.x] = half4(float4(v[id.x]) * float(s[id.x]) * float(k) + 1.0);   // CPU's prelude has no half4 arithmetic
}
"""


def test_half_buffers_and_uniforms_round_trip(session: sk.Session) -> None:
    session.run_cell(HALF, name="conf_half")
    n = 40
    rng = np.random.default_rng(1)
    v = rng.random((n, 4)).astype(np.float16)
    s = rng.random(n).astype(np.float16)
    want = (v.astype(np.float32) * s[:, None] * 2.0 + 1.0)
    session.kernel("conf_half")(threads=n, v=v, s=s, k=np.float16(2.0), n=n)
    assert v.dtype == np.float16
    np.testing.assert_allclose(v.astype(np.float32), want, rtol=4e-3, atol=4e-3)


PBLOCK = r"""
struct PbInner { float a; RWStructuredBuffer<float> out_buf; };
struct PbOuter { float3 v; PbInner inner; StructuredBuffer<float> src; };
ParameterBlock<PbOuter> conf_pb;

[shader("compute")][numthreads(16, 1, 1)]
void conf_pblock(uint3 id: SV_DispatchThreadID, uniform uint n)
{
    if (id.x < n)
        conf_pb.inner.out_buf[id.x] = conf_pb.inner.a * conf_pb.src[id.x] + conf_pb.v.y;
}
"""


def test_parameter_block_nested_with_buffers(session: sk.Session) -> None:
    session.run_cell(PBLOCK, name="conf_pblock")
    n = 20
    src = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    value: dict[str, Any] = {"v": np.float32([1, 2, 3]), "inner": {"a": 3.0, "out_buf": out}, "src": src}
    try:
        session.kernel("conf_pblock")(threads=n, conf_pb=value, n=n)
    except ParameterError as exc:
        if "no parameter_block" in str(exc):
            pytest.skip(f"the {session.backend.name} backend binds no ParameterBlock yet: {exc}")
        raise
    np.testing.assert_array_equal(out, 3.0 * src + 2.0)


def test_cuda_sampler_specs_and_one_sampler_per_dispatch() -> None:
    """The CUDA backend's sampler rules are plain Python: checked here without a GPU."""
    from slang_kernel.backends.cuda.textures import CudaSampler, dispatch_sampler, sampler_from

    assert sampler_from(None) == sampler_from("linear") == CudaSampler("linear", ("wrap",) * 3)
    assert sampler_from("nearest") == CudaSampler("point", ("wrap",) * 3)
    assert sampler_from("point_clamp") == sampler_from({"filter": "point", "address": "clamp"})
    assert sampler_from({"min_filter": "point", "address_u": "clamp_to_edge", "address_v": "mirror_repeat"}) == \
        CudaSampler("point", ("clamp", "mirror", "wrap"))
    with pytest.raises(ParameterError, match="SamplerState on CUDA.*address: wrap, clamp"):
        sampler_from({"filter": "cubic"})
    paths = [("a",), ("blk", "s")]
    same = dispatch_sampler(paths, {"a": "point", "blk": {"s": "point_wrap"}}, "k")
    assert same == CudaSampler("point", ("wrap",) * 3)
    with pytest.raises(ParameterError, match=r"k: CUDA keeps the sampling state.*`a`.*`blk\.s`"):
        dispatch_sampler(paths, {"a": "point", "blk": {"s": "linear"}}, "k")
