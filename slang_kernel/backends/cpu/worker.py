"""The CPU worker: runs compiled Slang kernels (g++-built .so files) outside the notebook's process.

Started by slang_kernel.backends.cpu (process.py) as `python -S worker.py SOCKET_FD PARENT_PID` (by path, with
the standard library only: slang_kernel._ipc is imported as a file, not through the package, so the
worker serves within tens of milliseconds). If a kernel crashes (SIGSEGV, SIGABRT, stack overflow),
only this process dies; the parent reports it and starts another. Nothing here is the only copy of
anything: buffers live in shared memory owned by the parent, .so files in the parent's cache.

Protocol: slang_kernel._ipc frames on a Unix stream socket (the messages are _ipc.CpuRequest):
  map {id, size} + the segment's fd          -> {"addr": A} | {"error": TEXT}   map a shared segment
  unmap {ids}                                -> (no reply)                      drop segments
  run {so, entry, groups, threads, params, globals, flush}
        -> {"ok": True, "bounds": (count, index, size, data_ptr) | None, "ms": float}
        |  {"error": TEXT, "kind": "load" | "run"}
  ping                                       -> {"pid": P, "libraries": N}
  exit (or the end of the socket)            -> the worker exits
Loaded kernel libraries are kept for the last KEEP_LIBRARIES .so files used (older ones are
unloaded), so that a long session of edits, each a new .so, does not grow the worker without limit.
The dispatch itself (:class:`Kernel`, :class:`Runner`) is shared with the in-process path
(``Session(isolate=False)``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING or __package__:
    from ... import _ipc
else:  # started by path: import _ipc as a file, without the package (and its numpy)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    import _ipc

    del sys.path[0]

PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1
#: Kernel libraries kept loaded in the worker (least recently used unloaded first): enough for every
#: kernel of a notebook at once; an unloaded one costs a dlopen (~1 ms) when it is used again.
KEEP_LIBRARIES = 64

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.fflush.argtypes = [ctypes.c_void_p]
_libc.dlopen.restype = ctypes.c_void_p
_libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.dlsym.restype = ctypes.c_void_p
_libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_libc.dlclose.argtypes = [ctypes.c_void_p]
_libc.dlerror.restype = ctypes.c_char_p


class _Varying(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint32 * 3), ("end", ctypes.c_uint32 * 3)]


class _BoundsReport(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("index", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("data", ctypes.c_uint64)]


# Calls through CFUNCTYPE pointers release the GIL, as CDLL functions do.
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Varying), ctypes.c_void_p, ctypes.c_void_p)
_SHARE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def dlopen(path: str) -> int:
    """A handle of the library (OSError with dlerror's text if it cannot be loaded). Plain dlopen, not
    ctypes.CDLL: a CDLL builds Python classes per library that a dlclose cannot give back (~1 KB per
    library loaded and unloaded, measured)."""
    handle = _libc.dlopen(os.fsencode(path), os.RTLD_NOW | os.RTLD_LOCAL)
    if not handle:
        raise OSError((_libc.dlerror() or b"dlopen failed").decode("utf-8", "replace"))
    return int(handle)


def _symbol(handle: int, name: str) -> int:
    addr = _libc.dlsym(handle, name.encode())
    if not addr:
        raise AttributeError(f"the kernel library has no symbol {name}")
    return int(addr)


class Kernel:
    """One entry point of a g++-built kernel library, with the helpers our prelude adds to it.
    `handle` (from dlopen) is owned by the caller; without one the library is opened for good."""

    def __init__(self, path: str, entry: str, handle: int | None = None) -> None:
        self.handle = handle if handle is not None else dlopen(path)
        self.addr = _symbol(self.handle, entry)
        self.fn = _ENTRY(self.addr)
        self.share = _SHARE(_symbol(self.handle, "sk_run_share"))
        report = _libc.dlsym(self.handle, b"sk_bounds_report")
        self.report: _BoundsReport | None = _BoundsReport.from_address(report) if report else None


def split(groups: tuple[int, int, int], threads: int) -> tuple[int, int]:
    """(axis, parts): the group range is cut along its longest axis into several slices per thread
    (of equally long axes the outer one, so that a slice of an image is whole rows)."""
    axis = max(range(3), key=lambda a: (groups[a], a))
    return axis, min(threads * 8 if threads > 1 else 1, groups[axis])


class Runner:
    """Runs a dispatch on a persistent pool of N threads. Each makes one call into the kernel library
    (``sk_run_share``), which takes slices until none are left. The calling thread only waits: when it
    computed too, the scheduler often woke the helper on the caller's core, and a 4 ms kernel took 7."""

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None
        self.pool_size = 0

    def run(self, k: Kernel, groups: tuple[int, int, int], threads: int, e_addr: int, g_addr: int) -> None:
        axis, parts = split(groups, threads)
        if parts <= 1:
            v = _Varying((ctypes.c_uint32 * 3)(0, 0, 0), (ctypes.c_uint32 * 3)(*groups))
            k.fn(ctypes.byref(v), e_addr, g_addr)
            return
        n = min(threads, parts)
        counter = ctypes.c_uint32(0)
        args = (k.addr, (ctypes.c_uint32 * 3)(*groups), axis, parts, ctypes.byref(counter), e_addr, g_addr)
        for f in [self._pool(n).submit(k.share, *args) for _ in range(n)]:
            f.result()

    def _pool(self, size: int) -> ThreadPoolExecutor:
        if self.pool is None or self.pool_size < size:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
            self.pool = ThreadPoolExecutor(size, thread_name_prefix="slang-cpu")
            self.pool_size = size
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None


class Libraries:
    """The kernel libraries this worker has loaded, least recently used first. Past `keep` the oldest
    is unloaded (dlclose): every edit of a kernel is a new .so, and a thousand edits must not keep a
    thousand libraries (and their thread-local scratch) mapped."""

    def __init__(self, keep: int = KEEP_LIBRARIES) -> None:
        self.keep = keep
        self._loaded: OrderedDict[str, tuple[int, dict[str, Kernel]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._loaded)

    def kernel(self, path: str, entry: str) -> Kernel:
        got = self._loaded.get(path)
        if got is None:
            got = self._loaded[path] = (dlopen(path), {})
            while len(self._loaded) > self.keep:
                self.unload(next(iter(self._loaded)))
        else:
            self._loaded.move_to_end(path)
        handle, kernels = got
        k = kernels.get(entry)
        if k is None:
            try:
                k = kernels[entry] = Kernel(path, entry, handle)
            except AttributeError:  # not the library it should be: let a rebuilt file load afresh
                self.unload(path)
                raise
        return k

    def unload(self, path: str) -> None:
        """dlclose one library. Only between dispatches: no thread may be running its code."""
        got = self._loaded.pop(path, None)
        if got is not None:
            _libc.dlclose(got[0])


class Worker:
    def __init__(self, channel: _ipc.Channel) -> None:
        self.channel = channel
        self.segments: dict[int, tuple[int, int]] = {}
        self.libraries = Libraries()
        self.runner = Runner()

    def serve(self) -> None:
        channel = self.channel
        while True:
            try:
                msg = cast(_ipc.CpuRequest, channel.recv())
            except EOFError:
                return
            if msg["op"] == "run":
                channel.send(self.run(msg))
            elif msg["op"] == "map":
                channel.send(self.map(msg, channel.recv_fds(1)[0]))
            elif msg["op"] == "unmap":
                for i in msg["ids"]:
                    got = self.segments.pop(i, None)
                    if got is not None:
                        _libc.munmap(got[0], got[1])
            elif msg["op"] == "ping":
                channel.send({"pid": os.getpid(), "libraries": len(self.libraries)})
            elif msg["op"] == "exit":
                return

    def map(self, msg: _ipc.CpuMap, fd: int) -> _ipc.MapReply:
        addr = _libc.mmap(None, msg["size"], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        os.close(fd)
        if addr in (None, ctypes.c_void_p(-1).value):
            return {"error": f"mmap failed: {os.strerror(ctypes.get_errno())}"}
        self.segments[msg["id"]] = (addr, msg["size"])
        return {"addr": addr}

    def run(self, msg: _ipc.CpuRun) -> _ipc.RunReply:
        try:
            k = self.libraries.kernel(msg["so"], msg["entry"])
        except (OSError, AttributeError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}", "kind": "load"}
        params = msg["params"] or b"\0"
        glob = msg["globals"] or b"\0"
        e_buf = ctypes.create_string_buffer(params, len(params))
        g_buf = ctypes.create_string_buffer(glob, len(glob))
        if k.report is not None:
            k.report.count = 0
        t0 = time.perf_counter()
        groups = msg["groups"]
        self.runner.run(k, (groups[0], groups[1], groups[2]), int(msg.get("threads") or 1),
                        ctypes.addressof(e_buf), ctypes.addressof(g_buf))
        ms = (time.perf_counter() - t0) * 1000
        if msg.get("flush"):
            _libc.fflush(None)
        bounds = None
        if k.report is not None and k.report.count:
            r = k.report
            bounds = (int(r.count), int(r.index), int(r.size), int(r.data))
        return {"ok": True, "bounds": bounds, "ms": ms}


def main() -> None:
    channel = _ipc.connect_to_parent()
    if channel is None:
        return
    try:  # line-buffered kernel printf: what was printed before a crash still reaches the cell
        stdout = ctypes.c_void_p.in_dll(_libc, "stdout")
        _libc.setvbuf(stdout, None, 1, 1 << 16)  # _IOLBF
    except Exception:
        pass
    Worker(channel).serve()


if __name__ == "__main__":
    main()
