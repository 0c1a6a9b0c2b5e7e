"""How the notebook's process talks to its two workers (the compiler, the CPU kernel runner).

Both workers are separate processes so that a crash costs one cell's error, not the notebook. They
share one transport: a Unix socket pair, whole messages framed as an 8-byte little-endian length and
a pickle, file descriptors passed beside them (SCM_RIGHTS), and a death turned into a readable reason.

Standard library only and no package-relative imports: the CPU worker is started by path
(``python backends/cpu/worker.py``) and imports this file directly, so that it serves in tens of
milliseconds instead of paying for the whole package (numpy and all).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Literal, Mapping, NamedTuple, Sequence, TypedDict, Union

if TYPE_CHECKING:
    import subprocess  # imported where used: the workers themselves never need it (~4 ms of their start)

__all__ = [
    "MAX_FRAME",
    "Channel",
    "ChannelClosed",
    "CompilerReply",
    "CompilerRequest",
    "CpuExit",
    "CpuMap",
    "CpuPing",
    "CpuRequest",
    "CpuRun",
    "CpuUnmap",
    "CrashReason",
    "FramingError",
    "MapReply",
    "RunReply",
    "TruncatedFrame",
    "WorkerOwner",
    "WorkerProcess",
    "connect_to_parent",
    "frame",
]

_HEADER = struct.Struct("<Q")
#: A length above this is not a message but a corrupt or out-of-step stream (the largest real ones,
#: serialized IR of big cells, are megabytes).
MAX_FRAME = 1 << 36
_CHUNK = 1 << 20  # most bytes asked of one recv (it allocates what it is asked for)
_PR_SET_PDEATHSIG = 1


# -- framing -----------------------------------------------------------------------------------------


class ChannelClosed(EOFError):
    """The other end is gone (it exited or crashed); an EOFError, so `except EOFError` sees it."""


class TruncatedFrame(ChannelClosed):
    """The other end died in the middle of a message: what arrived is not a whole frame."""


class FramingError(ValueError):
    """The stream carries something that is not a frame (a wild length, an undecodable pickle):
    the two ends are out of step and the worker must be restarted."""


def frame(msg: object) -> bytes:
    """One message as it travels: the length of the pickle, then the pickle."""
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class Channel:
    """One end of a worker's socket, carrying whole messages.

    `recv` takes an optional deadline (time.monotonic()) after which it raises TimeoutError; without
    one it blocks, as a worker waiting for its next request does. A failed send or receive leaves the
    stream out of step: the caller restarts the worker rather than reusing the channel.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, msg: object) -> None:
        try:
            self.sock.sendall(frame(msg))
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed(f"the worker is gone ({exc.strerror})") from None

    def recv(self, deadline: float | None = None) -> Any:
        head = self._read(_HEADER.size, deadline, "header")
        (n,) = _HEADER.unpack(head)
        if n > MAX_FRAME:
            raise FramingError(f"a frame announced {n} bytes (more than {MAX_FRAME}): the stream is corrupt")
        body = self._read(n, deadline, "frame")
        try:
            return pickle.loads(body)
        except Exception as exc:
            raise FramingError(f"could not decode a {n}-byte frame ({type(exc).__name__}: {exc})") from None

    def _read(self, n: int, deadline: float | None, part: str) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise TimeoutError(f"no reply within the deadline ({got} of {n} {part} bytes arrived)")
            try:
                chunk = self.sock.recv(min(n - got, _CHUNK))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if got == 0 and part == "header":
                    raise ChannelClosed("the worker closed its end of the socket (it exited or crashed)")
                article = "the" if part == "header" else "a"
                raise TruncatedFrame(
                    f"the stream ended {got} bytes into {article} {n}-byte {part}: the worker died while sending")
            if len(chunk) == n:  # the usual case: one recv
                return chunk
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def send_fds(self, fds: Sequence[int]) -> None:
        """File descriptors travel as one byte carrying SCM_RIGHTS, after the message announcing them."""
        try:
            socket.send_fds(self.sock, [b"F"], list(fds))
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed(f"the worker is gone ({exc.strerror})") from None

    def recv_fds(self, count: int) -> list[int]:
        data, fds, _, _ = socket.recv_fds(self.sock, 1, count)
        if not data:
            raise ChannelClosed("the other end closed its socket before sending file descriptors")
        return list(fds)

    def close(self) -> None:
        self.sock.close()


