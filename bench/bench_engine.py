"""Engine benchmarks, each against a named peer measured in the same run.

    .venv/bin/python bench/bench_engine.py [--repeat N]

1. warm recompile of an edited 50-line cell   vs slangpy Module.load_from_source (same source)
2. edit of the first cell of a 10-cell chain   vs slangpy loading the whole chain as one module
   (a body edit, which its users see when kernels link, and a signature edit, which rechecks them)
3. kernel compile at the end of that chain     vs slangpy load + kernel lookup
4. CPU dispatch                                 vs numpy, same arithmetic
5. CPU dispatch, all cores                      vs 1 thread (compute-bound kernel)
6. CPU dispatch of a light 512x512 image kernel vs 1 thread (the live-image kernel of bench_live.py)
Medians over --repeat runs. The compile cache is off for our side, so every run compiles.
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import platform
import tempfile
from typing import Callable

import numpy as np

import slang_kernel as sk
from _kernels import ARITH, MANDEL  # noqa: E402   (bench/: the kernels bench_cpu_simd times too)
from _timing import median_ms as _median_ms  # noqa: E402



def _light_kernel() -> str:
    """The kernel bench_live.py streams, read off the browser tests' conftest without importing it
    (that needs Jupyter, which the GPU machine lacks)."""
    tree = ast.parse((pathlib.Path(__file__).resolve().parents[1] / "tests" / "browser" / "conftest.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LIGHT_KERNEL")
    return str(ast.literal_eval(node.value))


LIGHT_KERNEL = _light_kernel()

CELL_50 = "\n".join(
    ["struct Material { float3 albedo; float roughness; float metallic; };"]
    + [f"float f{i}(float x) {{ return x * {i + 1}.0 + sin(x * {i}.0); }}" for i in range(40)]
    + ["float shade(Material m, float3 n, float3 l) {",
       "    float d = max(dot(n, l), 0.0);",
       "    float s = pow(d, 1.0 / max(m.roughness, 0.01));",
       "    return d * m.albedo.x * (1 - m.metallic) + s * m.metallic;",
       "}",
       "[Differentiable] float loss(float x, float y) { return (x - y) * (x - y); }",
       "float chain(float x) { return f0(f1(f2(f3(x)))); }",
       "float3 tint(float3 c, float k) { return c * k; }",
       ]
)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    return _median_ms(fn, repeat, warm=1)


def chain_cells() -> list[str]:
    cells = ["float c0(float x) { return x + 1; }"]
    for i in range(1, 9):
        cells.append(f"float c{i}(float x) {{ return c{i - 1}(x) * 1.5 + {i}; }}")
    cells.append("""
