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


def test_no_fixed_sleep_in_the_tests() -> None:
    # a test waits on the condition a wait stands for (tests/waiting.py's wait_until, Playwright's
    # wait_for_function/locator waits, lab_pages.py's wait_frames/wait_redrawn/painted), never for a
    # fixed time. Allowed: waiting.py's poll interval, and the notebook cell that must outrun a time
    # limit (it is the thing timed, named CELL_OUTRUNNING_THE_LIMIT).
    import re

    fixed = re.compile(r"\b(?:sleep|wait_for_timeout)\(")
    allowed = {("waiting.py", "time.sleep" + "(poll)"), ("test_execute_notebook.py", "CELL_OUTRUNNING_THE_LIMIT = ")}
    found = []
    for path in sorted((ROOT / "tests").rglob("*")):
        if path.suffix not in (".py", ".js", ".ts", ".slang") or "slang_torch" in path.parts:
            continue   # tests/data/slang_torch: slang-torch's own files, kept as they are
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if fixed.search(line) and not any(path.name == f and s in line for f, s in allowed):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "fixed sleeps in tests (wait on the condition instead):\n" + "\n".join(found)
