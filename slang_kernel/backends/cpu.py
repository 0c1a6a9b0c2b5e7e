"""CPU backend: Slang's C++ output built by g++ (cached on disk), groups split across cores.

Slang's generated entry point `k(ComputeVaryingInput*, void* entryPointParams, void* globalParams)`
loops over a range of groups; we hand each thread a slice of the range (ctypes releases the GIL).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..cache import digest
from ..compiler.reflection import TypeInfo
from . import BackendUnavailable
from ._packing import Packer, ParameterError, StructPlan, buffer_array

if TYPE_CHECKING:
    from ..session import CompiledKernel, Session

__all__ = ["CpuBackend", "CpuBuildError", "UnsupportedOnCpu"]

PRELUDE = Path(__file__).with_name("cpu_prelude.h")
# -march=native: the build cache key includes this CPU's identity (see _cpu_identity).
CXXFLAGS = ("-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math",
            "-fPIC", "-shared", "-w", "-fno-strict-aliasing")
_UNSUPPORTED = [
    (re.compile(r"\bGroupMemoryBarrier\w*|\bAllMemoryBarrier\w*|\bDeviceMemoryBarrier\w*|_barrier\w*\("),
     "group barriers (GroupMemoryBarrierWithGroupSync and friends)"),
    (re.compile(r"\bInterlocked\w+|\batomic\w*\("), "atomics (Interlocked*)"),
    (re.compile(r"\bWave\w+\("), "wave intrinsics (Wave*)"),
]


class CpuBuildError(RuntimeError):
    """g++ rejected Slang's generated C++."""


class UnsupportedOnCpu(NotImplementedError):
    """The kernel uses something Slang's CPU target cannot run."""


class _Varying(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint32 * 3), ("end", ctypes.c_uint32 * 3)]



