"""What the front ends (the %%slang magic and the Slang kernel) show: a short summary of a cell,
generated code, and errors as the compiler's diagnostics or as the user's own lines, without the
library's traceback noise.

`labels` map a session cell name to the name the user sees now (the prompt of the cell's latest run,
see slang_kernel.frontend): a re-run cell keeps its place and name in the session, but everything
shown about it says the prompt the user is looking at.
"""

from __future__ import annotations

import dataclasses
import html
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from ..engine.cells import overloaded
from ..compiler.diagnostics import Diagnostic, SlangCompileError, render_diagnostics

if TYPE_CHECKING:
    from ..engine.session import CellResult, Session

__all__ = ["CODE_LANGUAGES", "LIBRARY_PACKAGES", "CellSummary", "code_display", "error_lines",
           "relabel_error", "relabel_text", "show", "summary", "traceback_lines", "warnings_text"]

#: Top-level packages whose frames a user never needs to see above a library error's message.
LIBRARY_PACKAGES = frozenset({"slang_kernel", "IPython", "ipykernel"})

#: Pygments language for each code target.
CODE_LANGUAGES = {"hlsl": "hlsl", "glsl": "glsl", "cuda": "cuda", "cpp": "cpp", "metal": "cpp",
                  "wgsl": "wgsl", "spirv-asm": "text", "spirv": "text"}


def error_lines(exc: BaseException) -> list[str]:
    """The error as the user should see it: compiler diagnostics with carets, or the message."""
    if isinstance(exc, SlangCompileError):
        return exc.render().splitlines()
    if isinstance(exc, KeyboardInterrupt) and str(exc):
        return [f"KeyboardInterrupt: {exc}"]
    return f"{type(exc).__name__}: {exc}".splitlines()


def traceback_lines(exc: BaseException, tb: TracebackType | None,
                    cell_name: Callable[[str], str | None] = lambda filename: None,
                    labels: Mapping[str, str] | None = None) -> list[str]:
    """The user's own frames (the notebook cell that made the call; IPython's and our frames left
    out), then the message: a bad argument deep in packing reads as the line that passed it.

    cell_name: a frame's file name -> the cell's name ("In[4]"), None for a real file; labels: for
    the session cell names in the message."""
    frames = traceback.StackSummary.extract(
        (f, n) for f, n in traceback.walk_tb(tb)
        if str(f.f_globals.get("__name__", "")).partition(".")[0] not in LIBRARY_PACKAGES)
    lines: list[str] = []
    for fs in frames:
        cell = cell_name(fs.filename)
        where = f"Cell {cell}, line {fs.lineno}" if cell else f'File "{fs.filename}", line {fs.lineno}'
        lines.append(where + ("" if fs.name == "<module>" else f", in {fs.name}"))
        if fs.line:
            lines.append(f"    {fs.line}")
    return lines + [relabel_text(line, labels or {}) for line in error_lines(exc)]


def relabel_text(text: str, labels: Mapping[str, str]) -> str:
    """Every session cell name in `text` replaced by its label (one pass, so labels never chain)."""
    if not labels:
        return text
    pattern = "|".join(re.escape(n) for n in sorted(labels, key=len, reverse=True))
    return re.sub(rf"(?<!\w)(?:{pattern})", lambda m: labels[m.group(0)], text)


def _relabel_diagnostics(diags: Sequence[Diagnostic], labels: Mapping[str, str]) -> list[Diagnostic]:
    return [dataclasses.replace(d, cell=labels.get(d.cell, d.cell) if d.cell else d.cell,
                                message=relabel_text(d.message, labels)) for d in diags]


def relabel_error(exc: SlangCompileError, labels: Mapping[str, str]) -> SlangCompileError:
    """A copy of a compile error whose diagnostics, sources and message use the labels."""
    if not labels:
        return exc
    try:
        return type(exc)(relabel_text(exc.message, labels), _relabel_diagnostics(exc.diagnostics, labels),
                         {labels.get(n, n): src for n, src in exc.sources.items()})
    except TypeError:  # a subclass with another constructor: show it as it is
        return exc


class CellSummary:
    """text/plain + text/html: what a Slang cell defined, on which backend, in how long."""

    def __init__(self, text: str, html_text: str) -> None:
        self._text, self._html = text, html_text

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self._text, "text/html": self._html}

    def __repr__(self) -> str:
        return self._text


def _signature(session: Session, name: str) -> str:
    d = session.store.names().get(name)
    if d is not None and d.functions:
        sigs = [f.signature for f in d.functions]
        return sigs[0] + (f"  (+{len(sigs) - 1} overloads)" if len(sigs) > 1 else "")
    return name


