"""The session's state and the queries over its current revisions (which cell owns a name, what a cell
imports, whether something built from cells is still current). Session's base: the other session
modules build on these, and they read only the current revisions, never compile.
"""

from __future__ import annotations

from typing import Iterable

from .backends import Backend, BackendConfig
from .cache import DiskCache
from .cells import Cell
from .compiled import CompiledKernel
from .compiler.client import CompilerProcess
from .compiler.diagnostics import SlangCompileError
from .compiler.reflection import DeclInfo, FunctionInfo


class _SessionState:
    """What a Session holds (Session.__init__ makes it) and the lookups over it."""

    options: tuple[str, ...]
    _defines: dict[str, str]
    cache: DiskCache
    fingerprint: str
    config: BackendConfig
    _compiler: CompilerProcess
    _cells: dict[str, Cell]
    _failed: dict[str, SlangCompileError]
    _counter: int
    _compiled: dict[str, CompiledKernel]
    _entries: dict[tuple[str, str], CompiledKernel]
    _variants: dict[tuple[str, tuple[str, ...]], Cell]   # (revision digest, hidden names) -> visibility variant
    revision: int                # counts every change (cells, defines, backend); views compare digests instead
    _compiler_ms: float          # time in compiler checks, summed for the CellResult of a run
    backend: Backend

    # -- configuration ------------------------------------------------------------------------------

    @property
    def defines(self) -> dict[str, str]:
        """The session's defines (a copy: change them with set_define)."""
        return dict(self._defines)

    @property
    def threads(self) -> int | None:
        return self.config.threads

    @property
    def checked(self) -> bool:
        return self.config.checked

    @property
    def timeout(self) -> float | None:
        return self.config.timeout

    @property
    def isolate(self) -> bool:
        return self.config.isolate

    @property
    def compiler_pid(self) -> int | None:
        """The compiler worker's process id (None while it is not running)."""
        return self._compiler.pid

    # -- revisions ----------------------------------------------------------------------------------

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(self._cells)

    def cell(self, name: str) -> Cell:
        """The current revision of a cell."""
        return self._cells[name]

    def digest(self, name: str) -> str | None:
        """The digest of a cell's current revision (None when there is no such cell)."""
        c = self._cells.get(name)
        return c.digest if c is not None else None

    def is_current(self, built_from: CompiledKernel | Iterable[tuple[str, str]]) -> bool:
        """Whether everything `built_from` (a CompiledKernel, or (cell, digest) pairs) was made of is
        still the current, compiling revision of its cells."""
        pairs = built_from.digests if isinstance(built_from, CompiledKernel) else built_from
        cells = self._cells
        for n, d in pairs:
            c = cells.get(n)
            if c is None or c.digest != d or c.error is not None:
                return False
        return True

    def failure(self, name: str) -> SlangCompileError | None:
        """The error of the last run of cell `name` when it did not compile (its earlier revision is
        still the current one); None once a good revision arrived."""
        return self._failed.get(name)

    def _macros(self, source_idents: frozenset[str], own: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """The defines a cell sees: the session's and its own, those whose names it mentions (a define
        it never mentions cannot change it, so it must not change its digest either)."""
        merged = {**self._defines, **dict(own)}
        return tuple(sorted((k, v) for k, v in merged.items() if k in source_idents))

    def closure(self, cells: Iterable[Cell]) -> list[Cell]:
        """The cells these import, transitively (themselves included), in session order: the order
        their blobs must load."""
        seen: dict[str, Cell] = {}
        stack = list(cells)
        for c in stack:   # these first: a variant imported directly stands for its cell everywhere
            seen.setdefault(c.name, c)
        stack = [self._cells[n] for c in stack for n in c.imports if n in self._cells]
        while stack:
            c = stack.pop()
            if c.name in seen:
                continue
            seen[c.name] = c
            stack.extend(self._cells[n] for n in c.imports if n in self._cells)
        order = {n: i for i, n in enumerate(self._cells)}
        return sorted(seen.values(), key=lambda c: order.get(c.name, len(order)))

    def _sources(self, *extra: Cell) -> dict[str, str]:
        out = {c.shown: c.source for c in self._cells.values()}
        out.update({c.shown: c.source for c in extra})
        return out

    # -- lookup -------------------------------------------------------------------------------------

    def owner(self, name: str, *, kernel: bool | None = None) -> Cell:
        """The cell whose definition of `name` is current (the latest; kernel=True/False: only a
        compute kernel / only another declaration). Raises SlangCompileError when that cell no
        longer compiles, KeyError when no cell defines it."""
        for cell in reversed(self._cells.values()):
            is_kernel = name in cell.entry_points
            is_other = not is_kernel and name in cell.names
            if (kernel is None and (is_kernel or is_other)) or (kernel and is_kernel) or (kernel is False and is_other):
                if not cell.ok:
                    raise SlangCompileError(
                        f"{name} is defined in {cell.shown}, which no longer compiles: fix or re-run it.",
                        list(cell.diagnostics), self._sources(cell))
                return cell
        what = {True: "compute kernel", False: "function", None: "name"}[kernel]
        known = self.kernels() if kernel else self.functions() if kernel is False else sorted(self.names())
        raise KeyError(f"no {what} named {name!r} in this session; defined: {', '.join(known) or 'none'}")

    def kernels(self) -> list[str]:
        return sorted({k for c in self._cells.values() if c.ok for k in c.entry_points})

    def functions(self) -> list[str]:
        return sorted({d.name for c in self._cells.values() if c.ok for d in c.decls
                       if d.kind == "function" and d.name not in c.entry_points})

    def names(self) -> dict[str, DeclInfo]:
        """Every top-level name the session knows (latest definition wins), for completion."""
        out: dict[str, DeclInfo] = {}
        for cell in self._cells.values():
            if cell.ok:
                out.update({d.name: d for d in cell.decls})
        return out

    def function_info(self, name: str) -> tuple[Cell, tuple[FunctionInfo, ...]]:
        cell = self.owner(name, kernel=False)
        decl = next(d for d in cell.decls if d.name == name)
        if decl.kind != "function":
            raise TypeError(f"{name} in {cell.shown} is a {decl.kind}, not a function")
        return cell, decl.functions

    def _interfaces(self, owner: Cell) -> frozenset[str]:
        """The interfaces a kernel's cell sees (its own and its imports')."""
        return frozenset(d.name for c in self.closure([owner]) for d in c.decls if d.kind == "interface")

    def _owner_name(self, name: str) -> str | None:
        for cell in reversed(self._cells.values()):
            if name in cell.entry_points:
                return cell.name
        return None
