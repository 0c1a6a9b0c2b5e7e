"""slang-kernel: Jupyter-native notebooks for the Slang shading language.

    import slang_kernel as sk
    s = sk.Session(backend="cpu")
    s.run_cell("float sqr(float x) { return x * x; }")
    s.function("sqr")(np.arange(4, dtype=np.float32))
"""

from __future__ import annotations

import os as _os
from typing import Any

# magics/ and widgets/ sit beside this folder at the top of the repository (the layout fixes them) and are
# slang_kernel.magics and slang_kernel.widgets: the wheel puts them inside the package (pyproject's
# `sources`); in a checkout or an editable install the package's path reaches the folder above instead.
if not _os.path.isdir(_os.path.join(__path__[0], "widgets")):
    __path__.append(_os.path.dirname(_os.path.abspath(__path__[0])))

from .engine.autodiff import SlangFunction
from .backends import Backend, BackendConfig
from .compiled import CompiledKernel, CompileRequest
from .compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash
from .compiler.reflection import ParamInfo, TypeInfo
from .errors import (BackendUnavailable, BoundsError, DeviceLost, KernelCrash, KernelInterrupted, KernelTimeout,
                     OutOfRangeWarning, ParameterError)
from .engine.finite import NonFiniteError
from .engine.kernels import ComputeKernel
from .engine.session import CellResult, Session
from . import views as _views  # registers the views behind slang_kernel.hooks (Session.compare, ...)

__all__ = [
    "Backend",
    "BackendConfig",
    "BackendUnavailable",
    "BoundsError",
    "CellResult",
    "CompileRequest",
    "CompiledKernel",
    "ComputeKernel",
    "DeviceLost",
    "Diagnostic",
    "KernelCrash",
    "KernelInterrupted",
    "KernelTimeout",
    "NonFiniteError",
    "OutOfRangeWarning",
    "ParamInfo",
    "ParameterError",
    "Session",
    "SlangCompileError",
    "SlangCompilerCrash",
    "SlangFunction",
    "TypeInfo",
    "load_ipython_extension",
]
__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext slang_kernel` registers the %%slang magics."""
    from .magics import load_ipython_extension as _load

    _load(ipython)