class CpuBackend:
    name = "cpu"
    target = "cpp"

    def __init__(self, session: "Session") -> None:
        self.cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if not self.cxx:
            raise BackendUnavailable("no C++ compiler found: install g++ (Debian: apt-get install g++)")
        self.session = session
        self.checked = False
        self.workers = max(1, session.threads or os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None
        self._libs: dict[str, tuple[ctypes.CDLL, Any]] = {}
        self._loaded: dict[tuple[str, bool], _Loaded] = {}
        self._lock = threading.Lock()
        self._version = subprocess.run([self.cxx, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
        self._prelude = PRELUDE.read_text()

    def describe(self) -> str:
        return f"g++ {self._version}, {self.workers} threads"

    def compile_options(self, target: str) -> tuple[str, ...]:
        return ()

    # -- build ------------------------------------------------------------------------------------

    def _flags(self) -> tuple[str, ...]:
        return (*CXXFLAGS, "-include", str(PRELUDE), *(("-DSK_CHECKED",) if self.checked else ()))

    def load(self, kernel: "CompiledKernel") -> "_Loaded":
        loaded = self._loaded.get((kernel.key, self.checked))
        if loaded is None:
            lib, fn = self._load(kernel)
            ep = kernel.entry_point
            pointer = _array_pointer
            loaded = _Loaded(lib, fn, "printf" in _body(kernel.code),
                             StructPlan(ep.uniforms, ep.params_size, np.ndarray, pointer),
                             StructPlan(kernel.reflection.globals, kernel.reflection.globals_size, np.ndarray, pointer))
            self._loaded[(kernel.key, self.checked)] = loaded
        return loaded

    def _load(self, kernel: "CompiledKernel") -> tuple[ctypes.CDLL, Any]:
        for pattern, what in _UNSUPPORTED:
            m = pattern.search(_body(kernel.code))
            if m:
                raise UnsupportedOnCpu(
                    f"{kernel.entry} uses {what} (`{m.group(0).rstrip('(')}`), which Slang's CPU target cannot run. "
                    "Run it on a GPU backend (Session(backend='vulkan') or 'cuda'), or restructure the kernel.")
        key = digest("cpu-so", self._version, _cpu_identity(), kernel.code, *self._flags(), self._prelude)
        with self._lock:
            hit = self._libs.get(key)
            if hit is None:
                path = self.session.cache.path("cpu", key, ".so")
                if not path.exists():
                    self._build(kernel, path)
                lib = ctypes.CDLL(str(path))
                fn = getattr(lib, kernel.entry)
                fn.argtypes = [ctypes.POINTER(_Varying), ctypes.c_void_p, ctypes.c_void_p]
                fn.restype = None
                hit = (lib, fn)
                self._libs[key] = hit
        return hit

    def _build(self, kernel: "CompiledKernel", path: Path) -> None:
        scratch = self.session.cache.scratch_dir()
        fd, src = tempfile.mkstemp(suffix=".cpp", dir=scratch)
        with os.fdopen(fd, "w") as f:
            f.write(kernel.code)
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
        if t.kind == "constant_buffer" and t.element is not None:
            inner = packer.encode(t.element, value, name)
            block = ctypes.create_string_buffer(inner, max(len(inner), 1))
            packer.keepalive.append(block)
            return ctypes.addressof(block).to_bytes(8, sys.byteorder)
        if t.is_buffer:
            arr, count = buffer_array(value, name, t)
            packer.keepalive.append(arr)
            return arr.ctypes.data.to_bytes(8, sys.byteorder) + count.to_bytes(8, sys.byteorder)
        raise ParameterError(
            f"parameter `{name}` is {t.name}: the CPU backend has no {t.shape or t.kind}; "
            "textures and samplers need Session(backend='vulkan') or 'cuda'.")

    def pack(self, kernel: "CompiledKernel", values: Mapping[str, Any]) -> tuple[Packer, bytearray, bytearray]:
        loaded = self.load(kernel)
        packer = Packer(self._bind)
        return packer, loaded.entry.pack(values, packer), loaded.globals.pack(values, packer)

    def dispatch(self, kernel: "CompiledKernel", groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        loaded = self.load(kernel)
        lib, fn = loaded.lib, loaded.fn
        packer = Packer(self._bind)
        entry, glob = loaded.entry.pack(values, packer), loaded.globals.pack(values, packer)
        e_buf = (ctypes.c_char * max(1, len(entry))).from_buffer(entry if entry else bytearray(1))
        g_buf = (ctypes.c_char * max(1, len(glob))).from_buffer(glob if glob else bytearray(1))
        slices = self._split(groups)
        report = None
        if self.checked:
            report = _BoundsReport.in_dll(lib, "sk_bounds_report")
            report.count = 0
        with _CaptureStdout(enabled=loaded.printf):
            if len(slices) == 1:
                _run(fn, slices[0], e_buf, g_buf)
            else:
                pool = self._executor()
                for f in [pool.submit(_run, fn, s, e_buf, g_buf) for s in slices]:
                    f.result()
        del packer
        if report is not None and report.count:
            from ..kernels import BoundsError

            raise BoundsError(kernel.entry, int(report.count), int(report.index), int(report.size))

    def _split(self, groups: tuple[int, int, int]) -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
        axis = max(range(3), key=groups.__getitem__)
        n = groups[axis]
        parts = min(self.workers, n)
        out = []
        for i in range(parts):
            lo, hi = n * i // parts, n * (i + 1) // parts
            start, end = [0, 0, 0], list(groups)
            start[axis], end[axis] = lo, hi
            out.append((tuple(start), tuple(end)))
        return out  # type: ignore[return-value]

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="slang-cpu")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@dataclasses.dataclass(frozen=True)
class _Loaded:
    lib: ctypes.CDLL
    fn: Any
    printf: bool
    entry: StructPlan
    globals: StructPlan


def _array_pointer(a: np.ndarray) -> int:
    return a.ctypes.data


class _BoundsReport(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("index", ctypes.c_uint64), ("size", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _cpu_identity() -> str:
    """Model and feature flags of this CPU: builds with -march=native must not travel to another."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))][:2]
        return "".join(lines)
    except OSError:
        import platform

        return platform.processor() or platform.machine()


def _run(fn: Any, s: tuple[tuple[int, int, int], tuple[int, int, int]], e_buf: Any, g_buf: Any) -> None:
    v = _Varying((ctypes.c_uint32 * 3)(*s[0]), (ctypes.c_uint32 * 3)(*s[1]))
    fn(ctypes.byref(v), ctypes.addressof(e_buf), ctypes.addressof(g_buf))


_USER_LINE = re.compile(r'#line \d+ "')


def _body(code: str) -> str:
    """The generated code after Slang's inlined prelude (which mentions every intrinsic): it starts
    at the first `#line N "path"` directive, which points into the user's cells."""
    m = _USER_LINE.search(code)
    return code[m.start():] if m else code


class _CaptureStdout:
    """Kernel printf writes to fd 1, which Jupyter does not show: route it to sys.stdout."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        if not self.enabled:
            return
        sys.stdout.flush()
        self._tmp = tempfile.TemporaryFile()
        self._saved = os.dup(1)
        os.dup2(self._tmp.fileno(), 1)

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        libc = ctypes.CDLL(None)
        libc.fflush(None)
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._tmp.seek(0)
        text = self._tmp.read().decode("utf-8", "replace")
        self._tmp.close()
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
