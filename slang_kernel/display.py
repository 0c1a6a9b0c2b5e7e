"""What the front ends (the %%slang magic and the Slang kernel) show: a short summary of a cell,
generated code, and errors as the compiler's diagnostics without Python traceback noise."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from .compiler.diagnostics import SlangCompileError, render_diagnostics

if TYPE_CHECKING:
    from .session import CellResult, Session

__all__ = ["CODE_LANGUAGES", "CellSummary", "code_display", "error_lines", "summary"]

#: Pygments language for each code target.
CODE_LANGUAGES = {"hlsl": "hlsl", "glsl": "glsl", "cuda": "cuda", "cpp": "cpp", "metal": "cpp",
                  "wgsl": "wgsl", "spirv-asm": "text", "spirv": "text"}


def error_lines(exc: BaseException) -> list[str]:
    """The error as the user should see it: compiler diagnostics with carets, or the message."""
    if isinstance(exc, SlangCompileError):
        return exc.render().splitlines()
    if isinstance(exc, KeyboardInterrupt) and str(exc):
        return [f"KeyboardInterrupt: {exc}"]
    return [f"{type(exc).__name__}: {exc}"]


class CellSummary:
    """text/plain + text/html: what a Slang cell defined, on which backend, in how long."""

    def __init__(self, text: str, html_text: str) -> None:
        self._text, self._html = text, html_text

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self._text, "text/html": self._html}

    def __repr__(self) -> str:
        return self._text


def _signature(session: "Session", name: str) -> str:
    d = session.names().get(name)
    if d is not None and d.functions:
        sigs = [f.signature for f in d.functions]
        return sigs[0] + (f"  (+{len(sigs) - 1} overloads)" if len(sigs) > 1 else "")
    return name


def summary(session: "Session", result: "CellResult") -> CellSummary:
    names = session.names()
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
    head = f"{result.name}: compiled in {took}; backend {backend.name}"
    try:
        device = backend.describe()
    except Exception:
        device = ""
    notes = []
    if result.recompiled:
        notes.append("recompiled after this change: " + ", ".join(result.recompiled))
    if result.broken:
        notes.append("no longer compile (re-run them to see why): " + ", ".join(result.broken))
    if not rows:
        notes.append("no kernels, functions or types defined")
    warn = render_diagnostics(result.warnings, {result.name: session.cell(result.name).source})
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


def code_display(code: str, target: str, title: str) -> Any:
    """Generated code of one target, highlighted where Pygments knows the language."""
    language = CODE_LANGUAGES.get(target, "text")
    if language == "text":
        return _Pre(code, title)
    from IPython.display import Code

    return Code(code, language=language)
