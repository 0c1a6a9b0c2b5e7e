"""CUDA textures (H200 machine), each against a named peer in the same run:

    python3 bench/bench_cuda_textures.py

1. a Playground outputTexture frame (512x512, device texture)   on cuda vs on vulkan (same cell, same machine)
2. bilinear SampleLevel of a 4096^2 float4 device texture into a buffer (texels/s)
                                                               vs a buffer Load of the same data (StructuredBuffer)
Medians of wall-clock time per call (each call synchronises: what a notebook cell sees).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

import slang_kernel as sk
from slang_kernel.backends import textures
from slang_kernel.playground import PlaygroundProgram
from _timing import median_ms as _median_ms  # noqa: E402   (bench/)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository: the tests' Playground cell
from tests.playground_shaders import image_shader  # noqa: E402

# A Playground-style animated image (tests/playground_shaders.py: the tests' Playground cell)
SHADER = image_shader("imageMain", """(int2 pixel) => {
        uint width, height;
        outputTexture.GetDimensions(width, height);
        float2 uv = float2(pixel) / float2(width, height) - 0.5;
        float r = length(uv) * 24.0;
        float v = 0.5 + 0.5 * sin(r - 0.003 * time) * cos(6.0 * atan2(uv.y, uv.x));
        return float4(v, v * 0.5, 1.0 - v, 1.0);
    }""")

SAMPLE = r"""
[shader("compute")][numthreads(16, 16, 1)]
void bt_sample(uint3 id: SV_DispatchThreadID, uniform Texture2D<float4> tex, uniform SamplerState samp,
               uniform RWStructuredBuffer<float4> o, uniform uint n)
{
    if (id.x < n && id.y < n) o[id.y * n + id.x] = tex.SampleLevel(samp, (float2(id.xy) + 0.25) / n, 0);
}
[shader("compute")][numthreads(16, 16, 1)]
void bt_load(uint3 id: SV_DispatchThreadID, uniform StructuredBuffer<float4> src, uniform RWStructuredBuffer<float4> o,
             uniform uint n)
{
    if (id.x < n && id.y < n) o[id.y * n + id.x] = src[id.y * n + id.x];
}
"""


def median_ms(fn: Callable[[], object], repeat: int = 21) -> float:
    return _median_ms(fn, repeat, warm=1)


def main() -> None:
    import cupy as cp

    cache = tempfile.mkdtemp()
    frames, images = {}, {}
    for name in ("cuda", "vulkan"):
        s = sk.Session(backend=name, cache_dir=cache)
        s.run_cell(SHADER, name="shader")
        p = PlaygroundProgram(s, "shader", screen=(512, 512))
        frames[name] = median_ms(lambda: p.frame(time=0.0))
        images[name] = p.image().astype(int)
        print(f"playground frame 512x512 on {name}: {frames[name]:.3f} ms (the frame only, no read-back)")
    print(f"  ratio vulkan/cuda: {frames['vulkan'] / frames['cuda']:.2f}x; largest pixel difference cuda vs vulkan: "
          f"{np.abs(images['cuda'] - images['vulkan']).max()} of 255 (std of the image {images['cuda'].std():.1f})")

    s = sk.Session(backend="cuda", cache_dir=cache)
    s.run_cell(SAMPLE, name="sample")
    n = 4096
    data = np.random.default_rng(0).random((n, n, 4)).astype(np.float32)
    tex = textures(s.backend).texture(data)
    samp = textures(s.backend).sampler("linear")
    src = cp.asarray(data.reshape(-1, 4))
    out = cp.zeros((n * n, 4), cp.float32)

    def sample() -> None:
        s.kernel("bt_sample")(threads=(n, n, 1), tex=tex, samp=samp, o=out, n=n)
        cp.cuda.get_current_stream().synchronize()

    def load() -> None:
        s.kernel("bt_load")(threads=(n, n, 1), src=src, o=out, n=n)
        cp.cuda.get_current_stream().synchronize()

    ts, tl = median_ms(sample), median_ms(load)
    print(f"bilinear sample 4096^2 float4: {ts:.3f} ms = {n * n / ts / 1e6:.2f} Gtexel/s; "
          f"buffer load: {tl:.3f} ms = {n * n / tl / 1e6:.2f} G/s; ratio {tl / ts:.2f}x")
    np.testing.assert_allclose(out[:4].get(), data.reshape(-1, 4)[:4], atol=1e-6)


if __name__ == "__main__":
    main()
