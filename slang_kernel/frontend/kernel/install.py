"""The `slang` kernelspec (kernel.json and logos) and the Slang syntax highlighting for JupyterLab and
Notebook 7 (a prebuilt labextension: labextension/, built from labextension_src/ by
scripts/build-labextension; it also highlights `%%slang` cells of Python notebooks).

`pip install slang-kernel` (or `pip install -e .`) already puts both into the environment:
<prefix>/share/jupyter/kernels/slang (resources/, whose kernel.json starts "python", which Jupyter
resolves to its own interpreter) and <prefix>/share/jupyter/labextensions/slang-kernel-syntax, and
`pip uninstall` removes them. install() is for other places (--user, --prefix, another interpreter,
a default backend), through jupyter_client's KernelSpecManager.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "DISPLAY_NAME",
    "KERNEL_NAME",
    "RESOURCES",
    "install",
    "install_labextension",
    "kernel_json",
    "labextension_source_digest",
    "temporary_kernelspec",
    "uninstall",
    "write_kernelspec",
]

KERNEL_NAME = "slang"
DISPLAY_NAME = "Slang"
RESOURCES = Path(__file__).with_name("resources")
LABEXTENSION = Path(__file__).with_name("labextension")
LABEXTENSION_SRC = Path(__file__).with_name("labextension_src")
LABEXTENSION_NAME = "slang-kernel-syntax"


def kernel_json(python: str | None = None, display_name: str = DISPLAY_NAME,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "argv": [python or sys.executable, "-m", "slang_kernel.frontend.kernel", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "slang",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }
    if env:
        spec["env"] = dict(env)
    return spec


def write_kernelspec(dest: str | os.PathLike[str], **kwargs: Any) -> Path:
    """The logos (every file of resources/) and a kernel.json for `kwargs` (see kernel_json) into the
    folder `dest`; resources/kernel.json itself is the one the wheel installs (python="python")."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in RESOURCES.iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)
    (dest / "kernel.json").write_text(json.dumps(kernel_json(**kwargs), indent=1) + "\n")
    return dest


def default_scope() -> str:
    """--sys-prefix inside a virtualenv or conda env (Jupyter there finds it), else --user."""
    in_env = sys.prefix != getattr(sys, "base_prefix", sys.prefix) or os.path.exists(
        os.path.join(sys.prefix, "conda-meta"))
    return "sys-prefix" if in_env else "user"


def install(*, user: bool = False, sys_prefix: bool = False, prefix: str | None = None,
            kernel_name: str = KERNEL_NAME, display_name: str = DISPLAY_NAME,
            env: dict[str, str] | None = None, python: str | None = None) -> str:
    """Install the kernelspec; returns the folder it went to. With no scope given, see default_scope()."""
    from jupyter_client.kernelspec import KernelSpecManager

    if sum(map(bool, (user, sys_prefix, prefix))) > 1:
        raise ValueError("choose one of user, sys_prefix and prefix")
    if not (user or sys_prefix or prefix):
        user, sys_prefix = default_scope() == "user", default_scope() == "sys-prefix"
    if sys_prefix:
        prefix = sys.prefix
    with tempfile.TemporaryDirectory() as tmp:
        src = write_kernelspec(Path(tmp) / kernel_name, python=python, display_name=display_name, env=env)
        dest = KernelSpecManager().install_kernel_spec(str(src), kernel_name, user=user, prefix=prefix)
    install_labextension(Path(dest).parent.parent)  # <data>/kernels/<name> -> <data>
    return dest


def install_labextension(data_dir: str | os.PathLike[str]) -> Path | None:
    """Copy the prebuilt Slang highlighting into `data_dir`/labextensions (JupyterLab loads every
    folder there at start). None when this copy of the package has no built extension."""
    if not (LABEXTENSION / "package.json").exists():
        return None
    dest = Path(data_dir) / "labextensions" / LABEXTENSION_NAME
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".tmp-") as tmp:  # same file system
        staged = Path(tmp) / LABEXTENSION_NAME
        shutil.copytree(LABEXTENSION, staged)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staged, dest)
    return dest


def labextension_source_digest(src: str | os.PathLike[str] = LABEXTENSION_SRC) -> str:
    """sha256 of the labextension's sources (package.json and src/), as scripts/build-labextension
    records it in labextension/source.sha256 when it builds."""
    import hashlib

    src = Path(src)
    h = hashlib.sha256()
    for f in sorted([src / "package.json", *(src / "src").rglob("*")]):
        if f.is_file():
            h.update(f.relative_to(src).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def uninstall(kernel_name: str = KERNEL_NAME) -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    ksm = KernelSpecManager()
    path = ksm.get_kernel_spec(kernel_name).resource_dir
    ksm.remove_kernel_spec(kernel_name)
    shutil.rmtree(Path(path).parent.parent / "labextensions" / LABEXTENSION_NAME, ignore_errors=True)
    return path


@contextmanager
def temporary_kernelspec(env: dict[str, str] | None = None, *, isolate_ipython: bool = True) -> Iterator[str]:
    """Install the kernelspec into a temporary prefix and put it first on JUPYTER_PATH (tests, CI).

    Nothing under the user's home is touched; with isolate_ipython the kernel also gets a fresh
    IPYTHONDIR (history, profile). Yields the JUPYTER_PATH entry; restores the environment after.
    """
    with tempfile.TemporaryDirectory(prefix="slang-kernelspec-") as tmp:
        spec_env = dict(env or {})
        if isolate_ipython:
            spec_env.setdefault("IPYTHONDIR", os.path.join(tmp, "ipython"))
        install(prefix=tmp, env=spec_env)
        data = os.path.join(tmp, "share", "jupyter")
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = data + (os.pathsep + old if old else "")
        try:
            yield data
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old
