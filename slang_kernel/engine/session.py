"""Session: one notebook's Slang cells, compiled incrementally into one persistent session.

A small façade over the parts it holds (docs/architecture.md has the picture):

    CellStore      cell_store.py      the current revision of each cell, in order; lookups
    CompileService compile_service.py the one request builder, the compile cache, checks, variants
    KernelBuilds   kernel_builds.py   kernel builds, specializations, debugger variants, dtypes;
                                      the narrow services views are handed (protocols.py)
    CellChecks     checks.py          running a cell: its check, its imports, invalidation of later cells

Each cell revision is a frozen `Cell` whose digest covers its source, its options and defines and the
interfaces of the cells it imports (a body edit of an imported cell does not make a new revision of
its users: their blobs link the new body). Everything derived from cells records the digests it was
built from and is valid exactly while `is_current` says so: compiling an unrelated cell never
invalidates it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .autodiff import SlangFunction
from ..backends import Backend, BackendConfig, create_backend
from .. import hooks
from ..backends.registry import backend_names
from ..cache import DiskCache, compiler_fingerprint, digest
from .cell_store import CellStore
from .cells import Cell
from .checks import CellChecks, CellResult
from .compile_service import MODULE_DIR, CompileService
from ..compiled import CompiledKernel
from ..compiler.client import CompilerProcess
from ..compiler.diagnostics import SlangCompileError
from .finite import FiniteCheck
from .kernel_builds import KernelBuilds
from .kernels import ComputeKernel
from .protocols import CellLookup, Requests


__all__ = ["CODE_TARGETS", "MODULE_DIR", "CellResult", "CompiledKernel", "Session"]

CODE_TARGETS = ("hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp")


class Session:
    """One persistent notebook session: every cell compiles into it, incrementally.

    backend: "cpu" | "vulkan" | "cuda" | "auto". options: extra slangc options for every
    compile (e.g. ["-O2"]); defines: preprocessor defines for every cell (see set_define). The
    compiler runs in its own process (started here, in the background), so a compiler crash costs
    one cell's error, never the session. threads/checked/timeout/isolate configure the backend
    (BackendConfig: checked=True reports out-of-range buffer indices, timeout= stops a dispatch after
    that many seconds, isolate=False runs CPU kernels in this process: lower overhead, not crash-safe;
    fast_math=True builds CPU kernels with -ffast-math: faster, no IEEE care for NaN/inf or ordering).
    check_finite=True: after every kernel call and `.bwd`, raise NonFiniteError for the first written
    buffer (or gradient) holding a NaN/Inf (slang_kernel.engine.finite; per call: `k(..., check_finite=True)`).
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
        disk = DiskCache(cache_dir, enabled=cache)
        fingerprint = digest(compiler_fingerprint(), *(p.read_bytes() for p in sorted(MODULE_DIR.glob("*.slang"))))
        self.config = BackendConfig(threads=threads, checked=checked, timeout=timeout, isolate=isolate, fast_math=fast_math,
                                    include_paths=(str(MODULE_DIR),), cache=disk)
        """How the backend runs kernels (threads, checked, timeout, isolate, fast_math) and the compile cache."""
        self.finite = FiniteCheck(check_finite)   # the NaN/Inf finder (slang_kernel.engine.finite)
        self._compiler = compiler or CompilerProcess()
        self._compiler.start()
        self._replicas: dict[str, tuple[Session, tuple[Any, ...]]] = {}   # backend -> (replica, what it replays)
        self._shares_compiler = False  # a replica's compiler worker is its origin's (Session.replica)
        try:
            self.backend: Backend = create_backend(backend, self.config)
        except BaseException:
            if compiler is None:  # no backend, no session: do not leave the compiler we started running
                self._compiler.close()
            raise
        self._store = CellStore()
        self._service = CompileService(self._store, self._compiler, disk, fingerprint, tuple(options),
                                       {str(k): str(v) for k, v in (defines or {}).items()}, lambda: self.backend)
        self._builds = KernelBuilds(self._store, self._service, self.finite)   # handed to ComputeKernel & co.
        self._checks = CellChecks(self._store, self._service, self._builds)

    # -- what views are handed (read-only, typed by protocols.py) ------------------------------------

    @property
    def store(self) -> CellLookup:
        """The cells' current revisions, read only (a CellLookup): `digest(cell)`, `is_current(built)`,
        `failure(cell)` (the error of a cell's last run while its earlier revision still runs),
        `revision` (counts every change), `owner(name)`, `function_info(name)`, `names()`."""
        return self._store

    @property
    def compile_service(self) -> Requests:
        """Raw compiler requests through the session's one compile path and cache:
        `s.compile_service.compile(s.compile_service.request("compile", cell=..., target=...))`."""
        return self._service

    # -- cells --------------------------------------------------------------------------------------

    def run_cell(self, source: str, name: str | None = None, *, defines: Mapping[str, str] | None = None,
                 options: Sequence[str] = (), label: str | None = None) -> CellResult:
        """Compile one cell. Running a name again replaces that cell and recompiles its users.

        defines/options: for this cell only (on top of the session's). label: what diagnostics and
        messages call this revision when not its name (a front end re-running cell `In[2]` at prompt
        [7] keeps its name and place, labelled "In[7]"). A cell with errors raises
        SlangCompileError and changes nothing (views of the cell keep its last good revision;
        `store.failure(name)` holds the error until a good revision arrives).
        """
        return self._checks.run_cell(source, name, defines=defines, options=options, label=label)

    def remove_cell(self, name: str) -> None:
        """Forget a cell; later cells that used it are recompiled (and may break)."""
        self._checks.remove_cell(name)

    def set_define(self, name: str, value: str = "1") -> None:
        """A preprocessor define for every cell (each cell sees the defines whose names it mentions):
        the cells that mention it are re-checked now, and kernels built from them follow."""
        self._checks.set_define(name, value)

    @property
    def defines(self) -> dict[str, str]:
        """The session's defines (a copy: change them with set_define)."""
        return dict(self._service.defines)

    @property
    def cells(self) -> tuple[str, ...]:
        return self._store.cells

    def cell(self, name: str) -> Cell:
        """The current revision of a cell."""
        return self._store.cell(name)

    def kernels(self) -> list[str]:
        return self._store.kernels()

    def functions(self) -> list[str]:
        return self._store.functions()

    # -- kernels and functions ----------------------------------------------------------------------

    def kernel(self, name: str, *, specialize: Mapping[str, Any] | None = None,
               type_conformances: Sequence[Sequence[Any]] = ()) -> ComputeKernel:
        """The compute kernel `name`. specialize: values of its generic parameters (`void k<T : IFoo,
        let N : int>`: {"T": "MyType", "N": 4}) and of `extern struct`/`extern static const`
        declarations of its cells (link-time specialization); type_conformances: (interface, type, id)
        triples linked for dynamic dispatch (`createDynamicObject`, interface-typed parameters).
        Each specialization is compiled once and cached like any kernel (see specialize.py)."""
        self._store.owner(name, kernel=True)
        if not specialize and not type_conformances:
            return ComputeKernel(self._builds, name)
        return ComputeKernel(self._builds, name, self._builds.specialization(name, specialize, type_conformances))

    def function(self, name: str) -> SlangFunction:
        """The Slang function `name`, callable from Python (see SlangFunction)."""
        return self._builds.function(name)

    def dtype(self, type_name: str) -> Any:
        """The numpy dtype of Slang type `type_name` as a StructuredBuffer element on the current
        backend's target (see KernelBuilds.dtype)."""
        return self._builds.dtype(type_name)

    # -- views --------------------------------------------------------------------------------------

    def code(self, name: str, target: str = "hlsl") -> str:
        """Generated code of a kernel or function for one target: hlsl, glsl, spirv-asm, metal, wgsl, cuda, cpp."""
        if target not in CODE_TARGETS and target != "spirv":
            raise ValueError(f"unknown target {target!r}; choose one of {', '.join(CODE_TARGETS)}")
        if name in self.kernels():
            return self._builds.compile_entry(name, target).code
        return self.function(name).code(target)

    def reflection(self, target: str | None = None) -> dict[str, Any]:
        """JSON-able reflection of every kernel: parameters, types and layouts for one target."""
        target = target or self.backend.target
        return {k: self._builds.compile_entry(k, target).reflection.to_json() for k in self.kernels()}

    def ir(self, name: str) -> str:
        """Slang IR (IModule::disassemble) of the cell that defines `name` (or of the cell `name`)."""
        return self._builds.ir(name)

    def ir_graph(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """Graph data of `name`'s IR for the IRGraph widget (slang_kernel.views.ir_graph, through hooks)."""
        graph: dict[str, Any] = hooks.view(hooks.IR_GRAPH)(self.ir(name), **kwargs)
        return graph

    # -- configuration ------------------------------------------------------------------------------

    # -- backend ------------------------------------------------------------------------------------

    def reset_device(self) -> None:
        """Start the backend afresh (the CPU worker process, or a new device): use after a kernel left it
        in a bad state. Cells stay compiled; arrays you hold are untouched."""
        self.backend.reset()
        self._store.revision += 1

    def set_backend(self, name: str) -> None:
        """Switch backend; cells stay compiled (kernels are rebuilt for the new target on first use)."""
        new = create_backend(name, self.config)
        old, self.backend = self.backend, new
        self._store.revision += 1
        old.close()

    def replica(self, backend: str) -> "Session":
        """This session's cells on another backend (for `compare`): a Session that replays the current
        revisions in order (names, defines, options, session defines), sharing this session's compiler
        worker and compile cache. Cached per backend, brought up to date on each call when cells
        changed, closed with this session. A cell that does not compile there is left out (its kernels
        then say so). Raises BackendUnavailable when that backend does not work here."""
        if backend == self.backend.name:
            return self
        cells = self._store.by_name
        state = (tuple((c.name, c.digest) for c in cells.values()), tuple(sorted(self.defines.items())), self._store.revision)
        got = self._replicas.get(backend)
        if got is not None and got[1] == state:
            return got[0]
        cfg = self.config
        r = got[0] if got is not None else Session(
            backend, cache_dir=str(cfg.cache.root), cache=cfg.cache.enabled, options=self._service.options,
            defines=self.defines, compiler=self._compiler, threads=cfg.threads, checked=cfg.checked,
            timeout=cfg.timeout, isolate=cfg.isolate)
        r._shares_compiler = True
        if list(r.cells) != [n for n in cells if n in r.cells]:  # moved cells: replay from the start
            for name in reversed(r.cells):
                r.remove_cell(name)
        for name in [n for n in r.cells if n not in cells]:
            r.remove_cell(name)
        for k, v in self.defines.items():
            if r.defines.get(k) != v:
                r.set_define(k, v)
        for c in cells.values():
            mine = r.cell(c.name) if c.name in r.cells else None
            if mine is not None and (mine.source, mine.own_defines, mine.options) == (c.source, c.own_defines, c.options):
                continue
            try:
                r.run_cell(c.source, c.name, defines=dict(c.own_defines), options=c.options, label=c.label or None)
            except SlangCompileError:
                pass  # broken here as there (a dependency's edit): its kernels report it when asked for
        self._replicas[backend] = (r, state)
        return r

    def compare(self, kernel: str, backends: Sequence[str] = backend_names(), *, threads: Any = None,
                groups: Any = None, **params: Any) -> Any:
        """Run `kernel` on each of `backends` that works here (each on its own copy of the inputs) and
        compare its output buffers: max absolute and ULP differences, counts, first differing indices
        (a slang_kernel.views.compare.Comparison). Backends that cannot run it are listed with the reason."""
        return hooks.view(hooks.COMPARE)(self, kernel, backends, threads=threads, groups=groups, **params)

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
                f"{len(self.cells)} cells, {len(self.kernels())} kernels, {len(self.functions())} functions>")
