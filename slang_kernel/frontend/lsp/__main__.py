"""`python -m slang_kernel.frontend.lsp [-I DIR]... [-D NAME[=VALUE]]...`: see slang_kernel.frontend.lsp._proxy."""

from __future__ import annotations

import argparse
import sys

from ._proxy import Proxy

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slang_kernel.frontend.lsp",
                                description="Slang's language server (LSP on stdin/stdout) with the "
                                            "slang-kernel search path and defines")
    p.add_argument("-I", dest="paths", action="append", default=[], metavar="DIR",
                   help="another folder to search for imported modules")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="a preprocessor define, as the session's set_define")
    args = p.parse_args(argv)
    return Proxy(sys.stdin.buffer, sys.stdout.buffer, search_paths=tuple(args.paths),
                 defines=tuple(args.defines)).serve()


if __name__ == "__main__":
    sys.exit(main())