def _overload_notes(session: Session, result: CellResult, labels: Mapping[str, str]) -> list[str]:
    """"adds an overload of f (In[2] has f(float, float))" for each function of the cell whose earlier
    forms stay callable beside its own (cells.overloaded)."""
    order = list(session.cells)
    if result.name not in order:
        return []
    cell, earlier = session.cell(result.name), [session.cell(n) for n in order[:order.index(result.name)]]
    notes = []
    for f in result.functions:
        others = [f"{labels.get(c.name, c.name)} has " + ", ".join(
            f"{f}({', '.join(t for _, t, _ in fn.params)})" for d in c.decls if d.name == f for fn in d.functions)
            for c in overloaded(f, cell, earlier)]
        if others:
            notes.append(f"adds an overload of {f} ({'; '.join(others)})")
    return notes


def warnings_text(session: Session, result: CellResult, labels: Mapping[str, str] | None = None) -> str:
    """The cell's compiler warnings, with carets under the user's line ("" when there are none)."""
    labels = labels or {}
    label = labels.get(result.name, result.name)
    return render_diagnostics(_relabel_diagnostics(result.warnings, labels),
                              {label: session.cell(result.name).source})


def summary(session: Session, result: CellResult, labels: Mapping[str, str] | None = None) -> CellSummary:
    """What the cell defined, on which backend, in how long; later cells it recompiled or broke; warnings."""
    labels = labels or {}
    label = labels.get(result.name, result.name)
    names = session.store.names()
    rows: list[tuple[str, str]] = []
    for k in result.kernels:
        rows.append(("kernel", _signature(session, k)))
    for f in result.functions:
        rows.append(("function", _signature(session, f)))
    for t in result.types:
        d = names.get(t)
        fields = ", ".join(f"{ft} {fn}" for fn, ft in (d.fields if d else ()))
        rows.append(("type", f"{d.kind if d else 'struct'} {t}" + (f" {{ {fields} }}" if fields else "")))
    backend = session.backend
    ms = result.elapsed_ms
    took = f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"
    cms = result.compile_ms
    how = "from the compile cache" if result.cached and cms == 0 else \
        f"compiler {cms:.0f} ms" if cms >= 10 else f"compiler {cms:.1f} ms"
    head = f"{label}: compiled in {took} ({how}); backend {backend.name}"
    try:
        device = backend.describe()
    except Exception:
        device = ""
    notes = []
    if result.shadows:  # latest wins for the cells after this one; the earlier cells keep theirs
        notes.append("replaces for later cells: " + ", ".join(
            f"{n} (from {labels.get(c, c)})" for n, c in result.shadows))
    notes += _overload_notes(session, result, labels)
    if result.recompiled:
        notes.append("recompiled after this change: "
                     + ", ".join(labels.get(n, n) for n in result.recompiled))
    if result.broken:
        notes.append("no longer compile (re-run them to see why): "
                     + ", ".join(labels.get(n, n) for n in result.broken))
    if not rows:
        notes.append("no kernels, functions or types defined")
    warn = warnings_text(session, result, labels)
    text = "\n".join([head + (f" ({device})" if device else ""), *(f"  {k:8s} {v}" for k, v in rows),
                      *(f"  {n}" for n in notes), *([warn] if warn else [])])
    body = "".join(
        f"<tr><td style='color:#888;text-align:left;padding-right:1em'>{html.escape(k)}</td>"
        f"<td style='text-align:left'><code>{html.escape(v)}</code></td></tr>" for k, v in rows)
    notes_html = "".join(
        f"<div style='color:{'#b00' if 'no longer' in n else '#555'}'>{html.escape(n)}</div>" for n in notes)
    warn_html = f"<pre style='color:#b36b00'>{html.escape(warn)}</pre>" if warn else ""
    html_text = (f"<div class='slang-summary'><div style='color:#555' title='{html.escape(device)}'>"
                 f"{html.escape(head)}</div><table style='margin:0'>{body}</table>{notes_html}{warn_html}</div>")
    return CellSummary(text, html_text)


class _Pre:
    def __init__(self, text: str, title: str) -> None:
        self.text, self.title = text, title

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self.text,
                "text/html": f"<details open><summary>{html.escape(self.title)}</summary>"
                             f"<pre>{html.escape(self.text)}</pre></details>"}

    def __repr__(self) -> str:  # what a terminal (or a text-only front end) shows
        return self.text


def code_display(code: str, target: str, title: str) -> Any:
    """Generated code of one target, highlighted where Pygments knows the language."""
    language = CODE_LANGUAGES.get(target, "text")
    if language == "text":
        return _Pre(code, title)
    from IPython.display import Code

    return cast(Callable[..., Any], Code)(code, language=language)


def show(obj: object) -> None:
    """IPython's display() (typed: IPython's is not)."""
    from IPython.display import display

    cast(Callable[[object], None], display)(obj)
