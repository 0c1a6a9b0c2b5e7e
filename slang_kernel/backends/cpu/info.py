"""The CPU backend's registry entry (slang_kernel.backends.registry)."""

from __future__ import annotations

import os
import shutil

from ..registry import KERNEL_PATHS, SHARED_ARRAYS, TEXTURES, TIMING, BackendInfo

__all__ = ["INFO"]


def _probe() -> str | None:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    return None if cxx else "no C++ compiler found: install g++ (Debian: apt-get install g++)"


INFO = BackendInfo(name="cpu", capabilities=frozenset({SHARED_ARRAYS, TEXTURES, TIMING, KERNEL_PATHS}),
                   targets=("cpp",), auto_rank=2, factory="slang_kernel.backends.cpu.backend", probe=_probe,
                   host=True)
