"""Client side of the compiler worker: spawn, talk, and restart after a crash."""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Mapping, cast

from .. import _ipc
from .diagnostics import SlangCompilerCrash

__all__ = ["CompilerProcess", "CompilerUnavailable"]

# -m, not by path: the worker imports the package's compiler modules (the reflection dataclasses it
# returns must unpickle as slang_kernel.compiler.reflection's).
_COMMAND = (sys.executable, "-m", "slang_kernel.compiler._worker")


class CompilerUnavailable(RuntimeError):
    """The compiler worker could not start (missing or wrong slangpy wheel, ...)."""


class _Worker(_ipc.WorkerProcess):
    """The worker and which blobs it holds (a new worker holds none)."""

    def __init__(self) -> None:
        super().__init__(_COMMAND)
        self.sent: set[str] = set()
        self.forgotten: list[str] = []   # digests the worker holds but no longer needs: sent with the next request

    def start(self) -> None:
        super().start()
        self.sent = set()
        self.forgotten = []


class CompilerProcess:
    """One persistent compiler worker; restarted on demand after it dies.

    Blobs (serialized cell IR) are owned by the caller; the client remembers which ones the
    current worker already holds and sends only the others, so a restart costs one resend.
    `forget` tells it which ones it may drop (their cell revisions were replaced).
    """

    def __init__(self, timeout: float = 300.0) -> None:
        self.timeout = timeout
        self._worker = _Worker()

    # -- process management ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now (it takes ~0.4 s to create the Slang global session)."""
        with self._worker.lock:
            self._worker.ensure()

    def close(self) -> None:
        self._worker.close()

    @property
    def pid(self) -> int | None:
        """The worker's process id (None before the first start and after close)."""
        return self._worker.pid

    @property
    def restarts(self) -> int:
        """How often the worker was replaced after a crash, a timeout or an interrupted request."""
        return self._worker.restarts

    def __del__(self) -> None:
        try:
            self._worker.kill()
        except Exception:
            pass

    def forget(self, digests: Iterable[str]) -> None:
        """The blobs of these digests will not be sent as dependencies again (their revisions were
        replaced): the worker drops them. No round trip: the list travels with the next request, and
        a digest that is needed after all is simply sent again."""
        w = self._worker
        with w.lock:
            for d in digests:
                if d in w.sent:
                    w.sent.discard(d)
                    w.forgotten.append(d)

    # -- requests ----------------------------------------------------------------------------

    def call(self, op: str, *, what: str, blobs: Mapping[str, bytes] | None = None, **fields: Any) -> Any:
        """Send one request; `what` names the cell for the crash message."""
        w = self._worker
        with w.lock:
            w.ensure()
            msg = cast(_ipc.CompilerRequest, dict(fields, op=op))
            new: dict[str, bytes] = {}
            if blobs:
                new = msg["blobs"] = {k: v for k, v in blobs.items() if k not in w.sent}
            if w.forgotten:
                msg["forget"] = w.forgotten
            try:
                assert w.channel is not None
                w.channel.send(msg)
                reply = cast(_ipc.CompilerReply, w.channel.recv(time.monotonic() + self.timeout))
            except BaseException as exc:
                # Crash, timeout or KeyboardInterrupt mid-request: the stream is out of step.
                if isinstance(exc, EOFError):
                    how = w.death()
                    w.restart()
                    raise SlangCompilerCrash(self._crash_message(what, how)) from None
                w.restart()
                if isinstance(exc, TimeoutError):
                    raise SlangCompilerCrash(
                        f"the Slang compiler did not finish {what} within {self.timeout:.0f} s and was "
                        "restarted; the cell is unchanged. Simplify the cell or raise the timeout."
                    ) from None
                raise
            w.forgotten = []
            w.sent.update(new)
            if op == "check_batch" and "result" in reply:   # blobs the worker made and keeps (forget drops them)
                w.sent.update(reply["result"].get("kept", ()))
            if "error" in reply:
                if reply.get("fatal"):
                    w.kill()
                    raise CompilerUnavailable(reply["error"])
                raise RuntimeError(f"compiler worker failed on {what}: {reply['error']}")
            return reply["result"]

    @staticmethod
    def _crash_message(what: str, how: _ipc.CrashReason) -> str:
        return (
            f"the Slang compiler crashed while compiling {what} ({how}). This is a bug in Slang, "
            "not in your session: the compiler was restarted and every other cell still works. "
            "Rewrite this cell (e.g. simplify the construct on it) to work around it."
        )
