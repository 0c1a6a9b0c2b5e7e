"""PyTorch: the slangtorch-compatible surface and Slang functions and kernels inside torch autograd.

The engine never imports this package, and torch is imported only by the modules that need it, so
`slang_kernel` stays importable where PyTorch is not installed.
"""

__all__: list[str] = []
