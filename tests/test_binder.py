"""The set-up layer: binder/ (repo2docker), scripts/ and .ci/run are valid and agree with each other."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
SHELL_SCRIPTS = ["scripts/setup", "scripts/test", "scripts/lab", ".ci/run", "binder/postBuild", "binder/start"]
KERNELSPEC_INSTALL = re.compile(r"(?:^|[\s/])python3? -m slang_kernel install([^\n;&|>]*)", re.M)


def _lines(path):
    """Non-blank lines of a file with comments stripped."""
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_script_is_executable_bash(name):
    path = ROOT / name
    assert path.is_file(), f"{name} is missing"
    assert os.access(path, os.X_OK), f"{name} is not executable (chmod +x)"
    assert re.match(r"#!\s*/(usr/bin/env |bin/)bash\b", path.read_text()), f"{name} needs a bash shebang"
    subprocess.run(["bash", "-n", str(path)], check=True)  # syntax


@pytest.mark.parametrize("name", ["scripts/setup", "scripts/test", "scripts/lab", ".ci/run"])
def test_scripts_are_strict(name):
    assert "set -euo pipefail" in (ROOT / name).read_text()


def test_ci_runs_scripts_test():
    assert any(re.match(r"(\./)?scripts/test\b", line) for line in _lines(ROOT / ".ci/run"))


def test_start_ends_with_exec():
    assert _lines(BINDER / "start")[-1] == 'exec "$@"'


def test_start_passes_arguments_through():
    r = subprocess.run(
        [str(BINDER / "start"), sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", "a b", ""],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(r.stdout) == ["a b", ""]


def test_apt_txt_lists_vulkan_driver():
    packages = _lines(BINDER / "apt.txt")
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", p) for p in packages), packages
    for needed in ("mesa-vulkan-drivers", "libvulkan1"):
        assert needed in packages


def test_requirements_install_this_package():
    reqs = _lines(BINDER / "requirements.txt")
    assert any(re.fullmatch(r"(-e\s+)?\.(\[[\w,-]+\])?", r) for r in reqs), reqs
    assert "slang-kernel" in (ROOT / "pyproject.toml").read_text()


def test_setup_and_postbuild_install_the_same_kernelspec():
    def installs(name):
        return {args.strip() for args in KERNELSPEC_INSTALL.findall("\n".join(_lines(ROOT / name)))}

    setup, post_build = installs("scripts/setup"), installs("binder/postBuild")
    assert post_build == {"--sys-prefix"}
    assert setup == post_build


# --- scripts/lab --execute: exit code and output file ---------------------------------------------------


def _notebook(path, *cells):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _lab_execute(*args):
    # No apt, no Vulkan check: only the notebook runner is under test here.
    env = dict(os.environ, SLANG_KERNEL_SKIP_APT="1", SLANG_KERNEL_SKIP_VULKAN="1")
    return subprocess.run([str(ROOT / "scripts/lab"), "--execute", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


needs_venv = pytest.mark.skipif(not (ROOT / ".venv/bin/python").exists(), reason="needs .venv (run scripts/setup)")


@pytest.mark.slow
@needs_venv
def test_lab_execute_writes_executed_notebook(tmp_path):
    import nbformat

    src = _notebook(tmp_path / "ok.ipynb", "x = 6 * 7", "print(x)")
    out = tmp_path / "out" / "ok.ipynb"
    r = _lab_execute(src, out)
    assert r.returncode == 0, r.stderr
    outputs = nbformat.read(out, as_version=4).cells[1].outputs
    assert outputs and outputs[0]["text"] == "42\n"


@pytest.mark.slow
@needs_venv
def test_lab_execute_fails_when_a_cell_fails(tmp_path):
    import nbformat

    src = _notebook(tmp_path / "bad.ipynb", "1/0", "print('never')")
    out = tmp_path / "bad.out.ipynb"
    r = _lab_execute(src, out)
    assert r.returncode != 0
    assert "ZeroDivisionError" in r.stderr
    assert nbformat.read(out, as_version=4).cells[0].outputs[0]["ename"] == "ZeroDivisionError"
