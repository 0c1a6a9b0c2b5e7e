"""Client side of the compiler worker: spawn, talk, and restart after a crash."""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from typing import Any, Mapping

from .diagnostics import SlangCompilerCrash

__all__ = ["CompilerProcess", "CompilerUnavailable"]


class CompilerUnavailable(RuntimeError):
    """The compiler worker could not start (missing or wrong slangpy wheel, ...)."""


class CompilerProcess:
    """One persistent compiler worker; restarted on demand after it dies.

    Blobs (serialized cell IR) are owned by the caller; the client remembers which ones the
    current worker already holds and sends only the others, so a restart costs one resend.
    """

    def __init__(self, timeout: float = 300.0) -> None:
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent: set[str] = set()
        self._lock = threading.Lock()
        self.restarts = 0

    # -- process management ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now (it takes ~0.4 s to create the Slang global session)."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "slang_kernel.compiler._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
        )
        self._sent = set()
        return self._proc

    def close(self) -> None:
        with self._lock:
            self._kill()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        self._sent = set()
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except Exception:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:
            pass

    # -- requests ----------------------------------------------------------------------------

    def call(self, op: str, *, what: str, blobs: Mapping[str, bytes] | None = None, **fields: Any) -> Any:
        """Send one request; `what` names the cell for the crash message."""
        with self._lock:
            proc = self._ensure()
            msg = dict(fields, op=op)
            if blobs:
                msg["blobs"] = {k: v for k, v in blobs.items() if k not in self._sent}
            data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
            try:
                assert proc.stdin is not None
                proc.stdin.write(struct.pack("<Q", len(data)) + data)
                proc.stdin.flush()
                reply = self._read(proc)
            except BaseException as exc:
                # Crash, timeout or KeyboardInterrupt mid-request: the stream is out of step.
                code = proc.poll()
                self._kill()
                self.restarts += 1
                if isinstance(exc, (EOFError, BrokenPipeError)):
                    raise SlangCompilerCrash(self._crash_message(what, code)) from None
                if isinstance(exc, TimeoutError):
                    raise SlangCompilerCrash(
                        f"the Slang compiler did not finish {what} within {self.timeout:.0f} s and was "
                        "restarted; the cell is unchanged. Simplify the cell or raise the timeout."
                    ) from None
                raise
            if blobs:
                self._sent.update(msg.get("blobs", {}))
            if "error" in reply:
                if reply.get("fatal"):
                    self._kill()
                    raise CompilerUnavailable(reply["error"])
                raise RuntimeError(f"compiler worker failed on {what}: {reply['error']}")
            return reply["result"]

    def _read(self, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        head = self._read_exact(fd, 8)
        (n,) = struct.unpack("<Q", head)
        return pickle.loads(self._read_exact(fd, n))

    def _read_exact(self, fd: int, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _crash_message(what: str, code: int | None) -> str:
        how = ""
        if code is not None and code < 0:
            import signal

            try:
                how = f" ({signal.Signals(-code).name})"
            except ValueError:
                how = f" (signal {-code})"
        return (
            f"the Slang compiler crashed while compiling {what}{how}. This is a bug in Slang, "
            "not in your session: the compiler was restarted and every other cell still works. "
            "Rewrite this cell (e.g. simplify the construct on it) to work around it."
        )
