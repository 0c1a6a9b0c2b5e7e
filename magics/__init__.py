"""IPython magics: `%%slang` compiles a cell into the notebook's Slang session.

    %load_ext slang_kernel
    %%slang [NAME] [--backend B] [--show TARGET[,TARGET]] [--ir] [-D NAME=VALUE] [--no-export] [--time]
    %slang_backend cpu|vulkan|cuda|auto     %slang_session     %slang_ir NAME     %slang_grad NAME args...
    %slang_profile                          the phases of the last cell's compile (edit_phases.py)

A cell is named by its prompt (`In[5]`), as IPython names it; re-running the same notebook cell
replaces its earlier revision (cells are matched by Jupyter's cell id) and later cells that use it
are recompiled. After a cell compiles its kernels (ComputeKernel) and functions (SlangFunction) are
bound in the user namespace (not with --no-export). -D NAME=VALUE defines a preprocessor name for
this cell. --time splits the compile time: the cell's check (in the compiler, or from the compile cache),
then each of its kernels built for the backend's target now (kernels run from Python: `k.profile()`).
Naming, binding and error display are slang_kernel.frontend's, shared with the Slang kernel.
"""

from __future__ import annotations

import argparse
import re
import shlex
import time
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from slang_kernel.backends.registry import choices
from slang_kernel.frontend.display import code_display, show
from slang_kernel.frontend import FrontEnd
from slang_kernel.engine.session import CODE_TARGETS, Session

__all__ = ["SlangMagics", "load_ipython_extension", "session_for"]

_DEFINE = re.compile(r"[A-Za-z_]\w*")
_USAGE = ("usage: %%slang [NAME] [--backend cpu|vulkan|cuda|auto] [--show TARGET[,TARGET]] [--ir] "
          "[-D NAME=VALUE] [--no-export] [--time]")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing and exiting (the message goes into a UsageError)."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n{self.usage}")


class _BackendNames:
    """`--backend`'s choices, asked of the backend registry only when a cell names a backend: a plain
    `%%slang` cell goes magics -> frontend -> engine -> compiler -> backends (tests/test_model.py)."""

    def __contains__(self, name: object) -> bool:
        return name in choices()

    def __iter__(self) -> Iterator[str]:
        return iter(choices())


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%slang", add_help=False, usage=_USAGE)
    p.add_argument("name", nargs="?")
    p.add_argument("--backend", choices=_BackendNames(), metavar="BACKEND")   # a metavar: no listing at add time
    p.add_argument("--show", default="")
    p.add_argument("--ir", action="store_true")
    p.add_argument("-D", dest="defines", action="append", default=[])
    p.add_argument("--no-export", action="store_true")
    p.add_argument("--time", action="store_true")
    return p


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:  # e.g. an unclosed quote
        raise UsageError(f"{line!r}: {exc}") from None


def _defines(flags: list[str]) -> dict[str, str]:
    out = {}
    for d in flags:
        key, eq, value = d.partition("=")
        if not _DEFINE.fullmatch(key.strip()):
            raise UsageError(f"%%slang -D {d}: expected NAME=VALUE (or NAME, meaning NAME=1), "
                             "NAME a C identifier")
        out[key.strip()] = value if eq else "1"
    return out


def _targets(show: str) -> list[str]:
    targets = [t.strip() for t in show.split(",") if t.strip()]
    bad = [t for t in targets if t not in CODE_TARGETS and t != "spirv"]
    if bad:
        raise UsageError(f"%%slang --show {bad[0]}: unknown target; choose from {', '.join(CODE_TARGETS)}")
    return targets


def session_for(shell: InteractiveShell, backend: str | None = None) -> Session:
    """The shell's one Slang session (created on first use; `slang_session` in the namespace).

    The default backend is "auto", or $SLANG_KERNEL_BACKEND when set (CI runs notebooks on each)."""
    return FrontEnd.of(shell).session(backend)


