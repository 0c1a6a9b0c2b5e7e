"""The host code of [TorchEntryPoint] functions: Slang's torch-binding C++, built by g++ into a shared library.

Slang's torch-binding target writes C++ for PyTorch's extension API (slangtorch builds it with torch's
headers and nvcc/ninja: minutes). Here it is built against host_include/ (torch_host.h and the three
headers the code includes), which stand in for the few torch/ATen/pybind11 names it uses: about a
second of g++, cached on disk by a hash of the source, the shim headers, g++'s version and the flags.
The kernels the host code launches are only declared in it: a stub with a name is appended for each,
so that the address `cudaLaunchKernel` receives tells the shim which [CUDAKernel] to launch.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["CXX_FLAGS", "HOST_INCLUDE", "HostBuildError", "build_host_library", "kernel_declarations", "with_stubs"]

HOST_INCLUDE = Path(__file__).with_name("host_include")
CXX_FLAGS = ("-std=c++17", "-O0", "-fPIC", "-shared", "-w", "-fvisibility=hidden",
             "-fvisibility-inlines-hidden", "-fno-gnu-unique")
# `SLANG_PRELUDE_EXPORT\nvoid name(params);` (possibly inside `extern "C" {`): a kernel, declared only
_DECLARATION = re.compile(r"SLANG_PRELUDE_EXPORT\s*\n\s*void\s+(\w+)\s*\(([^;{)]*)\)\s*;")


class HostBuildError(RuntimeError):
    """g++ could not build the host code (or is missing); the message says which and how to fix it."""


def kernel_declarations(code: str) -> list[tuple[str, str]]:
    """The (name, parameter list) of each kernel the torch-binding code declares without defining."""
    return [(m.group(1), m.group(2)) for m in _DECLARATION.finditer(code)]


def with_stubs(code: str) -> str:
    """`code` with a definition per declared kernel, registered under its name for the shim's launcher."""
    stubs = [f'\nvoid {name}({params}) {{ ::sk::kernel_stub("{name}"); }}\n'
             f'static ::sk::KernelName sk_kernel_name_{i}((const void*)&{name}, "{name}");'
             for i, (name, params) in enumerate(kernel_declarations(code))]
    return code + "\n// slang-kernel: kernel stubs (their addresses name the kernels to launch)" + "".join(stubs) + "\n"


@functools.lru_cache(maxsize=4)
def _compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HostBuildError(f"[TorchEntryPoint] host code is built with a C++ compiler, and `{cxx} --version` "
                             f"failed ({exc}): install g++ (e.g. `apt-get install g++`) or set CXX") from None
    return out.splitlines()[0] if out else cxx


def _shim_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(HOST_INCLUDE.rglob("*.h")):
        h.update(path.relative_to(HOST_INCLUDE).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def build_host_library(code: str, cache_dir: Path, label: str, cxx: str | None = None) -> Path:
    """The shared library of torch-binding `code` (built once per content; `label` names it in errors),
    by `cxx` (default: $CXX, else g++)."""
    cxx = cxx or os.environ.get("CXX") or "g++"
    source = with_stubs(code)
    key = hashlib.sha256("\0".join([source, _shim_digest(), _compiler_version(cxx), *CXX_FLAGS]).encode())
    folder = Path(cache_dir) / "host"
    target = folder / f"{key.hexdigest()[:32]}.so"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
    try:
        cpp = scratch / "host.cpp"
        cpp.write_text(source)
        out = scratch / "host.so"
        proc = subprocess.run([cxx, *CXX_FLAGS, f"-I{HOST_INCLUDE}", str(cpp), "-o", str(out)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            kept = folder / f"{key.hexdigest()[:32]}-failed.cpp"
            os.replace(cpp, kept)
            errors = [ln for ln in proc.stderr.splitlines() if "error" in ln][:5] or proc.stderr.splitlines()[-5:]
            raise HostBuildError(f"the host code of {label} ([TorchEntryPoint] functions) did not build with {cxx} "
                                 f"against slang-kernel's torch shim; the source is kept at {kept}:\n"
                                 + "\n".join(errors))
        os.replace(cpp, folder / f"{key.hexdigest()[:32]}.cpp")   # kept for reading what runs
        os.replace(out, target)                                       # atomic: a half-written .so is never seen
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
