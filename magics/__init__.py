"""IPython magics: `%%slang` compiles a cell into the notebook's Slang session.

    %load_ext slang_kernel
    %%slang [NAME] [--backend B] [--show TARGET[,TARGET]] [--ir] [-D NAME=VALUE] [--no-export] [--time]
    %slang_backend cpu|vulkan|cuda|auto     %slang_session     %slang_ir NAME     %slang_grad NAME args...

--time also builds the cell's kernels for the backend now and prints how long that took.
After a cell compiles, its kernels (ComputeKernel) and functions (SlangFunction) are bound in the
user namespace. Re-running the same notebook cell replaces its earlier version (cells are matched
by Jupyter's cell id), and later cells that use it are recompiled.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..compiler.diagnostics import SlangCompileError
from ..display import code_display, error_lines, summary
from ..session import Session

__all__ = ["SlangMagics", "load_ipython_extension", "session_for"]


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
        display(summary(session, result))
        if args.time:  # also build this cell's kernels for the backend now, and say how long that took
            import time

            for k in result.kernels:
                t0 = time.perf_counter()
                session.compile_entry(k)
                print(f"{k}: {session.backend.target} code in {(time.perf_counter() - t0) * 1000:.1f} ms")
        for target in filter(None, args.show.split(",")):
            names = result.kernels or result.functions
            for n in names:
                display(code_display(session.code(n, target.strip()), target.strip(),
                                     f"{n} as {target.strip()}"))
        if args.ir:
            display(code_display(session.ir(result.name), "ir", f"Slang IR of {result.name}"))
        # Slang Playground cells (entry points with [playground::CALL...]) run and show their output
        # (rule: slang_kernel.playground's docstring); other cells only compile.
        from ..playground import PlaygroundError, show_cell

        try:
            self.shell.user_ns["slang_playground"] = show_cell(session, result.name, display=display) \
                or self.shell.user_ns.get("slang_playground")
        except PlaygroundError as exc:
            print(f"playground: {exc}", file=sys.stderr)

    @line_magic
    def slang_backend(self, line: str) -> str:
        """`%slang_backend cpu|vulkan|cuda|auto`: switch the session's backend; prints the device."""
        s = session_for(self.shell, line.strip() or None)
        return f"{s.backend.name}: {s.backend.describe()}"

    @line_magic
    def slang_ir(self, line: str) -> Any:
        """`%slang_ir NAME [--pass P]`: IRGraph of a function, kernel or cell: its IR (with source
        lines), the generated derivative functions beside a [Differentiable] one, and the IR before
        and after pass P."""
        from ..widgets import IRGraph

        p = argparse.ArgumentParser(prog="%slang_ir", add_help=False)
        p.add_argument("name")
        p.add_argument("--pass", dest="pass_")
        p.add_argument("--mode", default="blocks", choices=["module", "blocks", "dataflow"])
        try:
            args = p.parse_args(shlex.split(line))
        except SystemExit:
            raise SlangCompileError("usage: %slang_ir NAME [--pass PASS] [--mode module|blocks|dataflow]") from None
        return IRGraph.of(session_for(self.shell), args.name, args.pass_, mode=args.mode)

    @line_magic
    def slang_grad(self, line: str) -> Any:
        """`%slang_grad NAME arg1 arg2 ...`: GradientFlow of a [Differentiable] function at the given
        arguments (Python expressions evaluated in the notebook's namespace; no spaces inside one,
        or quote it)."""
        from ..widgets import GradientFlow

        parts = shlex.split(line)
        if not parts:
            raise SlangCompileError("usage: %slang_grad NAME ARG [ARG ...]  (arguments are Python expressions)")
        session = session_for(self.shell)
        ns = self.shell.user_ns
        args = [eval(a, ns) for a in parts[1:]]  # noqa: S307 - the user's own namespace, like %timeit
        return GradientFlow.check(session.function(parts[0]), *args)

    @line_magic
    def slang_session(self, line: str) -> Session:
        """`%slang_session`: the session (its repr lists cells, kernels and functions)."""
        return session_for(self.shell)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(SlangMagics(ipython))
