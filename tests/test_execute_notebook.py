"""scripts/lab --execute (scripts/execute_notebook.py): a cell past the limit per cell, or a failing
cell, ends the run with one message naming the notebook, the cell and what to do; the advice works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "execute_notebook.py"
# the cell the limit per cell is timed against: it must outrun the limit (no wait of the test's own)
CELL_OUTRUNNING_THE_LIMIT = "import time\ntime.sleep(4)  # longer than the limit of 2 s set below"


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a tiny notebook"),
                                         *(nbformat.v4.new_code_cell(c) for c in cells)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def execute(src: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(src), str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


@pytest.mark.slow
def test_a_cell_past_the_limit_names_the_cell_and_the_advice_works(tmp_path: Path) -> None:
    src = notebook(tmp_path / "sleepy.ipynb", "x = 1", CELL_OUTRUNNING_THE_LIMIT)
    out = tmp_path / "out" / "sleepy.ipynb"
    r = execute(src, out, SLANG_KERNEL_CELL_TIMEOUT="2")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "CellTimeoutError" not in r.stderr
    assert f"{src}, cell 3 of 3 ('import time') was still running after the limit of 2 s per cell" in r.stderr
    assert "SLANG_KERNEL_QUICK=1 scripts/lab --execute" in r.stderr
    assert out.exists()                        # the copy executed so far is written
    advice = next(line for line in r.stderr.splitlines() if line.startswith("To give each cell longer: "))
    assign = advice.split(": ", 1)[1].split()[0]          # SLANG_KERNEL_CELL_TIMEOUT=1200
    name, value = assign.split("=")
    again = execute(src, out, **{name: value})
    assert again.returncode == 0, again.stderr


@pytest.mark.slow
def test_a_failing_cell_is_named_with_its_error(tmp_path: Path) -> None:
    src = notebook(tmp_path / "broken.ipynb", "total = 1 / 0")
    r = execute(src, tmp_path / "broken.out.ipynb")
    assert r.returncode == 1
    assert f"{src}, cell 2 of 2 ('total = 1 / 0') failed: ZeroDivisionError: division by zero" in r.stderr
    assert "under that cell" in r.stderr and (tmp_path / "broken.out.ipynb").exists()
