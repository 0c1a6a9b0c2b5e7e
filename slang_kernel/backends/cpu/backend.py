"""CPU backend: Slang's C++ output built by g++ (cached on disk), groups split across cores.

Slang's generated entry point `k(ComputeVaryingInput*, void* entryPointParams, void* globalParams)`
loops over a range of groups; each thread takes slices of the range (``worker.Runner``, shared by
the worker process and the in-process path).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ... import _ipc
from ...cache import digest
from ...compiler.reflection import TypeInfo
from .. import BackendConfig, DispatchTiming
from ..common import shm as _shm
from ...compiled import CompiledKernel
from ...errors import (BackendUnavailable, BoundsError, CpuBuildError, KernelCrash, KernelInterrupted, KernelTimeout,
                      UnsupportedOnCpu)
from ..common import bounds as _bounds
from . import textures as textures
from .textures import CpuSampler, CpuTexture
from . import simd as _cpu_simd
from .build import CXXFLAGS, TYPED_AS_STRUCTURED, UNSUPPORTED, body as user_code, cpu_identity, looks_like_so
from .process import CaptureStdout, Context, NeedStaging, WorkerProcess
from .worker import Kernel, Runner
from ..common.packing import Packer, ParameterError, StructPlan, buffer_array, fast_encoder


__all__ = ["CpuBackend", "CpuBuildError", "UnsupportedOnCpu"]

PRELUDE = Path(__file__).with_name("cpu_prelude.h")



STAGING_KEEP = 256 << 20  # a staging segment larger than this is given back after the dispatch


def create(config: BackendConfig) -> "CpuBackend":
    return CpuBackend(config)


class CpuBackend(_shm.SharedMemoryArrays, _ipc.WorkerOwner):
    """Kernels run in a worker process by default (Session(isolate=True)): a crash, an endless loop
    or Ctrl-C costs one cell's error, never the notebook. Buffers reach the worker through shared
    memory: arrays from `empty`/`zeros`/`shared` are used in place; other numpy arrays are copied
    into a reused shared staging segment and the written ones copied back after a successful run.
    Session(isolate=False) runs kernels in this process (lower overhead, no protection)."""

    name = "cpu"
    target = "cpp"
    gpu = False

    capabilities = frozenset({"shared_arrays", "textures", "timing", "kernel_paths"})

    def __init__(self, config: BackendConfig | None = None) -> None:
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if not cxx:
            raise BackendUnavailable("no C++ compiler found: install g++ (Debian: apt-get install g++)")
        self.cxx: str = cxx
        self.config = config = config or BackendConfig()
        self.cache = config.cache
        self.checked = config.checked
        self.isolate = config.isolate
        self.timeout = config.timeout
        self.workers = max(1, config.threads or os.cpu_count() or 1)
        self._runner = Runner()
        self._kernels: dict[tuple[str, str], Kernel] = {}
        self._loaded: dict[tuple[str, bool], _Loaded] = {}
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._tls = threading.local()
        self._version = subprocess.run([self.cxx, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
        self._prelude = PRELUDE.read_text()
        self._staging: _shm.Segment | None = None
        self._proc: WorkerProcess | None = WorkerProcess() if self.isolate else None
        if self._proc is not None:
            self._proc.start()  # in the background: ~30 ms until it serves

    def describe(self) -> str:
        where = "isolated worker process" if self.isolate else "in-process"
        return f"g++ {self._version}, {self.workers} threads, {where}" + (", bounds-checked" if self.checked else "")

    def compile_options(self, target: str) -> tuple[str, ...]:
        """Slang's C++ target silently drops every access to a typed Buffer<T>/RWBuffer<T> (2026.12),
        while its (RW)StructuredBuffer<T> has the very same C++ layout ({T* data; size_t count}):
        kernels are compiled with the typed names meaning the structured ones."""
        return TYPED_AS_STRUCTURED if target == "cpp" else ()

    # -- textures (see textures) -------------------------------------------------------------

    def texture(self, array_or_shape: Any, dtype: Any = None, *, dims: int = 2) -> CpuTexture:
        """A texture in shared memory from a (W, C) / (H, W, C) / (D, H, W, C) array or a shape (+ dtype,
        default float32; zero-filled): kernels read and write it in place, `.numpy()` copies it out."""
        if isinstance(array_or_shape, np.ndarray) or (
                not isinstance(array_or_shape, (int, tuple, list)) and hasattr(array_or_shape, "__array__")):
            arr = np.asarray(array_or_shape, dtype=dtype)
            return CpuTexture(arr.shape, arr.dtype, arr, dims)
        shape = (array_or_shape,) if isinstance(array_or_shape, int) else tuple(array_or_shape)
        return CpuTexture(shape, np.dtype(dtype or np.float32), None, dims)

    def sampler(self, spec: Any = None) -> CpuSampler:
        """A SamplerState: None/"linear", "point"/"nearest", or {"filter": ..., "address": "wrap"|"clamp"}."""
        return textures.sampler(spec)

    # -- build ------------------------------------------------------------------------------------

    def _flags(self) -> tuple[str, ...]:
        return (*CXXFLAGS, "-include", str(PRELUDE), *(("-DSK_CHECKED",) if self.checked else ()),
                *(("-ffast-math",) if self.config.fast_math else ()))

    def _vector_flags(self) -> tuple[str, ...]:
        """The vector build (see simd.py): this CPU's vector width, its g++ options, the masked accessors."""
        return (*self._flags(), *_cpu_simd.isa().flags, *_cpu_simd.VECTOR_FLAGS, "-include", str(_cpu_simd.SIMD_HEADER))

    def path(self, kernel: CompiledKernel) -> str:
        """Which path the kernel runs: "simd (avx2, 8 lanes)" or "scalar: <why>" (builds it if needed)."""
        return self.load(kernel).path_desc

    def load(self, kernel: CompiledKernel) -> "_Loaded":
        checked = self.checked
        loaded = self._loaded.get((kernel.key, checked))
        if loaded is None:
            t0 = time.perf_counter()
            try:
                path, entry, desc = self._build_cached(kernel)
            except KeyboardInterrupt:   # g++ runs into a temporary file: the cache keeps nothing half-built
                elapsed = time.perf_counter() - t0
                raise KernelInterrupted(
                    f"{kernel.entry} interrupted after {elapsed:.1f} s while g++ built it; nothing ran and "
                    "the session is unchanged (run it again to build it).", kernel.entry, elapsed) from None
            ep = kernel.entry_point
            loaded = _Loaded(str(path), entry, "printf" in user_code(kernel.code),
                             self._plan(ep.uniforms, ep.params_size),
                             self._plan(kernel.reflection.globals, kernel.reflection.globals_size), desc)
            self._loaded[(kernel.key, checked)] = loaded
        return loaded

    def _plan(self, fields: Any, size: int) -> StructPlan:
        plan = StructPlan(fields, size, np.ndarray, _array_pointer)
        # Per-field pointers: the dispatch context knows where each buffer lives (in this process,
        # or staged/shared for the worker) and which parameter it is (for bounds reports).
        plan.fields = [(f, fast_encoder(f.type, np.ndarray, self._pointer_for(f.name, f.type.writable))
                        if fast is not None else None) for f, fast in plan.fields]
        return plan

    def _pointer_for(self, name: str, writable: bool) -> Callable[[np.ndarray], int]:
        tls = self._tls

        def pointer(a: np.ndarray) -> int:
            ctx: Context = tls.ctx
            return ctx.pointer(a, name, writable)
        return pointer

    def _build_cached(self, kernel: CompiledKernel) -> tuple[Path, str, str]:
        """The kernel's library, the entry to call and the path it takes: the vector build where g++
        vectorises its lane loop, else the scalar one (see simd.py)."""
        for pattern, what in UNSUPPORTED:
            m = pattern.search(user_code(kernel.code))
            if m:
                raise UnsupportedOnCpu(
                    f"{kernel.entry} uses {what} (`{m.group(0).rstrip('(')}`), which Slang's CPU target cannot run. "
                    "Run it on a GPU backend (Session(backend='vulkan') or 'cuda'), or restructure the kernel.")
        code = textures.prepare(kernel.code)   # textures as plain data (see textures)
        ep = kernel.entry_point
        desc = ""
        body, flags = user_code(code), self._vector_flags()
        inputs = (self._prelude, _cpu_simd.SIMD_HEADER.read_text(), textures.header())
        # the plain lane loop first; where g++ did not vectorise it, the body's loops run masked
        for masked in (False, True):
            tr = _cpu_simd.translate(code, body, kernel.entry, ep.numthreads, ep.params_size,
                                     kernel.reflection.globals_size, kernel.source, masked=masked)
            if tr.blocked:   # (masked: the body has no loop this rewrite handles; the plain reason stays)
                desc = desc or f"scalar: {tr.blocked}"
                break
            with self._lock:
                rt = _cpu_simd.runtime(self.cxx, self._version, self.cache)
                vkey = digest("cpu-so-simd", self._version, cpu_identity(), tr.source, *flags, *inputs, str(rt))
                vpath, why = _cpu_simd.build(self.cxx, self.cache, vkey, tr, flags, rt)
            if vpath is not None:
                return vpath, tr.entry, why
            desc = f"{desc}; {why.removeprefix('scalar: ')}" if desc else why
        key = digest("cpu-so", self._version, cpu_identity(), kernel.code, *self._flags(), self._prelude,
                     textures.header())
        with self._lock:
            path = self.cache.path("cpu", key, ".so")
            if not self.cache.writable:  # read-only cache: build into the private scratch folder
                path = self.cache.scratch_dir() / f"{key}.so"
            if not looks_like_so(path):
                self._build(kernel, path)
        return path, kernel.entry, desc

    def _load(self, loaded: "_Loaded") -> Kernel:
        """dlopen in this process (the in-process path only)."""
        with self._lock:
            k = self._kernels.get((loaded.path, loaded.entry))
            if k is None:
                k = self._kernels[(loaded.path, loaded.entry)] = Kernel(loaded.path, loaded.entry)
        return k

    def _build(self, kernel: CompiledKernel, path: Path) -> None:
        scratch = self.cache.scratch_dir()
        fd, src = tempfile.mkstemp(suffix=".cpp", dir=scratch)
        with os.fdopen(fd, "w") as f:
            f.write(textures.prepare(kernel.code))   # textures as plain data (see textures)
        tmp_so = src[:-4] + ".so"
        try:
            proc = subprocess.run([self.cxx, *self._flags(), src, "-o", tmp_so], capture_output=True, text=True)
            if proc.returncode != 0:
                raise CpuBuildError(
                    f"g++ could not build the C++ Slang generated for {kernel.entry} ({kernel.cell}):\n"
                    + proc.stderr[-3000:])
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp_so, path)
        finally:
            for p in (src, tmp_so):
                if os.path.exists(p):
                    os.unlink(p)

    # -- dispatch ---------------------------------------------------------------------------------

    def _bind(self, name: str, t: TypeInfo, value: Any, packer: Packer) -> bytes:
        """Resources in Slang's C++ layout: a ConstantBuffer<T> or ParameterBlock<T> is a pointer to
        its T (packed here, resources inside it bound recursively; the value is a dict, nested dicts
        for nested structs), a buffer is {T* data; size_t count}."""
        ctx: Context = self._tls.ctx
        if t.kind in ("constant_buffer", "parameter_block") and t.element is not None:
            inner = packer.encode(t.element, value, name)
            return ctx.place(inner, name, packer).to_bytes(8, sys.byteorder)
        if t.is_buffer:
            arr, count = buffer_array(value, name, t)
            packer.keepalive.append(arr)
            return ctx.pointer(arr, name, bool(t.writable)).to_bytes(8, sys.byteorder) + count.to_bytes(8, sys.byteorder)
        if t.is_texture:
            return textures.bind_texture(name, t, value, lambda a, w: _kept(packer, a, ctx.pointer(a, name, w)),
                                              lambda data: ctx.place(data, name, packer))
        if t.kind == "sampler":
            return textures.bind_sampler(value, lambda data: ctx.place(data, name, packer))
        if t.kind == "resource" and t.shape == "texture_buffer":
            raise ParameterError(
                f"parameter `{name}` is {t.name}, declared in a cell this kernel imports: Slang's CPU target drops "
                "typed-buffer accesses there. Declare it as (RW)StructuredBuffer<T> (the same data), or run on "
                "Session(backend='vulkan') or 'cuda'.")
        raise ParameterError(
            f"parameter `{name}` is {t.name}: the CPU backend has no {t.shape or t.kind}; "
            "run it on Session(backend='vulkan') or 'cuda'.")

    def _pack(self, loaded: "_Loaded", values: Mapping[str, Any], ctx: "Context") -> tuple[Packer, bytearray, bytearray]:
        self._tls.ctx = ctx
        try:
            packer = Packer(self._bind)
            return packer, loaded.params.pack(values, packer), loaded.globals.pack(values, packer)
        finally:
            self._tls.ctx = None

    def pack(self, kernel: CompiledKernel, values: Mapping[str, Any]) -> tuple[Packer, bytearray, bytearray]:
        """The parameter bytes of a dispatch, with this process's pointers (for inspection)."""
        return self._pack(self.load(kernel), values, Context(None, None))

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any],
                 marks: dict[str, float] | None = None) -> None:
        loaded = self.load(kernel)
        if marks is not None:
            marks["start"] = time.perf_counter()
        if self._proc is None:
            return self._dispatch_here(kernel, loaded, groups, values, marks)
        with self._run_lock:
            return self._dispatch_worker(kernel, loaded, groups, values, marks)

    def dispatch_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                       values: Mapping[str, Any]) -> DispatchTiming:
        """A dispatch split by the wall clock: packing and copying inputs to shared memory, the run
        inside the worker (or this process), copying outputs back (the first call's build is in none)."""
        m: dict[str, float] = {}
        self.dispatch(kernel, groups, values, m)
        ran = m.get("run_ms", (m["ran"] - m["bound"]) * 1000)
        return DispatchTiming((m["bound"] - m["start"]) * 1000, ran, (m["read"] - m["ran"]) * 1000, False,
                              "wall clock in the CPU worker" if self._proc is not None else "wall clock")

    def _dispatch_here(self, kernel: CompiledKernel, loaded: "_Loaded", groups: tuple[int, int, int],
                       values: Mapping[str, Any], marks: dict[str, float] | None = None) -> None:
        try:
            k = self._load(loaded)
        except OSError:  # a damaged .so in the cache (dlopen refused it): rebuild it once
            try:
                os.unlink(loaded.path)
            except OSError:
                pass
            self._build_cached(kernel)
            k = self._load(loaded)
        ctx = Context(None, None)
        packer, entry, glob = self._pack(loaded, values, ctx)
        if marks is not None:
            marks["bound"] = time.perf_counter()
        e_buf = (ctypes.c_char * max(1, len(entry))).from_buffer(entry if entry else bytearray(1))
        g_buf = (ctypes.c_char * max(1, len(glob))).from_buffer(glob if glob else bytearray(1))
        report = k.report
        assert report is not None
        report.count = 0
        with CaptureStdout(enabled=loaded.printf):
            self._runner.run(k, groups, self.workers, ctypes.addressof(e_buf), ctypes.addressof(g_buf))
        if marks is not None:
            marks["ran"] = marks["read"] = time.perf_counter()
        del packer
        if report.count:
            self._bounds_error(kernel, ctx, (report.count, report.index, report.size, report.data))

    def _bounds_error(self, kernel: CompiledKernel, ctx: "Context", report: tuple[int, int, int, int]) -> None:
        """Out-of-range accesses happened (and were made harmless): an error when checked, else a warning."""

        count, index, size, data = (int(x) for x in report)
        buffer = ctx.name_of(data)
        if buffer is None:
            buffer = "a local array" if data else None
        _bounds.report(BoundsError(kernel.entry, count, index, size, buffer), self.checked)

    def _dispatch_worker(self, kernel: CompiledKernel, loaded: "_Loaded", groups: tuple[int, int, int],
                         values: Mapping[str, Any], marks: dict[str, float] | None = None) -> None:
        proc = self._proc
        assert proc is not None
        proc.ensure()
        need = sum(v.nbytes + _shm.ALIGN for v in values.values()
                   if isinstance(v, np.ndarray) and _shm.segment_of(v) is None)
        if need and (self._staging is None or self._staging.size < need):
            self._grow_staging(need)
        ctx = None
        try:
            for _ in range(16):
                ctx = Context(proc, self._staging)
                try:
                    packer, entry, glob = self._pack(loaded, values, ctx)
                    break
                except NeedStaging as more:
                    self._grow_staging(more.nbytes)
            else:  # pragma: no cover
                raise RuntimeError("could not size the staging buffer")
        except BaseException:
            if proc.in_flight:  # interrupted while talking to the worker: the stream is out of step
                proc.restart()
            raise
        assert ctx is not None
        if marks is not None:
            marks["bound"] = time.perf_counter()
        msg: _ipc.CpuRun = {"op": "run", "so": loaded.path, "entry": loaded.entry,
                            "groups": (groups[0], groups[1], groups[2]), "threads": self.workers,
                            "params": bytes(entry), "globals": bytes(glob), "flush": loaded.printf}
        t0 = time.perf_counter()
        try:
            reply = proc.request(msg, timeout=self.timeout)
            if reply.get("kind") == "load":  # a damaged .so in the cache: rebuild it once
                try:
                    os.unlink(loaded.path)
                except OSError:
                    pass
                self._build_cached(kernel)
                reply = proc.request(msg, timeout=self.timeout)
        except BaseException as exc:
            self._after_failure(kernel, ctx, exc, time.perf_counter() - t0)
            raise  # _after_failure raises; this is for KeyboardInterrupt outside a request
        finally:
            if loaded.printf or not proc.alive():
                proc.forward_output()
        if "error" in reply:
            raise RuntimeError(f"the CPU worker could not run {kernel.entry}: {reply['error']}")
        if marks is not None:
            marks["ran"] = time.perf_counter()
            if isinstance(reply.get("ms"), float):
                marks["run_ms"] = float(reply["ms"])
        ctx.copy_back()
        if marks is not None:
            marks["read"] = time.perf_counter()
        del packer
        if self._staging is not None and self._staging.size > STAGING_KEEP:
            self._drop_staging()
        bounds = reply.get("bounds")
        if bounds:
            self._bounds_error(kernel, ctx, bounds)

    def _after_failure(self, kernel: CompiledKernel, ctx: "Context", exc: BaseException, elapsed: float) -> None:

        proc = self._proc
        assert proc is not None
        state = ctx.describe_buffers()
        if isinstance(exc, (EOFError, ConnectionError, BrokenPipeError)):
            how = proc.death()
            proc.restart()
            raise KernelCrash(
                f"{kernel.entry} crashed ({how}) after {elapsed:.2f} s; the CPU worker was restarted and every "
                f"cell, kernel and buffer of the session is still there; {state}. A crash on the CPU usually "
                "means memory outside a buffer (a pointer, a huge local array or deep recursion overflowing the "
                "stack); Session(checked=True) reports out-of-range buffer indices.",
                kernel.entry, how.signal or str(how)) from None
        if isinstance(exc, TimeoutError):
            proc.restart()
            raise KernelTimeout(
                f"{kernel.entry} did not finish within {self.timeout:g} s (Session(timeout=...)): it was stopped "
                f"and the CPU worker restarted; {state}.", kernel.entry, elapsed) from None
        if isinstance(exc, KeyboardInterrupt):
            proc.restart()
            raise KernelInterrupted(
                f"{kernel.entry} interrupted after {elapsed:.1f} s; the CPU worker was restarted; {state}.",
                kernel.entry, elapsed) from None
        proc.restart()  # anything else mid-request: the stream is out of step

    def _grow_staging(self, nbytes: int) -> None:
        old = self._staging.size if self._staging is not None else 0
        self._drop_staging()
        self._staging = _shm.Segment(max(nbytes + (nbytes >> 3), 2 * old, 1 << 20), "slang-kernel-staging")

    def _drop_staging(self) -> None:
        seg, self._staging = self._staging, None
        if seg is not None:
            if self._proc is not None:
                self._proc.forget(seg.id)
            seg.close()

    def forget(self, keys: list[str]) -> None:
        """Drop the loaded kernels of replaced revisions (the worker bounds its libraries itself)."""
        gone = set(keys)
        with self._lock:
            for k in [k for k in self._loaded if k[0] in gone]:
                del self._loaded[k]

    def reset(self) -> None:
        """Restart the worker process (kills a running kernel); compiled kernels stay cached."""
        if self._proc is not None:
            with self._proc.lock:
                self._proc.restart()

    def close(self) -> None:
        self._runner.close()
        if self._proc is not None:
            self._proc.close()
        self._drop_staging()


@dataclasses.dataclass(frozen=True)
class _Loaded:
    path: str       # the .so (built here, loaded by the worker or by _load)
    entry: str      # the exported entry point
    printf: bool
    params: StructPlan
    globals: StructPlan
    path_desc: str = "scalar"   # which path it takes (CpuBackend.path)


def _kept(packer: Packer, a: np.ndarray, addr: int) -> int:
    packer.keepalive.append(a)   # a converted copy lives until the dispatch ends
    return addr


def _array_pointer(a: np.ndarray) -> int:
    return a.ctypes.data
