"""The front ends' shared part: the controller under `%%slang` (magics/) and the Slang kernel (kernel/)
that names cells, binds kernels and functions in the user's namespace and shows errors (controller.py),
and how a cell's results and errors are displayed (display.py). It uses the Session's public API only.
The front ends built on it live here too: kernel/ (the Slang Jupyter kernel, `python -m
slang_kernel.frontend.kernel`) and lsp/ (Slang's language server, `python -m slang_kernel.frontend.lsp`).
"""

from .controller import RUNTIME_ERRORS, FrontEnd

__all__ = ["RUNTIME_ERRORS", "FrontEnd"]
