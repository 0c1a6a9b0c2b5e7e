"""LSP base protocol: `Content-Length` framed JSON-RPC messages over binary streams."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["Writer", "messages", "read_message"]


def read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next message, or None at the end of the stream (a frame without a length is skipped)."""
    while True:
        length = -1
        while True:
            line = stream.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            key, _, value = line.decode("ascii", "replace").partition(":")
            if key.strip().lower() == "content-length":
                length = int(value.strip())
        if length < 0:
            continue
        body = stream.read(length)
        if len(body) < length:
            return None
        try:
            msg = json.loads(body)
        except ValueError:
            continue
        if isinstance(msg, dict):
            return msg


def messages(stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The stream's messages, one after another, until it ends."""
    while (msg := read_message(stream)) is not None:
        yield msg


class Writer:
    """Writes framed messages to one stream; safe to share between threads."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
        with self._lock:
            self._stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self._stream.flush()
