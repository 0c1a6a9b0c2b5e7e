"""Slang's language server (slangd, from the pinned libslang-compiler) for notebooks.

- `python -m slang_kernel.frontend.lsp [-I DIR] [-D NAME=VALUE]`: LSP on stdin/stdout, with the session's
  search path (`import playground;`, `rendering`, `printing`, `debug`) and defines; _proxy says what
  it adds to the bare server (_native).
- `spec.slang_language_server`: the jupyter-lsp spec (entry point `jupyter_lsp_spec_v1`), so JupyterLab
  with jupyterlab-lsp (`pip install 'slang-kernel[lsp]'`) uses it for Slang-kernel notebooks and the
  `%%slang` cells of Python notebooks (the labextension's extractors, labextension_src/src/lsp.js).
- `assist.Assistant` / `replies`: the kernel protocol's Tab and Shift-Tab from the same server, in the
  Slang kernel and (`ipython.register`, called by `%load_ext slang_kernel`) in `%%slang` cells of
  Python kernels; `client.LanguageClient` never lets a slow or dead server hold the kernel up.
"""

from __future__ import annotations

from ._proxy import MODULE_DIR

__all__ = ["MODULE_DIR"]
