"""Cells: one Slang module each; which earlier cells a cell uses, and the import lines it needs.

A cell never has to write `import`: the names it mentions are matched against what earlier cells
define, and the latest earlier definition wins, as in Python. A cell that declares `extension`s is
imported only by cells that name the extended type, a member it adds or an interface it conforms
to (extensions apply without being named, but importing every one into every later cell lets any
broken or odd one reach unrelated kernels). Blobs of serialized IR are what the compiler loads for
later cells, so a cell is checked once per revision.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from .compiler.diagnostics import Diagnostic
from .compiler.reflection import DeclInfo

__all__ = ["Cell", "identifiers", "import_prefix", "interface_text", "module_name_for", "resolve_imports"]

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXTENSION = re.compile(r"\bextension\s*(?:<[^>{]*>\s*)?(\w+)[^{;]*?(?::\s*([\w\s,<>]+))?\{")
_MEMBER = re.compile(r"\b[A-Za-z_]\w*(?:<[^<>(){};]*>)?\s+([A-Za-z_]\w*)\s*\(")
_BUILTIN = re.compile(r"^(bool|int|uint|float|half|double|int64_t|uint64_t|int16_t|uint16_t|int8_t|uint8_t)"
                      r"(\d(x\d)?)?$")


def identifiers(source: str) -> frozenset[str]:
    """Identifiers a source mentions, outside comments and strings."""
    text = _STRINGS.sub('""', _COMMENTS.sub(" ", source))
    return frozenset(_IDENT.findall(text))


_SIGNATURE_TAIL = re.compile(r"\)\s*(?::\s*\w+\s*)?(?:throws\s+\w+\s*)?$")


def interface_text(source: str) -> str:
    """What other cells can see of a cell: its text without comments and without the bodies of its
    top-level functions. Cells that import it need re-checking only when this changes; a body edit
    reaches them at link time (their blobs refer to its functions by name; generics and derivatives
    are specialised when a kernel is linked)."""
    text = _COMMENTS.sub(" ", source)
    out, depth, i, start = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            m = _STRINGS.match(text, i)
            i = m.end() if m else i + 1
            continue
        if ch == "{":
            if depth == 0 and _SIGNATURE_TAIL.search(text, start, i):
                out.append(text[start:i] + "{}")
                depth, i = 1, i + 1
                while i < len(text) and depth:
                    m = _STRINGS.match(text, i) if text[i] == '"' else None
                    if m:
                        i = m.end()
                        continue
                    depth += {"{": 1, "}": -1}.get(text[i], 0)
                    i += 1
                start = i
                continue
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        i += 1
    out.append(text[start:])
    return " ".join("".join(out).split())


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


@dataclass(frozen=True)
class Cell:
    """One revision of one cell, checked by the compiler (frozen: a new revision is a new Cell)."""

    name: str                      # what the user sees in diagnostics, e.g. "In[3]"
    module: str                    # Slang module name, e.g. "In_3"
    source: str                    # exactly what the user wrote
    imports: tuple[str, ...]       # names of the cells it imports (directly)
    digest: str = ""               # content hash of this revision: source, options, defines, imports' interfaces
    blob: bytes = b""              # serialized IR
    decls: tuple[DeclInfo, ...] = ()
    entry_points: tuple[str, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    error: str | None = None       # set when it (or, after an edit, a dependency) does not compile
    idents: frozenset[str] = frozenset()
    own: frozenset[str] = frozenset()  # its kernels' names, for which no earlier cell is imported
    defines: tuple[tuple[str, str], ...] = ()   # preprocessor defines of this revision, sorted
    options: tuple[str, ...] = ()               # extra compiler options of this revision
    own_defines: tuple[tuple[str, str], ...] = ()  # the defines given with this cell (run_cell(defines=))
    interface: str = ""            # digest of what importers see (interface_text, defines, imports' interfaces)
    label: str = ""                # what diagnostics call it when not its name (a front end's prompt, "In[7]")

    @property
    def shown(self) -> str:
        """The cell as the user sees it: its label, or its name."""
        return self.label or self.name

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.blob)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """Top-level names it defines (declarations and kernels)."""
        return frozenset(d.name for d in self.decls) | frozenset(self.entry_points)

    @functools.cached_property
    def extension_triggers(self) -> frozenset[str] | None:
        """Names whose use makes a cell need this one's extensions; None when it declares none."""
        text = _STRINGS.sub('""', _COMMENTS.sub(" ", self.source))
        found = list(_EXTENSION.finditer(text))
        if not found:
            return None
        out: set[str] = set()
        for m in found:
            if not _BUILTIN.match(m.group(1)):
                out.add(m.group(1))
            out.update(_IDENT.findall(m.group(2) or ""))
            out.update(_MEMBER.findall(_body(text, m.end())))
        return frozenset(out)


def _body(text: str, start: int) -> str:
    """The text of a `{...}` block whose opening brace is just before `start`."""
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start:i - 1]


def import_prefix(modules: Sequence[str]) -> str:
    """One line of imports put before the user's first line (diagnostics subtract one line)."""
    return "".join(f"import {m}; " for m in modules) + "\n"


def resolve_imports(idents: frozenset[str], earlier: Sequence[Cell]) -> list[Cell]:
    """The earlier cells this source needs: for each name it mentions, the latest definition;
    plus the cells whose extensions it uses (see the module docstring)."""
    chosen: dict[str, Cell] = {}
    for cell in reversed(earlier):
        if not cell.ok:
            continue
        ext = cell.extension_triggers
        if (idents & (cell.names - _claimed(chosen))) or (ext is not None and idents & ext):
            chosen.setdefault(cell.name, cell)
    order = {c.name: i for i, c in enumerate(earlier)}
    return sorted(chosen.values(), key=lambda c: order[c.name])


def _claimed(chosen: dict[str, Cell]) -> set[str]:
    out: set[str] = set()
    for c in chosen.values():
        out |= c.names
    return out
