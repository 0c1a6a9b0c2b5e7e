"""Shared memory for the CPU worker: memfd segments mapped in this process and in the worker.

A Segment is an anonymous memfd (no name in /dev/shm, so nothing leaks if a process dies) mapped
with libc mmap; `array()` gives numpy arrays over it whose base keeps the mapping alive. The worker
maps the same fd (passed over the socket) and reports its own address; pointers packed for the
worker are `worker_base + (p - local_base)`.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import weakref
from typing import Any

import numpy as np

__all__ = ["ALIGN", "Segment", "SharedMemoryArrays", "empty", "map_fd", "segment_of", "shared", "unmap"]

ALIGN = 64
PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1
MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_ids = itertools.count(1)


def map_fd(fd: int, size: int) -> int:
    addr: int | None = _libc.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
    if addr is None or addr == MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap of {size} bytes failed: {os.strerror(err)}")
    return addr


def unmap(addr: int, size: int) -> None:
    _libc.munmap(addr, size)


class Segment:
    """One memfd mapping. Close it (or drop every array over it) to free the memory."""

    def __init__(self, size: int, name: str = "slang-kernel") -> None:
        self.size = max(ALIGN, -(-int(size) // 4096) * 4096)
        self.id = next(_ids)
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, self.size)
            self.addr = map_fd(self.fd, self.size)
        except BaseException:
            os.close(self.fd)
            raise
        self._closed = False
        self._finalizer = weakref.finalize(self, _release, self.fd, self.addr, self.size)

    @property
    def end(self) -> int:
        return self.addr + self.size

    def array(self, shape: Any, dtype: Any, offset: int = 0) -> np.ndarray:
        """A numpy array over bytes [offset, offset + nbytes) of this segment (it keeps the segment alive)."""
        dt = np.dtype(dtype)
        dims: tuple[int, ...] = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"{nbytes} bytes at offset {offset} do not fit a segment of {self.size}")
        raw = np.asarray(_View(self, self.addr + offset, nbytes))
        out: np.ndarray = raw.view(dt).reshape(dims)
        return out

    def bytes_at(self, offset: int, n: int) -> np.ndarray:
        arr: np.ndarray = np.ctypeslib.as_array((ctypes.c_ubyte * n).from_address(self.addr + offset))
        return arr

    def close(self) -> None:
        self._finalizer()


def _release(fd: int, addr: int, size: int) -> None:
    unmap(addr, size)
    os.close(fd)


class _View:
    """__array_interface__ holder: an ndarray's .base, holding its Segment."""

    def __init__(self, seg: Segment, addr: int, nbytes: int) -> None:
        self.segment = seg
        self.__array_interface__ = {"data": (addr, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


def segment_of(arr: np.ndarray) -> Segment | None:
    """The Segment an array's memory lies in (arrays made by Segment.array and views of them)."""
    base: Any = arr
    while base is not None:
        if isinstance(base, _View):
            return base.segment
        base = getattr(base, "base", None)
    return None


def empty(shape: Any, dtype: Any = np.float32) -> np.ndarray:
    """An array in a segment of its own: a worker maps it and uses it in place (a fresh memfd reads
    as zeros, so this is also `zeros`)."""
    dt = np.dtype(dtype)
    dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    return Segment(max(n, 1)).array(shape, dt)


def shared(a: Any, dtype: Any = None) -> np.ndarray:
    """A shared-memory copy of `a`."""
    src = np.asarray(a, dtype=dtype)
    out = empty(src.shape, src.dtype)
    out[...] = src
    return out


class SharedMemoryArrays:
    """The "shared_arrays" capability (backends.SharedArrays) of a backend whose worker process maps the
    caller's shared memory (cpu, isolated Vulkan): arrays made here go to a dispatch without a copy."""

    def empty(self, shape: Any, dtype: Any = np.float32) -> np.ndarray:
        """An array in shared memory: kernels read and write it in place (no copy to the worker)."""
        return empty(shape, dtype)

    def zeros(self, shape: Any, dtype: Any = np.float32) -> np.ndarray:
        return empty(shape, dtype)  # a fresh memfd reads as zeros

    def shared(self, a: Any, dtype: Any = None) -> np.ndarray:
        """A shared-memory copy of `a` (use it for buffers you pass to many dispatches)."""
        return shared(a, dtype)
