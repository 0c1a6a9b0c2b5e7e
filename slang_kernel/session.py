"""Session: cells -> revisions, dependency tracking, one compile path, caches, lookup of kernels/functions.

The model every other part builds on (DESIGN.md, "The model at the centre"): each cell revision is a
frozen `Cell` whose digest covers its source, its options and defines and the interfaces of the cells
it imports (a body edit of an imported cell does not make a new revision of its users: their blobs
link the new body; kernels record the full digests of every cell in their chain). Everything derived from cells (CompiledKernel, and through it ComputeKernel,
SlangFunction, playground programs, live and IR views) records the digests it was built from and is
valid exactly while `is_current` says so: compiling an unrelated cell never invalidates it. Every
compiler call is a `CompileRequest` built by `request` (or, for a cell's own check, the same builder).
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .autodiff import SlangFunction
from .backends import Backend, BackendConfig, create_backend
from .cache import DiskCache, compiler_fingerprint, digest
from .cells import Cell, identifiers, import_prefix, interface_text, module_name_for, resolve_imports
from .compiled import CompiledKernel, CompileRequest, ModuleSource, Specialization, define_lines
from .compiler.client import CompilerProcess
from .compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics
from .compiler.reflection import DeclInfo, FunctionInfo
from .kernels import ComputeKernel
from .specialize import SpecializationError, conformance_options, explain, find_entry, find_externs, interface_params
from .specialize import specialization as specialization_of
from .specialize import variant as specialize_variant

if TYPE_CHECKING:
    from .compare import Comparison

__all__ = ["CODE_TARGETS", "MODULE_DIR", "CellResult", "CompiledKernel", "Session"]

CODE_TARGETS = ("hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp")
# Our own Slang modules (playground, printing, rendering: `import playground;` as in the Slang
# Playground) are found on this search path; their text is part of every cache key.
MODULE_DIR = Path(__file__).with_name("slang")
_SEARCH = ("-I", str(MODULE_DIR))
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

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]


class Session:
    """One persistent notebook session: every cell compiles into it, incrementally.

    backend: "cpu" | "vulkan" | "cuda" | "auto". options: extra slangc options for every
    compile (e.g. ["-O2"]); defines: preprocessor defines for every cell (see set_define). The
    compiler runs in its own process (started here, in the background), so a compiler crash costs
    one cell's error, never the session. threads/checked/timeout/isolate configure the backend
    (BackendConfig: checked=True reports out-of-range buffer indices, timeout= stops a dispatch after
    that many seconds, isolate=False runs CPU kernels in this process: lower overhead, not crash-safe;
    fast_math=True builds CPU kernels with -ffast-math: faster, no IEEE care for NaN/inf or ordering).
    """

    def __init__(
        self,
        backend: str = "auto",
        *,
        cache_dir: str | None = None,
        cache: bool = True,
        options: Sequence[str] = (),
        defines: Mapping[str, str] | None = None,
        compiler: CompilerProcess | None = None,
        threads: int | None = None,
        checked: bool = False,
        timeout: float | None = None,
        isolate: bool = True,
        fast_math: bool = False,
    ) -> None:
        self.options = tuple(options)
        self._defines = {str(k): str(v) for k, v in (defines or {}).items()}
        self.cache = DiskCache(cache_dir, enabled=cache)
        self.fingerprint = digest(compiler_fingerprint(), *(p.read_bytes() for p in sorted(MODULE_DIR.glob("*.slang"))))
        self.config = BackendConfig(threads=threads, checked=checked, timeout=timeout, isolate=isolate, fast_math=fast_math,
                                    include_paths=(str(MODULE_DIR),), cache=self.cache)
        self._compiler = compiler or CompilerProcess()
        self._compiler.start()
        self._cells: dict[str, Cell] = {}
        self._failed: dict[str, SlangCompileError] = {}
        self._counter = 0
        self._compiled: dict[str, CompiledKernel] = {}
        self._entries: dict[tuple[str, str], CompiledKernel] = {}
        self.revision = 0  # counts every change (cells, defines, backend); views compare digests instead
        self._replicas: dict[str, tuple[Session, tuple[Any, ...]]] = {}   # backend -> (replica, what it replays)
        self._shares_compiler = False  # a replica's compiler worker is its origin's (Session.replica)
        self._compiler_ms = 0.0        # time in compiler checks, summed for the CellResult of a run
        try:
            self.backend: Backend = create_backend(backend, self.config)
        except BaseException:
            if compiler is None:  # no backend, no session: do not leave the compiler we started running
                self._compiler.close()
            raise

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
        return CellResult(name, list(cell.diagnostics), kernels, functions, types, users, broken,
                          (time.perf_counter() - t0) * 1000, cell.digest, rechecked, self._compiler_ms, cached)

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

    def _macros(self, source_idents: frozenset[str], own: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """The defines a cell sees: the session's and its own, those whose names it mentions (a define
        it never mentions cannot change it, so it must not change its digest either)."""
        merged = {**self._defines, **dict(own)}
        return tuple(sorted((k, v) for k, v in merged.items() if k in source_idents))

    def _check(self, name: str, module: str, source: str, earlier: Sequence[Cell], own: frozenset[str] = frozenset(),
               *, own_defines: tuple[tuple[str, str], ...] = (), options: tuple[str, ...] = (), label: str = "") -> Cell:
        """Check one cell against the earlier cells it uses. `own`: kernels the cell defines (known after
        a first check) for whose names no earlier cell is imported."""
        idents = identifiers(source)
        imports = resolve_imports(idents - own, earlier)
        macros = self._macros(idents, own_defines)
        shown = label or name
        req = self._build("check", shown, module, source, imports, macros, options)
        base = Cell(name=name, module=module, source=source, imports=tuple(c.name for c in imports),
                    digest=req.key, idents=idents, own=own, defines=macros, options=options,
                    own_defines=own_defines, label=label,
                    interface=digest("interface", interface_text(source), *(f"{k}={v}" for k, v in macros),
                                     *options, *(d.interface for d in self.closure(imports))))
        reply = self.cache.get_object("cells", req.key)
        if reply is None:
            t_check = time.perf_counter()
            try:
                reply = self._compiler.call("check", **req.message())
            except SlangCompilerCrash as exc:
                self._compiler_ms += (time.perf_counter() - t_check) * 1000
                return dataclasses.replace(base, error=str(exc),
                                           diagnostics=(Diagnostic("error", "crash", shown, 0, 0, str(exc)),))
            self._compiler_ms += (time.perf_counter() - t_check) * 1000
            if reply["ok"]:
                self.cache.put_object("cells", req.key, reply)
        diagnostics = tuple(self._annotate(parse_diagnostics(reply["diagnostics"], {shown: 1}), name, shown, earlier))
        if not reply["ok"]:
            error = "\n".join(str(d) for d in diagnostics if d.severity == "error") or "error"
            return dataclasses.replace(base, diagnostics=diagnostics, error=error)
        cell = dataclasses.replace(base, diagnostics=diagnostics, blob=reply["blob"], decls=tuple(reply["decls"]),
                                   entry_points=tuple(reply.get("entry_points", ())))
        kernels = frozenset(cell.entry_points)
        if not own and resolve_imports(idents - kernels, earlier) != imports:
            # A kernel named like an earlier cell's function: that cell is not imported for the name
            # (its `shade(...)` would overload the kernel `shade`, and the entry point could no longer
            # be found). Only kernels: a function named like an earlier one is an overload, which may
            # call the earlier one (`f(float2)` built on `f(float)`), and Slang would still compile it
            # without that cell, calling itself through an implicit float -> float2.
            shadowing = self._check(name, module, source, earlier, kernels, own_defines=own_defines, options=options,
                                    label=label)
            if shadowing.ok:
                return shadowing
        return cell

    def _annotate(self, diags: list[Diagnostic], name: str, shown: str, earlier: Sequence[Cell]) -> list[Diagnostic]:
        """Add hints: an undefined name that a later cell defines (cells see only earlier ones); a name
        that a cell declaring a `module` keeps internal."""
        later = [c for n, c in self._cells.items() if n != name and c not in earlier and c.ok]
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
            imports = resolve_imports(cell.idents - cell.own, earlier)
            macros = self._macros(cell.idents, cell.own_defines)
            req = self._build("check", cell.shown, cell.module, cell.source, imports, macros, cell.options)
            if req.key == cell.digest and cell.ok:
                continue
            new = self._check(cell.name, cell.module, cell.source, earlier, cell.own,
                              own_defines=cell.own_defines, options=cell.options, label=cell.label)
            if new.error is not None:  # keep what it defined, so lookups can say it is broken
                new = dataclasses.replace(new, decls=cell.decls, entry_points=cell.entry_points)
            self._commit(new)
            (broken if new.error is not None else recompiled).append(later_name)
        return tuple(recompiled), tuple(broken)

    def closure(self, cells: Iterable[Cell]) -> list[Cell]:
        """The cells these import, transitively (themselves included), in session order: the order
        their blobs must load."""
        seen: dict[str, Cell] = {}
        stack = list(cells)
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

    def kernel(self, name: str, *, specialize: Mapping[str, Any] | None = None,
               type_conformances: Sequence[Sequence[Any]] = ()) -> ComputeKernel:
        """The compute kernel `name`. specialize: values of its generic parameters (`void k<T : IFoo,
        let N : int>`: {"T": "MyType", "N": 4}) and of `extern struct`/`extern static const`
        declarations of its cells (link-time specialization); type_conformances: (interface, type, id)
        triples linked for dynamic dispatch (`createDynamicObject`, interface-typed parameters).
        Each specialization is compiled once and cached like any kernel (see specialize.py)."""
        self.owner(name, kernel=True)
        if not specialize and not type_conformances:
            return ComputeKernel(self, name)
        return ComputeKernel(self, name, self.specialization(name, specialize, type_conformances))

    def specialization(self, name: str, specialize: Mapping[str, Any] | None = None,
                       type_conformances: Sequence[Sequence[Any]] = ()) -> Specialization:
        """Check `specialize=`/`type_conformances=` against kernel `name` as its cells declare it now;
        raises SpecializationError saying which value does not fit and why."""
        owner = self.owner(name, kernel=True)
        elsewhere: dict[str, Any] = {}
        for c in self.closure([self._cells[n] for n in owner.imports]):
            elsewhere.update(find_externs(c.shown, c.source))
        entry = find_entry(owner.source, name)
        return specialization_of(name, entry, find_externs(owner.shown, owner.source), specialize, type_conformances,
                                 elsewhere, interface_params(entry, self._interfaces(owner)))

    def _interfaces(self, owner: Cell) -> frozenset[str]:
        """The interfaces a kernel's cell sees (its own and its imports')."""
        return frozenset(d.name for c in self.closure([owner]) for d in c.decls if d.kind == "interface")

    def function(self, name: str) -> SlangFunction:
        self.function_info(name)
        return SlangFunction(self, name)

    def dtype(self, type_name: str) -> Any:
        """The numpy dtype of Slang type `type_name` (a struct `P`, `float3`, `MyGeneric<float>`) as the
        elements of a `StructuredBuffer<type_name>` on the current backend's target: that target's
        field offsets and padding, vector and matrix fields as subarrays, nested structs as structured
        fields; the same machinery as `ComputeKernel.dtype`. Fill a struct buffer with
        `np.zeros(n, s.dtype("P"))`: the same fields give the same answer on every backend."""
        import numpy as np

        from .backends._packing import element_dtype
        from .errors import ParameterError

        name = " ".join(str(type_name).split())
        head = re.match(r"[A-Za-z_]\w*", name)
        if head is None or not re.fullmatch(r"[\w<>, :]+", name):
            raise ParameterError(f"dtype({type_name!r}): give a Slang type name, e.g. s.dtype(\"Particle\")")
        structs = sorted(n for n, d in self.names().items() if d.kind in ("struct", "generic"))
        if head.group(0) not in self.names() and not _BUILTIN_TYPE.fullmatch(head.group(0)) and \
                head.group(0) not in ("vector", "matrix"):
            raise ParameterError(f"dtype({name!r}): no type `{head.group(0)}` in this session's cells; "
                                 f"structs defined: {', '.join(structs) or 'none'}")
        entry = "sk_dtype_probe"
        src = (f"[shader(\"compute\")][numthreads(1, 1, 1)]\n"
               f"void {entry}(uniform StructuredBuffer<{name}> sk_elements) {{}}\n")
        try:
            ck = self.compile(self.request("compile", source=src, entries=[entry], what=f"dtype({name})"))[entry]
        except SlangCompileError as exc:
            first = next((d.message for d in exc.diagnostics if d.severity == "error"), str(exc))
            raise ParameterError(f"dtype({name!r}): Slang cannot lay out `{name}` as a buffer element on target "
                                 f"{self.backend.target}: {first}") from None
        t = ck.entry_point.uniforms[0].type.element
        assert t is not None
        base, shape = element_dtype(t)
        return np.dtype((base, shape)) if shape else base

    # -- the one compile path -----------------------------------------------------------------------

    def request(
        self, op: str, *, cell: str | None = None, source: str | None = None, upto: str | None = None,
        append: str = "", module: str | None = None, what: str | None = None, entries: Sequence[str] = (),
        target: str | None = None, options: Sequence[str] = (), reflect: bool = True,
    ) -> CompileRequest:
        """Build a compiler request ("compile" or "disassemble"; cells are checked by run_cell).

        cell: a cell's current revision (its text, imports, defines, options), with `append`ed
        generated text if given; or source: generated text that uses the cells up to `upto` (all by
        default), imported by the names it mentions. options: extra compiler options (e.g. "-g").
        """
        if (cell is None) == (source is None):
            raise TypeError("request(): give exactly one of cell= or source=")
        target = target or self.backend.target
        if cell is not None:
            c = self._cells[cell]
            imports = [self._cells[n] for n in c.imports]
            text = c.source + append
            macros = c.defines if not append else self._macros(identifiers(text), c.own_defines)
            own_options: tuple[str, ...] = (*c.options, *options)
            mod = module or (c.module if not append else f"{c.module}_{digest(append)[:8]}")
            label = what or c.shown
            digests: tuple[tuple[str, str], ...] = ((c.name, c.digest),)
        else:
            assert source is not None
            names = list(self._cells)
            upto_cells = [self._cells[n] for n in names[: names.index(upto) + 1]] if upto else list(self._cells.values())
            idents = identifiers(source)
            imports = resolve_imports(idents, upto_cells)
            text, macros, own_options = source, self._macros(idents, ()), tuple(options)
            mod = module or "sk_gen_" + digest(source)[:12]
            label = what or mod
            digests = ()
        req = self._build(op, label, mod, text, imports, macros, own_options, target=target, entries=entries,
                          reflect=reflect)
        return dataclasses.replace(req, digests=(*req.digests, *digests))

    def _build(self, op: str, what: str, module: str, text: str, imports: Sequence[Cell],
               macros: tuple[tuple[str, str], ...], own_options: tuple[str, ...], *, target: str = "",
               entries: Sequence[str] = (), reflect: bool = True) -> CompileRequest:
        """The one constructor of compiler requests: search path, session and cell options, the
        backend's options for the target, defines, and the module chain (as blobs and as sources)."""
        deps = self.closure(imports)
        prefix = import_prefix([c.module for c in imports])
        options = (*_SEARCH, *self.options, *own_options)
        target_options = tuple(self.backend.compile_options(target)) if op == "compile" else ()
        chain: list[ModuleSource] = []
        if op == "compile":  # module names by content: a module is reloaded when it or an import changed
            hashed: dict[str, str] = {}
            for c in deps:
                m = _module_source(c.module, c.defines, [hashed[n] for n in c.imports if n in hashed], c.source, c.name)
                hashed[c.name] = m.name
                chain.append(m)
            chain.append(_module_source(module, macros, [hashed[c.name] for c in imports], text, what))
        return CompileRequest(
            op=op, what=what, module=module, source=prefix + text, line_offset=prefix.count("\n"),
            deps=tuple((d.module, d.name, d.digest) for d in deps), options=options,
            target_options=target_options, defines=macros, fingerprint=self.fingerprint, target=target if op == "compile" else "",
            entries=tuple(entries), reflect=reflect, blobs={d.digest: d.blob for d in deps},
            digests=tuple((d.name, d.digest) for d in deps), chain=tuple(chain),
            # a check depends on what its imports declare, not on their bodies (see cells.interface_text)
            dep_keys=tuple(d.interface for d in deps) if op == "check" else ())

    def call(self, req: CompileRequest) -> dict[str, Any]:
        """Run a request as it is (not cached): the compiler's reply, ok or not (e.g. IR dumps)."""
        return dict(self._compiler.call(req.op, **req.message()))

    def compile(self, req: CompileRequest) -> dict[str, CompiledKernel]:
        """Compile a "compile" request: a CompiledKernel per entry point (with no entries, the whole
        module under ""). Cached in memory and on disk by the request's content."""
        names = list(req.entries) or [""]
        key = req.key
        if all(f"{key}/{e}" in self._compiled for e in names):
            return {e: self._compiled[f"{key}/{e}"] for e in names}
        reply = self.cache.get_object("kernels", key)
        if reply is None:
            reply = self.call(req)
            if reply["ok"]:
                self.cache.put_object("kernels", key, reply)
        diags = parse_diagnostics(reply["diagnostics"], {req.what: req.line_offset})
        if not reply["ok"]:
            raise self._compile_error(req, diags)
        used: dict[str, frozenset[str] | None] = {e: None for e in names}
        if req.target not in ("cpp", "cuda") and req.entries and reply["reflection"].globals:
            cpp = req.retarget("cpp", tuple(self.backend.compile_options("cpp")))
            try:  # which globals each kernel touches, read off its C++ (cached; binary targets hide it)
                used = {e: k.used_globals for e, k in self.compile(cpp).items()}
            except SlangCompileError:
                pass  # e.g. barriers, which C++ lacks: then every global is required
        if len(self._compiled) > 512:  # old revisions are only ever needed again through the disk cache
            for old in list(self._compiled)[:256]:
                del self._compiled[old]
        out = {}
        for e in names:
            ck = CompiledKernel(f"{key}/{e}", e, req.target, reply["code"][e], reply["reflection"], req.what,
                                tuple(diags), req.module, req.source, tuple(n for _, n, _ in req.deps), used[e],
                                req.chain, req.digests)
            self._compiled[ck.key] = ck
            out[e] = ck
        return out

    def _compile_error(self, req: CompileRequest, diags: list[Diagnostic]) -> SlangCompileError:
        sources = self._sources()
        sources[req.what] = req.source.split("\n", req.line_offset)[-1] if req.line_offset else req.source
        hint = ""
        if req.target == "cpp" and any(d.code == "E36107" for d in diags):
            hint = (" Slang's CPU target has no group barriers, atomics or wave operations (the notes "
                    "below name the construct): run this kernel with backend='vulkan' or 'cuda'.")
        deps = [self._cells[n] for _, n, _ in req.deps if n in self._cells]
        clash = [(e, d.shown) for e in req.entries for d in deps if e in d.names]
        if clash and any(d.code == "E38000" for d in diags):
            e, other = clash[0]
            hint = (f" {other} also defines `{e}`, and this cell uses other names of {other}, so Slang sees "
                    f"both `{e}` as overloads and cannot pick the entry point: rename one of them.")
        return SlangCompileError(f"{', '.join(req.entries) or req.what} did not compile for target {req.target}.{hint}",
                                 diags, sources)

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
        self._entries[(name, target)] = ck
        return ck

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
            imports = [self._cells[n] for n in owner.imports]
            imports += [c for c in resolve_imports(idents - owner.names, earlier) if c not in imports]
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
                          [self._cells[n] for n in c.imports], macros, c.options,
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

    def _owner_name(self, name: str) -> str | None:
        for cell in reversed(self._cells.values()):
            if name in cell.entry_points:
                return cell.name
        return None

    def code(self, name: str, target: str = "hlsl") -> str:
        """Generated code of a kernel or function for one target: hlsl, glsl, spirv-asm, metal, wgsl, cuda, cpp."""
        if target not in CODE_TARGETS and target != "spirv":
            raise ValueError(f"unknown target {target!r}; choose one of {', '.join(CODE_TARGETS)}")
        if name in self.kernels():
            return self.compile_entry(name, target).code
        return self.function(name).code(target)

    def reflection(self, target: str | None = None) -> dict[str, Any]:
        """JSON-able reflection of every kernel: parameters, types and layouts for one target."""
        target = target or self.backend.target
        return {k: self.compile_entry(k, target).reflection.to_json() for k in self.kernels()}

    def ir(self, name: str) -> str:
        """Slang IR (IModule::disassemble) of the cell that defines `name` (or of the cell `name`)."""
        cell = self._cells.get(name) or self.owner(name)
        req = self.request("disassemble", cell=cell.name)
        reply = self.call(req)
        if not reply["ok"]:
            raise SlangCompileError(f"could not disassemble {cell.shown}",
                                    parse_diagnostics(reply["diagnostics"], {cell.shown: req.line_offset}),
                                    self._sources())
        return str(reply["ir"])

    def ir_graph(self, name: str, **kwargs: Any) -> dict[str, Any]:
        from . import ir as ir_module

        return ir_module.to_graph(ir_module.parse_ir(self.ir(name)), **kwargs)

    # -- backend ------------------------------------------------------------------------------------

    def reset_device(self) -> None:
        """Start the backend afresh (the CPU worker process, or a new device): use after a kernel left it
        in a bad state. Cells stay compiled; arrays you hold are untouched."""
        self.backend.reset()
        self.revision += 1

    def set_backend(self, name: str) -> None:
        """Switch backend; cells stay compiled (kernels are rebuilt for the new target on first use)."""
        new = create_backend(name, self.config)
        old, self.backend = self.backend, new
        self.revision += 1
        old.close()

    def replica(self, backend: str) -> "Session":
        """This session's cells on another backend (for `compare`): a Session that replays the current
        revisions in order (names, defines, options, session defines), sharing this session's compiler
        worker and compile cache. Cached per backend, brought up to date on each call when cells
        changed, closed with this session. A cell that does not compile there is left out (its kernels
        then say so). Raises BackendUnavailable when that backend does not work here."""
        if backend == self.backend.name:
            return self
        state = (tuple((c.name, c.digest) for c in self._cells.values()), tuple(sorted(self._defines.items())),
                 self.revision)
        got = self._replicas.get(backend)
        if got is not None and got[1] == state:
            return got[0]
        r = got[0] if got is not None else Session(
            backend, cache_dir=str(self.cache.root), cache=self.cache.enabled, options=self.options,
            defines=self._defines, compiler=self._compiler, threads=self.threads, checked=self.checked,
            timeout=self.timeout, isolate=self.isolate)
        r._shares_compiler = True
        if list(r.cells) != [n for n in self._cells if n in r.cells]:  # moved cells: replay from the start
            for name in reversed(r.cells):
                r.remove_cell(name)
        for name in [n for n in r.cells if n not in self._cells]:
            r.remove_cell(name)
        for k, v in self._defines.items():
            if r._defines.get(k) != v:
                r.set_define(k, v)
        for c in self._cells.values():
            mine = r._cells.get(c.name)
            if mine is not None and (mine.source, mine.own_defines, mine.options) == (c.source, c.own_defines, c.options):
                continue
            try:
                r.run_cell(c.source, c.name, defines=dict(c.own_defines), options=c.options, label=c.label or None)
            except SlangCompileError:
                pass  # broken here as there (a dependency's edit): its kernels report it when asked for
        self._replicas[backend] = (r, state)
        return r

    def compare(self, kernel: str, backends: Sequence[str] = ("cpu", "vulkan", "cuda"), *, threads: Any = None,
                groups: Any = None, **params: Any) -> "Comparison":
        """Run `kernel` on each of `backends` that works here (each on its own copy of the inputs) and
        compare its output buffers: max absolute and ULP differences, counts, first differing indices
        (slang_kernel.compare). Backends that cannot run it are listed with the reason."""
        from .compare import compare

        return compare(self, kernel, backends, threads=threads, groups=groups, **params)

    # -- lifecycle ----------------------------------------------------------------------------------

    def close(self) -> None:
        for r, _ in self._replicas.values():
            r.close()
        self._replicas.clear()
        self.backend.close()
        if not self._shares_compiler:
            self._compiler.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<slang_kernel.Session backend={self.backend.name} ({self.backend.describe()}), "
                f"{len(self._cells)} cells, {len(self.kernels())} kernels, {len(self.functions())} functions>")


_BUILTIN_TYPE = re.compile(r"(float|half|double|int|uint|bool|u?int(8|16|32|64)_t|float(16|32|64)_t)([1-4](x[1-4])?)?")


def _module_source(module: str, defines: tuple[tuple[str, str], ...], imports: Sequence[str], text: str,
                   what: str) -> ModuleSource:
    """A module as source for compilers that take source: its defines, its imports by their content
    names (sgl cannot reload a name with new source), then the text."""
    source = define_lines(defines) + "".join(f"import {m}; " for m in imports) + "\n" + text
    h = digest(source)
    return ModuleSource(f"{module}_{h[:16]}", source, f"{what}@{h[:8]}", what)
