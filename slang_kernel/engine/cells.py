"""Cells: one Slang module each; which earlier cells a cell may use, what it must not see of them.

A cell never has to write `import`. Names work as in Python: a later cell may declare any name an
earlier cell declared, and for the cells after it the latest declaration wins while the cells before
it keep what they saw. The earlier declaration is hidden from later importers by a *visibility
variant* of its cell (scanner.visibility_variant: the shadowed names `internal`, same module, same
code), so nothing is ambiguous. Functions are the exception Slang users expect: a later function of
the same name but another signature adds an overload (and may call the earlier one); the same
signature, or a kernel of that name, shadows it.

Which cells a cell imports: the mentioned names (scanner.mentions: never a member after `.`) give
candidates; the compiler's check says which of them the cell really references (compiler/_worker
`refs`), and only those stay its imports. A cell that declares `extension`s is
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

from .. import scanner
from ..compiler.diagnostics import Diagnostic
from ..compiler.reflection import DeclInfo

__all__ = ["Cell", "Visible", "exposed", "identifiers", "import_prefix", "interface_text", "module_name_for",
           "overloaded", "visible_imports"]

_EXTENSION = re.compile(r"\bextension\s*(?:<[^>{]*>\s*)?(\w+)[^{;]*?(?::\s*([\w\s,<>]+))?\{")
_MEMBER = re.compile(r"\b[A-Za-z_]\w*(?:<[^<>(){};]*>)?\s+([A-Za-z_]\w*)\s*\(")
_BUILTIN = re.compile(r"^(bool|int|uint|float|half|double|int64_t|uint64_t|int16_t|uint16_t|int8_t|uint8_t)"
                      r"(\d(x\d)?)?$")


def identifiers(source: str) -> frozenset[str]:
    """Identifiers a source mentions, outside comments and strings (member names included)."""
    return frozenset(scanner.IDENT.findall(scanner.blank(source)))


def interface_text(source: str) -> str:
    """What other cells can see of a cell: its text without comments and without the bodies of its
    top-level functions. Cells that import it need re-checking only when this changes; a body edit
    reaches them at link time (their blobs refer to its functions by name; generics and derivatives
    are specialised when a kernel is linked)."""
    text = scanner.uncommented(source)
    out, last = [], 0
    for d in scanner.declarations(source):
        if d.kind == "function" and d.body is not None:
            out.append(text[last:d.body[0]] + "}")
            last = d.body[1] + 1
    out.append(text[last:])
    return " ".join("".join(out).split())


def exposed(source: str, interface: str, deps: Iterable["Cell"]) -> list["Cell"]:
    """The cells among `deps` (those a cell loads: its imports, transitively) whose interfaces are part
    of its own (early cutoff): those its interface text names (a type, alias, constant or function in a
    signature, a field, a default value, a generic constraint), and those that reach every module
    loaded with them (`Cell.reaches_loaders`). A signature edit then re-checks the cells that import
    the edited one; one of those whose interface names nothing of it is a firewall: the cells after
    it are not re-checked (their blobs refer to its declarations by mangled name, which its
    interface text fixes; as for a body edit, the rest is linked). `__exported import`: every cell.
    interface: the source's interface_text (the caller has it)."""
    deps = list(deps)
    if "__exported" in scanner.blank(source):
        return deps
    names = identifiers(interface)
    return [d for d in deps if d.reaches_loaders or d.names & names]


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
    interface: str = ""            # digest of what importers see (interface_text, defines, the interfaces of the
                                   # imports it names there or that reach every loader: `exposed`)
    label: str = ""                # what diagnostics call it when not its name (a front end's prompt, "In[7]")
    hidden: tuple[tuple[str, tuple[str, ...]], ...] = ()  # per import: its names this cell must not see
    shadows: tuple[tuple[str, str], ...] = ()  # (name, earlier cell) whose declaration this one replaces
    basis: str = ""                # key of the check that chose its imports (unchanged: nothing to redo)
    variant_of: str = ""           # set on a visibility variant: the digest of the revision it hides names of

    @property
    def shown(self) -> str:
        """The cell as the user sees it: its label, or its name."""
        return self.label or self.name

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.blob)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """Top-level names it defines (declarations, kernels, cbuffer members, type aliases)."""
        return frozenset(d.name for d in self.decls) | frozenset(self.entry_points) | self.unreflected

    @functools.cached_property
    def unreflected(self) -> frozenset[str]:
        """Names reflection does not list and a checked module's IR never references (type aliases,
        typedefs, enums, cbuffer members): from the scanner."""
        return frozenset(n for d in scanner.declarations(self.source)
                         if d.kind in ("typealias", "typedef", "enum", "cbuffer", "tbuffer") for n in d.names)

    @functools.cached_property
    def compile_time_names(self) -> frozenset[str]:
        """Names a user resolves entirely at check time, so a checked module's IR never references
        their cell: type aliases, typedefs, enums (their values are folded in)."""
        return frozenset(n for d in scanner.declarations(self.source)
                         if d.kind in ("typealias", "typedef", "enum") for n in d.names)

    @functools.cached_property
    def reaches_loaders(self) -> bool:
        """Whether loading this cell can change the meaning of a module that does not import it, so
        that every cell loading it, directly or not, depends on its interface (no early cutoff through
        it): it declares extensions or conformances (`struct S : I`), or re-exports (`__exported`)."""
        b = scanner.blank(self.source)
        if self.extension_triggers is not None or "__exported" in b:
            return True
        return any(":" in b[d.head:d.body[0] if d.body else d.end] for d in scanner.declarations(self.source, _b=b)
                   if d.kind in ("struct", "class", "interface", "enum"))

    def signatures(self, name: str) -> frozenset[tuple[str, ...]] | None:
        """Parameter types of each overload of function `name` here; None if `name` is not a plain
        function (a kernel, a variable, a type)."""
        if name in self.entry_points:
            return None
        d = next((d for d in self.decls if d.name == name), None)
        if d is None or d.kind != "function":
            return None
        return frozenset(tuple(" ".join(t.split()) for _, t, _ in f.params) for f in d.functions)

    @functools.cached_property
    def extension_triggers(self) -> frozenset[str] | None:
        """Names whose use makes a cell need this one's extensions; None when it declares none."""
        text = scanner.blank(self.source)
        found = list(_EXTENSION.finditer(text))
        if not found:
            return None
        out: set[str] = set()
        for m in found:
            if not _BUILTIN.match(m.group(1)):
                out.add(m.group(1))
            out.update(scanner.IDENT.findall(m.group(2) or ""))
            out.update(_MEMBER.findall(text[m.end():scanner.closing(text, m.end() - 1) - 1]))
        return frozenset(out)


