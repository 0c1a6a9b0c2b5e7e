"""slangtorch 1.3's Python surface on slang-kernel's compiler: `loadModule` and its kernels.

Code written for slangtorch runs with `import slang_kernel.slangtorch as slangtorch`; CUDA code is
built by NVRTC (through CuPy) instead of a PyTorch C++ extension, so a first load takes seconds.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Mapping, Sequence

from ._debug import LaunchDebug, debug_launches
from ._load import Loader, ModuleSource, SlangTorchLoadError
from ._module import BoundKernel, KernelHandle, SlangTorchModule
from ._notebook import ModuleViews, module_views
from ._views import BroadcastTensorError

__all__ = ["BoundKernel", "BroadcastTensorError", "KernelHandle", "LaunchDebug", "Loader", "ModuleViews",
           "SlangTorchLoadError", "SlangTorchModule", "clearPersistentShaderCache", "clearSessionShaderCache",
           "clearShaderCaches", "debug_launches", "loadModule", "module_views"]

DEFAULT_LOADER = Loader()
"""The loader `loadModule` uses unless given one: loaded modules are shared per process, as in slangtorch."""


def loadModule(fileName: str | os.PathLike[str], skipSlang: bool | None = None, verbose: bool = False,  # noqa: N802,N803
               defines: Mapping[str, Any] | None = None, includePaths: Sequence[str | os.PathLike[str]] = (),  # noqa: N803
               skipNinjaCheck: bool = False, slangGenLineInfo: bool = True, cudaFastMath: bool = True,  # noqa: N803
               cudaGenLineInfo: bool = True, extraSlangFlags: Sequence[str] = (),  # noqa: N803
               extraCudaFlags: Sequence[str] = (), loader: Loader | None = None) -> SlangTorchModule:  # noqa: N803
    """slangtorch.loadModule: a .slang file (or Slang source text) with its [CUDAKernel]s as attributes.

    skipSlang, skipNinjaCheck, slangGenLineInfo, cudaFastMath, cudaGenLineInfo, extraSlangFlags and
    extraCudaFlags are accepted for compatibility; they tune slangtorch's nvcc/ninja build, which is
    not used here. A compile error raises SlangTorchLoadError (a RuntimeError) and loads nothing.
    """
    src = ModuleSource.of(fileName, defines or {}, includePaths)
    return (loader or DEFAULT_LOADER).load(src, verbose=verbose)


def clearSessionShaderCache() -> None:  # noqa: N802
    """Forget the modules loaded in this process; the next loadModule compiles again."""
    DEFAULT_LOADER.clear()


def clearPersistentShaderCache() -> None:  # noqa: N802
    """Empty the on-disk compile cache of the default loader's session."""
    shutil.rmtree(DEFAULT_LOADER.cache_dir, ignore_errors=True)


def clearShaderCaches() -> None:  # noqa: N802
    """Both of the above."""
    clearSessionShaderCache()
    clearPersistentShaderCache()
