"""The Playground's scaffolding, written once: the animated-image cell (`import playground; import
rendering;`, a TIME uniform and an entry point drawn over `outputTexture`, as the Playground's own
samples begin), and a compute entry point's attributes and signature around its statements. Tests and
bench/bench_cuda_textures.py give them their uniforms and bodies; no widgets imported here (the GPU
machine has none)."""

from __future__ import annotations

__all__ = ["entry", "image_shader"]

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


def entry(name: str, call: str, body: str, *, threads: str = "1, 1, 1", once: bool = False) -> str:
    """A Playground compute entry point as the Playground's samples write one: `[shader("compute")]`,
    `[numthreads(threads)]`, `[playground::call]` (and `[playground::CALL::ONCE]` if `once`), then
    `void name(uint3 id : SV_DispatchThreadID)` around `body`, its statements from a new line on."""
    return ('[shader("compute")]\n'
            f"[numthreads({threads})]\n[playground::{call}]\n" + ("[playground::CALL::ONCE]\n" if once else "")
            + f"void {name}(uint3 id : SV_DispatchThreadID)\n{{{body}}}\n")
