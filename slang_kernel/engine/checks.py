"""Cell checks: running, replacing and removing cells, the check of each revision (candidates, the
compiler's references, shadowed names hidden), hints added to its diagnostics, and bringing later
cells up to date when one changes (invalidation).
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from .. import scanner
from ..cache import digest
from .cell_store import CellStore
from .cells import Cell, Visible, exposed, identifiers, interface_text, module_name_for, own_signatures, visible_imports
from .compile_service import CompileService
from ..compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics
from .kernel_builds import KernelBuilds
from .edit_phases import EditPhases
from .recheck_batch import PredictingService, batch_rechecks, drop_unused, prefetch, scratch_store
from ..compiled import CompileRequest

__all__ = ["CellChecks", "CellResult"]

_DEFINE_NAME = re.compile(r"[A-Za-z_]\w*$")
_MODULE_DECL = re.compile(r"^\s*module\s+\w+\s*;", re.M)


@dataclass(frozen=True)
class CellResult:
    """What running a cell did."""

    name: str
    diagnostics: list[Diagnostic]
    kernels: tuple[str, ...]
    functions: tuple[str, ...]
    types: tuple[str, ...]
    recompiled: tuple[str, ...]   # later cells that use this one (directly or not) and now see the new revision
    broken: tuple[str, ...]       # later cells that no longer compile (their errors say why)
    elapsed_ms: float
    digest: str = ""              # the new revision's digest
    rechecked: tuple[str, ...] = ()  # those of `recompiled` whose check had to run again: the cells importing
                                     # this one when its interface changed, then those importing a rechecked
                                     # cell whose own interface changed (early cutoff: cells.exposed); a body
                                     # edit reaches users when kernels link
    compile_ms: float = 0.0       # of elapsed_ms, the time in the compiler (this cell's check and its users')
    cached: bool = False          # this cell's check came from the compile cache (no compiler call)
    shadows: tuple[tuple[str, str], ...] = ()  # (name, earlier cell) whose declaration of it this cell replaces
                                               # for the cells after it (the earlier cell keeps its own)
    phases: EditPhases | None = None  # where the time went (edit_phases.py; %slang_profile shows it)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]


class CellChecks:
    """The cells of a session and their revisions: what runs a cell and keeps the later ones current."""

    def __init__(self, store: CellStore, service: CompileService, builds: KernelBuilds) -> None:
        self.store = store
        self.service = service
        self.builds = builds
        self._scans: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str],
                                     dict[str, frozenset[tuple[str, ...]] | None] | None]] = {}

    # -- cells --------------------------------------------------------------------------------------

    def run_cell(self, source: str, name: str | None = None, *, defines: Mapping[str, str] | None = None,
                 options: Sequence[str] = (), label: str | None = None) -> CellResult:
        """Session.run_cell's work (its docstring is the contract)."""
        t0, ms0 = time.perf_counter(), self.service.spent_ms
        self.service.timings.clear()
        if name is None:
            name = self.store.new_name()
        own = {str(k): str(v) for k, v in (defines or {}).items()}
        bad = [k for k in own if not _DEFINE_NAME.match(k)]
        if bad:
            raise ValueError(f"not a preprocessor name: {bad[0]!r} (defines are NAME=VALUE)")
        old = self.store.by_name.get(name)
        earlier = self.store.earlier(name)
        module = old.module if old else module_name_for(name, (c.module for c in self.store.by_name.values()))
        cell = self.check(name, module, source, earlier, own_defines=tuple(sorted(own.items())),
                           options=tuple(options), label="" if label in (None, name) else str(label))
        cached = self.service.spent_ms == ms0   # its check (and its variants') came from the compile cache
        if cell.error is not None:
            if any(d.code == "crash" for d in cell.diagnostics):
                raise SlangCompilerCrash(cell.error + " The session is unchanged.")
            exc = SlangCompileError(f"{cell.shown} did not compile; the session is unchanged.", list(cell.diagnostics),
                                    self.store.sources(cell))
            self.store.failed[name] = exc
            raise exc
        self.store.failed.pop(name, None)
        self.commit(cell)
        if (old is None or old.interface != cell.interface) and batch_rechecks():   # its users' checks run again: in one call
            prefetch(self.service, self.predicted_rechecks(name))
        try:
            rechecked, broken = self.refresh_after(name)
        finally:
            drop_unused(self.service)
        later = self.store.after(name)
        users = tuple(n for n in later if n not in broken and
                      any(c.name == name for c in self.store.closure([self.store.by_name[m] for m in self.store.by_name[n].imports])))
        kernels = tuple(cell.entry_points)
        functions = tuple(d.name for d in cell.decls if d.kind == "function" and d.name not in kernels)
        types = tuple(d.name for d in cell.decls if d.kind in ("struct", "enum") or d.kind.startswith("generic"))
        shadows = cell.shadows  # (name, earlier cell name): front ends show the cell under its label
        wall = (time.perf_counter() - t0) * 1000
        phases = self.store.last_edit = EditPhases(cell.shown, wall, tuple(self.service.timings), rechecked)
        return CellResult(name, list(cell.diagnostics), kernels, functions, types, users, broken,
                          wall, cell.digest, rechecked, self.service.spent_ms - ms0, cached, shadows, phases)

    def predicted_rechecks(self, name: str) -> list[CompileRequest]:
        """The checks refresh_after(name) will most likely run, from the same loop on a scratch copy
        whose compiler answers every check as a success (recheck_batch.py)."""
        store = scratch_store(self.store)
        service = PredictingService(self.service, store)
        scratch = _Scratch(store, service, self.builds)
        scratch._scans = self._scans
        scratch.refresh_after(name)
        return service.requests

    def remove_cell(self, name: str) -> None:
        """Forget a cell; later cells that used it are recompiled (and may break)."""
        if name not in self.store.by_name:
            raise KeyError(f"no cell named {name!r}; cells: {', '.join(self.store.by_name) or 'none'}")
        order = list(self.store.by_name)
        i = order.index(name)
        self.forget_revision(self.store.remove(name))
        if i < len(order) - 1:
            self.refresh_after(order[i - 1] if i else None)

    def set_define(self, name: str, value: str = "1") -> None:
        """A preprocessor define for every cell (each cell sees the defines whose names it mentions):
        the cells that mention it are re-checked now, and kernels built from them follow."""
        if not _DEFINE_NAME.match(name):
            raise ValueError(f"not a preprocessor name: {name!r}")
        self.service.defines[name] = str(value)
        self.store.revision += 1
        self.refresh_after(None)

    def commit(self, cell: Cell) -> None:
        old = self.store.commit(cell)
        if old is not None and old.digest != cell.digest:
            self.forget_revision(old)

    def forget_revision(self, cell: Cell) -> None:
        """The compiler worker drops the blob of a revision nothing can load again; the kernels built
        from it are dropped here and by the backend (a view still running one rebuilds it if asked)."""
        if not cell.digest or any(c.digest == cell.digest for c in self.store.by_name.values()):
            return
        keys = self.builds.forget((cell.name, cell.digest))
        self.service.forget(keys, [cell.digest])
        if keys:
            self.service.backend.forget(keys)

    def visible(self, source: str, earlier: Sequence[Cell]) -> tuple[Visible, frozenset[str], frozenset[str]]:
        """The candidate imports of a text placed after `earlier`, with what each must hide."""
        scan = self._scans.get(source)
        if scan is None:   # what the scanner reads of a text, kept: refreshes ask again for every later cell
            scan = self._scans[source] = (scanner.mentions(source), scanner.declared_names(source),
                                          identifiers(source), None)
            if len(self._scans) > 4096:
                del self._scans[next(iter(self._scans))]
        mentioned, own, idents, sigs = scan
        if sigs is None and any(own & c.names for c in earlier):
            # signatures matter only for a name an earlier cell declares too: overload or replacement
            sigs = own_signatures(source)
            self._scans[source] = (mentioned, own, idents, sigs)
        return visible_imports(mentioned, own, sigs or {}, earlier, idents), mentioned, idents

    def check(self, name: str, module: str, source: str, earlier: Sequence[Cell], own: frozenset[str] = frozenset(),
               *, own_defines: tuple[tuple[str, str], ...] = (), options: tuple[str, ...] = (), label: str = "") -> Cell:
        """Check one cell against the earlier cells it may use: first against every candidate (the
        cells declaring a name it mentions, shadowed names hidden), then, when the compiler says it
        referenced fewer of them, against only those, which become its imports."""
        vis, mentioned, idents = self.visible(source, earlier)
        macros = self.service.macros(idents, own_defines)
        shown = label or name
        imports = self.service.imports_of(vis)
        req = self.service.build("check", shown, module, source, imports, macros, options)
        first_key = req.key   # = basis(): variants share their placeholders' interfaces
        reply = self.service.check_call(req)
        if reply.get("ok"):
            refs = set(reply.get("refs", ()))
            needed = [c for c in imports if c.module in refs or (c.compile_time_names & mentioned)
                      or (c.extension_triggers is not None and c.extension_triggers & idents)]
            if len(needed) < len(imports):
                narrow = self.service.build("check", shown, module, source, needed, macros, options)
                second = self.service.check_call(narrow)
                if second.get("ok"):
                    imports, req, reply = needed, narrow, second
        hidden = tuple((n, h) for n, h in vis.hidden if any(c.name == n for c in imports))
        seen = interface_text(source)
        base = Cell(name=name, module=module, source=source, imports=tuple(c.name for c in imports),
                    digest=req.key, idents=idents, own=own, defines=macros, options=options,
                    own_defines=own_defines, label=label, hidden=hidden, shadows=vis.shadows,
                    basis=first_key,
                    interface=digest("interface", seen, *(f"{k}={v}" for k, v in macros), *options,
                                     *(d.interface for d in exposed(source, seen, self.store.closure(imports)))))
        if "crash" in reply:
            return dataclasses.replace(base, error=str(reply["crash"]),
                                       diagnostics=(Diagnostic("error", "crash", shown, 0, 0, str(reply["crash"])),))
        diagnostics = tuple(self.annotate(parse_diagnostics(reply["diagnostics"], {shown: 1}), name, shown, earlier))
        if not reply["ok"]:
            error = "\n".join(str(d) for d in diagnostics if d.severity == "error") or "error"
            return dataclasses.replace(base, diagnostics=diagnostics, error=error)
        return dataclasses.replace(base, diagnostics=diagnostics, blob=reply["blob"], decls=tuple(reply["decls"]),
                                   entry_points=tuple(reply.get("entry_points", ())))

    def basis(self, shown: str, module: str, source: str, earlier: Sequence[Cell],
               macros: tuple[tuple[str, str], ...], options: tuple[str, ...]) -> str:
        """The key of a cell's first check (its candidates, as the earlier cells are now): while it is
        unchanged, so is everything the check decided."""
        vis, _, _ = self.visible(source, earlier)
        return self.service.build("check", shown, module, source, self.service.imports_of(vis, check=False), macros, options).key

    def annotate(self, diags: list[Diagnostic], name: str, shown: str, earlier: Sequence[Cell]) -> list[Diagnostic]:
        """Add hints: an undefined name that a later cell defines (cells see only earlier ones); a name
        that a cell declaring a `module` keeps internal."""
        before = {c.name for c in earlier}
        later = [c for n, c in self.store.by_name.items() if n != name and n not in before and c.ok]
        out = []
        for d in diags:
            if d.cell is None and d.severity in ("error", "internal"):  # e.g. an internal compiler error
                d = Diagnostic(d.severity, d.code, shown, 0, 0, d.message)
            if d.code == "E30015" and "'" in d.message:
                ident = d.message.split("'")[1]
                owner = next((c.shown for c in later if ident in c.names), None)
                if owner:
                    d = Diagnostic(d.severity, d.code, d.cell, d.line, d.column,
                                   f"{d.message} ({ident} is defined in {owner}, which comes after {shown}; "
                                   f"a cell sees only the cells before it: move the definition up)",
                                   d.end_line, d.end_column)
            elif d.code == "E30600" and "'" in d.message:
                ident = d.message.split("'")[1]
                home = next((c for c in reversed(earlier) if ident in c.names), None)
                if home is not None and _MODULE_DECL.search(home.source):
                    d = Diagnostic(d.severity, d.code, d.cell, d.line, d.column,
                                   f"{d.message} ({home.shown} declares a `module`, whose names are internal "
                                   f"unless marked `public`: write `public` before {ident})", d.end_line, d.end_column)
            out.append(d)
        return out

    def refresh_after(self, name: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Bring the cells after `name` (all, for None) up to date, in order: they may use what changed."""
        order = list(self.store.by_name)
        start = order.index(name) + 1 if name is not None else 0
        recompiled: list[str] = []
        broken: list[str] = []
        earlier = [self.store.by_name[n] for n in order[:start]]   # grows with each cell's current revision
        for later_name in order[start:]:
            cell = self.store.by_name[later_name]
            macros = self.service.macros(cell.idents, cell.own_defines)
            if cell.ok and self.basis(cell.shown, cell.module, cell.source, earlier, macros, cell.options) == cell.basis:
                earlier.append(cell)
                continue
            new = self.check(cell.name, cell.module, cell.source, earlier, cell.own,
                              own_defines=cell.own_defines, options=cell.options, label=cell.label)
            if new.error is not None:  # keep what it defined, so lookups can say it is broken
                new = dataclasses.replace(new, decls=cell.decls, entry_points=cell.entry_points)
            self.commit(new)
            earlier.append(self.store.by_name[later_name])
            (broken if new.error is not None else recompiled).append(later_name)
        return tuple(recompiled), tuple(broken)


class _Scratch(CellChecks):
    """CellChecks over a scratch store: replaced revisions are not the real ones, so nothing is forgotten."""

    def forget_revision(self, cell: Cell) -> None:
        pass
