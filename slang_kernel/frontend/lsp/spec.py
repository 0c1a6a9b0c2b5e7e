"""The jupyter-lsp spec (entry point `jupyter_lsp_spec_v1`): JupyterLab with jupyterlab-lsp starts
`python -m slang_kernel.frontend.lsp` for Slang documents: Slang-kernel notebooks (language `slang`), `.slang`
files, and the `%%slang` cells of Python notebooks (extracted by this package's labextension)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

__all__ = ["slang_language_server"]


def slang_language_server(manager: Any = None) -> dict[str, Any]:
    """{server key: spec} as jupyter_lsp's LanguageServerManager expects (schema version 2)."""
    installed = importlib.util.find_spec("slangpy") is not None
    return {
        "slang-kernel": {
            "version": 2,
            "argv": [sys.executable, "-m", "slang_kernel.frontend.lsp"] if installed else [],
            "languages": ["slang"],
            "mime_types": ["text/x-slang"],
            "display_name": "Slang (slang-kernel)",
            "urls": {"home": "https://shader-slang.org/",
                     "issues": "https://github.com/shader-slang/slang/issues"},
            "install": {"pip": "pip install 'slang-kernel[lsp]'"},
            "requires_documents_on_disk": True,
        }
    }