[Differentiable] float lossc(float x) { return x * x * 0.5; }
[shader("compute")][numthreads(64, 1, 1)]
void chain_kernel(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o, uniform StructuredBuffer<float> x)
{
    var p = diffPair(x[t.x]); bwd_diff(lossc)(p, 1.0);
    o[t.x] = c8(x[t.x]) + p.d;
}""")
    return cells


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import slangpy

    try:
        device = slangpy.create_device(type=slangpy.DeviceType.vulkan)
    except Exception:
        device = slangpy.create_device(type=slangpy.DeviceType.cpu)
    peer = f"slangpy {slangpy.__version__} Module.load_from_source on {device.info.adapter_name}"
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    print(f"# peer: {peer}")
    rows: list[tuple[str, float, float, str]] = []
    counter = iter(range(10**9))

    with tempfile.TemporaryDirectory() as tmp:
        s = sk.Session(backend="cpu", cache=False, cache_dir=tmp)
        s.run_cell(CELL_50, name="big")

        ours = median_ms(lambda: s.run_cell(CELL_50 + f"\n// edit {next(counter)}", name="big"), args.repeat)
        theirs = median_ms(lambda: slangpy.Module.load_from_source(
            device, f"big{next(counter)}", CELL_50 + f"\n// edit {next(counter)}"), args.repeat)
        rows.append(("warm recompile, 50-line cell", ours, theirs, "slangpy load_from_source"))

        cells = chain_cells()
        for i, c in enumerate(cells):
            s.run_cell(c, name=f"chain{i}")
        ours = median_ms(lambda: s.run_cell(cells[0] + f" // {next(counter)}", name="chain0"), args.repeat)
        whole = "\n".join(cells)
        theirs = median_ms(lambda: slangpy.Module.load_from_source(
            device, f"chain{next(counter)}", whole + f"\n// {next(counter)}"), args.repeat)
        rows.append(("edit first cell of a 10-cell chain (body)", ours, theirs, "slangpy load of the chain"))
        sigs = iter(f"float c0(float x, float y{i} = 0) {{ return x + 1; }}" for i in range(10**9))
        ours = median_ms(lambda: s.run_cell(next(sigs), name="chain0"), args.repeat)
        rows.append(("edit first cell of a 10-cell chain (signature: 9 users rechecked)", ours, theirs,
                     "slangpy load of the chain"))

        def our_kernel() -> None:  # a new option each time: a new key, so a real compile every time
            s.compile_service.compile(s.compile_service.request("compile", cell="chain9", entries=["chain_kernel"], target="cpp",
                                options=[f"-DBENCH_NONCE={next(counter)}"]))

        ours = median_ms(our_kernel, args.repeat)

        def their_kernel() -> None:
            m = slangpy.Module.load_from_source(device, f"ck{next(counter)}", whole + f"\n// {next(counter)}")
            dm = m.device_module
            device.create_compute_kernel(device.link_program([dm], [dm.entry_point("chain_kernel")]))

        try:
            theirs = median_ms(their_kernel, args.repeat)
        except Exception as exc:  # API differences: report, do not hide
            print(f"# slangpy kernel link failed: {exc}")
            theirs = float("nan")
        rows.append(("kernel compile, end of 10-cell chain (cpp)", ours, theirs,
                     "slangpy load + link + compute kernel (SPIR-V)"))

        s.run_cell(ARITH, name="arith")
        n = 1 << 22
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        o = np.zeros(n, np.float32)
        k = s.kernel("arith")
        ours = median_ms(lambda: k(threads=n, o=o, x=x, n=n), args.repeat)
        theirs = median_ms(lambda: np.sqrt(x * x + 1.0) * np.exp(-x) + np.sin(x), args.repeat)
        assert np.allclose(o, np.sqrt(x * x + 1.0) * np.exp(-x) + np.sin(x), atol=1e-4)
        rows.append(("CPU dispatch, 2^22 floats, sqrt/exp/sin", ours, theirs, "numpy"))

        def all_vs_one(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
            all_cores = median_ms(fn, repeat)
            s.backend.workers = 1
            one = median_ms(fn, repeat)
            s.backend.workers = os.cpu_count() or 1
            return all_cores, one

        s.run_cell(MANDEL, name="mandel")
        w, h = 1024, 768
        it = np.zeros((h, w), np.uint32)
        km = s.kernel("mandel")
        rows.append((f"CPU mandelbrot 1024x768, {os.cpu_count()} threads",
                     *all_vs_one(lambda: km(threads=(w, h), it=it, w=w, h=h), max(3, args.repeat // 3)), "1 thread"))
        s.run_cell(LIGHT_KERNEL, name="light")
        pixels = s.backend.zeros((512, 512, 4), np.float32)
        kl = s.kernel("shade")
        rows.append((f"CPU light 512x512 image kernel, {os.cpu_count()} threads",
                     *all_vs_one(lambda: kl(threads=(512, 512, 1), amp=0.5, t=1.0, pixels=pixels), 4 * args.repeat),
                     "1 thread"))
        s.close()

    print(f"\n{'benchmark':48} {'ours ms':>9} {'peer ms':>9} {'speed-up':>9}  peer")
    for name, ours, theirs, who in rows:
        print(f"{name:48} {ours:9.2f} {theirs:9.2f} {theirs / ours:8.2f}x  {who}")


if __name__ == "__main__":
    main()
