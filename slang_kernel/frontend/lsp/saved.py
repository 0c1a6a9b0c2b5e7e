"""The notebook file on disk, read so that editor answers can name cells as the user sees them.

Neither side of the editor support knows the notebook's cells by itself: the kernel sees only the
cells that ran (Shift-Tab on a name from a cell above that has not run found nothing), and the
jupyter-lsp server sees one scratch document, the Slang cells joined with two blank lines between
them (hovers read "Defined in nb.ipynb"). Both know the notebook's path (the kernel from
`JPY_SESSION_NAME`, which jupyter_server sets; the server from the virtual document's path), so
both read the saved notebook: its Slang cells, their place and their execution counts.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SavedCell", "cell_of_line", "label", "saved_cells", "session_notebook", "unrun_above"]

# as the labextension's extractors (labextension_src/src/lsp.js) split cells
_SLANG_CELL = re.compile(r"^((?:[ \t]*\n)*%%slang(?:[ \t][^\n]*)?\n)(.*)$", re.S)
_OTHER_CELL = re.compile(r"^(?:[ \t]*\n)*(?:%%(?!slang\b)\w|%(?!(?:backend|show|run)\b)\w|[!?])")


@dataclass(frozen=True)
class SavedCell:
    """A code cell of a saved notebook: its place among all cells (0-based), execution count
    (None before it ran), source, and whether it is Slang (in its notebook's kind)."""

    index: int
    count: int | None
    source: str
    slang: bool


def label(cell: SavedCell) -> str:
    """The cell as the user sees it: `In[3]` once it ran, else its place (`cell 2`, from 1)."""
    return f"In[{cell.count}]" if cell.count else f"cell {cell.index + 1}"


def saved_cells(path: str | os.PathLike[str], *, slang_kernel: bool) -> list[SavedCell]:
    """The notebook's code cells in order, each marked Slang or not: in a Slang-kernel notebook
    every code cell but those IPython runs (`%%python`, other cell magics, `!`); in a Python
    notebook the `%%slang` cells. Empty when the file is missing or unreadable."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    out = []
    for i, c in enumerate(cells if isinstance(cells, list) else []):
        if not isinstance(c, dict) or c.get("cell_type") != "code":
            continue
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        slang = not _OTHER_CELL.match(src) if slang_kernel else bool(_SLANG_CELL.match(src))
        count = c.get("execution_count")
        out.append(SavedCell(i, count if isinstance(count, int) else None, src, slang))
    return out


def session_notebook() -> Path | None:
    """The notebook this kernel serves (jupyter_server's `JPY_SESSION_NAME`), if it is a file."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    if not name.endswith(".ipynb"):
        return None
    p = Path(name)
    return p if p.is_file() else None


def _same(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def unrun_above(saved: list[SavedCell], code: str, ran: list[str]) -> list[SavedCell]:
    """The saved cells above the one being edited (found by its text; all of them when it is not
    saved yet) whose text has not run in the session."""
    mine = next((i for i, c in enumerate(saved) if _same(c.source, code)), len(saved))
    return [c for c in saved[:mine] if c.slang and not any(_same(c.source, r) for r in ran)]


def _blocks(saved: list[SavedCell], slang_kernel: bool) -> list[tuple[SavedCell, str, int]]:
    """The cells in the jupyter-lsp document, their text there and the lines of the cell above
    it: in a Slang-kernel notebook every code cell (one that IPython runs is left empty), in a
    Python notebook the bodies of the `%%slang` cells (below their header)."""
    if slang_kernel:
        return [(c, c.source if c.slang else "", 0) for c in saved]
    return [(c, m.group(2), m.group(1).count("\n")) for c in saved if (m := _SLANG_CELL.match(c.source))]


def cell_of_line(document: str, line: int, saved: list[SavedCell],
                 slang_kernel: bool) -> tuple[SavedCell, int] | None:
    """(cell, 1-based line in it) of a 1-based line of the jupyter-lsp document, which is each
    cell's lines then two blank lines. None unless the saved cells have the document's lines (an
    edit within lines keeps them; a cell or line added since the save does not, and the caller
    keeps the notebook's name rather than name a wrong cell)."""
    blocks = _blocks(saved, slang_kernel)
    doc = document.rstrip("\n").split("\n")
    spans, first = [], 0
    for cell, text, shift in blocks:
        n = text.count("\n") + 1
        spans.append((cell, first, n, shift))
        first += n + 2
    tail = len(blocks[-1][1]) - len(blocks[-1][1].rstrip("\n")) if blocks else 0
    if not blocks or not first - 2 - tail <= len(doc) <= first - 2:   # (the document's end is trimmed)
        return None
    if any(doc[a + n].strip() or doc[a + n + 1].strip() for _, a, n, _ in spans[:-1]):
        return None  # a separator holds text: the cells are not the saved ones
    for cell, a, n, shift in spans:
        if a < line <= a + n:
            return cell, line - a + shift
    return None
