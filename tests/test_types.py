"""The type check: mypy over slang_kernel, magics and widgets with the [tool.mypy] configuration of
pyproject.toml (strict for the model and the backends). A clean clone takes ~30 s of CPU (mypy
analyses numpy, IPython, ipykernel, ...); with a warm .mypy_cache, about a second."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reads_the_folders_and_the_repository_has_no_symlink() -> None:
    # [tool.mypy] checks magics/ and widgets/ as they are (packages `magics`, `widgets`), no links
    tracked = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    links = [line.split("\t", 1)[1] for line in tracked.splitlines() if line.startswith("120000 ")]
    assert links == [], f"symlinks in the repository: {links}"
    import tomllib

    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert files == ["slang_kernel", "magics", "widgets"], files


@pytest.mark.slow
@pytest.mark.timeout(900)  # cold, on a loaded machine
def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, capture_output=True, text=True)
    # ("No module named mypy": it comes with the test extra, which scripts/setup installs)
    assert proc.returncode == 0, f"mypy exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
