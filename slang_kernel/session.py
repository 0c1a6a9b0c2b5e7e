"""Session: cells -> modules, dependency tracking, invalidation, caches, lookup of kernels/functions."""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .backends import Backend, create_backend
from .cache import DiskCache, compiler_fingerprint, digest
from .cells import Cell, identifiers, import_prefix, module_name_for, resolve_imports
from .compiler.client import CompilerProcess
from .compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics
from .compiler.reflection import DeclInfo, EntryPointInfo, FunctionInfo, ProgramReflection

if TYPE_CHECKING:
    from .autodiff import SlangFunction
    from .kernels import ComputeKernel

__all__ = ["CellResult", "CompiledKernel", "Session"]

CODE_TARGETS = ("hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp")
_USER_CODE = re.compile(r'#line \d+ "')           # generated code after Slang's inlined prelude
_GLOBALS_STRUCT = re.compile(r"struct GlobalParams_\d+\s*\{[^}]*\};")
# Our own Slang modules (playground, printing, rendering: `import playground;` as in the Slang
# Playground) are found on this search path; their text is part of every cache key.
MODULE_DIR = Path(__file__).with_name("slang")
_SEARCH = ("-I", str(MODULE_DIR))


@dataclass(frozen=True)
class CellResult:
    """What running a cell did."""

    name: str
    diagnostics: list[Diagnostic]
    kernels: tuple[str, ...]
    functions: tuple[str, ...]
    types: tuple[str, ...]
    recompiled: tuple[str, ...]   # later cells recompiled because they use this one
    broken: tuple[str, ...]       # later cells that no longer compile (their errors say why)
    elapsed_ms: float

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]


@dataclass(frozen=True)
class CompiledKernel:
    """Target code and reflection of one entry point, for one revision of its cells."""

    key: str
    entry: str
    target: str
    code: str
    reflection: ProgramReflection
    cell: str
    diagnostics: tuple[Diagnostic, ...] = ()
    module: str = ""               # the Slang module compiled (for backends that compile from source: vulkan)
    source: str = ""               # its full source, import prefix included
    deps: tuple[str, ...] = ()     # names of the cells it loads, in load order
    globals_from_cpp: frozenset[str] | None = None  # used globals, read off a C++ build (binary targets)

    @functools.cached_property
    def entry_point(self) -> EntryPointInfo:
        return self.reflection.entry_point(self.entry)

    @functools.cached_property
    def parameter_names(self) -> frozenset[str]:
        """What a dispatch must be given: entry-point uniforms and the globals this kernel uses."""
        used = self.used_globals
        return frozenset([p.name for p in self.entry_point.uniforms]
                         + [p.name for p in self.reflection.globals if used is None or p.name in used])

    @functools.cached_property
    def used_globals(self) -> frozenset[str] | None:
        """Globals the generated code reads or writes (None where the target's code cannot tell).

        Reflection lists every global of every imported cell; a kernel that touches none of another
        cell's globals should not have to be given them. In C++ and CUDA output a global `g` is the
        field `g_N` of the GlobalParams struct, so after removing that struct's declaration, a
        mention of `g_N` is a use (erring towards "used": a false positive only asks for a value).
        """
        if self.target not in ("cpp", "cuda"):
            return self.globals_from_cpp
        m = _USER_CODE.search(self.code)
        body = _GLOBALS_STRUCT.sub("", self.code[m.start():] if m else self.code)
        return frozenset(p.name for p in self.reflection.globals
                         if re.search(rf"\b{re.escape(p.name)}_\d+\b", body))


