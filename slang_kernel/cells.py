"""Cells: one Slang module each; which earlier cells a cell uses, and the import lines it needs.

A cell never has to write `import`: the names it mentions are matched against what earlier cells
define, and the latest earlier definition wins, as in Python. Blobs of serialized IR are what the
compiler loads for later cells, so a cell is checked once per revision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .compiler.reflection import DeclInfo

__all__ = ["Cell", "identifiers", "import_prefix", "module_name_for", "resolve_imports"]

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXTENSION = re.compile(r"\bextension\b")


def identifiers(source: str) -> frozenset[str]:
    """Identifiers a source mentions, outside comments and strings."""
    text = _STRINGS.sub('""', _COMMENTS.sub(" ", source))
    return frozenset(_IDENT.findall(text))


def module_name_for(cell_name: str, taken: Iterable[str] = ()) -> str:
    """A Slang module identifier for a cell name: "cell[3]" -> "cell_3"."""
    base = re.sub(r"\W+", "_", cell_name).strip("_") or "cell"
    if base[0].isdigit():
        base = "m_" + base
    taken = set(taken)
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


@dataclass
class Cell:
    """One revision of one cell, checked by the compiler."""

    name: str                      # what the user sees in diagnostics, e.g. "cell[3]"
    module: str                    # Slang module name, e.g. "cell_3"
    source: str                    # exactly what the user wrote
    imports: tuple[str, ...]       # names of the cells it imports (directly)
    digest: str = ""               # content hash of this revision (source + imports' digests)
    blob: bytes = b""              # serialized IR
    decls: tuple[DeclInfo, ...] = ()
    entry_points: tuple[str, ...] = ()
    diagnostics: list = field(default_factory=list)
    error: str | None = None       # set when a dependency change broke this cell
    idents: frozenset[str] = frozenset()
    own: frozenset[str] = frozenset()  # its kernels' names, for which no earlier cell is imported

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.blob)

    def defines(self) -> set[str]:
        return {d.name for d in self.decls} | set(self.entry_points)

    @property
    def has_extensions(self) -> bool:
        return bool(_EXTENSION.search(_COMMENTS.sub(" ", self.source)))


def import_prefix(modules: Sequence[str]) -> str:
    """One line of imports put before the user's first line (diagnostics subtract one line)."""
    return "".join(f"import {m}; " for m in modules) + "\n"


def resolve_imports(idents: frozenset[str], earlier: Sequence[Cell]) -> list[Cell]:
    """The earlier cells this source needs: for each name it mentions, the latest definition;
    plus every cell declaring extensions (they apply without being named)."""
    chosen: dict[str, Cell] = {}
    for cell in reversed(earlier):
        if not cell.ok:
            continue
        if cell.has_extensions or (idents & cell.defines() - _claimed(chosen)):
            chosen.setdefault(cell.name, cell)
    order = {c.name: i for i, c in enumerate(earlier)}
    return sorted(chosen.values(), key=lambda c: order[c.name])


def _claimed(chosen: dict[str, Cell]) -> set[str]:
    out: set[str] = set()
    for c in chosen.values():
        out |= c.defines()
    return out
