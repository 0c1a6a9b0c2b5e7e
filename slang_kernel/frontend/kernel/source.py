"""What a kernel cell is (Slang, Python or an IPython magic cell) and the Slang cell's line magics.

    %%python / %%py      first line: the rest of the cell is Python, run by the IPython shell
    %%<other magic>      an IPython cell magic (%%timeit, %%html, %%slang, ...): run by IPython
    %<magic> first       a cell whose first line is an IPython line magic that is not one of the
                         Slang kernel's own (%backend, %show, %run), e.g. %matplotlib: Python;
                         so is `%run script.py` (IPython's %run of a .py/.ipy/.ipynb file)
    anything else        Slang; lines starting with %backend, %show or %run are the kernel's
                         line magics (blanked out before compiling, so line numbers stay right)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PYTHON_HEADERS", "SLANG_MAGICS", "Magic", "ParsedCell", "classify", "is_slang_cell", "parse_cell"]

PYTHON_HEADERS = ("%%python", "%%py")
SLANG_MAGICS = ("backend", "show", "run")
_MAGIC = re.compile(r"^%(\w+)\b(.*)$")
_SLANG_CELL = re.compile(r"^\s*%%slang\b")


@dataclass(frozen=True)
class Magic:
    name: str     # backend | show | run
    args: str     # the rest of the line, stripped
    line: int     # 1-based line in the cell


@dataclass
class ParsedCell:
    kind: str                     # "slang" | "python" | "ipython"
    source: str                   # Slang text with magic lines blanked (slang); Python text (python)
    magics: list[Magic] = field(default_factory=list)

    @property
    def has_slang(self) -> bool:
        return self.kind == "slang" and bool(_strip_comments(self.source).strip())


def _first_line(code: str) -> str:
    for line in code.splitlines():
        if line.strip():
            return line.strip()
    return ""


def is_slang_cell(code: str) -> bool:
    """A `%%slang` cell (its first line, after blank lines, is `%%slang ...`)."""
    return bool(_SLANG_CELL.match(code))


def classify(code: str) -> str:
    """"slang", "python" (a %%python/%%py cell) or "ipython" (another IPython magic cell)."""
    first = _first_line(code)
    if first.startswith("%%"):
        word = first.split()[0]
        return "python" if word in PYTHON_HEADERS else "ipython"
    if first.startswith("%"):
        m = _MAGIC.match(first)
        if m and m.group(1) not in SLANG_MAGICS:
            return "ipython"
        if m and m.group(1) == "run" and re.match(r"^\s*(-\w+\s+)*\S+\.(py|ipy|ipynb)\b", m.group(2)):
            return "ipython"   # IPython's %run of a script, not a kernel dispatch
    if first.startswith(("!", "?")):
        return "ipython"
    return "slang"


def python_body(code: str) -> str:
    """A %%python cell as the shell runs it: the header becomes a comment (line numbers stay)."""
    lines = code.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip():
            lines[i] = "# " + line.lstrip()
            break
    return "".join(lines)


def parse_cell(code: str) -> ParsedCell:
    kind = classify(code)
    if kind == "python":
        return ParsedCell("python", python_body(code))
    if kind == "ipython":
        return ParsedCell("ipython", code)
    out, magics = [], []
    in_comment = False
    for i, line in enumerate(code.splitlines(), 1):
        m = _MAGIC.match(line.strip()) if not in_comment else None
        if m and m.group(1) in SLANG_MAGICS and line.lstrip().startswith("%"):
            magics.append(Magic(m.group(1), m.group(2).strip(), i))
            out.append("")
            continue
        out.append(line)
        in_comment = _ends_in_comment(line, in_comment)
    return ParsedCell("slang", "\n".join(out) + ("\n" if code.endswith("\n") else ""), magics)


def _ends_in_comment(line: str, in_comment: bool) -> bool:
    i = 0
    while i < len(line):
        if in_comment:
            j = line.find("*/", i)
            if j < 0:
                return True
            in_comment, i = False, j + 2
        else:
            j = line.find("/*", i)
            k = line.find("//", i)
            if j < 0 or (0 <= k < j):
                return False
            in_comment, i = True, j + 2
    return in_comment


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*[\s\S]*?(\*/|$)|//[^\n]*", " ", text)
