"""The Slang Jupyter kernel: SlangKernel (an IPythonKernel subclass) and its kernelspec.

    python -m slang_kernel install [--user | --sys-prefix | --prefix PREFIX]
"""

from __future__ import annotations

from typing import Any

from .install import DISPLAY_NAME, KERNEL_NAME, install, kernel_json, uninstall
from .language import LANGUAGE_INFO

__all__ = [
    "DISPLAY_NAME", "KERNEL_NAME", "LANGUAGE_INFO", "SlangKernel", "install", "kernel_json", "uninstall",
]


def __getattr__(name: str) -> Any:
    if name == "SlangKernel":  # ipykernel is imported only when the kernel itself is needed
        from .kernel import SlangKernel

        return SlangKernel
    raise AttributeError(name)