def import_prefix(modules: Sequence[str]) -> str:
    """One line of imports put before the user's first line (diagnostics subtract one line)."""
    return "".join(f"import {m}; " for m in modules) + "\n"


@dataclass(frozen=True)
class Visible:
    """What a new cell sees of the earlier cells: for each candidate import, the names hidden from it."""

    imports: tuple[Cell, ...]                          # candidate imports, in session order
    hidden: tuple[tuple[str, tuple[str, ...]], ...]    # (cell name, its names hidden from the new cell)
    shadows: tuple[tuple[str, str], ...]               # (name, cell) the new cell's own declarations replace


def _overloads(newer: frozenset[tuple[str, ...]] | None, older: frozenset[tuple[str, ...]] | None) -> bool:
    """Whether a later function adds overloads to an earlier one instead of replacing it."""
    return newer is not None and older is not None and not (newer & older)


def overloaded(name: str, cell: Cell, earlier: Sequence[Cell]) -> list[Cell]:
    """The earlier cells (latest first) whose forms of function `name` stay callable next to `cell`'s:
    those no later declaration replaces (the rule of visible_imports)."""
    claims = [cell.signatures(name)]
    out = []
    for c in reversed(earlier):
        if c.ok and name in c.names:
            mine = c.signatures(name)
            if all(_overloads(later, mine) for later in claims):
                out.append(c)
            claims.append(mine)
    return out


def visible_imports(mentioned: frozenset[str], own: frozenset[str],
                    own_signatures: dict[str, frozenset[tuple[str, ...]] | None], earlier: Sequence[Cell],
                    members: frozenset[str] = frozenset()) -> Visible:
    """The earlier cells a cell that mentions `mentioned` and declares `own` may import, and what each
    must hide: for each name the latest declaration wins (functions with other signatures add
    overloads); plus the cells whose extensions it uses (see the module docstring; `members`: the
    member names it mentions, `.twice()`, which only extensions can provide)."""
    # name -> who declared it later (the new cell as None): their signatures are read only on a clash
    claims: dict[str, list[Cell | None]] = {n: [None] for n in own}
    chosen: list[Cell] = []
    hidden: dict[str, tuple[str, ...]] = {}
    shadows: list[tuple[str, str]] = []

    def sig(c: Cell | None, n: str) -> frozenset[tuple[str, ...]] | None:
        return own_signatures.get(n) if c is None else c.signatures(n)

    for cell in reversed(earlier):
        if not cell.ok:
            continue
        covered = []
        for n in cell.names & claims.keys():
            mine = cell.signatures(n)
            if all(_overloads(sig(c, n), mine) for c in claims[n]):
                continue
            covered.append(n)
            if n in own and not any(s[0] == n for s in shadows):
                shadows.append((n, cell.name))
        seen = (cell.names - set(covered)) & mentioned
        ext = cell.extension_triggers
        if seen or (ext is not None and (mentioned | members) & ext):
            chosen.append(cell)
            hide = tuple(sorted(set(covered) & (mentioned | own)))
            if hide:
                hidden[cell.name] = hide
        for n in cell.names:
            claims.setdefault(n, []).append(cell)
    chosen.reverse()
    return Visible(tuple(chosen), tuple(sorted(hidden.items())), tuple(sorted(shadows)))


def own_signatures(source: str) -> dict[str, frozenset[tuple[str, ...]] | None]:
    """Parameter types of the functions a new cell declares, from its text (None: a kernel or not a
    function), before the compiler has seen it: enough to tell an overload from a redefinition."""
    out: dict[str, set[tuple[str, ...]] | None] = {}
    b = scanner.blank(source)
    for d in scanner.declarations(source):
        for n in d.names:
            if d.kind != "function" or "shader" in b[d.start:d.head] or "numthreads" in b[d.start:d.head]:
                out[n] = None
                continue
            seg = b[d.head:d.end]
            p = seg.find("(", seg.find(n))
            q = scanner.closing(seg, p) if p >= 0 else -1
            params = []
            for part in scanner.split_commas(seg[p + 1:q - 1]) if q > p else []:
                words = scanner.IDENT.findall(part.split("=")[0].split(":")[0])
                words = [w for w in words if w not in ("in", "out", "inout", "const", "no_diff", "uniform")]
                if len(words) >= 2:
                    params.append(" ".join(part.split("=")[0].split(":")[0].split()[:-1]).replace("inout ", "")
                                  .replace("in ", "").replace("out ", "").replace("no_diff ", "").strip())
            got = out.get(n, set())
            if got is not None:
                got.add(tuple(params))
                out[n] = got
    return {k: (frozenset(v) if v is not None else None) for k, v in out.items()}
