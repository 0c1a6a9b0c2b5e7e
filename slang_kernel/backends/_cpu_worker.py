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
  {"op": "run", "so": PATH, "entry": NAME, "slices": [((x,y,z),(x,y,z)), ...], "threads": N,
   "params": bytes, "globals": bytes, "checked": bool, "flush": bool}
        -> {"ok": True, "bounds": (count, index, size, data_ptr) | None, "ms": float}
        |  {"error": TEXT, "kind": "load" | "run"}
  {"op": "ping"}                            -> {"pid": P}
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
        self.fns: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
        self.pool: ThreadPoolExecutor | None = None
        self.pool_size = 0

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

    def _fn(self, path: str, entry: str) -> tuple[Any, Any, Any]:
        hit = self.fns.get((path, entry))
        if hit is None:
            lib = ctypes.CDLL(path)
            fn = getattr(lib, entry)
            fn.argtypes = [ctypes.POINTER(_Varying), ctypes.c_void_p, ctypes.c_void_p]
            fn.restype = None
            try:
                report = _BoundsReport.in_dll(lib, "sk_bounds_report")
            except ValueError:
                report = None
            hit = self.fns[(path, entry)] = (lib, fn, report)
        return hit

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            _, fn, report = self._fn(msg["so"], msg["entry"])
        except (OSError, AttributeError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}", "kind": "load"}
        params = msg["params"] or b"\0"
        glob = msg["globals"] or b"\0"
        e_buf = ctypes.create_string_buffer(params, len(params))
        g_buf = ctypes.create_string_buffer(glob, len(glob))
        e_addr, g_addr = ctypes.addressof(e_buf), ctypes.addressof(g_buf)
        if report is not None:
            report.count = 0
        slices = msg["slices"]
        t0 = time.perf_counter()
        if len(slices) == 1:
            _run(fn, slices[0], e_addr, g_addr)
        else:
            threads = min(len(slices), int(msg.get("threads") or len(slices)))
            if self.pool is None or self.pool_size != threads:
                if self.pool is not None:
                    self.pool.shutdown(wait=True)
                self.pool = ThreadPoolExecutor(threads, thread_name_prefix="slang-cpu")
                self.pool_size = threads
            for f in [self.pool.submit(_run, fn, s, e_addr, g_addr) for s in slices]:
                f.result()
        ms = (time.perf_counter() - t0) * 1000
        if msg.get("flush"):
            _libc.fflush(None)
        bounds = None
        if report is not None and report.count:
            bounds = (int(report.count), int(report.index), int(report.size), int(report.data))
        return {"ok": True, "bounds": bounds, "ms": ms}


def _run(fn: Any, s: Any, e_addr: int, g_addr: int) -> None:
    v = _Varying((ctypes.c_uint32 * 3)(*s[0]), (ctypes.c_uint32 * 3)(*s[1]))
    fn(ctypes.byref(v), e_addr, g_addr)


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
