"""The CUDA backend: Slang's CUDA target through NVRTC and CuPy (backend.py); its registry entry is
info.py. Importing it does not import CuPy."""

from .backend import CudaBackend, create

__all__ = ["CudaBackend", "create"]
