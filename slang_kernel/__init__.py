"""slang-kernel: Jupyter-native notebooks for the Slang shading language.

    import slang_kernel as sk
    s = sk.Session(backend="cpu")
    s.run_cell("float sqr(float x) { return x * x; }")
    s.function("sqr")(np.arange(4, dtype=np.float32))
"""

from __future__ import annotations

from typing import Any

from .backends import BackendUnavailable
from .backends._packing import ParameterError
from .compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash
from .kernels import BoundsError, ComputeKernel, DeviceLost, KernelCrash, KernelInterrupted, KernelTimeout, OutOfRangeWarning
from .session import CellResult, CompiledKernel, Session

__all__ = [
    "BackendUnavailable",
    "BoundsError",
    "CellResult",
    "CompiledKernel",
    "ComputeKernel",
    "DeviceLost",
    "Diagnostic",
    "KernelCrash",
    "KernelInterrupted",
    "KernelTimeout",
    "OutOfRangeWarning",
    "ParameterError",
    "Session",
    "SlangCompileError",
    "SlangCompilerCrash",
    "SlangFunction",
    "load_ipython_extension",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "SlangFunction":
        from .autodiff import SlangFunction

        return SlangFunction
    raise AttributeError(name)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext slang_kernel` registers the %%slang magics."""
    from .magics import load_ipython_extension as _load

    _load(ipython)
