"""Cell bookkeeping: running, replacing and removing cells, the check of each revision (with hints
added to its diagnostics), and bringing later cells up to date when one changes.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ._session_requests import _Requests
from .cache import digest
from .compiled import CompileRequest
from . import scanner
from .cells import Cell, Visible, identifiers, interface_text, module_name_for, own_signatures, visible_imports
from .compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics

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
    rechecked: tuple[str, ...] = ()  # those of `recompiled` whose check had to run again (this cell's
                                     # interface changed; a body edit reaches users when kernels link)
    compile_ms: float = 0.0       # of elapsed_ms, the time in the compiler (this cell's check and its users')
    cached: bool = False          # this cell's check came from the compile cache (no compiler call)
    shadows: tuple[tuple[str, str], ...] = ()  # (name, earlier cell) whose declaration of it this cell replaces
                                               # for the cells after it (the earlier cell keeps its own)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]


class _Cells(_Requests):
    """The cells of a Session and their revisions."""

    # -- cells --------------------------------------------------------------------------------------

    def run_cell(self, source: str, name: str | None = None, *, defines: Mapping[str, str] | None = None,
                 options: Sequence[str] = (), label: str | None = None) -> CellResult:
        """Compile one cell. Running a name again replaces that cell and recompiles its users.

        defines/options: for this cell only (on top of the session's). label: what diagnostics and
        messages call this revision when not its name (a front end re-running cell `In[2]` at prompt
        [7] keeps its name and place, labelled "In[7]"). A cell with errors raises
        SlangCompileError and changes nothing (views of the cell keep its last good revision;
        `failure(name)` holds the error until a good revision arrives).
        """
        t0 = time.perf_counter()
        self._compiler_ms = 0.0
        if name is None:
            self._counter += 1
            name = f"cell[{self._counter}]"
            while name in self._cells:
                self._counter += 1
                name = f"cell[{self._counter}]"
        own = {str(k): str(v) for k, v in (defines or {}).items()}
        bad = [k for k in own if not _DEFINE_NAME.match(k)]
        if bad:
            raise ValueError(f"not a preprocessor name: {bad[0]!r} (defines are NAME=VALUE)")
        old = self._cells.get(name)
        order = list(self._cells)
        pos = order.index(name) if old else len(order)
        earlier = [self._cells[n] for n in order[:pos]]
        module = old.module if old else module_name_for(name, (c.module for c in self._cells.values()))
        cell = self._check(name, module, source, earlier, own_defines=tuple(sorted(own.items())),
                           options=tuple(options), label="" if label in (None, name) else str(label))
        cached = self._compiler_ms == 0.0
        if cell.error is not None:
            if any(d.code == "crash" for d in cell.diagnostics):
                raise SlangCompilerCrash(cell.error + " The session is unchanged.")
            exc = SlangCompileError(f"{cell.shown} did not compile; the session is unchanged.", list(cell.diagnostics),
                                    self._sources(cell))
            self._failed[name] = exc
            raise exc
        self._failed.pop(name, None)
        self._commit(cell)
        rechecked, broken = self._refresh_after(name)
        later = list(self._cells)[list(self._cells).index(name) + 1:]
        users = tuple(n for n in later if n not in broken and
                      any(c.name == name for c in self.closure([self._cells[m] for m in self._cells[n].imports])))
        kernels = tuple(cell.entry_points)
        functions = tuple(d.name for d in cell.decls if d.kind == "function" and d.name not in kernels)
        types = tuple(d.name for d in cell.decls if d.kind in ("struct", "enum") or d.kind.startswith("generic"))
        shadows = cell.shadows  # (name, earlier cell name): front ends show the cell under its label
        return CellResult(name, list(cell.diagnostics), kernels, functions, types, users, broken,
                          (time.perf_counter() - t0) * 1000, cell.digest, rechecked, self._compiler_ms, cached,
                          shadows)

    def remove_cell(self, name: str) -> None:
        """Forget a cell; later cells that used it are recompiled (and may break)."""
        if name not in self._cells:
            raise KeyError(f"no cell named {name!r}; cells: {', '.join(self._cells) or 'none'}")
        order = list(self._cells)
        i = order.index(name)
        self._forget(self._cells.pop(name))
        self._failed.pop(name, None)
        self.revision += 1
        if i < len(order) - 1:
            self._refresh_after(order[i - 1] if i else None)

    def set_define(self, name: str, value: str = "1") -> None:
        """A preprocessor define for every cell (each cell sees the defines whose names it mentions):
        the cells that mention it are re-checked now, and kernels built from them follow."""
        if not _DEFINE_NAME.match(name):
            raise ValueError(f"not a preprocessor name: {name!r}")
        self._defines[name] = str(value)
        self.revision += 1
        self._refresh_after(None)

    def _commit(self, cell: Cell) -> None:
        old = self._cells.get(cell.name)
        self._cells[cell.name] = cell
        self.revision += 1
        if old is not None and old.digest != cell.digest:
            self._forget(old)

    def _forget(self, cell: Cell) -> None:
        """The compiler worker drops the blob of a revision nothing can load again; the kernels built
        from it are dropped here and by the backend (a view still running one rebuilds it if asked)."""
        if not cell.digest or any(c.digest == cell.digest for c in self._cells.values()):
            return
        self._compiler.forget([cell.digest])
        old = (cell.name, cell.digest)
        keys = [k for k, ck in self._compiled.items() if old in ck.digests]
        for k in keys:
            del self._compiled[k]
        for e in [e for e, ck in self._entries.items() if old in ck.digests]:
            del self._entries[e]
        if keys:
            self.backend.forget(keys)

    def _visible(self, source: str, earlier: Sequence[Cell]) -> tuple[Visible, frozenset[str]]:
        """The candidate imports of a text placed after `earlier`, with what each must hide."""
        mentioned = scanner.mentions(source)
        sigs = own_signatures(source)
        return visible_imports(mentioned, frozenset(sigs), sigs, earlier, identifiers(source)), mentioned

    def _check(self, name: str, module: str, source: str, earlier: Sequence[Cell], own: frozenset[str] = frozenset(),
               *, own_defines: tuple[tuple[str, str], ...] = (), options: tuple[str, ...] = (), label: str = "") -> Cell:
        """Check one cell against the earlier cells it may use: first against every candidate (the
        cells declaring a name it mentions, shadowed names hidden), then, when the compiler says it
        referenced fewer of them, against only those, which become its imports."""
        idents = identifiers(source)
        vis, mentioned = self._visible(source, earlier)
        macros = self._macros(idents, own_defines)
        shown = label or name
        imports = self._imports_of(vis)
        req = self._build("check", shown, module, source, imports, macros, options)
        reply = self._check_call(req)
        if reply.get("ok"):
            refs = set(reply.get("refs", ()))
            needed = [c for c in imports if c.module in refs or (c.compile_time_names & mentioned)
                      or (c.extension_triggers is not None and c.extension_triggers & idents)]
            if len(needed) < len(imports):
                narrow = self._build("check", shown, module, source, needed, macros, options)
                second = self._check_call(narrow)
                if second.get("ok"):
                    imports, req, reply = needed, narrow, second
        hidden = tuple((n, h) for n, h in vis.hidden if any(c.name == n for c in imports))
        base = Cell(name=name, module=module, source=source, imports=tuple(c.name for c in imports),
                    digest=req.key, idents=idents, own=own, defines=macros, options=options,
                    own_defines=own_defines, label=label, hidden=hidden, shadows=vis.shadows,
                    basis=self._basis(shown, module, source, earlier, macros, options),
                    interface=digest("interface", interface_text(source), *(f"{k}={v}" for k, v in macros),
                                     *options, *(d.interface for d in self.closure(imports))))
        if "crash" in reply:
            return dataclasses.replace(base, error=str(reply["crash"]),
                                       diagnostics=(Diagnostic("error", "crash", shown, 0, 0, str(reply["crash"])),))
        diagnostics = tuple(self._annotate(parse_diagnostics(reply["diagnostics"], {shown: 1}), name, shown, earlier))
        if not reply["ok"]:
            error = "\n".join(str(d) for d in diagnostics if d.severity == "error") or "error"
            return dataclasses.replace(base, diagnostics=diagnostics, error=error)
        return dataclasses.replace(base, diagnostics=diagnostics, blob=reply["blob"], decls=tuple(reply["decls"]),
                                   entry_points=tuple(reply.get("entry_points", ())))

    def _basis(self, shown: str, module: str, source: str, earlier: Sequence[Cell],
               macros: tuple[tuple[str, str], ...], options: tuple[str, ...]) -> str:
        """The key of a cell's first check (its candidates, as the earlier cells are now): while it is
        unchanged, so is everything the check decided."""
        vis, _ = self._visible(source, earlier)
        return self._build("check", shown, module, source, self._imports_of(vis, check=False), macros, options).key

    def _annotate(self, diags: list[Diagnostic], name: str, shown: str, earlier: Sequence[Cell]) -> list[Diagnostic]:
        """Add hints: an undefined name that a later cell defines (cells see only earlier ones); a name
        that a cell declaring a `module` keeps internal."""
        before = {c.name for c in earlier}
        later = [c for n, c in self._cells.items() if n != name and n not in before and c.ok]
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

    def _refresh_after(self, name: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Bring the cells after `name` (all, for None) up to date, in order: they may use what changed."""
        order = list(self._cells)
        start = order.index(name) + 1 if name is not None else 0
        recompiled: list[str] = []
        broken: list[str] = []
        for later_name in order[start:]:
            cell = self._cells[later_name]
            earlier = [self._cells[n] for n in order[: order.index(later_name)]]
            macros = self._macros(cell.idents, cell.own_defines)
            if cell.ok and self._basis(cell.shown, cell.module, cell.source, earlier, macros, cell.options) == cell.basis:
                continue
            new = self._check(cell.name, cell.module, cell.source, earlier, cell.own,
                              own_defines=cell.own_defines, options=cell.options, label=cell.label)
            if new.error is not None:  # keep what it defined, so lookups can say it is broken
                new = dataclasses.replace(new, decls=cell.decls, entry_points=cell.entry_points)
            self._commit(new)
            (broken if new.error is not None else recompiled).append(later_name)
        return tuple(recompiled), tuple(broken)
