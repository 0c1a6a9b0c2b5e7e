"""The CPU backend: Slang's C++ target built with g++ into a shared library, run by a worker process
(backend.py); its registry entry is info.py."""

from .backend import CpuBackend, CpuBuildError, UnsupportedOnCpu, create

__all__ = ["CpuBackend", "CpuBuildError", "UnsupportedOnCpu", "create"]
