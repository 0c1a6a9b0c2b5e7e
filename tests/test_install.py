"""`pip install` is the whole install: the wheel (and an editable install) carries the kernelspec and
the labextension as shared data, its dependencies are what the code imports, and a wheel installed
into a fresh virtualenv (no scripts/setup, no `python -m slang_kernel install`) runs the Slang kernel
notebook and the quickstart; `pip uninstall` takes the kernelspec and the labextension away again.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from slang_kernel.frontend.kernel.install import (
    KERNEL_NAME,
    LABEXTENSION,
    LABEXTENSION_NAME,
    RESOURCES,
    kernel_json,
    labextension_source_digest,
)

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC_DATA = f"share/jupyter/kernels/{KERNEL_NAME}"
LABEXTENSION_DATA = f"share/jupyter/labextensions/{LABEXTENSION_NAME}"
SOURCES = ("slang_kernel", "magics", "widgets")  # what the wheel installs as slang_kernel[.magics|.widgets]
NOTEBOOKS = ("notebooks/01_first_shader.ipynb", "notebooks/00_quickstart.ipynb")

# declared, not imported, and why
NOT_IMPORTED = {
    "jupyterlab": "the front end the labextension is for; brings `jupyter lab` and `jupyter execute`",
    "ipywidgets": "the widget manager of JupyterLab 4 / Notebook 7 that anywidget renders through",
}
# imported, optional (the importing module says how to get it), and the extra that brings it
OPTIONAL_IMPORTS = {
    "cupy": "cuda",
    "dask": "dask",
    "distributed": "dask",
    "dask_cuda": None,  # one Dask worker per GPU (slang_kernel.distributed.local_cuda_cluster), GPU hosts only
}


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _req_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


# --- the data files ------------------------------------------------------------------------------


def test_wheel_kernel_json_is_the_kernelspec():
    """resources/ is shared as share/jupyter/kernels/slang: its kernel.json must be kernel_json() with
    "python" (Jupyter runs that as its own interpreter: the environment the wheel went into)."""
    assert json.loads((RESOURCES / "kernel.json").read_text()) == kernel_json(python="python")
    assert {p.name for p in RESOURCES.glob("logo-*.png")} == {"logo-32x32.png", "logo-64x64.png", "logo-128x128.png"}


def test_pyproject_ships_kernelspec_and_labextension_as_shared_data():
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    res, ext = (p.relative_to(ROOT).as_posix() for p in (RESOURCES, LABEXTENSION))
    assert wheel["shared-data"] == {res: KERNELSPEC_DATA, ext: LABEXTENSION_DATA}
    assert wheel["sources"] == {"magics": "slang_kernel/magics", "widgets": "slang_kernel/widgets"}


def test_labextension_build_is_current():
    """The built labextension is committed; scripts/build-labextension records the digest of the sources
    it was built from. A source edit without a rebuild (node + npm) fails here."""
    recorded = (LABEXTENSION / "source.sha256").read_text().strip()
    assert recorded == labextension_source_digest(), "labextension_src changed: run scripts/build-labextension"
    pkg = json.loads((LABEXTENSION / "package.json").read_text())
    assert pkg["name"] == LABEXTENSION_NAME
    assert (LABEXTENSION / pkg["jupyterlab"]["_build"]["load"]).is_file()


def test_this_environment_has_them_from_pip():
    """The test environment was made by `pip install -e .` (scripts/setup): its RECORD owns the
    kernelspec and the labextension under sys.prefix, so `pip uninstall` removes them."""
    # the installed distribution, not a stale slang_kernel.egg-info of a setuptools build in the checkout
    (dist,) = md.distributions(name="slang-kernel", path=[sysconfig.get_path("purelib")])
    files = {f.as_posix() for f in dist.files or ()}
    data = Path(sysconfig.get_path("data"))
    for rel in (f"{KERNELSPEC_DATA}/kernel.json", f"{KERNELSPEC_DATA}/logo-64x64.png",
                f"{LABEXTENSION_DATA}/package.json"):
        assert any(f.endswith(rel) for f in files), f"{rel} is not in slang-kernel's RECORD"
        assert (data / rel).is_file(), data / rel
    import slang_kernel.magics
    import slang_kernel.widgets

    assert Path(slang_kernel.magics.__file__).parent.name == "magics"
    assert Path(slang_kernel.widgets.__file__).parent.name == "widgets"


# --- dependencies --------------------------------------------------------------------------------


def _ours(module: str) -> bool:
    """A module of this package imported by file name (a worker started by path does that)."""
    return any((ROOT / src / f"{module}.py").exists() or (ROOT / src / module).is_dir()
               for src in ("slang_kernel", "slang_kernel/backends", "slang_kernel/compiler", "slang_kernel/frontend/kernel"))


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files importing it (absolute imports of anything not stdlib, not ours)."""
    found: dict[str, set[str]] = {}
    for src in SOURCES:
        for path in (ROOT / src).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top in (*SOURCES, "__future__") or _ours(top):
                        continue
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_dependencies_are_what_the_code_imports():
    project = _pyproject()["project"]
    declared = {_req_name(r) for r in project["dependencies"]}
    extras = {name: {_req_name(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}
    to_dist = md.packages_distributions()
    imported: dict[str, str] = {}
    missing = []
    for module, files in sorted(_third_party_imports().items()):
        dists = {d.lower().replace("_", "-") for d in to_dist.get(module, [])}
        if module in OPTIONAL_IMPORTS:
            extra = OPTIONAL_IMPORTS[module]
            if extra is not None:
                assert dists & extras[extra] or any(r.startswith(module) for r in extras[extra]), (module, extra)
            continue
        hit = dists & declared
        if not hit:
            missing.append(f"{module} (distribution {sorted(dists) or '?'}), imported by {sorted(files)}")
        imported.update({d: module for d in hit})
    assert not missing, "imported but not declared in [project].dependencies:\n" + "\n".join(missing)
    unused = declared - set(imported) - set(NOT_IMPORTED)
    assert not unused, f"declared but never imported (say why in NOT_IMPORTED, or drop them): {sorted(unused)}"


# --- the wheel in a fresh virtualenv -------------------------------------------------------------


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, **kwargs)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} -> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    return r


