"""The Playground's animated-image cell, written once: `import playground; import rendering;`, a TIME
uniform and an entry point drawn over `outputTexture` (as the Playground's own samples begin). Tests
and bench/bench_cuda_textures.py give it their uniforms and the lambda each pixel runs; no widgets
imported here (the GPU machine has none)."""

from __future__ import annotations

__all__ = ["image_shader"]

_PREAMBLE = """import playground;
import rendering;

[playground::TIME]
uniform float time;
"""


def image_shader(entry: str, pixel: str, uniforms: str = "", *,
                 thread: str = "uint3 dispatchThreadID : SV_DispatchThreadID", at: str = "dispatchThreadID.xy") -> str:
    """A Playground cell whose kernel `entry` (thread id parameter `thread`) draws `pixel`, the text of
    drawPixel's lambda (`(int2 screenSize) => ...`), at `at`; `uniforms`: declarations after `time`."""
    return (f"\n{_PREAMBLE}{uniforms}\n"
            '[shader("compute")]\n[numthreads(16, 16, 1)]\n[playground::CALL::SIZE_OF("outputTexture")]\n'
            f"void {entry}({thread})\n{{\n    drawPixel({at}, {pixel});\n}}\n")