class Session:
    """One persistent notebook session: every cell compiles into it, incrementally.

    backend: "cpu" | "vulkan" | "cuda" | "auto". options: extra slangc options for every
    compile (e.g. ["-O2"]). The compiler runs in its own process (started here, in the
    background), so a compiler crash costs one cell's error, never the session.
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
    ) -> None:
        self.options = tuple(options)
        self.defines = dict(defines or {})  # change with set_define(), so kernels see it
        self.cache = DiskCache(cache_dir, enabled=cache)
        self.fingerprint = digest(compiler_fingerprint(), *(p.read_bytes() for p in sorted(MODULE_DIR.glob("*.slang"))))
        self._compiler = compiler or CompilerProcess()
        self._compiler.start()
        self._cells: dict[str, Cell] = {}
        self._counter = 0
        self._compiled: dict[str, CompiledKernel] = {}
        self._entry_cache: dict[tuple[Any, ...], CompiledKernel] = {}
        self.revision = 0  # bumped whenever cells or the backend change
        self._entry_rev = 0
        self.threads = threads
        # CPU backend: checked=True reports out-of-range buffer indices (BoundsError); timeout= stops a
        # dispatch after that many seconds (KernelTimeout); isolate=False runs kernels in this process
        # (lower overhead, but a crashing kernel takes the notebook down with it).
        self.checked = checked
        self.timeout = timeout
        self.isolate = isolate
        try:
            self.backend: Backend = create_backend(backend, self)
        except BaseException:
            self._compiler.close()  # no backend, no session: do not leave the compiler running
            raise

    # -- cells --------------------------------------------------------------------------------------

    def run_cell(self, source: str, name: str | None = None) -> CellResult:
        """Compile one cell. Running a name again replaces that cell and recompiles its users.

        A cell with errors raises SlangCompileError and changes nothing.
        """
        t0 = time.perf_counter()
        if name is None:
            self._counter += 1
            name = f"cell[{self._counter}]"
            while name in self._cells:
                self._counter += 1
                name = f"cell[{self._counter}]"
        old = self._cells.get(name)
        order = list(self._cells)
        pos = order.index(name) if old else len(order)
        earlier = [self._cells[n] for n in order[:pos]]
        module = old.module if old else module_name_for(name, (c.module for c in self._cells.values()))
        cell = self._check(name, module, source, earlier)
        if cell.error is not None:
            if any(d.code == "crash" for d in cell.diagnostics):
                raise SlangCompilerCrash(cell.error + " The session is unchanged.")
            raise SlangCompileError(
                f"{name} did not compile; the session is unchanged.", cell.diagnostics, self._sources(cell)
            )
        # Commit, then bring later cells up to date (in order): they may use this one.
        self._cells[name] = cell
        self.revision += 1
        recompiled, broken = self._refresh_after(name)
        kernels = tuple(cell.entry_points)
        functions = tuple(d.name for d in cell.decls if d.kind == "function" and d.name not in kernels)
        types = tuple(d.name for d in cell.decls if d.kind in ("struct", "enum") or d.kind.startswith("generic"))
        return CellResult(name, cell.diagnostics, kernels, functions, types, recompiled, broken,
                          (time.perf_counter() - t0) * 1000)

    def remove_cell(self, name: str) -> None:
        """Forget a cell; later cells that used it are recompiled (and may break)."""
        if name not in self._cells:
            raise KeyError(f"no cell named {name!r}; cells: {', '.join(self._cells) or 'none'}")
        order = list(self._cells)
        del self._cells[name]
        self.revision += 1
        if order.index(name) < len(order) - 1:
            self._refresh_after(order[order.index(name) - 1] if order.index(name) else None)

    @property
    def cells(self) -> tuple[str, ...]:
        return tuple(self._cells)

    def cell(self, name: str) -> Cell:
        return self._cells[name]

    def _check(self, name: str, module: str, source: str, earlier: Sequence[Cell],
               own: frozenset[str] = frozenset()) -> Cell:
        """Check one cell against the earlier cells it uses. `own`: kernels the cell defines (known after
        a first check) for whose names no earlier cell is imported."""
        idents = identifiers(source)
        imports = resolve_imports(idents - own, earlier)
        deps = self._closure(imports)
        full = import_prefix([c.module for c in imports]) + source
        key = self._check_key(name, module, full, deps)
        cell = Cell(name=name, module=module, source=source, imports=tuple(c.name for c in imports),
                    digest=key, idents=idents)
        reply = self.cache.get_object("cells", key)
        if reply is None:
            try:
                reply = self._compiler.call(
                    "check", what=name, module=module, path=name, source=full,
                    deps=[(d.module, d.name, d.digest) for d in deps],
                    blobs={d.digest: d.blob for d in deps}, options=(*_SEARCH, *self.options), defines=self.defines,
                )
            except SlangCompilerCrash as exc:
                cell.error = str(exc)
                cell.diagnostics = [Diagnostic("error", "crash", name, 0, 0, str(exc))]
                return cell
            if reply["ok"]:
                self.cache.put_object("cells", key, reply)
        cell.diagnostics = self._annotate(parse_diagnostics(reply["diagnostics"], {name: 1}), name, earlier)
        if not reply["ok"]:
            cell.error = "\n".join(str(d) for d in cell.diagnostics if d.severity == "error") or "error"
            return cell
        cell.blob = reply["blob"]
        cell.decls = tuple(reply["decls"])
        cell.entry_points = tuple(reply.get("entry_points", ()))
        cell.own = own
        kernels = frozenset(cell.entry_points)
        if not own and resolve_imports(idents - kernels, earlier) != imports:
            # A kernel named like an earlier cell's function: that cell is not imported for the name
            # (its `shade(...)` would overload the kernel `shade`, and the entry point could no longer
            # be found). Only kernels: a function named like an earlier one is an overload, which may
            # call the earlier one (`f(float2)` built on `f(float)`), and Slang would still compile it
            # without that cell, calling itself through an implicit float -> float2.
            shadowing = self._check(name, module, source, earlier, kernels)
            if shadowing.ok:
                return shadowing
        return cell

    def _annotate(self, diags: list[Diagnostic], name: str, earlier: Sequence[Cell]) -> list[Diagnostic]:
        """Add a hint when an undefined name is defined by a later cell (cells see only earlier ones)."""
        later = [c for n, c in self._cells.items() if n != name and c not in earlier and c.ok]
        out = []
        for d in diags:
            if d.cell is None and d.severity in ("error", "internal"):  # e.g. an internal compiler error
                d = Diagnostic(d.severity, d.code, name, 0, 0, d.message)
            if d.code == "E30015" and "'" in d.message:
                ident = d.message.split("'")[1]
                owner = next((c.name for c in later if ident in c.defines()), None)
                if owner:
                    d = Diagnostic(d.severity, d.code, d.cell, d.line, d.column,
                                   f"{d.message} ({ident} is defined in {owner}, which comes after {name}; "
                                   f"a cell sees only the cells before it: move the definition up)",
                                   d.end_line, d.end_column)
            out.append(d)
        return out

    def _refresh_after(self, name: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        order = list(self._cells)
        start = order.index(name) + 1 if name is not None else 0
        recompiled, broken = [], []
        for later_name in order[start:]:
            cell = self._cells[later_name]
            earlier = [self._cells[n] for n in order[: order.index(later_name)]]
            imports = resolve_imports(cell.idents - cell.own, earlier)
            deps = self._closure(imports)
            full = import_prefix([c.module for c in imports]) + cell.source
            if self._check_key(cell.name, cell.module, full, deps) == cell.digest and cell.ok:
                continue
            new = self._check(cell.name, cell.module, cell.source, earlier, cell.own)
            if new.error is not None:  # keep what it defined, so lookups can say it is broken
                new.decls, new.entry_points = cell.decls, cell.entry_points
            self._cells[later_name] = new
            (broken if new.error is not None else recompiled).append(later_name)
        return tuple(recompiled), tuple(broken)

    def _check_key(self, name: str, module: str, full_source: str, deps: Sequence[Cell]) -> str:
        """What a cell's check depends on: compiler, options, its text and its dependencies' revisions."""
        return digest("check", self.fingerprint, name, module, full_source, *self.options,
                      *sorted(f"{k}={v}" for k, v in self.defines.items()), *(d.digest for d in deps))

    def _closure(self, cells: Iterable[Cell]) -> list[Cell]:
        """The cells these import, transitively, in session order (the order blobs must load)."""
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
        out = {n: c.source for n, c in self._cells.items()}
        out.update({c.name: c.source for c in extra})
        return out

    # -- lookup -------------------------------------------------------------------------------------

    def _owner(self, name: str, *, kernel: bool | None = None) -> Cell:
        for cell in reversed(self._cells.values()):
            is_kernel = name in cell.entry_points
            is_other = any(d.name == name for d in cell.decls) and not is_kernel
            if (kernel is None and (is_kernel or is_other)) or (kernel and is_kernel) or (kernel is False and is_other):
                if not cell.ok:
                    raise SlangCompileError(
                        f"{name} is defined in {cell.name}, which no longer compiles: fix or re-run it.",
                        cell.diagnostics, self._sources(cell))
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
        cell = self._owner(name, kernel=False)
        decl = next(d for d in cell.decls if d.name == name)
        if decl.kind != "function":
            raise TypeError(f"{name} in {cell.name} is a {decl.kind}, not a function")
        return cell, decl.functions

    def kernel(self, name: str) -> "ComputeKernel":
        from .kernels import ComputeKernel

        self._owner(name, kernel=True)
        return ComputeKernel(self, name)

    def function(self, name: str) -> "SlangFunction":
        from .autodiff import SlangFunction

        self.function_info(name)
        return SlangFunction(self, name)

    # -- compiling ----------------------------------------------------------------------------------

    def compile_entry(self, name: str, target: str | None = None) -> CompiledKernel:
        """Target code and reflection for a compute kernel of the current cells (cached)."""
        target = target or self.backend.target
        fast = (name, target, self.options, tuple(sorted(self.defines.items())))
        if self._entry_rev != self.revision:  # entries of older revisions can never be hit again
            self._entry_cache.clear()
            self._entry_rev = self.revision
        hit = self._entry_cache.get(fast)
        if hit is not None:
            return hit
        cell = self._owner(name, kernel=True)
        imports = [self._cells[n] for n in cell.imports]
        full = import_prefix([c.module for c in imports]) + cell.source
        ck = self.compile_source(cell.name, cell.module, full, [name], target, self._closure(imports))[name]
        self._entry_cache[fast] = ck
        return ck

    def compile_source(
        self, what: str, module: str, source: str, entries: Sequence[str], target: str,
        deps: Sequence[Cell], *, line_offset: int = 1,
    ) -> dict[str, CompiledKernel]:
        """Compile entry points of `source` (a fresh compiler request); results are cached.

        With no entries, the whole module is generated (e.g. [CUDAKernel] functions), under "".
        """
        names = list(entries) or [""]
        opts = (*self.options, *self.backend.compile_options(target))
        key = digest("compile", self.fingerprint, target, module, source, *entries, *opts,
                     *sorted(f"{k}={v}" for k, v in self.defines.items()), *(d.digest for d in deps))
        if all(f"{key}/{e}" in self._compiled for e in names):
            return {e: self._compiled[f"{key}/{e}"] for e in names}
        reply = self.cache.get_object("kernels", key)
        if reply is None:
            reply = self._compiler.call(
                "compile", what=what, module=module, path=what, source=source, entry_points=list(entries),
                target=target, deps=[(d.module, d.name, d.digest) for d in deps],
                blobs={d.digest: d.blob for d in deps}, options=(*_SEARCH, *opts), defines=self.defines,
            )
            if reply["ok"]:
                self.cache.put_object("kernels", key, reply)
        diags = parse_diagnostics(reply["diagnostics"], {what: line_offset})
        if not reply["ok"]:
            sources = self._sources()
            sources[what] = source.split("\n", line_offset)[-1] if line_offset else source
            hint = ""
            if target == "cpp" and any(d.code == "E36107" for d in diags):
                hint = (" Slang's CPU target has no group barriers, atomics or wave operations (the notes "
                        "below name the construct): run this kernel with backend='vulkan' or 'cuda'.")
            clash = [(e, d.name) for e in entries for d in deps if e in d.defines()]
            if clash and any(d.code == "E38000" for d in diags):
                e, other = clash[0]
                hint = (f" {other} also defines `{e}`, and this cell uses other names of {other}, so Slang sees "
                        f"both `{e}` as overloads and cannot pick the entry point: rename one of them.")
            raise SlangCompileError(f"{', '.join(entries) or what} did not compile for target {target}.{hint}",
                                    diags, sources)
        used: dict[str, frozenset[str] | None] = {e: None for e in names}
        if target not in ("cpp", "cuda") and entries and reply["reflection"].globals:
            try:  # which globals each kernel touches, read off its C++ (cached; binary targets hide it)
                used = {e: k.used_globals for e, k in
                        self.compile_source(what, module, source, entries, "cpp", deps,
                                            line_offset=line_offset).items()}
            except SlangCompileError:
                pass  # e.g. barriers, which C++ lacks: then every global is required
        if len(self._compiled) > 512:  # old revisions are only ever needed again through the disk cache
            for old in list(self._compiled)[:256]:
                del self._compiled[old]
        out = {}
        for e in names:
            ck = CompiledKernel(f"{key}/{e}", e, target, reply["code"][e], reply["reflection"], what, tuple(diags),
                                module, source, tuple(d.name for d in deps), used[e])
            self._compiled[ck.key] = ck
            out[e] = ck
        return out

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
        cell = self._cells.get(name) or self._owner(name)
        imports = [self._cells[n] for n in cell.imports]
        deps = self._closure(imports)
        reply = self._compiler.call(
            "disassemble", what=cell.name, module=cell.module, path=cell.name,
            source=import_prefix([c.module for c in imports]) + cell.source,
            deps=[(d.module, d.name, d.digest) for d in deps], blobs={d.digest: d.blob for d in deps},
            options=(*_SEARCH, *self.options), defines=self.defines,
        )
        if not reply["ok"]:
            raise SlangCompileError(f"could not disassemble {cell.name}",
                                    parse_diagnostics(reply["diagnostics"], {cell.name: 1}), self._sources())
        return reply["ir"]

    def ir_graph(self, name: str, **kwargs: Any) -> dict[str, Any]:
        from . import ir as ir_module

        return ir_module.to_graph(ir_module.parse_ir(self.ir(name)), **kwargs)

    def set_define(self, name: str, value: str = "1") -> None:
        """A preprocessor define for cells run from now on and for every kernel compiled after this."""
        self.defines[name] = value
        self.revision += 1

    def reset_device(self) -> None:
        """Start the backend afresh (the CPU worker process, or a new device): use after a kernel left it
        in a bad state. Cells stay compiled; arrays you hold are untouched."""
        reset = getattr(self.backend, "reset", None)
        if reset is not None:
            reset()
        else:
            self.set_backend(self.backend.name)

    def set_backend(self, name: str) -> None:
        """Switch backend; cells stay compiled (kernels are rebuilt for the new target on first use)."""
        new = create_backend(name, self)
        old, self.backend = self.backend, new
        self.revision += 1
        old.close()

    # -- lifecycle ----------------------------------------------------------------------------------

    def close(self) -> None:
        self.backend.close()
        self._compiler.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<slang_kernel.Session backend={self.backend.name} ({self.backend.describe()}), "
                f"{len(self._cells)} cells, {len(self.kernels())} kernels, {len(self.functions())} functions>")
