"""Compiler diagnostics: parsed from Slang's machine-readable format, rendered with carets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

__all__ = [
    "Diagnostic",
    "SlangCompileError",
    "SlangCompilerCrash",
    "parse_diagnostics",
    "render_diagnostics",
]

Severity = Literal["error", "warning", "note", "internal"]

# code, severity, file, line, col, endLine, endCol, message
_LINE = re.compile(r"^([A-Za-z]*\d*)\t(\w+(?: \w+)?)\t([^\t]*)\t(-?\d+)\t(-?\d+)\t(-?\d+)\t(-?\d+)\t(.*)$")
# Diagnostics on generated code nobody wrote; they would only confuse (entry-point uniform packing).
_NOISE = {"E31106", "E31107"}


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message, pointing at the cell and line the user wrote (1-based)."""

    severity: Severity
    code: str
    cell: str | None
    line: int
    column: int
    message: str
    end_line: int = 0
    end_column: int = 0

    def __str__(self) -> str:
        where = f"{self.cell}:{self.line}:{self.column}: " if self.cell else ""
        return f"{where}{self.severity} {self.code}: {self.message}"


def _severity(word: str) -> Severity:
    word = word.lower()
    if word in ("error", "fatal", "fatal error"):
        return "error"
    if word == "warning":
        return "warning"
    if word in ("internal", "internalerror"):
        return "internal"
    return "note"


def parse_diagnostics(text: str, line_offsets: Mapping[str, int] | None = None) -> list[Diagnostic]:
    """Parse `-enable-machine-readable-diagnostics` output.

    Slang prints a short line and then a `span` line with the full message for the same place;
    the full message wins. `line_offsets` maps a path to the number of lines we prepended to the
    user's text (auto-imports), so lines point at what the user wrote. Unparseable lines become
    notes, never an exception: a diagnostic must not hide the error it reports.
    """
    offsets = line_offsets or {}
    out: list[Diagnostic] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = _LINE.match(raw)
        if m is None:
            if out and not raw.startswith(("E", "W")):
                last = out[-1]
                out[-1] = Diagnostic(last.severity, last.code, last.cell, last.line, last.column,
                                     last.message + "\n" + raw, last.end_line, last.end_column)
            else:
                out.append(Diagnostic("note", "", None, 0, 0, raw))
            continue
        code, sev, path, line, col, eline, ecol, msg = m.groups()
        if code in _NOISE:
            continue
        shift = offsets.get(path, 0)
        cell = path or None
        ln, eln = int(line), int(eline)
        if cell is not None and ln > 0:
            ln, eln = max(1, ln - shift), max(0, eln - shift)
        if sev == "span" and out and out[-1].code == code and out[-1].cell == cell and out[-1].line == ln:
            last = out[-1]
            out[-1] = Diagnostic(last.severity, code, cell, ln, int(col), msg or last.message, eln, int(ecol))
            continue
        if sev == "span" or (sev == "note" and path.endswith(".meta.slang")):
            continue  # a span without its head, or a note inside Slang's own core module
        out.append(Diagnostic(_severity(sev), code, cell, ln, int(col), msg, eln, int(ecol)))
    return out


TAB = 4   # the tab stop lines are shown with


def _shown_column(line: str, column: int) -> int:
    """The 1-based column where the compiler's `column` (which counts a tab as one character) shows
    once the line's tabs are expanded to TAB stops."""
    return len(line[:max(1, column) - 1].expandtabs(TAB)) + 1


def render_diagnostics(diags: Sequence[Diagnostic], sources: Mapping[str, str]) -> str:
    """Format like a compiler: location, message, the user's line and a caret under the column."""
    parts: list[str] = []
    for d in diags:
        parts.append(str(d))
        src = sources.get(d.cell or "")
        if src is None or d.line <= 0:
            continue
        lines = src.splitlines()
        if d.line > len(lines):
            continue
        raw = lines[d.line - 1]
        start = _shown_column(raw, d.column)
        width = 1
        if d.end_line == d.line and d.end_column > d.column:
            width = _shown_column(raw, d.end_column) - start
        parts.append(f"  {d.line:4d} | {raw.expandtabs(TAB)}")
        parts.append(f"       | {' ' * (start - 1)}{'^' * width}")
    return "\n".join(parts)


@dataclass
class SlangCompileError(Exception):
    """A cell (or a kernel built from it) did not compile; nothing in the session changed."""

    message: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity in ("error", "internal")]

    def render(self) -> str:
        body = render_diagnostics(self.diagnostics, self.sources)
        return f"{self.message}\n{body}" if body else self.message

    def __str__(self) -> str:
        return self.render()


class SlangCompilerCrash(SlangCompileError):
    """The Slang compiler process died on this input; it has been restarted."""
