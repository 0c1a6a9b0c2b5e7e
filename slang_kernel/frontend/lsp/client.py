"""A language-server client for the kernel: the server is a child process it may lose at any time.

The kernel answers Shift-Tab and Tab from Slang's language server without ever waiting on it for
long: the server starts on the first question (not with the kernel), a question gets an answer
within `timeout` seconds or None, a server that died is started again on the next question, and
nothing here runs while a cell executes. Replies are read by a daemon thread; a late reply is
dropped.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from typing import Any, Sequence

from ._wire import Writer, messages

__all__ = ["LanguageClient"]


class LanguageClient:
    """One `python -m slang_kernel.frontend.lsp` process, started lazily, restarted when it is gone."""

    def __init__(self, argv: Sequence[str] | None = None, *, timeout: float = 2.0) -> None:
        self.argv = tuple(argv or (sys.executable, "-m", "slang_kernel.frontend.lsp"))
        self.timeout = timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._writer: Writer | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future[Any]] = {}
        self._pending_writer: Writer | None = None
        self._init: Future[Any] | None = None
        self._ready = False
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.starts = 0   # how many servers were started (a restart counts)

    @property
    def pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    # -- lifecycle -----------------------------------------------------------------------------------

    def ensure(self, timeout: float) -> bool:
        """A running, initialized server (True), or False when none is ready within `timeout`: a
        server still starting is left to finish (the next question may find it ready)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._stop_locked()
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL, env=env)
                assert self._proc.stdin is not None
                self.starts += 1
                self._ready = False
                self._pending_writer = Writer(self._proc.stdin)
                threading.Thread(target=self._read, args=(self._proc,), daemon=True,
                                 name="slang-lsp-client").start()
                self._init = self._send_request(self._pending_writer, "initialize", {
                    "processId": os.getpid(), "rootUri": None, "capabilities": {}})
            if self._ready:
                return True
            init, writer = self._init, self._pending_writer
        if init is None or writer is None:
            return False
        try:
            init.result(timeout=timeout)
        except (FutureTimeout, OSError):
            return False
        with self._lock:
            if self._ready or self._pending_writer is not writer:
                return self._ready
            try:
                writer.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            except (OSError, ValueError):
                return False
            self._writer, self._ready = writer, True
        self.on_start()
        return True

    def on_start(self) -> None:
        """Called after each (re)start: a subclass re-sends its settings and documents."""

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for msg in messages(proc.stdout):
            if "method" in msg:
                if msg.get("method") == "textDocument/publishDiagnostics":
                    params = msg.get("params") or {}
                    self.diagnostics[params.get("uri", "")] = params.get("diagnostics") or []
                continue  # server requests need no answer from us (the proxy answers configuration)
            fut = self._waiting.pop(msg.get("id"), None)  # type: ignore[arg-type]
            if fut is not None and not fut.done():
                fut.set_result(msg.get("result"))
        for fut in list(self._waiting.values()):
            if not fut.done():
                fut.set_result(None)

    def _stop_locked(self) -> None:
        proc, self._proc, self._writer, self._pending_writer = self._proc, None, None, None
        self._ready, self._init = False, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    # -- messages ------------------------------------------------------------------------------------

    def _send_request(self, writer: Writer, method: str, params: dict[str, Any]) -> Future[Any]:
        rid = next(self._ids)
        fut: Future[Any] = Future()
        self._waiting[rid] = fut
        fut.add_done_callback(lambda _: self._waiting.pop(rid, None))
        try:
            writer.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        except (OSError, ValueError):
            fut.set_result(None)
        return fut

    def request(self, method: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        """The server's result, or None (no server, it died, or it did not answer in time): one
        deadline covers starting the server and the answer."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if not self.ensure(max(0.0, deadline - time.monotonic())) or self._writer is None:
            return None
        fut = self._send_request(self._writer, method, params)
        try:
            return fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            fut.cancel()
            self._waiting.pop(next((k for k, v in list(self._waiting.items()) if v is fut), -1), None)
            return None

    def notify(self, method: str, params: dict[str, Any], timeout: float | None = None) -> bool:
        if not self.ensure(self.timeout if timeout is None else timeout) or self._writer is None:
            return False
        try:
            self._writer.send({"jsonrpc": "2.0", "method": method, "params": params})
            return True
        except (OSError, ValueError):
            return False
