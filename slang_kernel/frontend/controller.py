"""One front-end controller for the `%%slang` magic and the Slang kernel: cell names, name binding,
error display. Both front ends are thin over it, so a notebook behaves the same in either.

Cell names follow the prompt, as IPython names cells: the run at prompt `[5]` is `In[5]`, in every
diagnostic. Re-running the same notebook cell (same Jupyter cell id) replaces its earlier revision in
place: the session keeps the cell's first name, so its position, the cells that use it and the views
that follow it (hot reload) are undisturbed, and the controller labels it with the newest prompt in
everything it shows (`display.relabel_*`). `%%slang NAME` keeps NAME.

IPython increments `execution_count` before a cell runs, so while a cell magic runs the prompt is
`execution_count - 1` (`execution_count` itself when the run does not store history); the prompt and
cell id are taken from the `pre_run_cell` event, which every front end goes through.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, cast

from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell

from ..compiler.diagnostics import SlangCompileError
from .display import error_lines, relabel_error, relabel_text, show, summary, traceback_lines
from ..errors import (
    BoundsError,
    DeviceLost,
    KernelCrash,
    KernelInterrupted,
    KernelTimeout,
    ParameterError,
    PlaygroundError,
)
from ..playground import is_playground
from ..engine.session import CellResult, Session

__all__ = ["RUNTIME_ERRORS", "FrontEnd"]

#: Errors raised from Python calls of bound kernels and functions: shown as the user's line and the
#: message, without the library frames between them.
RUNTIME_ERRORS: tuple[type[BaseException], ...] = (
    ParameterError, KernelCrash, KernelTimeout, DeviceLost, BoundsError, KernelInterrupted)


class FrontEnd:
    """The controller of one IPython shell's Slang cells; get it with `FrontEnd.of(shell)`."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self._session: Session | None = None
        self._running: list[tuple[ExecutionInfo, int]] = []   # (cell, its prompt), innermost last
        self._by_id: dict[str, str] = {}          # Jupyter cell id -> session cell name
        self._given: set[str] = set()             # session cell names this controller made up
        self._labels: dict[str, str] = {}         # session cell name -> prompt of its latest run
        self._bound: dict[str, dict[str, object]] = {}  # session cell name -> names it bound, and what
        self._quiet: tuple[type[BaseException], ...] = ()
        self._own: BaseException | None = None    # the last error a front end raised itself
        shell.events.register("pre_run_cell", self._pre_run_cell)
        shell.events.register("post_run_cell", self._post_run_cell)
        self._install_handler()

    @classmethod
    def of(cls, shell: InteractiveShell, *, quiet: tuple[type[BaseException], ...] = ()) -> FrontEnd:
        """The shell's one controller (made on first use; it lives in the shell's event callbacks, so
        the magic and the kernel in one shell share it). quiet: more error types shown as their
        message only (a front end's usage errors)."""
        for cb in shell.events.callbacks.get("pre_run_cell", ()):
            owner = getattr(cb, "__self__", None)
            if isinstance(owner, cls):
                break
        else:
            owner = cls(shell)
        if set(quiet) - set(owner._quiet):
            owner._quiet = (*owner._quiet, *(t for t in quiet if t not in owner._quiet))
            owner._install_handler()
        return owner

    # -- the session ------------------------------------------------------------------------------------

    def session(self, backend: str | None = None) -> Session:
        """The notebook's one Session, `slang_session` in the namespace (created on first use, on
        $SLANG_KERNEL_BACKEND or "auto"); backend: switch to it first."""
        s = self.shell.user_ns.get("slang_session")
        if not isinstance(s, Session):
            s = self._session or Session(backend=backend or os.environ.get("SLANG_KERNEL_BACKEND", "auto"))
            self.shell.user_ns["slang_session"] = s
        elif backend and backend != s.backend.name:
            s.set_backend(backend)
        if s is not self._session:  # the user put another session there: names here were of the old one
            for state in (self._by_id, self._given, self._labels, self._bound):
                state.clear()
            self._session = s
        return s

    @property
    def existing_session(self) -> Session | None:
        """The session if one was made (completion and inspection must not start one)."""
        return self._session

    # -- names ------------------------------------------------------------------------------------------

    def _pre_run_cell(self, info: ExecutionInfo) -> None:
        count = self.shell.execution_count
        self._running.append((info, count - 1 if info.store_history else count))

    def _post_run_cell(self, result: ExecutionResult) -> None:
        if self._running and self._running[-1][0] is result.info:
            self._running.pop()

    def current(self) -> tuple[str | None, int]:
        """(Jupyter cell id, prompt number) of the cell running now."""
        if self._running:
            info, prompt = self._running[-1]
            return info.cell_id, prompt
        return None, self.shell.execution_count

    @property
    def labels(self) -> Mapping[str, str]:
        """Session cell name -> the prompt the user sees for it, where the two differ (re-runs)."""
        return self._labels

    def label(self, name: str) -> str:
        """What the user sees for a session cell: the prompt of its latest run."""
        return self._labels.get(name, name)

    def resolve(self, name: str) -> str:
        """The session cell name for a label the user typed (`%slang_ir In[7]`); other names as given."""
        return next((n for n, shown in self._labels.items() if shown == name), name)

    def _target(self, session: Session, explicit: str | None, cell_id: str | None,
                prompt: int) -> tuple[str, str]:
        """(session name, label) for this run."""
        if explicit:
            return explicit, explicit
        label = f"In[{prompt}]"
        old = self._by_id.get(cell_id) if cell_id else None
        if old is not None and old in self._given and old in session.cells:
            return old, label  # a re-run: replace in place, shown under its new prompt
        name, k = label, 1
        while name in self._given or name in session.cells:
            k += 1
            name = f"In[{prompt}.{k}]"  # the same prompt twice (a run that stores no history)
        self._given.add(name)
        return name, name

    # -- running a cell ---------------------------------------------------------------------------------

    def run(self, source: str, *, name: str | None = None, defines: Mapping[str, str] | None = None,
            export: bool = True) -> CellResult:
        """Compile one cell under the prompt's name (or `name`), then bind its kernels and functions in
        the namespace (unless export=False) and unbind names a re-run no longer defines.

        A compile error is raised with the labels the user sees; the session keeps the last good
        revision. An interrupt during the compile raises KernelInterrupted (the session is unchanged)."""
        session = self.session()
        cell_id, prompt = self.current()
        target, label = self._target(session, name, cell_id, prompt)
        old = self._by_id.get(cell_id) if cell_id else None
        prior = None
        if old is not None and old != target and old in session.cells:  # it gained or lost an explicit NAME
            c = session.cell(old)
            prior = (old, self.label(old), c.source, dict(c.own_defines), bool(self._bound.get(old)))
            self._remove(session, old)  # first: both revisions define the same names
        if cell_id:
            self._by_id[cell_id] = target
        if label != target:
            self._labels[target] = label
        else:
            self._labels.pop(target, None)
        try:
            result = session.run_cell(source, name=target, defines=dict(defines or {}), label=label)
        except BaseException as exc:
            if prior is not None and cell_id:  # a failed run loses nothing
                self._restore(session, cell_id, *prior)
            if isinstance(exc, KeyboardInterrupt):
                raise KernelInterrupted(f"interrupted while compiling {label}; "
                                        "the session is unchanged") from None
            if isinstance(exc, SlangCompileError):
                self._keep_view(session, target)
                raise self.relabel(exc) from None
            raise
        self._bind(session, result, export)
        return result

    def _restore(self, session: Session, cell_id: str, name: str, label: str, source: str,
                 defines: dict[str, str], export: bool) -> None:
        with contextlib.suppress(SlangCompileError):
            self._bind(session, session.run_cell(source, name=name, defines=defines), export)
            self._by_id[cell_id] = name
            if label != name:
                self._labels[name] = label

    def present(self, result: CellResult) -> None:
        """Show what a compiled cell defined; run and show a Slang Playground cell (its
        `[playground::CALL]` entry points: slang_kernel.playground), kept as `slang_playground`."""
        session = self.session()
        show(summary(session, result, self._labels))
        if not is_playground(session.cell(result.name).source):
            return  # (the widgets, and what they import, load only for playground cells)
        from ..widgets import show_cell

        try:
            prog = show_cell(session, result.name, display=show)
        except PlaygroundError as exc:
            print(f"playground: {relabel_text(str(exc), self._labels)}", file=sys.stderr)
        else:
            if prog is not None:
                self.shell.user_ns["slang_playground"] = prog

    def _keep_view(self, session: Session, name: str) -> None:
        """A failed edit of a playing Playground cell: its view stays in the cell (widgets/playground_view)."""
        if name in session.cells and is_playground(session.cell(name).source):
            from ..widgets import keep_cell_view

            keep_cell_view(session, name, display=show)

    def forget(self, cell_id: str | None = None, *, reason: str) -> None:
        """The notebook cell (default: the one running) holds no Slang any more: remove its session
        cell and the names it bound, and say so."""
        cell_id = cell_id if cell_id is not None else self.current()[0]
        name = self._by_id.pop(cell_id, None) if cell_id else None
        session = self._session
        if name is None or session is None or name not in session.cells:
            return
        label = self.label(name)
        self._remove(session, name)
        print(f"{label} was removed from the Slang session: {reason}.", file=sys.stderr)

    def _remove(self, session: Session, name: str) -> None:
        if name in session.cells:
            session.remove_cell(name)
        self._labels.pop(name, None)
        self._unbind(session, self._bound.pop(name, {}))

    # -- binding names ----------------------------------------------------------------------------------

    def _bind(self, session: Session, result: CellResult, export: bool) -> None:
        old = self._bound.pop(result.name, {})
        bound: dict[str, object] = {}
        if export:
            for n in (*result.kernels, *result.functions):
                obj = self._make(session, n, n in result.kernels)
                if obj is not None:  # else e.g. a function Python cannot call: still usable from Slang
                    self.shell.user_ns[n] = bound[n] = obj
        self._bound[result.name] = bound
        self._unbind(session, {n: o for n, o in old.items() if n not in bound})

    @staticmethod
    def _make(session: Session, name: str, kernel: bool) -> object | None:
        try:
            return session.kernel(name) if kernel else session.function(name)
        except Exception:  # noqa: BLE001 - whatever the lookup raises, the name just stays unbound
            return None

    def _unbind(self, session: Session, stale: Mapping[str, object]) -> None:
        """Names a cell no longer defines: bound to another cell's definition if one is left, else
        removed; a name the user rebound in the meantime is left alone."""
        ns = self.shell.user_ns
        stale = {n: o for n, o in stale.items() if ns.get(n) is o}
        if not stale:
            return
        kernels, functions = set(session.kernels()), set(session.functions())
        for n in stale:
            other = self._make(session, n, n in kernels) if n in kernels | functions else None
            if other is None:
                del ns[n]
                continue
            ns[n] = other
            owner = next((c for c in reversed(session.cells) if n in session.cell(c).entry_points
                          or any(d.name == n for d in session.cell(c).decls)), None)
            if owner is not None:  # so that cell's next run can unbind it in turn
                self._bound.setdefault(owner, {})[n] = other

    # -- errors -----------------------------------------------------------------------------------------

    def relabel(self, exc: SlangCompileError) -> SlangCompileError:
        """A compile error as the user sees it: cells named by their latest prompt."""
        return relabel_error(exc, self._labels)

    @contextlib.contextmanager
    def own_errors(self) -> Iterator[None]:
        """Errors escaping this block come from a front end's own work (the cell is Slang, or a line
        magic): shown as their message only, since the Python line that made the call is ours."""
        try:
            yield
        except BaseException as exc:
            self._own = exc
            raise

    def error_lines(self, exc: BaseException, tb: TracebackType | None) -> list[str]:
        """Compile errors: the diagnostics with the user's Slang line. Errors from Python calls: the
        user's own frames and the message. Front-end and usage errors: the message."""
        if isinstance(exc, SlangCompileError):
            return self.relabel(exc).render().splitlines()
        if exc is self._own or isinstance(exc, self._quiet):
            return [relabel_text(line, self._labels) for line in error_lines(exc)]
        return traceback_lines(exc, tb, self._cell_name, self._labels)

    def _cell_name(self, filename: str) -> str | None:
        fmt: Callable[[str], tuple[str, str] | None] = self.shell.compile.format_code_name
        got = fmt(filename)
        return got[1] if got else None

    def _install_handler(self) -> None:
        cast(Any, self.shell).set_custom_exc((SlangCompileError, *RUNTIME_ERRORS, *self._quiet), self._handle)

    def _handle(self, shell: InteractiveShell, etype: type[BaseException], value: BaseException,
                tb: TracebackType | None, tb_offset: int | None = None) -> list[str]:
        """IPython's custom exception hook. It discards what a handler returns, so the lines are shown
        through IPython's own `showtraceback` (in a kernel: the `error` message, ename and evalue
        intact) by way of the `_render_traceback_` protocol it honours."""
        try:
            lines = self.error_lines(value, tb)
        except Exception:  # noqa: BLE001 - never let the display lose the error it shows
            lines = error_lines(value)
        shown = self.relabel(value) if isinstance(value, SlangCompileError) else value
        setattr(shown, "_render_traceback_", lambda: lines)  # noqa: B010 - BaseException does not declare it
        shell.showtraceback((type(shown), shown, tb))
        return lines