@magics_class
class SlangMagics(Magics):
    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self.frontend = FrontEnd.of(shell)

    @cell_magic
    def slang(self, line: str, cell: str) -> None:
        """`%%slang [NAME] [flags]`: compile the cell into the session (flags: module docstring)."""
        args = _parser().parse_args(_split(line))
        defines, targets = _defines(args.defines), _targets(args.show)
        fe = self.frontend
        with fe.own_errors():
            session = fe.session(args.backend)
            # one empty line for the `%%slang` line: diagnostics and carets count lines as the editor does
            result = fe.run("\n" + cell, name=args.name, defines=defines, export=not args.no_export)
            label = fe.label(result.name)
            fe.present(result)
            if args.time:  # the compile split: the cell's check, then its kernels built for the backend now
                how = "from the compile cache" if result.cached else f"{result.compile_ms:.1f} ms in the compiler"
                print(f"{label}: checked in {result.elapsed_ms:.1f} ms ({how})")
                for k in result.kernels:
                    t0 = time.perf_counter()
                    session.kernel(k).compiled()
                    print(f"{k}: {session.backend.target} code in {(time.perf_counter() - t0) * 1000:.1f} ms")
            for target in targets:
                for n in result.kernels or result.functions:
                    show(code_display(session.code(n, target), target, f"{n} as {target}"))
            if args.ir:
                show(code_display(session.ir(result.name), "ir", f"Slang IR of {label}"))

    @line_magic
    def slang_backend(self, line: str) -> str:
        """`%slang_backend cpu|vulkan|cuda|auto`: switch the session's backend; prints the device."""
        s = self.frontend.session(line.strip() or None)
        return f"{s.backend.name}: {s.backend.describe()}"

    @line_magic
    def slang_ir(self, line: str) -> Any:
        """`%slang_ir NAME [--pass P]`: IRGraph of a function, kernel or cell: its IR (with source
        lines), the generated derivative functions beside a [Differentiable] one, and the IR before
        and after pass P."""
        from slang_kernel.widgets import IRGraph

        p = _Parser(prog="%slang_ir", add_help=False,
                    usage="usage: %slang_ir NAME [--pass PASS] [--mode module|blocks|dataflow]")
        p.add_argument("name")
        p.add_argument("--pass", dest="pass_")
        p.add_argument("--mode", default="blocks", choices=["module", "blocks", "dataflow"])
        args = p.parse_args(_split(line))
        fe = self.frontend
        return IRGraph.of(fe.session(), fe.resolve(args.name), args.pass_, mode=args.mode)

    @line_magic
    def slang_grad(self, line: str) -> Any:
        """`%slang_grad NAME arg1 arg2 ...`: GradientFlow of a [Differentiable] function at the given
        arguments (Python expressions evaluated in the notebook's namespace; no spaces inside one,
        or quote it)."""
        from slang_kernel.widgets import GradientFlow

        parts = _split(line)
        if not parts:
            raise UsageError("usage: %slang_grad NAME ARG [ARG ...]  (arguments are Python expressions)")
        session = self.frontend.session()
        ns = self.frontend.shell.user_ns
        args = [eval(a, ns) for a in parts[1:]]  # the user's own namespace, like %timeit
        return GradientFlow.check(session.function(parts[0]), *args)

    @line_magic
    def slang_profile(self, line: str) -> None:
        """`%slang_profile`: where the time of the last cell run went (engine, compile cache,
        transport, and the compiler's load/parse-check/serialize/reflect/references), with the later
        cells whose checks ran again after a signature change."""
        last = self.frontend.session().store.last_edit
        if last is None:
            print("%slang_profile: no Slang cell has run in this session yet; run a %%slang cell, then %slang_profile.")
            return
        print(last.table())

    @line_magic
    def slang_session(self, line: str) -> Session:
        """`%slang_session`: the session (its repr lists cells, kernels and functions)."""
        return self.frontend.session()


def load_ipython_extension(ipython: InteractiveShell) -> None:
    ipython.register_magics(SlangMagics(ipython))
    from slang_kernel.frontend.lsp.ipython import register  # Tab and Shift-Tab in %%slang cells (slang_kernel.frontend.lsp, i31)

    register(ipython)
