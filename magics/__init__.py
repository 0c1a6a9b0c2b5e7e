"""IPython magics: `%%slang` compiles a cell into the notebook's Slang session.

    %load_ext slang_kernel
    %%slang [NAME] [--backend B] [--show TARGET[,TARGET]] [--ir] [-D NAME=VALUE] [--no-export] [--time]

After a cell compiles, its kernels (ComputeKernel) and functions (SlangFunction) are bound in the
user namespace. Re-running the same notebook cell replaces its earlier version (cells are matched
by Jupyter's cell id), and later cells that use it are recompiled.
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..compiler.diagnostics import SlangCompileError
from ..session import Session
from ._display import code_display, error_lines, summary

__all__ = ["SlangMagics", "load_ipython_extension", "session_for"]

_LANG = {"hlsl": "hlsl", "glsl": "glsl", "cuda": "cuda", "cpp": "cpp", "metal": "cpp", "wgsl": "wgsl",
         "spirv-asm": "text", "spirv": "text"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%slang", add_help=False)
    p.add_argument("name", nargs="?")
    p.add_argument("--backend")
    p.add_argument("--show", default="")
    p.add_argument("--ir", action="store_true")
    p.add_argument("-D", dest="defines", action="append", default=[])
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--time", action="store_true")
    return p


def session_for(shell: Any, backend: str | None = None) -> Session:
    """The shell's one Slang session (created on first use; `slang_session` in the namespace).

    The default backend is "auto", or $SLANG_KERNEL_BACKEND when set (CI runs notebooks on each)."""
    s = shell.user_ns.get("slang_session")
    if not isinstance(s, Session):
        s = Session(backend=backend or os.environ.get("SLANG_KERNEL_BACKEND", "auto"))
        shell.user_ns["slang_session"] = s
    elif backend and backend != s.backend.name:
        s.set_backend(backend)
    return s


def _compile_error_handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
    """Show compile errors as the compiler's diagnostics, without a Python traceback.

    IPython discards a custom handler's return value, so the handler shows the lines itself
    (in a kernel, `_showtraceback` sends them as the error message with ename/evalue)."""
    lines = error_lines(value)
    shell._showtraceback(etype, value, lines)
    return lines


@magics_class
class SlangMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._cell_id: str | None = None
        self._names: dict[str, str] = {}
        shell.events.register("pre_run_cell", self._pre_run_cell)
        shell.set_custom_exc((SlangCompileError,), _compile_error_handler)

    def _pre_run_cell(self, info: Any) -> None:
        self._cell_id = getattr(info, "cell_id", None)

    def _cell_name(self, explicit: str | None) -> str | None:
        if explicit:
            return explicit
        if not self._cell_id:
            return None
        name = self._names.get(self._cell_id)
        if name is None:
            name = f"cell[{self.shell.execution_count}]"
            self._names[self._cell_id] = name
        return name

    @cell_magic
    def slang(self, line: str, cell: str) -> None:
        try:
            args = _parser().parse_args(shlex.split(line))
        except SystemExit:
            raise SlangCompileError(
                "usage: %%slang [NAME] [--backend cpu|vulkan|cuda|auto] [--show TARGET[,TARGET]] [--ir] "
                "[-D NAME=VALUE] [--no-export] [--time]") from None
        from IPython.display import display

        session = session_for(self.shell, args.backend)
        for d in args.defines:
            key, _, value = d.partition("=")
            session.set_define(key, value or "1")
        result = session.run_cell(cell, name=self._cell_name(args.name))
        if not args.no_export:
            for k in result.kernels:
                self.shell.user_ns[k] = session.kernel(k)
            for f in result.functions:
                self.shell.user_ns[f] = session.function(f)
        display(summary(session, result, timing=args.time))
        for target in filter(None, args.show.split(",")):
            names = result.kernels or result.functions
            for n in names:
                display(code_display(session.code(n, target.strip()), _LANG.get(target.strip(), "text"),
                                     f"{n} as {target.strip()}"))
        if args.ir:
            display(code_display(session.ir(result.name), "text", f"Slang IR of {result.name}"))

    @line_magic
    def slang_backend(self, line: str) -> str:
        """`%slang_backend cpu|vulkan|cuda|auto`: switch the session's backend; prints the device."""
        s = session_for(self.shell, line.strip() or None)
        return f"{s.backend.name}: {s.backend.describe()}"

    @line_magic
    def slang_session(self, line: str) -> Session:
        """`%slang_session`: the session (its repr lists cells, kernels and functions)."""
        return session_for(self.shell)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(SlangMagics(ipython))
