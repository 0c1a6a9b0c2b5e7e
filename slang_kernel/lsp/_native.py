"""The Slang language server itself: `Slang::runLanguageServer` from the pinned libslang-compiler.

Run as `python -m slang_kernel.lsp._native [--periodic]`: this process becomes the server, speaking
LSP on its own stdin/stdout until the client sends `exit` or closes stdin. The function is a C++
symbol (no C API wraps it), so it is called by its Itanium-mangled name; its one argument is
`Slang::LanguageServerStartupOptions`, a struct of two bools passed by value.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

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


def main(argv: list[str] | None = None) -> int:
    from ..compiler._lib import load

    _die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    lib = load()  # checks the build tag: the symbol and the struct are those of Slang 2026.12
    run = getattr(lib, SYMBOL)
    run.restype = ctypes.c_int32
    run.argtypes = [StartupOptions]
    rc = int(run(StartupOptions(False, "--periodic" in args)))
    return 0 if rc >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