# -- typed messages ----------------------------------------------------------------------------------
# Every request is a dict with "op"; these say which fields each one carries.


class _Op(TypedDict):
    op: str


class CompilerRequest(_Op, total=False):
    """A request to the compiler worker; op is ping, check, check_batch, disassemble, compile, forget or abort."""

    module: str
    path: str
    source: str
    deps: list[tuple[str, str, str]]     # (module, path, digest) of the cells to load, in load order
    blobs: dict[str, bytes]              # digest -> serialized IR, only those the worker lacks
    forget: list[str]                    # digests to drop before anything else (replaced revisions)
    digests: list[str]                   # op "forget": the digests to drop
    options: Sequence[str]
    defines: Mapping[str, str | None]
    entry_points: list[str]
    target: str
    profile: str
    reflect: bool
    ir: bool
    items: list[dict[str, Any]]          # op "check_batch": check requests, each with the `digest` to keep its blob under
    digest: str
    retire_later: bool                   # a check_batch item: its request is destroyed after the reply


class CompilerReply(TypedDict, total=False):
    """{"result": ...} on success; {"error": text} for a Python-level failure ("fatal": the worker
    could not start the compiler at all, and exits)."""

    result: Any
    error: str
    fatal: bool


class CpuMap(TypedDict):
    """Map a shared segment; its fd follows (send_fds). Reply: MapReply."""

    op: Literal["map"]
    id: int
    size: int


class CpuUnmap(TypedDict):
    """Drop mapped segments. No reply."""

    op: Literal["unmap"]
    ids: list[int]


class CpuRun(TypedDict):
    """One dispatch of entry `entry` of the kernel library `so`. Reply: RunReply."""

    op: Literal["run"]
    so: str
    entry: str
    groups: tuple[int, int, int]
    threads: int
    params: bytes
    globals: bytes
    flush: bool


class CpuPing(TypedDict):
    """Reply: {"pid": P, "libraries": number of kernel libraries loaded}."""

    op: Literal["ping"]


class CpuExit(TypedDict):
    """Stop serving (closing the socket does the same). No reply."""

    op: Literal["exit"]


CpuRequest = Union[CpuMap, CpuUnmap, CpuRun, CpuPing, CpuExit]


class MapReply(TypedDict, total=False):
    addr: int
    error: str


class RunReply(TypedDict, total=False):
    """ok, bounds (count, index, size, data pointer) of out-of-range accesses or None, ms; or error
    with kind "load" (the library could not be loaded: rebuild it) or "run"."""

    ok: bool
    bounds: tuple[int, int, int, int] | None
    ms: float
    error: str
    kind: Literal["load", "run"]


# -- crash reasons -----------------------------------------------------------------------------------

_SIGNAL_TEXT = {
    "SIGABRT": "aborted with SIGABRT",
    "SIGFPE": "killed by SIGFPE: an arithmetic fault such as an integer division by zero",
    "SIGILL": "killed by SIGILL: an illegal instruction",
    "SIGKILL": "killed by SIGKILL: from outside, or by the out-of-memory killer",
    "SIGTERM": "terminated by SIGTERM",
}


