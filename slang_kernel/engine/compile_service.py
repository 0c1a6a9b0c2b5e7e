"""The compile service: the one request builder, the compile cache, checks, and visibility variants.

Every compiler call is a `CompileRequest` built here (`request`, or `build` for the parts that
assemble their own module list): search path, session and cell options, the backend's options for
the target, defines, and the module chain (as blobs and as sources). `compile` runs and caches
"compile" requests, `check_call` runs and caches checks, `variant` makes the visibility variants
through which a later cell's redeclaration hides an earlier cell's name (see cells.py).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import scanner
from ..backends import Backend
from ..cache import DiskCache, digest
from .cell_store import CellStore
from .cells import Cell, Visible, identifiers, import_prefix, visible_imports
from .edit_phases import CheckTiming
from ..compiled import CompiledKernel, CompileRequest, ModuleSource, define_lines
from ..compiler.client import CompilerProcess
from ..compiler.diagnostics import Diagnostic, SlangCompileError, SlangCompilerCrash, parse_diagnostics

__all__ = ["MODULE_DIR", "CompileService"]

# Our own Slang modules (playground, printing, rendering: `import playground;` as in the Slang
# Playground) are found on this search path; their text is part of every cache key.
MODULE_DIR = Path(__file__).resolve().parent.parent / "slang"
_SEARCH = ("-I", str(MODULE_DIR))


class CompileService:
    """Builds, runs and caches compiler requests for the cells of one store."""

    def __init__(self, store: CellStore, compiler: CompilerProcess, cache: DiskCache, fingerprint: str,
                 options: tuple[str, ...], defines: Mapping[str, str], backend: Callable[[], Backend]) -> None:
        self.store = store
        self.compiler = compiler
        self.cache = cache
        self.fingerprint = fingerprint
        self.options = options
        self.defines: dict[str, str] = dict(defines)
        self._backend = backend              # the session's current backend (set_backend swaps it)
        self.compiled: dict[str, CompiledKernel] = {}
        self.variants: dict[tuple[str, tuple[str, ...]], Cell] = {}   # (digest, hidden) -> variant
        self.spent_ms = 0.0                  # time in compiler checks so far (readers take differences)
        self.timings: list[CheckTiming] = []  # the checks since the current edit began (edit_phases.py)
        self.prefetched: dict[str, dict[str, Any]] = {}   # check replies by request key, from one batch call
        self.batch_blobs: set[str] = set()   # digests whose blobs a batch left in the worker (recheck_batch)

    @property
    def backend(self) -> Backend:
        return self._backend()

    def macros(self, source_idents: frozenset[str], own: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """The defines a cell sees: the session's and its own, those whose names it mentions (a define
        it never mentions cannot change it, so it must not change its digest either)."""
        merged = {**self.defines, **dict(own)}
        return tuple(sorted((k, v) for k, v in merged.items() if k in source_idents))

    def forget(self, keys: Sequence[str], digests: Sequence[str]) -> None:
        """Drop compiled kernels by key and the worker's blobs by digest (replaced revisions)."""
        for k in keys:
            self.compiled.pop(k, None)
        self.compiler.forget(digests)

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
            c = self.store.by_name[cell]
            imports = self.import_cells(c)
            text = c.source + append
            macros = c.defines if not append else self.macros(identifiers(text), c.own_defines)
            own_options: tuple[str, ...] = (*c.options, *options)
            mod = module or (c.module if not append else f"{c.module}_{digest(append)[:8]}")
            label = what or c.shown
            digests: tuple[tuple[str, str], ...] = ((c.name, c.digest),)
        else:
            assert source is not None
            names = list(self.store.by_name)
            upto_cells = [self.store.by_name[n] for n in names[: names.index(upto) + 1]] if upto else list(self.store.by_name.values())
            imports = self.imports_for(source, upto_cells)
            text, macros, own_options = source, self.macros(identifiers(source), ()), tuple(options)
            mod = module or "sk_gen_" + digest(source)[:12]
            label = what or mod
            digests = ()
        req = self.build(op, label, mod, text, imports, macros, own_options, target=target, entries=entries,
                          reflect=reflect)
        return dataclasses.replace(req, digests=(*req.digests, *digests))

    def import_cells(self, cell: Cell) -> list[Cell]:
        """The cells `cell` imports, each as the variant it was checked against."""
        hidden = dict(cell.hidden)
        return [self.variant(self.store.by_name[n], hidden[n]) if n in hidden else self.store.by_name[n]
                for n in cell.imports if n in self.store.by_name]

    def imports_for(self, text: str, earlier: Sequence[Cell], own: frozenset[str] = frozenset()) -> list[Cell]:
        """The cells generated `text` placed after `earlier` imports (declaring nothing but `own`): for
        each name it mentions, the latest earlier declaration (cells.visible_imports, the one rule a
        cell's check follows too), each cell as the variant that hides what it must."""
        vis = visible_imports(scanner.mentions(text) - own, frozenset(), {}, earlier, identifiers(text))
        return self.imports_of(vis)

    def imports_of(self, vis: Visible, only: Sequence[str] | None = None, *, check: bool = True) -> list[Cell]:
        """The cells to import for `vis` (those named in `only`), each as the variant that hides what it must."""
        hidden = dict(vis.hidden)
        return [self.variant(c, hidden[c.name], check=check) if c.name in hidden else c
                for c in vis.imports if only is None or c.name in only]

    def variant(self, cell: Cell, hide: tuple[str, ...], *, check: bool = True) -> Cell:
        """`cell` as importers that must not see `hide` load it: its text with those declarations
        `internal` (scanner.visibility_variant), checked as the same module against the same
        imports. Cached per revision; when the variant does not compile (a construct the scanner
        misreads), the cell itself, and the check that needed it reports the clash."""
        key = (cell.digest, hide)
        got = self.variants.get(key)
        if got is not None:
            return got
        text = scanner.visibility_variant(cell.source, hide)
        interface = digest("variant", cell.interface, *hide)
        placeholder = dataclasses.replace(cell, source=text, interface=interface, variant_of=cell.digest)
        if not check:
            return placeholder
        req = self.build("check", cell.shown, cell.module, text, self.import_cells(cell), cell.defines, cell.options)
        reply = self.check_call(req)
        if not reply.get("ok"):
            self.variants[key] = cell
            return cell
        out = dataclasses.replace(placeholder, digest=req.key, blob=reply["blob"])
        self.variants[key] = out
        return out

    def check_call(self, req: CompileRequest) -> dict[str, Any]:
        """One check through the compile cache (timed into the CellResult); a crash is a reply. A
        reply the worker already gave in a batch (recheck_batch.prefetch) is taken as it is."""
        t_cache = time.perf_counter()
        reply = self.cache.get_object("cells", req.key)
        if reply is not None and "refs" in reply:   # (replies cached before references were reported: redo)
            self.timings.append(CheckTiming(req.what, 0.0, (), (time.perf_counter() - t_cache) * 1000))
            return dict(reply)
        t_check = time.perf_counter()
        batched = self.prefetched.pop(req.key, None)
        try:
            reply = batched if batched is not None else self.compiler.call("check", **req.message())
        except SlangCompilerCrash as exc:
            return {"ok": False, "crash": str(exc), "diagnostics": ""}
        finally:
            self.spent_ms += (time.perf_counter() - t_check) * 1000
        t_put = time.perf_counter()
        if reply["ok"]:
            self.cache.put_object("cells", req.key, reply)
        if len(self.timings) > 4096:   # checks outside run_cell (kernel variants) must not pile up
            del self.timings[:2048]
        if batched is None:   # (a batch's items were recorded when it ran)
            self.timings.append(CheckTiming(req.what, (t_put - t_check) * 1000, tuple(reply.get("wall_ms", {}).items()),
                                            (t_check - t_cache + time.perf_counter() - t_put) * 1000))
        return dict(reply)

    def build(self, op: str, what: str, module: str, text: str, imports: Sequence[Cell],
               macros: tuple[tuple[str, str], ...], own_options: tuple[str, ...], *, target: str = "",
               entries: Sequence[str] = (), reflect: bool = True) -> CompileRequest:
        """The one constructor of compiler requests: search path, session and cell options, the
        backend's options for the target, defines, and the module chain (as blobs and as sources)."""
        deps = self.store.closure(imports)
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
            # a check depends on what its imports declare, not on their bodies (see cells.interface_text),
            # nor on what they import but do not expose (their interfaces name it: cells.exposed)
            dep_keys=_check_keys(imports, deps) if op == "check" else ())

    def call(self, req: CompileRequest) -> dict[str, Any]:
        """Run a request as it is (not cached): the compiler's reply, ok or not (e.g. IR dumps)."""
        return dict(self.compiler.call(req.op, **req.message()))

    def compile(self, req: CompileRequest) -> dict[str, CompiledKernel]:
        """Compile a "compile" request: a CompiledKernel per entry point (with no entries, the whole
        module under ""). Cached in memory and on disk by the request's content."""
        names = list(req.entries) or [""]
        key = req.key
        if all(f"{key}/{e}" in self.compiled for e in names):
            return {e: self.compiled[f"{key}/{e}"] for e in names}
        reply = self.cache.get_object("kernels", key)
        if reply is None:
            reply = self.call(req)
            if reply["ok"]:
                self.cache.put_object("kernels", key, reply)
        diags = parse_diagnostics(reply["diagnostics"], {req.what: req.line_offset})
        if not reply["ok"]:
            raise self.compile_error(req, diags)
        used: dict[str, frozenset[str] | None] = {e: None for e in names}
        if req.target not in ("cpp", "cuda") and req.entries and reply["reflection"].globals:
            cpp = req.retarget("cpp", tuple(self.backend.compile_options("cpp")))
            try:  # which globals each kernel touches, read off its C++ (cached; binary targets hide it)
                used = {e: k.used_globals for e, k in self.compile(cpp).items()}
            except SlangCompileError:
                pass  # e.g. barriers, which C++ lacks: then every global is required
        if len(self.compiled) > 512:  # old revisions are only ever needed again through the disk cache
            for old in list(self.compiled)[:256]:
                del self.compiled[old]
        out = {}
        for e in names:
            ck = CompiledKernel(f"{key}/{e}", e, req.target, reply["code"][e], reply["reflection"], req.what,
                                tuple(diags), req.module, req.source, tuple(n for _, n, _ in req.deps), used[e],
                                req.chain, req.digests)
            self.compiled[ck.key] = ck
            out[e] = ck
        return out

    def compile_error(self, req: CompileRequest, diags: list[Diagnostic]) -> SlangCompileError:
        sources = self.store.sources()
        sources[req.what] = req.source.split("\n", req.line_offset)[-1] if req.line_offset else req.source
        hint = ""
        if req.target == "cpp" and any(d.code == "E36107" for d in diags):
            hint = (" Slang's CPU target has no group barriers, atomics or wave operations (the notes "
                    "below name the construct): run this kernel with backend='vulkan' or 'cuda'.")
        deps = [self.store.by_name[n] for _, n, _ in req.deps if n in self.store.by_name]
        clash = [(e, d.shown) for e in req.entries for d in deps if e in d.names]
        if clash and any(d.code == "E38000" for d in diags):
            e, other = clash[0]
            hint = (f" {other} also defines `{e}`, and this cell uses other names of {other}, so Slang sees "
                    f"both `{e}` as overloads and cannot pick the entry point: rename one of them.")
        return SlangCompileError(f"{', '.join(req.entries) or req.what} did not compile for target {req.target}.{hint}",
                                 diags, sources)


def _check_keys(imports: Sequence[Cell], deps: Sequence[Cell]) -> tuple[str, ...]:
    """What a check's key takes of the cells it loads: the interfaces of its imports (each covers the
    cells whose declarations it exposes) and of any loaded cell that reaches every loader."""
    direct = {c.name for c in imports}
    return tuple(d.interface for d in deps if d.name in direct or d.reaches_loaders)


def _module_source(module: str, defines: tuple[tuple[str, str], ...], imports: Sequence[str], text: str,
                   what: str) -> ModuleSource:
    """A module as source for compilers that take source: its defines, its imports by their content
    names (sgl cannot reload a name with new source), then the text."""
    source = define_lines(defines) + "".join(f"import {m}; " for m in imports) + "\n" + text
    h = digest(source)
    return ModuleSource(f"{module}_{h[:16]}", source, f"{what}@{h[:8]}", what)
