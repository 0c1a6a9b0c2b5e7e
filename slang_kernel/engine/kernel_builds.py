"""Kernel builds: a kernel's own build (compile_entry), its specializations (generic arguments,
externs, type conformances), the variants the thread debugger compiles, and buffer element dtypes.

The one object views are given (typed by the narrow protocols of protocols.py): it reads the cell
store and builds through the compile service, and keeps the current build of each kernel per target.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..backends import Backend
from ..backends.registry import TYPE_CONFORMANCES, capability, info_of
from ..cache import digest
from .cell_store import CellStore
from .cells import Cell, identifiers
from ..compiled import CompiledKernel, CompileRequest, Specialization, define_lines
from .compile_service import CompileService
from ..compiler.diagnostics import SlangCompileError, parse_diagnostics
from ..compiler.reflection import FunctionInfo
from ..errors import ParameterError
from .finite import FiniteCheck
from .specialize import SpecializationError, conformance_options, explain, find_entry, find_externs, interface_params
from .specialize import specialization as specialization_of
from .specialize import variant as specialize_variant

if TYPE_CHECKING:
    from .autodiff import SlangFunction

__all__ = ["KernelBuilds"]

_BUILTIN_TYPE = re.compile(r"(float|half|double|int|uint|bool|u?int(8|16|32|64)_t|float(16|32|64)_t)([1-4](x[1-4])?)?")


class KernelBuilds:
    """Builds of kernels and functions of one store through one compile service."""

    def __init__(self, store: CellStore, service: CompileService, finite: FiniteCheck | None = None) -> None:
        self.store = store
        self.service = service
        self.finite = finite if finite is not None else FiniteCheck(False)   # the session's NaN/Inf finder
        self.entries: dict[tuple[str, str], CompiledKernel] = {}

    # -- what views read ----------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        return self.service.backend

    @property
    def revision(self) -> int:
        return self.store.revision

    @property
    def compile_service(self) -> CompileService:
        """The compile service (the IR views' raw requests, whether given a Session or this service)."""
        return self.service

    def function(self, name: str) -> "SlangFunction":
        """The SlangFunction `name` (engine parts given a view's service, e.g. the gradient flow)."""
        from .autodiff import SlangFunction

        self.store.function_info(name)
        return SlangFunction(self, name)

    def code(self, name: str, target: str = "hlsl") -> str:
        """Generated code of kernel `name` for one target."""
        return self.compile_entry(name, target).code

    @property
    def cells(self) -> tuple[str, ...]:
        return self.store.cells

    def cell(self, name: str) -> Cell:
        return self.store.cell(name)

    def is_current(self, built_from: CompiledKernel) -> bool:
        return self.store.is_current(built_from)

    def failure(self, name: str) -> SlangCompileError | None:
        return self.store.failure(name)

    def digest(self, name: str) -> str | None:
        return self.store.digest(name)

    def owner(self, name: str, *, kernel: bool | None = None) -> Cell:
        return self.store.owner(name, kernel=kernel)

    def closure(self, cells: Sequence[Cell]) -> list[Cell]:
        return self.store.closure(cells)

    def function_info(self, name: str) -> tuple[Cell, tuple[FunctionInfo, ...]]:
        return self.store.function_info(name)

    def request(self, op: str, **kwargs: Any) -> CompileRequest:
        return self.service.request(op, **kwargs)

    def compile(self, req: CompileRequest) -> dict[str, CompiledKernel]:
        return self.service.compile(req)

    def call(self, req: CompileRequest) -> dict[str, Any]:
        return self.service.call(req)

    def ir(self, name: str) -> str:
        """Slang IR (IModule::disassemble) of the cell that defines `name` (or of the cell `name`)."""
        cell = self.store.by_name.get(name) or self.store.owner(name)
        req = self.service.request("disassemble", cell=cell.name)
        reply = self.service.call(req)
        if not reply["ok"]:
            raise SlangCompileError(f"could not disassemble {cell.shown}",
                                    parse_diagnostics(reply["diagnostics"], {cell.shown: req.line_offset}),
                                    self.store.sources())
        return str(reply["ir"])

    def forget(self, old: tuple[str, str]) -> list[str]:
        """Drop the builds made from a replaced revision; returns their compile keys."""
        keys = [k for k, ck in self.service.compiled.items() if old in ck.digests]
        for e in [e for e, ck in self.entries.items() if old in ck.digests]:
            del self.entries[e]
        return keys

    # -- builds -------------------------------------------------------------------------------------

    def specialization(self, name: str, specialize: Mapping[str, Any] | None = None,
                       type_conformances: Sequence[Sequence[Any]] = ()) -> Specialization:
        """Check `specialize=`/`type_conformances=` against kernel `name` as its cells declare it now;
        raises SpecializationError saying which value does not fit and why."""
        owner = self.store.owner(name, kernel=True)
        elsewhere: dict[str, Any] = {}
        for c in self.store.closure(self.service.import_cells(owner)):
            elsewhere.update(find_externs(c.shown, c.source))
        entry = find_entry(owner.source, name)
        return specialization_of(name, entry, find_externs(owner.shown, owner.source), specialize, type_conformances,
                                 elsewhere, interface_params(entry, self.store.interfaces(owner)))

    def compile_entry(self, name: str, target: str | None = None,
                      specialization: Specialization | None = None) -> CompiledKernel:
        """Target code and reflection for a compute kernel of the current cells (cached); with a
        `specialization` (from `Session.specialization`), of that specialization of it."""
        target = target or self.backend.target
        if specialization:
            return self.compile_specialized(name, target, specialization)
        hit = self.entries.get((name, target))
        if hit is not None and self.store.is_current(hit) and hit.cell == self.store.owner_name(name):
            return hit
        owner = self.store.owner(name, kernel=True)
        entry = find_entry(owner.source, name)
        if entry is not None and entry.generics:  # with its defaults, or an error naming what it needs
            return self.compile_specialized(name, target, specialization_of(name, entry, {}, None))
        try:
            ck = self.service.compile(self.service.request("compile", cell=owner.name, entries=[name], target=target))[name]
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
        self.same_name_globals(ck, owner)
        self.entries[(name, target)] = ck
        return ck

    def same_name_globals(self, ck: CompiledKernel, owner: Cell) -> None:
        """A kernel that reads a redeclared global directly and the earlier one through an earlier
        cell's function holds two globals of one name. The CPU and CUDA backends fill both from the one
        keyword; Vulkan (sgl) binds by name and would fill one: say so instead of guessing."""
        if not info_of(self.backend.name).globals_by_name or ck.target != self.backend.target:
            return
        seen: dict[str, int] = {}
        for p in ck.reflection.globals:
            seen[p.name] = seen.get(p.name, 0) + 1
        dup = sorted(n for n, k in seen.items() if k > 1 and (ck.used_globals is None or n in ck.used_globals))
        if dup:
            cells = [c.shown for c in self.store.closure([owner]) if dup[0] in c.names]
            raise ParameterError(
                f"{ck.entry} holds {len(cells) or 2} globals named `{dup[0]}` ({', '.join(cells)}): a later cell's "
                f"`{dup[0]}` replaces the earlier one for the cells after it, but functions of the earlier cell "
                "still read their own, and the Vulkan backend binds globals by name. Rename one of them, or "
                "run it with backend='cpu' or 'cuda', which fill both from the one keyword.")

    def compile_specialized(self, name: str, target: str, spec: Specialization) -> CompiledKernel:
        """A specialization: a variant of the kernel's cell (specialize.variant: externs defined, a
        generated entry point for a generic kernel) with Slang's -conformance options, compiled and
        cached like the cell's own kernels (keyed by its text and options; dropped with the cell)."""
        slot = (f"{name}<{spec}>", target)
        owner = self.store.owner(name, kernel=True)
        hit = self.entries.get(slot)
        if hit is not None and self.store.is_current(hit) and (owner.name, owner.digest) in hit.digests:
            return hit
        if spec.conformances and target == self.backend.target and target not in ("cpp", "cuda") \
                and not capability(self.backend, TYPE_CONFORMANCES):
            raise SpecializationError(
                f"{name}: type_conformances need a backend that runs Slang's generated code (cpu, cuda); the "
                f"{self.backend.name} backend builds kernels from Slang source through slangpy, which this "
                "version does not hand conformances to. Use Session(backend='cpu') or 'cuda', or `specialize=` "
                "(a generic parameter instead of dynamic dispatch).")
        externs = find_externs(owner.shown, owner.source)
        entry = find_entry(owner.source, name)
        wanted = {g.name for g in entry.generics} if entry is not None else set()
        have = {k for k, _ in spec.args}
        typed = interface_params(entry, self.store.interfaces(owner))
        if entry is None or not wanted <= have or not have <= wanted | set(externs) | set(typed):
            raise SpecializationError(
                f"{name} in {owner.shown} changed since it was specialized with {spec} (it now declares "
                + (", ".join(g.describe() for g in entry.generics) if entry and entry.generics else "no generic parameters")
                + "): get it again with s.kernel(..., specialize=...).")
        wname, text, tail = specialize_variant(owner.source, entry, spec, externs, typed)
        earlier = self.store.earlier(owner.name)
        named = identifiers(" ".join([*(v for _, v in spec.args), *(f"{i} {t}" for i, t, _ in spec.conformances)]))
        named -= {n for c in [*earlier, owner] for n in c.names}
        later = [c for c in self.store.by_name.values() if c not in earlier and c is not owner and c.ok and c.names & named]
        options = (*owner.options, *conformance_options(spec))
        if later:  # types defined after the kernel's cell (which they import): all of them as one module
            cells = self.store.closure([owner, *later])
            body = "".join(define_lines(d.defines) + (text if d.name == owner.name else d.source) + "\n"
                           + "".join(f"#undef {k}\n" for k, _ in d.defines) for d in cells) + tail
            req = self.service.build("compile", owner.shown, f"{owner.module}_i{digest(body)[:8]}", body, [], (), options,
                              target=target, entries=[wname])
            req = dataclasses.replace(req, digests=(*req.digests, *((d.name, d.digest) for d in cells)))
        else:  # the types come from the kernel's cell and the cells before it: a variant of the cell
            text += tail
            imports = self.service.import_cells(owner)
            imports += [c for c in self.service.imports_for(text, earlier, owner.names)
                        if c.name not in {i.name for i in imports}]
            req = self.service.build("compile", owner.shown, f"{owner.module}_s{digest(text)[:8]}", text, imports,
                              self.service.macros(identifiers(text), owner.own_defines), options, target=target,
                              entries=[wname])
            req = dataclasses.replace(req, digests=(*req.digests, (owner.name, owner.digest)))
        try:
            ck = self.service.compile(req)[wname]
        except SlangCompileError as exc:
            types = sorted({d.name for c in self.store.by_name.values() if c.ok for d in c.decls
                            if d.kind in ("struct", "enum", "interface", "generic", "generic struct")})
            msg = explain(name, spec, exc.diagnostics, types)
            if msg is None:
                raise
            raise SpecializationError(msg) from None
        ck = dataclasses.replace(ck, specialization=spec)
        self.entries[slot] = ck
        return ck

    def compile_variant(self, name: str, rewrite: Callable[[str], str], target: str | None = None) -> CompiledKernel:
        """Kernel `name` built from `rewrite(text of its cell)` with that cell's imports, defines and
        options: an instrumented copy (the thread debugger's) under its own key, leaving the ordinary
        build alone. It is dropped with the cell's revision, like the kernels built from it."""
        c = self.store.owner(name, kernel=True)
        text = rewrite(c.source)
        macros = self.service.macros(identifiers(text), c.own_defines)
        req = self.service.build("compile", c.shown, f"{c.module}_v{digest(text)[:8]}", text,
                          self.service.import_cells(c), macros, c.options,
                          target=target or self.backend.target, entries=[name])
        req = dataclasses.replace(req, digests=(*req.digests, (c.name, c.digest)))
        return self.service.compile(req)[name]

    def compile_inline(self, name: str, rewrite: Callable[[str, str], str], target: str | None = None) -> CompiledKernel:
        """Kernel `name` built from the text of its cell and of every cell it imports (transitively),
        each as `rewrite(cell name, text)`, in session order, as ONE module (no checked blobs): a
        variant that reaches the imported cells' code too (the thread debugger's printf filter).
        Raises SlangCompileError where one module cannot hold them (a cell that declares a `module`,
        a name that two of them define)."""
        c = self.store.owner(name, kernel=True)
        cells = self.store.closure([c])
        text = "".join(define_lines(d.defines) + rewrite(d.name, d.source) + "\n"
                       + "".join(f"#undef {k}\n" for k, _ in d.defines) for d in cells)
        req = self.service.build("compile", c.shown, f"{c.module}_i{digest(text)[:8]}", text, [], (), c.options,
                          target=target or self.backend.target, entries=[name])
        req = dataclasses.replace(req, digests=(*req.digests, *((d.name, d.digest) for d in cells)))
        return self.service.compile(req)[name]

    def dtype(self, type_name: str) -> Any:
        """The numpy dtype of Slang type `type_name` (a struct `P`, `float3`, `MyGeneric<float>`) as the
        elements of a `StructuredBuffer<type_name>` on the current backend's target: that target's
        field offsets and padding, vector and matrix fields as subarrays, nested structs as structured
        fields; the same machinery as `ComputeKernel.dtype`. Fill a struct buffer with
        `np.zeros(n, s.dtype("P"))`: the same fields give the same answer on every backend."""
        import numpy as np

        from ..backends.common.packing import element_dtype

        name = " ".join(str(type_name).split())
        head = re.match(r"[A-Za-z_]\w*", name)
        if head is None or not re.fullmatch(r"[\w<>, :]+", name):
            raise ParameterError(f"dtype({type_name!r}): give a Slang type name, e.g. s.dtype(\"Particle\")")
        structs = sorted(n for n, d in self.store.names().items() if d.kind in ("struct", "generic"))
        if head.group(0) not in self.store.names() and not _BUILTIN_TYPE.fullmatch(head.group(0)) and \
                head.group(0) not in ("vector", "matrix"):
            raise ParameterError(f"dtype({name!r}): no type `{head.group(0)}` in this session's cells; "
                                 f"structs defined: {', '.join(structs) or 'none'}")
        entry = "sk_dtype_probe"
        src = (f"[shader(\"compute\")][numthreads(1, 1, 1)]\n"
               f"void {entry}(uniform StructuredBuffer<{name}> sk_elements) {{}}\n")
        try:
            ck = self.service.compile(self.service.request("compile", source=src, entries=[entry], what=f"dtype({name})"))[entry]
        except SlangCompileError as exc:
            first = next((d.message for d in exc.diagnostics if d.severity == "error"), str(exc))
            raise ParameterError(f"dtype({name!r}): Slang cannot lay out `{name}` as a buffer element on target "
                                 f"{self.backend.target}: {first}") from None
        t = ck.entry_point.uniforms[0].type.element
        assert t is not None
        base, shape = element_dtype(t)
        return np.dtype((base, shape)) if shape else base
