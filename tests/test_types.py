"""The type check: mypy over slang_kernel, magics and widgets with the [tool.mypy] configuration of
pyproject.toml (strict for the model and the backends). A clean clone takes ~30 s of CPU (mypy
analyses numpy, IPython, ipykernel, ...); with a warm .mypy_cache, about a second."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reads_magics_and_widgets_as_subpackages() -> None:
    # [tool.mypy] checks magics/ and widgets/ through these links, named as they are installed
    for name in ("magics", "widgets"):
        link = ROOT / "scripts" / "mypy_path" / "slang_kernel" / name
        assert link.is_symlink() and link.resolve() == ROOT / name, f"{link} must link to {name}/"


@pytest.mark.slow
@pytest.mark.timeout(900)  # cold, on a loaded machine
def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, capture_output=True, text=True)
    # ("No module named mypy": it comes with the test extra, which scripts/setup installs)
    assert proc.returncode == 0, f"mypy exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
