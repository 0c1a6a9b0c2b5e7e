"""Every notebook runs top to bottom as a newcomer runs it, in under a minute on two cores without a
GPU: the default backend (`auto`: software Vulkan here, the notebooks size themselves to it), through
`jupyter execute` and through `scripts/lab --execute`, each timed as the user waits for it (the
command's wall time, set-up included). Times go to artifacts/notebook_times.json; a run over the
budget fails naming the notebook, its slowest cells and the time.

Slow (24 runs, ~6 min on 2 cores): the lead's full suite runs it; `-k budget` alone to check."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BUDGET_S = 60.0
TIMES = ROOT / "artifacts" / "notebook_times.json"
JUPYTER = Path(sys.executable).with_name("jupyter")


def _slowest(path: Path) -> str:
    """The executed copy's three slowest cells (nbclient records each cell's times)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return "(no executed copy)"
    rows = []
    for i, c in enumerate(nb.cells):
        ex = c.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            t = (dt.datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                 - dt.datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            rows.append((t, i, c.source.split("\n", 1)[0][:50]))
    return "; ".join(f"cell {i} ({src!r}) {t:.1f} s" for t, i, src in sorted(rows, reverse=True)[:3])


def _record(name: str, runner: str, seconds: float) -> None:
    TIMES.parent.mkdir(exist_ok=True)
    try:
        times = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        times = {}
    times.setdefault(name, {})[runner] = round(seconds, 1)
    TIMES.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runner", ["jupyter execute", "scripts/lab --execute"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_within_the_budget(path: Path, runner: str, tmp_path: Path, cache_dir: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SLANG_KERNEL_BACKEND", "SLANG_KERNEL_QUICK")}
    env.update(SLANG_KERNEL_CACHE_DIR=cache_dir, SLANG_KERNEL_SKIP_APT="1")
    out = tmp_path / f"{path.stem}_out.ipynb"
    if runner == "jupyter execute":
        cmd = [str(JUPYTER), "execute", f"--timeout={int(BUDGET_S * 5)}", f"--output={out.with_suffix('')}", str(path)]
    else:
        cmd = [str(ROOT / "scripts" / "lab"), "--execute", str(path), str(out)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=path.parent, env=env, capture_output=True, text=True, timeout=BUDGET_S * 8)
    took = time.perf_counter() - t0
    _record(path.stem, runner, took)
    print(f"{path.stem} via {runner}: {took:.1f} s")
    assert r.returncode == 0, f"{runner} {path.name} failed:\n{r.stderr[-3000:]}"
    assert took < BUDGET_S, f"{path.name} via {runner} took {took:.1f} s (budget {BUDGET_S:.0f} s): {_slowest(out)}"
