"""`import slang_kernel.slangtorch as slangtorch`: slangtorch 1.3's API (see slang_kernel.torch.slangtorch).

    m = slangtorch.loadModule("square.slang", defines={"N": 4}, includePaths=["lib"])
    m.square(input=A, output=out).launchRaw(blockSize=(32, 1, 1), gridSize=(64, 1, 1))
    m.square.bwd(input=(x, x_grad), output=(y, y_grad)).launchRaw(blockSize=..., gridSize=...)
"""

from .torch.slangtorch import (BoundKernel, BroadcastTensorError, KernelHandle, Loader, SlangTorchLoadError,
                               SlangTorchModule, clearPersistentShaderCache, clearSessionShaderCache,
                               clearShaderCaches, loadModule)

__all__ = ["BoundKernel", "BroadcastTensorError", "KernelHandle", "Loader", "SlangTorchLoadError",
           "SlangTorchModule", "clearPersistentShaderCache", "clearSessionShaderCache", "clearShaderCaches",
           "loadModule"]