class CrashReason(NamedTuple):
    """Why a worker died, from its exit status; str() is the readable reason ("killed by SIGSEGV",
    "aborted with SIGABRT", "ran out of memory: ...", "exited with status 3"). A stack overflow is a
    SIGSEGV like any other bad memory access: the exit status cannot tell them apart.
    (A NamedTuple, not a dataclass: importing dataclasses would cost the CPU worker ~10 ms of start.)"""

    returncode: int | None     # Popen.returncode: -N for signal N; None while it has not exited
    out_of_memory: bool = False

    @property
    def signal(self) -> str:
        """The signal's name ("SIGSEGV"), or "" when the worker exited by itself or has not exited."""
        code = self.returncode
        if code is None or code >= 0:
            return ""
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"

    def __str__(self) -> str:
        code = self.returncode
        if code is None:
            return "no reply, and it did not exit"
        if code >= 0:
            return "exited" if code == 0 else f"exited with status {code}"
        name = self.signal
        if name == "SIGKILL" and self.out_of_memory:
            return "ran out of memory: the out-of-memory killer stopped it"
        return _SIGNAL_TEXT.get(name, f"killed by {name}")


def _oom_kills() -> int:
    """The system's count of out-of-memory kills (Linux /proc/vmstat); 0 where it cannot be read."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


# -- the process -------------------------------------------------------------------------------------


class WorkerProcess:
    """A worker process on one end of a socket pair: started in the background (the first request
    simply waits in the socket until it serves), replaced after it dies, closed.

    `command` starts it (e.g. ``[sys.executable, "-S", path_of_script]``); the socket's fd and this
    process's pid are appended, and the worker calls connect_to_parent() to get its Channel. `lock`
    serializes the users of one worker; subclasses that keep per-worker state reset it by
    overriding start().
    """

    def __init__(self, command: Sequence[str], *, stdout: int | None = None) -> None:
        self.command = tuple(command)
        self.stdout = stdout
        self.proc: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.restarts = 0
        self.lock = threading.RLock()
        self._oom_kills = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Spawn the worker; returns at once."""
        import subprocess

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen(
                [*self.command, str(child.fileno()), str(os.getpid())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=self.stdout, close_fds=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.channel = Channel(parent)
        self._oom_kills = _oom_kills()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure(self) -> None:
        """Start the worker if there is none; replace it if it died (killed from outside, out of memory)."""
        if self.proc is None:
            self.start()
        elif self.proc.poll() is not None:
            self.restart()

    def death(self, wait: float = 5.0) -> CrashReason:
        """Why the worker died (call after its socket closed): waits up to `wait` s for the exit status."""
        import subprocess

        proc = self.proc
        if proc is None:
            return CrashReason(None)
        try:
            code = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return CrashReason(None)
        return CrashReason(code, out_of_memory=code == -signal.SIGKILL and _oom_kills() > self._oom_kills)

    def kill(self) -> None:
        """Stop the worker now (SIGKILL): for a stream out of step or a request that must not finish."""
        proc, channel, self.proc, self.channel = self.proc, self.channel, None, None
        if channel is not None:
            channel.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def close(self, wait: float = 2.0) -> None:
        """Let the worker exit by itself (end of its input), then make sure it has."""
        import subprocess

        with self.lock:
            proc, channel = self.proc, self.channel
            if channel is not None:
                channel.close()
                self.channel = None
            if proc is not None and proc.poll() is None:
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
            self.kill()


class WorkerOwner:
    """A backend whose work runs in the WorkerProcess `_proc` (None: in this process): which process it
    is and how often it was replaced, as tests and status lines ask every such backend."""

    _proc: WorkerProcess | None

    @property
    def worker_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def restarts(self) -> int:
        return self._proc.restarts if self._proc is not None else 0


def connect_to_parent(argv: Sequence[str] | None = None) -> Channel | None:
    """Worker side of WorkerProcess: the Channel on the socket named in argv; None if the parent is
    already gone. The worker ignores SIGINT (Jupyter interrupts the whole process group, and it is
    the parent's to decide what an interrupt stops) and dies with its parent (PR_SET_PDEATHSIG)."""
    argv = sys.argv if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the end of the socket still stops the worker
        pass
    if len(argv) > 2 and os.getppid() != int(argv[2]):  # the parent died before PDEATHSIG was set
        return None
    return Channel(socket.socket(fileno=int(argv[1])))
