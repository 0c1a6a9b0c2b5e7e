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

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ._session_cells import CellResult, _Cells
from ._session_layouts import _Layouts
from ._session_requests import MODULE_DIR
from ._session_variants import _Variants
from .autodiff import SlangFunction
from .backends import Backend, BackendConfig, create_backend
from .cache import DiskCache, compiler_fingerprint, digest
from .cells import Cell
from .compiled import CompiledKernel
from .compiler.client import CompilerProcess
from .compiler.diagnostics import SlangCompileError, parse_diagnostics
from .finite import FiniteCheck
from .kernels import ComputeKernel

if TYPE_CHECKING:
    from .compare import Comparison

__all__ = ["CODE_TARGETS", "MODULE_DIR", "CellResult", "CompiledKernel", "Session"]

CODE_TARGETS = ("hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp")


class Session(_Cells, _Variants, _Layouts):
    """One persistent notebook session: every cell compiles into it, incrementally.

    backend: "cpu" | "vulkan" | "cuda" | "auto". options: extra slangc options for every
    compile (e.g. ["-O2"]); defines: preprocessor defines for every cell (see set_define). The
    compiler runs in its own process (started here, in the background), so a compiler crash costs
    one cell's error, never the session. threads/checked/timeout/isolate configure the backend
    (BackendConfig: checked=True reports out-of-range buffer indices, timeout= stops a dispatch after
    that many seconds, isolate=False runs CPU kernels in this process: lower overhead, not crash-safe;
    fast_math=True builds CPU kernels with -ffast-math: faster, no IEEE care for NaN/inf or ordering).
    check_finite=True: after every kernel call and `.bwd`, raise NonFiniteError for the first written
    buffer (or gradient) holding a NaN/Inf (slang_kernel.finite; per call: `k(..., check_finite=True)`).
    The parts live in sibling modules: _session_state (state, lookups), _session_requests (the one
    compile path), _session_cells (cells and revisions), _session_variants (kernel builds and
    specializations), _session_layouts (dtype); here: construction, kernels and functions, code and
    IR views, other backends, lifecycle.
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
        check_finite: bool = False,
    ) -> None:
        self.options = tuple(options)
        self._defines = {str(k): str(v) for k, v in (defines or {}).items()}
        self.cache = DiskCache(cache_dir, enabled=cache)
        self.fingerprint = digest(compiler_fingerprint(), *(p.read_bytes() for p in sorted(MODULE_DIR.glob("*.slang"))))
        self.config = BackendConfig(threads=threads, checked=checked, timeout=timeout, isolate=isolate, fast_math=fast_math,
                                    include_paths=(str(MODULE_DIR),), cache=self.cache)
        self.finite = FiniteCheck(check_finite)   # the NaN/Inf finder (slang_kernel.finite)
        self._compiler = compiler or CompilerProcess()
        self._compiler.start()
        self._cells: dict[str, Cell] = {}
        self._failed: dict[str, SlangCompileError] = {}
        self._counter = 0
        self._compiled: dict[str, CompiledKernel] = {}
        self._entries: dict[tuple[str, str], CompiledKernel] = {}
        self._variants: dict[tuple[str, tuple[str, ...]], Cell] = {}
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

    def function(self, name: str) -> SlangFunction:
        self.function_info(name)
        return SlangFunction(self, name)

    # -- views --------------------------------------------------------------------------------------

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
        from .ir import parse_ir
        from .ir_graph import to_graph

        return to_graph(parse_ir(self.ir(name)), **kwargs)

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
