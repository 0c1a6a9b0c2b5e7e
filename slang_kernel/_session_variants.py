"""Kernel builds of a session: a kernel's own build (compile_entry), its specializations (generic
arguments, externs, type conformances) and the variants the thread debugger compiles.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from ._session_requests import _Requests
from .cache import digest
from . import scanner
from .cells import identifiers, visible_imports
from .cells import Cell
from .compiled import CompiledKernel, Specialization, define_lines
from .errors import ParameterError
from .compiler.diagnostics import SlangCompileError
from .specialize import SpecializationError, conformance_options, explain, find_entry, find_externs, interface_params
from .specialize import specialization as specialization_of
from .specialize import variant as specialize_variant


class _Variants(_Requests):
    """Kernel builds: plain, specialized, instrumented."""

    def specialization(self, name: str, specialize: Mapping[str, Any] | None = None,
                       type_conformances: Sequence[Sequence[Any]] = ()) -> Specialization:
        """Check `specialize=`/`type_conformances=` against kernel `name` as its cells declare it now;
        raises SpecializationError saying which value does not fit and why."""
        owner = self.owner(name, kernel=True)
        elsewhere: dict[str, Any] = {}
        for c in self.closure(self.import_cells(owner)):
            elsewhere.update(find_externs(c.shown, c.source))
        entry = find_entry(owner.source, name)
        return specialization_of(name, entry, find_externs(owner.shown, owner.source), specialize, type_conformances,
                                 elsewhere, interface_params(entry, self._interfaces(owner)))

    def compile_entry(self, name: str, target: str | None = None,
                      specialization: Specialization | None = None) -> CompiledKernel:
        """Target code and reflection for a compute kernel of the current cells (cached); with a
        `specialization` (from `Session.specialization`), of that specialization of it."""
        target = target or self.backend.target
        if specialization:
            return self._compile_specialized(name, target, specialization)
        hit = self._entries.get((name, target))
        if hit is not None and self.is_current(hit) and hit.cell == self._owner_name(name):
            return hit
        owner = self.owner(name, kernel=True)
        entry = find_entry(owner.source, name)
        if entry is not None and entry.generics:  # with its defaults, or an error naming what it needs
            return self._compile_specialized(name, target, specialization_of(name, entry, {}, None))
        try:
            ck = self.compile(self.request("compile", cell=owner.name, entries=[name], target=target))[name]
        except SlangCompileError as exc:
            externs = find_externs(owner.shown, owner.source)
            unresolved = [e for e in externs.values() if any(d.code == "E45001" and e.name in d.message
                                                             for d in exc.diagnostics)]
            if not unresolved:
                raise
            raise SpecializationError(
                f"{name} uses extern declarations that nothing defines: "
                + ", ".join(e.describe() for e in unresolved) + ". Give them with s.kernel(" + repr(name)
                + ", specialize={" + ", ".join(f"{e.name!r}: {'4' if e.value_type else repr('MyType')}"
                                              for e in unresolved) + "}), or define them with `export` in a cell."
            ) from None
        self._same_name_globals(ck, owner)
        self._entries[(name, target)] = ck
        return ck

    def _same_name_globals(self, ck: CompiledKernel, owner: Cell) -> None:
        """A kernel that reads a redeclared global directly and the earlier one through an earlier
        cell's function holds two globals of one name. The CPU and CUDA backends fill both from the one
        keyword; Vulkan (sgl) binds by name and would fill one: say so instead of guessing."""
        if self.backend.name != "vulkan" or ck.target != self.backend.target:
            return
        seen: dict[str, int] = {}
        for p in ck.reflection.globals:
            seen[p.name] = seen.get(p.name, 0) + 1
        dup = sorted(n for n, k in seen.items() if k > 1 and (ck.used_globals is None or n in ck.used_globals))
        if dup:
            cells = [c.shown for c in self.closure([owner]) if dup[0] in c.names]
            raise ParameterError(
                f"{ck.entry} holds {len(cells) or 2} globals named `{dup[0]}` ({', '.join(cells)}): a later cell's "
                f"`{dup[0]}` replaces the earlier one for the cells after it, but functions of the earlier cell "
                "still read their own, and the Vulkan backend binds globals by name. Rename one of them, or "
                "run it with backend='cpu' or 'cuda', which fill both from the one keyword.")

    def _compile_specialized(self, name: str, target: str, spec: Specialization) -> CompiledKernel:
        """A specialization: a variant of the kernel's cell (specialize.variant: externs defined, a
        generated entry point for a generic kernel) with Slang's -conformance options, compiled and
        cached like the cell's own kernels (keyed by its text and options; dropped with the cell)."""
        slot = (f"{name}<{spec}>", target)
        owner = self.owner(name, kernel=True)
        hit = self._entries.get(slot)
        if hit is not None and self.is_current(hit) and (owner.name, owner.digest) in hit.digests:
            return hit
        if spec.conformances and target == self.backend.target and target not in ("cpp", "cuda") \
                and "type_conformances" not in self.backend.capabilities:
            raise SpecializationError(
                f"{name}: type_conformances need a backend that runs Slang's generated code (cpu, cuda); the "
                f"{self.backend.name} backend builds kernels from Slang source through slangpy, which this "
                "version does not hand conformances to. Use Session(backend='cpu') or 'cuda', or `specialize=` "
                "(a generic parameter instead of dynamic dispatch).")
        externs = find_externs(owner.shown, owner.source)
        entry = find_entry(owner.source, name)
        wanted = {g.name for g in entry.generics} if entry is not None else set()
        have = {k for k, _ in spec.args}
        typed = interface_params(entry, self._interfaces(owner))
        if entry is None or not wanted <= have or not have <= wanted | set(externs) | set(typed):
            raise SpecializationError(
                f"{name} in {owner.shown} changed since it was specialized with {spec} (it now declares "
                + (", ".join(g.describe() for g in entry.generics) if entry and entry.generics else "no generic parameters")
                + "): get it again with s.kernel(..., specialize=...).")
        wname, text, tail = specialize_variant(owner.source, entry, spec, externs, typed)
        order = list(self._cells)
        earlier = [self._cells[n] for n in order[:order.index(owner.name)]]
        named = identifiers(" ".join([*(v for _, v in spec.args), *(f"{i} {t}" for i, t, _ in spec.conformances)]))
        named -= {n for c in [*earlier, owner] for n in c.names}
        later = [c for c in self._cells.values() if c not in earlier and c is not owner and c.ok and c.names & named]
        options = (*owner.options, *conformance_options(spec))
        if later:  # types defined after the kernel's cell (which they import): all of them as one module
            cells = self.closure([owner, *later])
            body = "".join(define_lines(d.defines) + (text if d.name == owner.name else d.source) + "\n"
                           + "".join(f"#undef {k}\n" for k, _ in d.defines) for d in cells) + tail
            req = self._build("compile", owner.shown, f"{owner.module}_i{digest(body)[:8]}", body, [], (), options,
                              target=target, entries=[wname])
            req = dataclasses.replace(req, digests=(*req.digests, *((d.name, d.digest) for d in cells)))
        else:  # the types come from the kernel's cell and the cells before it: a variant of the cell
            text += tail
            idents = identifiers(text)
            imports = self.import_cells(owner)
            vis = visible_imports(scanner.mentions(text) - owner.names, frozenset(), {}, earlier, idents)
            imports += [c for c in self._imports_of(vis) if c.name not in {i.name for i in imports}]
            req = self._build("compile", owner.shown, f"{owner.module}_s{digest(text)[:8]}", text, imports,
                              self._macros(idents, owner.own_defines), options, target=target, entries=[wname])
            req = dataclasses.replace(req, digests=(*req.digests, (owner.name, owner.digest)))
        try:
            ck = self.compile(req)[wname]
        except SlangCompileError as exc:
            types = sorted({d.name for c in self._cells.values() if c.ok for d in c.decls
                            if d.kind in ("struct", "enum", "interface", "generic", "generic struct")})
            msg = explain(name, spec, exc.diagnostics, types)
            if msg is None:
                raise
            raise SpecializationError(msg) from None
        ck = dataclasses.replace(ck, specialization=spec)
        self._entries[slot] = ck
        return ck

    def compile_variant(self, name: str, rewrite: Callable[[str], str], target: str | None = None) -> CompiledKernel:
        """Kernel `name` built from `rewrite(text of its cell)` with that cell's imports, defines and
        options: an instrumented copy (the thread debugger's) under its own key, leaving the ordinary
        build alone. It is dropped with the cell's revision, like the kernels built from it."""
        c = self.owner(name, kernel=True)
        text = rewrite(c.source)
        macros = self._macros(identifiers(text), c.own_defines)
        req = self._build("compile", c.shown, f"{c.module}_v{digest(text)[:8]}", text,
                          self.import_cells(c), macros, c.options,
                          target=target or self.backend.target, entries=[name])
        req = dataclasses.replace(req, digests=(*req.digests, (c.name, c.digest)))
        return self.compile(req)[name]

    def compile_inline(self, name: str, rewrite: Callable[[str, str], str], target: str | None = None) -> CompiledKernel:
        """Kernel `name` built from the text of its cell and of every cell it imports (transitively),
        each as `rewrite(cell name, text)`, in session order, as ONE module (no checked blobs): a
        variant that reaches the imported cells' code too (the thread debugger's printf filter).
        Raises SlangCompileError where one module cannot hold them (a cell that declares a `module`,
        a name that two of them define)."""
        c = self.owner(name, kernel=True)
        cells = self.closure([c])
        text = "".join(define_lines(d.defines) + rewrite(d.name, d.source) + "\n"
                       + "".join(f"#undef {k}\n" for k, _ in d.defines) for d in cells)
        req = self._build("compile", c.shown, f"{c.module}_i{digest(text)[:8]}", text, [], (), c.options,
                          target=target or self.backend.target, entries=[name])
        req = dataclasses.replace(req, digests=(*req.digests, *((d.name, d.digest) for d in cells)))
        return self.compile(req)[name]
