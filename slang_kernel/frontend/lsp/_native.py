"""The Slang language server itself: `Slang::runLanguageServer` from the pinned libslang-compiler.

Run as `python .../slang_kernel/frontend/lsp/_native.py [--periodic]` (as a script: it loads
compiler/_lib.py by its path, without importing the slang_kernel package and numpy, ~0.3 s): this
process becomes the server, speaking LSP on its own stdin/stdout until the client sends `exit`
(it does not notice stdin closing: it dies with its parent instead). The function is a C++ symbol
(no C API wraps it), so it is called by its Itanium-mangled name; its one argument is
`Slang::LanguageServerStartupOptions`, a struct of two bools passed by value.
"""

from __future__ import annotations

import sys

_HERE = __file__.rsplit("/", 1)[0]
if __name__ == "__main__" and sys.path and sys.path[0] in (_HERE, "."):
    del sys.path[0]  # run as a script: its folder's modules must not shadow any others

import ctypes
import importlib.util
import os
import signal
from pathlib import Path
from typing import cast

__all__ = ["SYMBOL", "StartupOptions", "main"]

#: `Slang::runLanguageServer(Slang::LanguageServerStartupOptions)` (nm -D libslang-compiler.so)
SYMBOL = "_ZN5Slang17runLanguageServerENS_28LanguageServerStartupOptionsE"


class StartupOptions(ctypes.Structure):
    """`Slang::LanguageServerStartupOptions` (slang-language-server.h): field order matters."""

    _fields_ = [("isVisualStudio", ctypes.c_bool), ("periodicDiagnosticUpdate", ctypes.c_bool)]


def _die_with_parent() -> None:
    """Linux: end with the parent (the proxy). The server does not notice its stdin closing, so a
    proxy that is killed would otherwise leave it running."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _load_library() -> ctypes.CDLL:
    """compiler/_lib.py's `load` (it imports only the standard library), by path."""
    path = Path(__file__).resolve().parents[2] / "compiler" / "_lib.py"
    spec = importlib.util.spec_from_file_location("_slang_kernel_lib", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return cast(ctypes.CDLL, module.load())


def main(argv: list[str] | None = None) -> int:
    _die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    lib = _load_library()  # checks the build tag: the symbol and the struct are those of Slang 2026.12
    run = getattr(lib, SYMBOL)
    run.restype = ctypes.c_int32
    run.argtypes = [StartupOptions]
    rc = int(run(StartupOptions(False, "--periodic" in args)))
    return 0 if rc >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
