"""Handles to device objects that live in the Vulkan worker process (split from isolated).

A handle names its object by id and by the worker's generation: after the worker that made it died,
using it raises DeviceLost naming it. Reading, frames and uploads go through the backend that made it.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import numpy as np

from ...errors import DeviceLost, ParameterError
from ..common import shm as _shm
from .wire import Reply

__all__ = ["HandleHost", "VulkanBufferHandle", "VulkanTextureHandle", "_Handle"]


class HandleHost(Protocol):
    """What a handle needs of the IsolatedVulkanBackend that made it."""

    adapter: str

    @property
    def generation(self) -> int: ...
    _lost: dict[int, str]

    def _freed(self, generation: int, obj_id: int) -> None: ...
    def _read(self, h: "_Handle") -> np.ndarray: ...
    def _frame(self, h: "_Handle", rgba8: bool) -> np.ndarray: ...
    def _write(self, h: "_Handle", array: Any) -> None: ...


class _Handle:
    """A device object in the worker, by id; valid while the worker that made it lives."""

    kind = "object"

    def __init__(self, backend: HandleHost, oid: int, reply: Reply) -> None:
        self.backend, self.id = backend, oid
        self.generation = backend.generation
        self.shape: tuple[int, ...] = tuple(reply["shape"])
        self.dtype: np.dtype[Any] = np.dtype(reply["dtype"])
        self.nbytes = self.size * self.dtype.itemsize
        self._frames: dict[bool, tuple[_shm.Segment, np.ndarray]] = {}   # frame(rgba8): segment, view on it
        weakref.finalize(self, backend._freed, self.generation, oid)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def label(self) -> str:
        return f"device {self.kind} #{self.id} ({self.dtype} {self.shape})"

    @property
    def lost(self) -> bool:
        return self.generation != self.backend.generation

    def _live(self, backend: HandleHost, where: str) -> int:
        """The worker's id of this object; DeviceLost if the worker that held it is gone."""
        if backend is not self.backend:
            raise ParameterError(f"{where or self.label}: that {self.kind} belongs to another Vulkan session")
        if self.lost:
            why = self.backend._lost.get(self.generation, "was restarted")
            raise DeviceLost(
                f"{where + ': ' if where else ''}{self.label} is lost: the Vulkan worker that held it {why}. "
                f"Make it again (backend.{self.kind}(...)); re-running the cell that made it does.")
        return self.id

    def numpy(self) -> np.ndarray:
        """A copy of the contents (yours to keep)."""
        return self.backend._read(self)

    def frame(self, rgba8: bool = False) -> np.ndarray:
        """The contents as a read-only view on shared memory that the worker wrote them into (one
        copy): valid until the next frame() of this object, which overwrites it in place. For a
        live view's frames; `.numpy()` gives a copy that outlives the next frame. rgba8=True (float
        2D textures): (H, W, 4) uint8 as playground.to_rgba8 makes it, converted by the worker."""
        return self.backend._frame(self, rgba8)

    def upload(self, array: Any) -> None:
        self.backend._write(self, array)

    def __repr__(self) -> str:
        state = ", lost" if self.lost else ""
        return f"<{type(self).__name__} #{self.id} {self.dtype} {self.shape} on {self.backend.adapter}{state}>"


class VulkanBufferHandle(_Handle):
    """A buffer in the Vulkan worker: pass it to kernels (no copy); `.numpy()` reads it back."""

    kind = "buffer"


class VulkanTextureHandle(_Handle):
    """A texture in the Vulkan worker ((H, W, C) for 2D, (D, H, W, C) for 3D, (W, C) for 1D)."""

    kind = "texture"

    def __init__(self, backend: HandleHost, oid: int, reply: Reply, dims: int) -> None:
        super().__init__(backend, oid, reply)
        self.dims = dims
        self.channels = self.shape[-1]
        self.format_name = str(reply.get("format", ""))
