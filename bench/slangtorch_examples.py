"""slang-torch's examples, unchanged, with ours and with the real slangtorch wheel side by side (GPU machine).

Each example script of shader-slang/slang-torch (bezier2d, soft-, hard- and fwd-rasterizer, inline-mlp)
runs in its own Python process, once per side, from a fresh copy of its folder (slangtorch keeps its
builds there; the scripts write their figures and videos there), with empty caches:

    ours: `import slangtorch` is slang_kernel.slangtorch (sys.modules alias set before the script runs)
    real: the slangtorch wheel, unpacked into --real-site (`pip download --no-deps slangtorch==1.3.21`,
          `python -m zipfile -e slangtorch-*.whl SITE`); it builds with nvcc and ninja

The scripts are not edited. What is compared is read from them as they run: each new tensor their
variable `loss` holds (a tracer on the script's own frames: after each top-level line, and when a
function such as `optimize(i)` returns; `float(loss)` syncs once per iteration on both sides) and,
at the end, the final tensors each example produces (`outputs` below), with the wall time.
torch is seeded (0) before each script, so the bezier2d's unseeded `torch.rand` start is the same on
both sides. Results: a table on stdout, JSON and the final tensors (.npy) under --out.

    python bench/slangtorch_examples.py --examples SLANG_TORCH_CHECKOUT [--real-site DIR] [--only bezier2d,...]
                                        [--sides ours,real] [--timeout 900] [--out $OUT]

SLANG_TORCH_CHECKOUT holds `examples/` of slang-torch v1.3.22, e.g. made here and carried in .gpu/:
`git -C MIRROR archive v1.3.22 examples | tar x -C .gpu/slang-torch` (the fetched mirror of
shader-slang/slang-torch). The soft and hard rasterizers save an MP4 through matplotlib's FFMpegWriter
and need `ffmpeg` on PATH; inline-mlp ends by writing a video with OpenCV (`cv2`), after training: a
missing one is reported with the losses that were recorded before it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLES", "Example", "compare", "main"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Example:
    """One example: its folder under examples/, the script run, and the tensors compared at the end."""

    name: str
    folder: str
    script: str
    outputs: tuple[str, ...]
    needs: tuple[str, ...] = ()    # programs the script runs (looked up on PATH)


EXAMPLES = {e.name: e for e in (
    Example("bezier2d", "bezier2d", "bezier_curvefit.py", ("pts", "opt_param")),
    Example("soft-rasterizer", "soft-rasterizer-example", "rasterizer2d.py", ("vertices", "color"), ("ffmpeg",)),
    Example("hard-rasterizer", "hard-rasterizer-example", "rasterizer2d.py", ("vertices", "color"), ("ffmpeg",)),
    Example("fwd-rasterizer", "fwd-rasterizer-example", "rasterizer2d.py", ("outputImage",)),
    Example("inline-mlp", "inline-mlp-example", "mlp_image_fit.py", ("y_pred", "feature_grid")),
)}

# Runs in the child process: argv = side, script, result json path, output names (comma separated).
DRIVER = r'''
import json, os, runpy, sys, time, traceback
side, script, result_path, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
os.environ.setdefault("MPLBACKEND", "Agg")
if side == "ours":
    import slang_kernel.slangtorch
    sys.modules["slangtorch"] = slang_kernel.slangtorch
import slangtorch
import torch
torch.manual_seed(0)
losses, seen = [], [None]

def local(frame, event, arg):
    # at the top level after each line; in a function (optimize(i), a loss helper) when it returns,
    # so a loss summed up inside a helper is recorded once, as the value it returns
    if event != ("line" if frame.f_code.co_name == "<module>" else "return"):
        return local
    loss = frame.f_locals.get("loss")
    if loss is not None and loss is not seen[0] and hasattr(loss, "item"):
        seen[0] = loss
        losses.append(float(loss.detach()))
    return local

def trace(frame, event, arg):       # only the example's own frames (its loop, or its optimize(i))
    return local if frame.f_code.co_filename == script else None

out = {"side": side, "slangtorch": getattr(slangtorch, "__file__", "?"), "error": None}
t0 = time.perf_counter()
sys.path.insert(0, os.path.dirname(script))   # as `python script.py` does: its sibling modules import
sys.settrace(trace)
try:
    g = runpy.run_path(script, run_name="__main__")
except BaseException as exc:        # report it with what was recorded before it
    g = {}
    out["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-800:]
    frame = exc.__traceback__
    while frame is not None:        # the script's globals, from its frame in the traceback
        if frame.tb_frame.f_code.co_filename == script:
            g = frame.tb_frame.f_globals
            break
        frame = frame.tb_next
finally:
    sys.settrace(None)
if torch.cuda.is_available():
    torch.cuda.synchronize()
out["seconds"] = time.perf_counter() - t0
out["losses"] = losses
import numpy as np
saved = {}
for n in names:
    v = g.get(n)
    if hasattr(v, "detach"):
        path = result_path[:-5] + f".{n}.npy"
        np.save(path, v.detach().float().cpu().numpy())
        saved[n] = path
out["outputs"] = saved
with open(result_path, "w") as f:
    json.dump(out, f)
'''


def run_side(side: str, ex: Example, examples: Path, work: Path, out: Path, env: dict[str, str],
             timeout: float) -> dict[str, Any]:
    """One example on one side, from a fresh copy of its folder and empty caches."""
    folder = work / side / ex.folder
    shutil.copytree(examples / "examples" / ex.folder, folder)
    caches = work / side / "caches"
    env = dict(env, SLANG_KERNEL_CACHE_DIR=str(caches / "sk"), CUPY_CACHE_DIR=str(caches / "cupy"),
               TORCH_EXTENSIONS_DIR=str(caches / "torch-ext"), PYTHONUNBUFFERED="1")
    result = out / f"{ex.name}.{side}.json"
    driver = work / "driver.py"
    driver.write_text(DRIVER)
    log = out / f"{ex.name}.{side}.log"
    try:
        with open(log, "w") as f:
            p = subprocess.run([sys.executable, str(driver), side, str(folder / ex.script), str(result),
                                ",".join(ex.outputs)], cwd=folder, env=env, stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"side": side, "error": f"still running after {timeout:.0f} s (--timeout)", "losses": [], "outputs": {}}
    if not result.exists():
        tail = log.read_text()[-1200:]
        return {"side": side, "error": f"exit {p.returncode} before a result:\n{tail}", "losses": [], "outputs": {}}
    return dict(json.loads(result.read_text()))


def compare(ours: dict[str, Any], real: dict[str, Any], rtol: float = 1e-3, atol: float = 1e-5) -> dict[str, Any]:
    """Losses iteration by iteration and the final tensors: the largest differences, and whether they agree
    to float tolerance (|a - b| <= atol + rtol * |b|)."""
    import numpy as np

    a, b = ours.get("losses", []), real.get("losses", [])
    n = min(len(a), len(b))
    diff = max((abs(x - y) for x, y in zip(a[:n], b[:n])), default=0.0)
    same = len(a) == len(b) and all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b))
    tensors: dict[str, dict[str, Any]] = {}
    for name in sorted(set(ours.get("outputs", {})) & set(real.get("outputs", {}))):
        x, y = np.load(ours["outputs"][name]), np.load(real["outputs"][name])
        if x.shape != y.shape:
            tensors[name] = {"shapes": [list(x.shape), list(y.shape)], "same": False}
            continue
        close = bool(np.allclose(x, y, rtol=rtol, atol=atol))
        tensors[name] = {"max_abs_diff": float(np.max(np.abs(x - y))) if x.size else 0.0, "same": close}
        same = same and close
    stopped = [r.get("side", "?") for r in (ours, real) if r.get("error")]
    return {"iterations": [len(a), len(b)], "max_loss_diff": diff, "tensors": tensors, "same": same and not stopped,
            "stopped": stopped}


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.6g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", required=True, help="a checkout of slang-torch v1.3.22 (holding examples/)")
    ap.add_argument("--real-site", help="folder holding the unpacked slangtorch wheel")
    ap.add_argument("--only", default=",".join(EXAMPLES), help="comma-separated: " + ", ".join(EXAMPLES))
    ap.add_argument("--sides", default="ours,real")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per example and side")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/out"))
    a = ap.parse_args()
    examples, out = Path(a.examples).resolve(), Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    unknown = [n for n in a.only.split(",") if n not in EXAMPLES]
    if unknown:
        ap.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    if not (examples / "examples").is_dir():
        ap.error(f"{examples} has no examples/ folder: give a checkout of shader-slang/slang-torch v1.3.22")
    sides = a.sides.split(",")
    if "real" in sides and not (a.real_site and (Path(a.real_site) / "slangtorch").is_dir()):
        print("# real: skipped: give --real-site, a folder with the slangtorch wheel unpacked "
              "(pip download --no-deps slangtorch==1.3.21; python -m zipfile -e slangtorch-*.whl SITE)")
        sides = [s for s in sides if s != "real"]
    import torch

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    print(f"# slangtorch_examples {datetime.date.today()} on {card or 'no CUDA'}; torch {torch.__version__}; "
          f"sides {', '.join(sides)}")
    if card is None:
        print("# slang-torch's examples launch CUDA kernels: run this on the GPU machine (bench/gpu_run.sh)")
        sys.exit(2)
    base = dict(os.environ)
    work = Path(tempfile.mkdtemp(prefix="slangtorch-examples-"))
    rows: list[dict[str, Any]] = []
    for name in a.only.split(","):
        ex = EXAMPLES[name]
        missing = [p for p in ex.needs if shutil.which(p) is None]
        results: dict[str, dict[str, Any]] = {}
        for side in sides:
            env = dict(base)
            site = [str(Path(a.real_site).resolve())] if side == "real" else []
            env["PYTHONPATH"] = os.pathsep.join(site + [str(ROOT)] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
            results[side] = run_side(side, ex, examples, work, out, env, a.timeout)
        row: dict[str, Any] = {"example": name, "missing": missing, **results}
        if "ours" in results and "real" in results:
            row["compare"] = compare(results["ours"], results["real"])
        rows.append(row)
        for side, r in results.items():
            losses = r.get("losses", [])
            print(f"{name:16s} {side:5s} {_fmt(r.get('seconds')):>9s} s  {len(losses):6d} losses  first "
                  f"{_fmt(losses[0] if losses else None):>10s}  last {_fmt(losses[-1] if losses else None):>10s}"
                  + (f"  ERROR {r['error'].splitlines()[-1][:150]}" if r.get("error") else ""), flush=True)
        if missing:
            print(f"{name:16s} needs {', '.join(missing)} on PATH (not found): its error above is that")
        if "compare" in row:
            c = row["compare"]
            t = "; ".join(f"{k}: " + (f"max |diff| {v['max_abs_diff']:.3g}" if "max_abs_diff" in v else f"shapes {v['shapes']}")
                          for k, v in c["tensors"].items())
            verdict = (f"NOT COMPARED ({' and '.join(c['stopped'])} stopped with an error), up to there"
                       if c["stopped"] else "SAME" if c["same"] else "DIFFERENT")
            print(f"{name:16s} ours vs real: {verdict} to float tolerance; iterations "
                  f"{c['iterations'][0]}/{c['iterations'][1]}, max loss diff {c['max_loss_diff']:.3g}; {t}", flush=True)
            r_s, o_s = results["real"].get("seconds"), results["ours"].get("seconds")
            if r_s and o_s:
                print(f"{name:16s} wall time real / ours = {r_s / o_s:.2f}x (cold caches: both include their builds)")
    (out / "slangtorch_examples.json").write_text(json.dumps({"card": card, "rows": rows}, indent=1))
    print(f"# JSON, logs and final tensors in {out}; scratch copies in {work}")


if __name__ == "__main__":
    main()
