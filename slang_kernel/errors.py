"""Every exception the engine raises, in one module: backends, kernels, views and front ends share one
definition without importing each other.

Compile errors are defined by the compiler layer (`compiler.diagnostics`, which renders them) and the
compiler worker's start-up error by its client; both are re-exported here. Everything else a
dispatch, a parameter, a build or a device can go wrong with is defined here.
"""

from __future__ import annotations

import warnings

from .compiler.client import CompilerUnavailable
from .compiler.diagnostics import SlangCompileError, SlangCompilerCrash

__all__ = [
    "BackendUnavailable",
    "BoundsError",
    "CompilerUnavailable",
    "CpuBuildError",
    "DeviceLost",
    "KernelCrash",
    "KernelInterrupted",
    "KernelTimeout",
    "OutOfRangeWarning",
    "ParameterError",
    "PlaygroundError",
    "SlangCompileError",
    "SlangCompilerCrash",
    "UnsupportedOnCpu",
    "VulkanCompileError",
]


class BackendUnavailable(RuntimeError):
    """This backend cannot run here (no driver, no GPU, missing package); the message says what to install."""


class ParameterError(TypeError):
    """A value given for a kernel parameter does not fit its Slang type."""


class BoundsError(IndexError):
    """A checked kernel indexed a buffer out of range (Session(checked=True))."""

    def __init__(self, kernel: str, count: int, index: int, size: int, buffer: str | None = None,
                 thread: tuple[int, int, int] | None = None) -> None:
        what = f"`{buffer}`" if buffer and not buffer.startswith("a ") else (buffer or "a buffer")
        super().__init__(
            f"{kernel}: {count} out-of-range access(es); the first read or wrote index {index} of {what} "
            f"({size} elements). Out-of-range writes were dropped and reads gave 0; in-range results were "
            "written back.")
        self.kernel, self.count, self.index, self.size, self.buffer = kernel, count, index, size, buffer
        self.thread = thread   # SV_DispatchThreadID of the first access, where the backend knows it (GPUs)


class OutOfRangeWarning(RuntimeWarning):
    """A kernel indexed a buffer out of range; the accesses were made harmless (GPU semantics).
    Shown every time (not once per place, as Python does for other warnings)."""


warnings.simplefilter("always", OutOfRangeWarning)


class KernelCrash(RuntimeError):
    """A kernel crashed its worker process (SIGSEGV, SIGABRT, stack overflow); the worker was
    restarted and the session is intact."""

    def __init__(self, message: str, kernel: str = "", signal: str = "") -> None:
        super().__init__(message)
        self.kernel, self.signal = kernel, signal


class DeviceLost(RuntimeError):
    """The GPU context is unusable (e.g. CUDA_ERROR_ILLEGAL_ADDRESS is sticky): says what to do."""


class KernelTimeout(TimeoutError):
    """A kernel ran past Session(timeout=...); it was stopped (the CPU worker restarted)."""

    def __init__(self, message: str, kernel: str = "", elapsed: float = 0.0) -> None:
        super().__init__(message)
        self.kernel, self.elapsed = kernel, elapsed


class KernelInterrupted(KeyboardInterrupt):
    """Ctrl-C / the notebook's stop button during a dispatch; the CPU worker was restarted."""

    def __init__(self, message: str, kernel: str = "", elapsed: float = 0.0) -> None:
        super().__init__(message)
        self.kernel, self.elapsed = kernel, elapsed


class CpuBuildError(RuntimeError):
    """g++ rejected Slang's generated C++."""


class UnsupportedOnCpu(NotImplementedError):
    """The kernel uses something Slang's CPU target cannot run."""


class VulkanCompileError(RuntimeError):
    """sgl (slangpy) could not compile or link a kernel that our compiler accepted."""


class PlaygroundError(RuntimeError):
    """A playground cell cannot run here (missing resource attribute, unreadable URL, ...)."""
