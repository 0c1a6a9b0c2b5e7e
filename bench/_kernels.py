"""Slang kernels that more than one bench times (bench_engine, bench_cpu_simd), written once; the
Mandelbrot is the tests' own (tests/data/mandel.slang), run here at 256 iterations."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ARITH", "MANDEL"]

ARITH = """
[shader("compute")][numthreads(256, 1, 1)]
void arith(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x,
           uniform uint n)
{
    if (t.x < n) { float v = x[t.x]; o[t.x] = sqrt(v * v + 1.0) * exp(-v) + sin(v); }
}"""

MANDEL = "#define MANDEL_ITERATIONS 256\n" + (Path(__file__).resolve().parents[1] / "tests" / "data" / "mandel.slang").read_text()