def _pins(path: Path) -> Path:
    """Constraints: the versions this environment (scripts/setup) resolved, so the fresh venv gets
    the same ones and pip does not explore others."""
    skip = {"slang-kernel", "editables"}
    lines = sorted({f"{d.metadata['Name']}=={d.version}" for d in md.distributions()
                    if d.metadata["Name"] and d.metadata["Name"].lower() not in skip})
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wheel_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    """Done means (issue 18): `pip install` of the wheel into a fresh virtualenv, then `jupyter
    execute` of the Slang kernel notebook and the quickstart; `pip uninstall` cleans up after it.

    Fast enough for CI: the venv has no pip of its own (this environment's pip installs into it
    with --python), nothing is byte-compiled, and versions are pinned to this environment's."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    wheels = tmp_path / "wheels"
    # with hatchling here (a test dependency), pip builds with it instead of installing it into a
    # fresh isolated build environment first
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *isolation, "-w", wheels, ROOT])
    (wheel,) = wheels.glob("slang_kernel-*.whl")
    timings["build_wheel_s"] = time.perf_counter() - t0

    t = time.perf_counter()
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", py]  # pip >= 22.3
    _run([*pip, "install", "-q", "--no-compile", "--disable-pip-version-check",
          "-c", _pins(tmp_path / "pins.txt"), wheel])
    timings["install_s"] = time.perf_counter() - t

    # an environment that sees nothing of ours but the venv: no .venv on PATH, no JUPYTER_PATH, a
    # fresh per-user Jupyter/IPython dir (a kernelspec installed --user must not stand in)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR",
                        "IPYTHONDIR", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               JUPYTER_DATA_DIR=str(home / "jupyter-data"), JUPYTER_CONFIG_DIR=str(home / "jupyter-config"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_PLATFORM_DIRS="1")
    jupyter = venv / "bin" / "jupyter"

    t = time.perf_counter()
    work = tmp_path / "notebooks"  # a copy: executed in place, where their relative paths hold
    shutil.copytree(ROOT / "notebooks", work)
    runs = [(nb, subprocess.Popen([jupyter, "execute", "--timeout=600", "--inplace", work / Path(nb).name],
                                  env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            for nb in NOTEBOOKS]  # side by side: each is mostly one compiler or g++ process at a time
    # what Jupyter sees, asked while the notebooks run (each `jupyter` start takes seconds)
    try:
        specs = json.loads(_run([jupyter, "kernelspec", "list", "--json"], env=env).stdout)["kernelspecs"]
        assert KERNEL_NAME in specs, specs
        assert Path(specs[KERNEL_NAME]["resource_dir"]).resolve() == (venv / KERNELSPEC_DATA).resolve()
        labext = _run([jupyter, "labextension", "list"], env=env)
        assert re.search(rf"{LABEXTENSION_NAME} v\S+ .*enabled.*OK", labext.stdout + labext.stderr), labext
    except BaseException:
        for _, proc in runs:
            proc.kill()
            proc.wait()
        raise
    for nb, proc in runs:
        log, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"jupyter execute {nb} -> {proc.returncode}\n{log[-6000:]}"
    timings["execute_s"] = time.perf_counter() - t
    executed = json.loads((work / "01_first_shader.ipynb").read_text())
    assert executed["metadata"]["kernelspec"]["name"] == KERNEL_NAME
    code = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code), "not every cell of 01_first_shader ran"

    _run([*pip, "uninstall", "-y", "-q", "slang-kernel"])
    assert not (venv / KERNELSPEC_DATA).exists() and not (venv / LABEXTENSION_DATA).exists()
    timings["total_s"] = time.perf_counter() - t0
    print("WHEEL TEST", json.dumps({k: round(v, 1) for k, v in timings.items()}))
