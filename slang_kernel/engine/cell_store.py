"""The cell store: the current revision of every cell, in notebook order, and the lookups over them.

It never compiles. The Session commits revisions here (after checks.CellChecks made them); views ask
it which cell owns a name and whether what they were built from is still current.
"""

from __future__ import annotations

from typing import Iterable

from .cells import Cell, overloaded
from .edit_phases import EditPhases
from ..compiled import CompiledKernel
from ..compiler.diagnostics import SlangCompileError
from ..compiler.reflection import DeclInfo, FunctionInfo

__all__ = ["CellStore"]


class CellStore:
    """Cells by name in notebook order, the last failure of each, and a revision counter."""

    def __init__(self) -> None:
        self.by_name: dict[str, Cell] = {}
        self.failed: dict[str, SlangCompileError] = {}
        self.revision = 0        # counts every change (cells, defines, backend); views compare digests instead
        self.last_edit: EditPhases | None = None   # the phases of the last run_cell (edit_phases.py)
        self._counter = 0

    # -- revisions ----------------------------------------------------------------------------------

    def new_name(self) -> str:
        """The next free "cell[N]"."""
        while True:
            self._counter += 1
            name = f"cell[{self._counter}]"
            if name not in self.by_name:
                return name

    def commit(self, cell: Cell) -> Cell | None:
        """Make `cell` the current revision of its name; returns the revision it replaced."""
        old = self.by_name.get(cell.name)
        self.by_name[cell.name] = cell
        self.revision += 1
        return old

    def remove(self, name: str) -> Cell:
        cell = self.by_name.pop(name)
        self.failed.pop(name, None)
        self.revision += 1
        return cell

    def earlier(self, name: str | None) -> list[Cell]:
        """The cells before `name` (all cells for a name not in the store)."""
        order = list(self.by_name)
        return [self.by_name[n] for n in order[:order.index(name)]] if name in self.by_name else list(self.by_name.values())

    def after(self, name: str | None) -> list[str]:
        """Names of the cells after `name` (all, for None)."""
        order = list(self.by_name)
        return order[order.index(name) + 1:] if name is not None else order

    # -- lookups ------------------------------------------------------------------------------------

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(self.by_name)

    def cell(self, name: str) -> Cell:
        """The current revision of a cell."""
        return self.by_name[name]

    def digest(self, name: str) -> str | None:
        c = self.by_name.get(name)
        return c.digest if c is not None else None

    def is_current(self, built_from: CompiledKernel | Iterable[tuple[str, str]]) -> bool:
        """Whether everything `built_from` (a CompiledKernel, or (cell, digest) pairs) was made of is
        still the current, compiling revision of its cells."""
        pairs = built_from.digests if isinstance(built_from, CompiledKernel) else built_from
        for n, d in pairs:
            c = self.by_name.get(n)
            if c is None or c.digest != d or c.error is not None:
                return False
        return True

    def failure(self, name: str) -> SlangCompileError | None:
        """The error of the last run of cell `name` when it did not compile (its earlier revision is
        still the current one); None once a good revision arrived."""
        return self.failed.get(name)

    def sources(self, *extra: Cell) -> dict[str, str]:
        """Cell texts by the name diagnostics use, for rendering carets."""
        out = {c.shown: c.source for c in self.by_name.values()}
        out.update({c.shown: c.source for c in extra})
        return out

    def closure(self, cells: Iterable[Cell]) -> list[Cell]:
        """The cells these import, transitively (themselves included), in session order: the order
        their blobs must load. A visibility variant given here stands for its cell everywhere."""
        seen: dict[str, Cell] = {}
        direct = list(cells)
        for c in direct:
            seen.setdefault(c.name, c)
        stack = [self.by_name[n] for c in direct for n in c.imports if n in self.by_name]
        while stack:
            c = stack.pop()
            if c.name in seen:
                continue
            seen[c.name] = c
            stack.extend(self.by_name[n] for n in c.imports if n in self.by_name)
        order = {n: i for i, n in enumerate(self.by_name)}
        return sorted(seen.values(), key=lambda c: order.get(c.name, len(order)))

    def owner(self, name: str, *, kernel: bool | None = None) -> Cell:
        """The cell whose definition of `name` is current (the latest; kernel=True/False: only a
        compute kernel / only another declaration). Raises SlangCompileError when that cell no
        longer compiles, KeyError when no cell defines it."""
        for cell in reversed(self.by_name.values()):
            is_kernel = name in cell.entry_points
            is_other = not is_kernel and name in cell.names
            if (kernel is None and (is_kernel or is_other)) or (kernel and is_kernel) or (kernel is False and is_other):
                if not cell.ok:
                    raise SlangCompileError(
                        f"{name} is defined in {cell.shown}, which no longer compiles: fix or re-run it.",
                        list(cell.diagnostics), self.sources(cell))
                return cell
        what = {True: "compute kernel", False: "function", None: "name"}[kernel]
        known = self.kernels() if kernel else self.functions() if kernel is False else sorted(self.names())
        raise KeyError(f"no {what} named {name!r} in this session; defined: {', '.join(known) or 'none'}")

    def owner_name(self, name: str) -> str | None:
        """The cell whose kernel `name` is current, without raising."""
        for cell in reversed(self.by_name.values()):
            if name in cell.entry_points:
                return cell.name
        return None

    def kernels(self) -> list[str]:
        return sorted({k for c in self.by_name.values() if c.ok for k in c.entry_points})

    def functions(self) -> list[str]:
        return sorted({d.name for c in self.by_name.values() if c.ok for d in c.decls
                       if d.kind == "function" and d.name not in c.entry_points})

    def names(self) -> dict[str, DeclInfo]:
        """Every top-level name the session knows (latest definition wins), for completion."""
        out: dict[str, DeclInfo] = {}
        for cell in self.by_name.values():
            if cell.ok:
                out.update({d.name: d for d in cell.decls})
        return out

    def function_info(self, name: str) -> tuple[Cell, tuple[FunctionInfo, ...]]:
        """The cell of the latest definition of function `name`, and every overload a later cell sees:
        its own, then those of earlier cells that it adds to rather than replaces (the rule of
        cells.visible_imports: an earlier form stays visible while no later one has its signature)."""
        cell = self.owner(name, kernel=False)
        decl = next(d for d in cell.decls if d.name == name)
        if decl.kind != "function":
            raise TypeError(f"{name} in {cell.shown} is a {decl.kind}, not a function")
        earlier = list(self.by_name.values())[:list(self.by_name).index(cell.name)]
        return cell, decl.functions + tuple(f for c in overloaded(name, cell, earlier)
                                            for d in c.decls if d.name == name for f in d.functions)

    def interfaces(self, owner: Cell) -> frozenset[str]:
        """The interfaces a kernel's cell sees (its own and its imports')."""
        return frozenset(d.name for c in self.closure([owner]) for d in c.decls if d.kind == "interface")
