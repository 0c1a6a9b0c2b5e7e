"""The Vulkan worker process as the isolated backend starts it (split from isolated): how it
is launched, and what one incarnation of it holds (mapped segments, loaded kernel revisions)."""

from __future__ import annotations

import sys
from pathlib import Path

from ... import _ipc
from .wire import Reply

__all__ = ["_Process"]

_ROOT = str(Path(__file__).resolve().parents[3])   # the folder that holds the slang_kernel package
_BOOTSTRAP = (f"import sys; sys.path.insert(0, {_ROOT!r}); "
              "from slang_kernel.backends.vulkan.worker import main; main()")

class _Process(_ipc.WorkerProcess):
    """The worker, and what this incarnation of it holds: mapped segments, loaded kernel revisions."""

    def __init__(self, include_paths: tuple[str, ...]) -> None:
        super().__init__((sys.executable, "-c", _BOOTSTRAP))
        self.include_paths = include_paths
        self.generation = 0
        self.mapped: set[int] = set()
        self.loaded: set[str] = set()
        self.ready: Reply | None = None
        self.in_flight = False

    def start(self) -> None:
        super().start()
        self.generation += 1
        self.mapped, self.loaded, self.ready, self.in_flight = set(), set(), None, False
        assert self.channel is not None
        self.channel.send({"op": "init", "include_paths": list(self.include_paths)})  # read by wait_ready
