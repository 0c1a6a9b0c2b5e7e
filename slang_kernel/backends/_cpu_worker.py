"""The CPU worker: runs compiled Slang kernels (g++-built .so files) outside the notebook's process.

Started by slang_kernel.backends.cpu as `python _cpu_worker.py SOCK_FD` (by path: standard library
only, so it starts in ~20 ms). If a kernel crashes (SIGSEGV, SIGABRT, stack overflow), only this
process dies; the parent reports it and starts another. Nothing here is the only copy of anything:
buffers live in shared memory owned by the parent, .so files in the parent's cache.

Protocol (a Unix stream socket; every message is an 8-byte little-endian length + a pickled dict;
file descriptors travel separately as one byte carrying SCM_RIGHTS right after the message that
announces them):
  {"op": "map", "id": N, "size": S} + fd    -> {"addr": A}       map a shared segment
  {"op": "unmap", "ids": [N, ...]}          -> (no reply)        drop segments
  {"op": "run", "so": PATH, "entry": NAME, "groups": (x, y, z), "threads": N,
   "params": bytes, "globals": bytes, "flush": bool}
        -> {"ok": True, "bounds": (count, index, size, data_ptr) | None, "ms": float}
        |  {"error": TEXT, "kind": "load" | "run"}
  {"op": "ping"}                            -> {"pid": P}
The dispatch itself (:class:`Kernel`, :class:`Runner`) is shared with the in-process path
(``Session(isolate=False)``).

The worker ignores SIGINT (Jupyter signals the whole process group on interrupt; the parent decides
what to do) and dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import socket
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.fflush.argtypes = [ctypes.c_void_p]


class _Varying(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint32 * 3), ("end", ctypes.c_uint32 * 3)]


class _BoundsReport(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("index", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("data", ctypes.c_uint64)]


class Kernel:
    """One entry point of a g++-built kernel library, with the helpers our prelude adds to it."""

    def __init__(self, path: str, entry: str) -> None:
        self.lib = ctypes.CDLL(path)  # ctypes releases the GIL during calls
        self.fn = getattr(self.lib, entry)
        self.fn.argtypes = [ctypes.POINTER(_Varying), ctypes.c_void_p, ctypes.c_void_p]
        self.fn.restype = None
        self.addr = ctypes.cast(self.fn, ctypes.c_void_p).value
        self.share = self.lib.sk_run_share
        self.share.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.share.restype = None
        try:
            self.report: _BoundsReport | None = _BoundsReport.in_dll(self.lib, "sk_bounds_report")
        except ValueError:
            self.report = None


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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("<Q", len(data)) + data)


class Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.segments: dict[int, tuple[int, int]] = {}
        self.kernels: dict[tuple[str, str], Kernel] = {}
        self.runner = Runner()

    def serve(self) -> None:
        while True:
            try:
                (n,) = struct.unpack("<Q", _recv_exact(self.sock, 8))
                msg = pickle.loads(_recv_exact(self.sock, n))
            except (EOFError, ConnectionError):
                return
            op = msg["op"]
            if op == "run":
                _send(self.sock, self.run(msg))
            elif op == "map":
                _, fds, _, _ = socket.recv_fds(self.sock, 1, 4)
                addr = _libc.mmap(None, msg["size"], PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0)
                os.close(fds[0])
                if addr in (None, ctypes.c_void_p(-1).value):
                    _send(self.sock, {"error": f"mmap failed: {os.strerror(ctypes.get_errno())}"})
                else:
                    self.segments[msg["id"]] = (addr, msg["size"])
                    _send(self.sock, {"addr": addr})
            elif op == "unmap":
                for i in msg["ids"]:
                    got = self.segments.pop(i, None)
                    if got is not None:
                        _libc.munmap(got[0], got[1])
            elif op == "ping":
                _send(self.sock, {"pid": os.getpid()})
            elif op == "exit":
                return

    def _kernel(self, path: str, entry: str) -> Kernel:
        k = self.kernels.get((path, entry))
        if k is None:
            k = self.kernels[(path, entry)] = Kernel(path, entry)
        return k

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            k = self._kernel(msg["so"], msg["entry"])
        except (OSError, AttributeError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}", "kind": "load"}
        params = msg["params"] or b"\0"
        glob = msg["globals"] or b"\0"
        e_buf = ctypes.create_string_buffer(params, len(params))
        g_buf = ctypes.create_string_buffer(glob, len(glob))
        if k.report is not None:
            k.report.count = 0
        t0 = time.perf_counter()
        self.runner.run(k, tuple(msg["groups"]), int(msg.get("threads") or 1),
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
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if len(sys.argv) > 2 and os.getppid() != int(sys.argv[2]):  # the parent is already gone
            return
    except Exception:
        pass
    try:  # line-buffered kernel printf: what was printed before a crash still reaches the cell
        stdout = ctypes.c_void_p.in_dll(_libc, "stdout")
        _libc.setvbuf(stdout, None, 1, 1 << 16)  # _IOLBF
    except Exception:
        pass
    sock = socket.socket(fileno=int(sys.argv[1]))
    Worker(sock).serve()


if __name__ == "__main__":
    main()
