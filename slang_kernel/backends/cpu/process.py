"""The CPU backend's dispatch plumbing: where one dispatch's buffers live (Context: in this process,
shared in place, or staged for the worker), the worker process itself, and routing in-process kernel
printf (fd 1) to sys.stdout."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ... import _ipc
from ..common import shm as _shm
from ..common.packing import Packer

__all__ = ["CaptureStdout", "Context", "NeedStaging", "WorkerProcess"]

WORKER = Path(__file__).with_name("worker.py")


class NeedStaging(Exception):
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


class Context:
    """Where the buffers of one dispatch live. In-process (proc None): the arrays themselves. For the
    worker: shared arrays in place, others copied into the staging segment (written ones copied back)."""

    def __init__(self, proc: "WorkerProcess | None", staging: "_shm.Segment | None") -> None:
        self.proc = proc
        self.staging = staging
        self.cursor = 0
        self.buffers: list[tuple[int, int, str]] = []        # (kernel-side address, nbytes, parameter)
        self.copies: list[tuple[np.ndarray, int, int]] = []  # (user array, staging offset, nbytes) to copy back
        self.staged: list[str] = []
        self.in_place: list[str] = []
        self._seen: dict[tuple[int, int], int] = {}
        self._blocks: list[Any] = []

    def pointer(self, a: np.ndarray, name: str, writable: bool) -> int:
        nbytes = a.nbytes
        if self.proc is None:
            addr = a.ctypes.data
        else:
            key = (a.ctypes.data, nbytes)
            seen = self._seen.get(key)
            if seen is not None:
                addr = seen
            else:
                seg = _shm.segment_of(a)
                if seg is not None:
                    addr = self.proc.addr_of(seg) + (a.ctypes.data - seg.addr)
                    (self.in_place if writable else []).append(name)
                else:
                    off = self._alloc(nbytes)
                    assert self.staging is not None
                    if nbytes:
                        ctypes.memmove(self.staging.addr + off, a.ctypes.data, nbytes)
                    addr = self.proc.addr_of(self.staging) + off
                    if writable:
                        self.copies.append((a, off, nbytes))
                        self.staged.append(name)
                self._seen[key] = addr
        self.buffers.append((addr, nbytes, name))
        return addr

    def place(self, data: bytes, name: str, packer: Packer) -> int:
        if self.proc is None:
            block = ctypes.create_string_buffer(data, max(len(data), 1))
            packer.keepalive.append(block)
            return ctypes.addressof(block)
        off = self._alloc(max(len(data), 1))
        assert self.staging is not None
        ctypes.memmove(self.staging.addr + off, data, len(data))
        return self.proc.addr_of(self.staging) + off

    def _alloc(self, nbytes: int) -> int:
        off = self.cursor
        end = off + -(-max(nbytes, 1) // _shm.ALIGN) * _shm.ALIGN
        if self.staging is None or end > self.staging.size:
            raise NeedStaging(self._needed(end))
        self.cursor = end
        return off

    def _needed(self, end: int) -> int:
        return end * 2  # packing restarts with a staging segment at least this big

    def copy_back(self) -> None:
        assert self.staging is not None or not self.copies
        for a, off, nbytes in self.copies:
            if nbytes:
                ctypes.memmove(a.ctypes.data, self.staging.addr + off, nbytes)  # type: ignore[union-attr]

    def name_of(self, addr: int) -> str | None:
        for start, nbytes, name in self.buffers:
            if start <= addr < start + max(nbytes, 1):
                return name
        return None

    def describe_buffers(self) -> str:
        parts = []
        if self.staged:
            parts.append(f"{', '.join(f'`{n}`' for n in dict.fromkeys(self.staged))} unchanged (the kernel "
                         "wrote a copy)")
        if self.in_place:
            parts.append(f"shared-memory {', '.join(f'`{n}`' for n in dict.fromkeys(self.in_place))} may be "
                         "partially written")
        if not parts:
            return "no buffer passed to this call was written"
        return "buffers passed to this call: " + "; ".join(parts)


class WorkerProcess(_ipc.WorkerProcess):
    """The worker process (see _ipc.WorkerProcess), which shared segments it has mapped (and where),
    and the file its stdout (kernel printf) goes to."""

    def __init__(self) -> None:
        self._out = tempfile.TemporaryFile(prefix="slang-cpu-out-")
        self._out_pos = 0
        super().__init__((sys.executable, "-S", str(WORKER)), stdout=self._out.fileno())
        self.mapped: dict[int, int] = {}     # segment id -> the worker's address for it
        self.unmap: list[int] = []
        self.in_flight = False

    def start(self) -> None:
        super().start()
        self.mapped = {}
        self.unmap = []
        self.in_flight = False

    def close(self, wait: float = 2.0) -> None:
        super().close(wait)
        self._out.close()

    def forget(self, seg_id: int) -> None:
        if self.mapped.pop(seg_id, None) is not None:
            self.unmap.append(seg_id)

    def addr_of(self, seg: "_shm.Segment") -> int:
        addr = self.mapped.get(seg.id)
        if addr is None:
            self._send({"op": "map", "id": seg.id, "size": seg.size})
            assert self.channel is not None
            self.channel.send_fds([seg.fd])
            reply: _ipc.MapReply = self._recv(None)
            if "error" in reply:
                raise OSError(f"the CPU worker could not map shared memory: {reply['error']}")
            addr = self.mapped[seg.id] = reply["addr"]
            weakref.finalize(seg, self._dead_segment, seg.id)
        return addr

    def _dead_segment(self, seg_id: int) -> None:
        self.forget(seg_id)

    def request(self, msg: _ipc.CpuRun, timeout: float | None) -> _ipc.RunReply:
        if self.unmap:
            ids, self.unmap = self.unmap, []
            self._send({"op": "unmap", "ids": ids})
        self._send(msg)
        reply: _ipc.RunReply = self._recv(None if timeout is None else time.monotonic() + timeout)
        return reply

    def _send(self, msg: _ipc.CpuRequest) -> None:
        assert self.channel is not None
        self.in_flight = True
        self.channel.send(msg)
        if msg["op"] in ("unmap", "exit"):  # no reply
            self.in_flight = False

    def _recv(self, deadline: float | None) -> Any:
        assert self.channel is not None
        reply = self.channel.recv(deadline)
        self.in_flight = False
        return reply

    def forward_output(self) -> None:
        """Kernel printf output (the worker's stdout is a file we own) goes to sys.stdout."""
        fd = self._out.fileno()
        size = os.fstat(fd).st_size
        if size > self._out_pos:
            text = os.pread(fd, size - self._out_pos, self._out_pos).decode("utf-8", "replace")
            self._out_pos = size
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()
        if self._out_pos > (1 << 20):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            self._out_pos = 0


class CaptureStdout:
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
