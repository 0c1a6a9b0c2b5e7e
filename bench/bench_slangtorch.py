"""First and repeated `loadModule` of slang-torch's own test modules (tests/data/slang_torch, unchanged):
ours (slang_kernel.slangtorch: Slang in-process, host code by g++ against our torch shim, CUDA by NVRTC)
against the real slangtorch wheel (slangc, then a PyTorch C++/CUDA extension built by nvcc and ninja),
where that one is importable with CUDA torch and nvcc; otherwise its column says why it was skipped.

Each load runs in a fresh Python process. cold: empty caches (slang-kernel's, CuPy's, torch
extensions', and a fresh copy of the module's folder, where slangtorch keeps its builds); warm: a new
process with the caches the cold run filled. For ours, `ready` adds building the CUDA code (NVRTC),
which slangtorch's load already includes and ours otherwise defers to the first launch; without CUDA
here it is not measured. Numbers are this machine's, in this run.

    python bench/bench_slangtorch.py [--modules smoke,multiply,...] [--warm 3] [--real-site DIR]
    python bench/bench_slangtorch.py --folder DIR --modules FILE[:NAME=VALUE;...],...   (another project's
        modules, e.g. DIR = slang_gaussian_rasterization/internal/slang of google/slang-gaussian-rasterization,
        --modules vertex_shader.slang,tile_shader.slang,alphablend_shader.slang:PYTHON_TILE_HEIGHT=16;PYTHON_TILE_WIDTH=16)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "data" / "slang_torch"
MODULES = {   # file, defines (as test.py loads them)
    "smoke": ("smoke.slang", {}),
    "multiply": ("multiply.slang", {"FACTOR": "2.0"}),
    "import-module": ("import-module.slang", {}),
    "builtin-type-input": ("builtin-type-input.slang", {}),
    "autobind-square-diff": ("autobind-square-diff.slang", {}),
}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
side, path, defines = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if side == "ours":
    import slang_kernel.slangtorch as slangtorch
else:
    import slangtorch
import torch
t1 = time.perf_counter()
m = slangtorch.loadModule(path, defines=defines)
t2 = time.perf_counter()
out = {"import_s": t1 - t0, "load_s": t2 - t1, "where": getattr(slangtorch, "__file__", "?")}
if side == "ours" and torch.cuda.is_available():
    m.prepare()
    out["ready_s"] = time.perf_counter() - t1
print("RESULT " + json.dumps(out))
"""


def real_unavailable(env: dict[str, str]) -> str | None:
    """Why the real wheel cannot be measured here, or None."""
    probe = ("import torch, slangtorch, shutil; "
             "print('ok' if torch.cuda.is_available() and shutil.which('nvcc') else "
             "'no CUDA torch or no nvcc: slangtorch builds its modules with nvcc')")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or ["import slangtorch failed"])[-1][:160]
    return None if p.stdout.strip() == "ok" else p.stdout.strip()


def parse_module(spec: str) -> tuple[str, dict[str, str]]:
    """`file.slang[:NAME=VALUE;...]` of --folder's --modules: the file and its defines."""
    file, _, defs = spec.partition(":")
    return file, dict(d.split("=", 1) for d in defs.split(";") if d)


def one_load(side: str, folder: Path, name: str, caches: Path, env: dict[str, str]) -> dict[str, Any]:
    file, defines = MODULES[name] if name in MODULES else parse_module(name)
    env = dict(env, SLANG_KERNEL_CACHE_DIR=str(caches / "sk"), CUPY_CACHE_DIR=str(caches / "cupy"),
               TORCH_EXTENSIONS_DIR=str(caches / "torch-ext"))
    p = subprocess.run([sys.executable, "-c", CHILD, side, str(folder / file), json.dumps(defines)],
                       capture_output=True, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(f"{side} {name}: the load failed:\n{(p.stdout + p.stderr)[-1500:]}")


def fresh_copy(scratch: Path, tag: str, source: Path = SUITE) -> Path:
    """The modules' folder with %FACTOR%/%CONST_VAL% filled in (as slang-torch's test.py does for its templates)."""
    folder = scratch / tag
    folder.mkdir(parents=True)
    for f in source.iterdir():
        if f.suffix in (".slang", ".cuh"):
            (folder / f.name).write_text(f.read_text().replace("%FACTOR%", "2.0").replace("%CONST_VAL%", "2.0"))
    return folder


def measure(side: str, name: str, warm: int, scratch: Path, env: dict[str, str],
            source: Path = SUITE) -> dict[str, float]:
    tag = f"{side}-{parse_module(name)[0]}"
    folder = fresh_copy(scratch, tag, source)
    caches = scratch / f"{tag}-caches"
    cold = one_load(side, folder, name, caches, env)
    warms = [one_load(side, folder, name, caches, env) for _ in range(warm)]
    out = {"cold_s": cold["load_s"], "warm_s": statistics.median(w["load_s"] for w in warms)}
    if "ready_s" in cold:
        out["cold_ready_s"] = cold["ready_s"]
        out["warm_ready_s"] = statistics.median(w.get("ready_s", 0.0) for w in warms)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--real-site", help="folder holding the unpacked slangtorch wheel (put first on PYTHONPATH)")
    ap.add_argument("--folder", type=Path, default=SUITE, help="another project's module folder (see above)")
    a = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [a.real_site, str(ROOT), env.get("PYTHONPATH")]))
    import torch

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA (CPU-only torch or no GPU)"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# bench_slangtorch {datetime.date.today()} on {card}; {os.cpu_count()} CPUs, load average {load:.1f}; "
          f"torch {torch.__version__}")
    why_not_real = real_unavailable(env)
    print(f"# real slangtorch: {'measured' if why_not_real is None else 'skipped: ' + why_not_real}")
    scratch = Path(tempfile.mkdtemp(prefix="bench-slangtorch-"))
    try:
        print(f"{'module':22s} {'ours cold':>10s} {'ours warm':>10s} {'+NVRTC cold':>12s} {'real cold':>10s} "
              f"{'real warm':>10s} {'cold x':>7s} {'warm x':>7s}")
        for name in a.modules.split(","):
            ours = measure("ours", name, a.warm, scratch, env, a.folder)
            real = measure("real", name, a.warm, scratch, env, a.folder) if why_not_real is None else {}
            ours_cold = ours.get("cold_ready_s", ours["cold_s"])
            cells = [f"{ours['cold_s']:10.2f}", f"{ours['warm_s']:10.3f}",
                     f"{ours['cold_ready_s']:12.2f}" if "cold_ready_s" in ours else f"{'-':>12s}"]
            if real:
                cells += [f"{real['cold_s']:10.2f}", f"{real['warm_s']:10.3f}",
                          f"{real['cold_s'] / ours_cold:7.1f}", f"{real['warm_s'] / ours['warm_s']:7.1f}"]
            else:
                cells += [f"{'-':>10s}"] * 2 + [f"{'-':>7s}"] * 2
            print(f"{parse_module(name)[0]:22s} " + " ".join(cells), flush=True)
        print("# seconds; cold x / warm x = real / ours (ours cold counted with NVRTC where it was measured)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
