"""Rich display of cell results, generated code and compile errors (shared by magic and kernel)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ..compiler.diagnostics import SlangCompileError, render_diagnostics

if TYPE_CHECKING:
    from ..session import CellResult, Session

__all__ = ["CellSummary", "code_display", "error_lines", "summary"]


class CellSummary:
    """What a cell defined, on which backend, how long it took; warnings with carets."""

    def __init__(self, text: str, html_text: str) -> None:
        self._text, self._html = text, html_text

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self._text, "text/html": self._html}

    def __repr__(self) -> str:
        return self._text


def summary(session: "Session", result: "CellResult", timing: bool = False) -> CellSummary:
    parts, rows = [], []
    names = session.names()
    for k in result.kernels:
        decl = names.get(k)
        sig = decl.functions[0].signature if decl is not None and decl.functions else k
        parts.append(f"kernel {sig}")
        rows.append(("kernel", sig))
    for f in result.functions:
        try:
            sig = session.function(f).signature
        except Exception:
            sig = f
        parts.append(sig)
        rows.append(("function", sig))
    for t in result.types:
        parts.append(f"type {t}")
        rows.append(("type", t))
    head = f"{result.name}: compiled in {result.elapsed_ms:.1f} ms on {session.backend.name} ({session.backend.describe()})"
    extra = []
    if result.recompiled:
        extra.append("recompiled " + ", ".join(result.recompiled))
    if result.broken:
        extra.append("now failing: " + ", ".join(result.broken))
    warn = render_diagnostics(result.warnings, {result.name: session.cell(result.name).source})
    text = "\n".join([head, *("  " + p for p in parts), *extra, *([warn] if warn else [])])
    body = "".join(f"<tr><td style='color:#888'>{html.escape(k)}</td><td><code>{html.escape(v)}</code></td></tr>"
                   for k, v in rows)
    warn_html = f"<pre style='color:#b36b00'>{html.escape(warn)}</pre>" if warn else ""
    extra_html = "".join(f"<div style='color:#b00'>{html.escape(e)}</div>" if "failing" in e
                         else f"<div>{html.escape(e)}</div>" for e in extra)
    return CellSummary(text, f"<div class='slang-summary'><div style='color:#555'>{html.escape(head)}</div>"
                             f"<table>{body}</table>{extra_html}{warn_html}</div>")


def code_display(code: str, language: str, title: str) -> Any:
    from IPython.display import Code

    return Code(code, language=language) if language != "text" else _Pre(code, title)


class _Pre:
    def __init__(self, text: str, title: str) -> None:
        self.text, self.title = text, title

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self.text,
                "text/html": f"<details open><summary>{html.escape(self.title)}</summary>"
                             f"<pre>{html.escape(self.text)}</pre></details>"}


def error_lines(exc: BaseException) -> list[str]:
    if isinstance(exc, SlangCompileError):
        return exc.render().splitlines()
    return [f"{type(exc).__name__}: {exc}"]
