"""What travels between the notebook's process and the Vulkan worker (framed by slang_kernel._ipc).

Requests are dicts with "op" (the TypedDicts below). numpy arrays never travel in a message: they lie
in shared-memory segments (backends/common/shm.py) that the worker has mapped, and a message names them by
`ArraySlot` (segment, offset, shape, dtype). In a dispatch's values a top-level array is replaced by
`ArrayArg` (its index in the message's arrays) and a device buffer or texture by `DeviceRef` (its id
in the worker), wherever it is nested.

  init {include_paths}                    -> {"adapter", "describe", "pid"} | error   first message
  map {id, size} + the segment's fd       -> {"ok"} | error
  unmap {ids}, free {ids}                 -> (no reply)      drop segments / device objects
  load {kernel: CompiledKernel}           -> {"ok"} | error  build the sgl kernel of this revision
  forget {keys}                           -> (no reply)      drop kernels of replaced revisions
  run {key, groups, values, arrays}       -> {"ok", "text": printf output, "us"} | error
      + "timed": True                     -> + "timing": [bind_upload_ms, run_ms, readback_ms, device_timestamps, how]
  new {id, kind, source, dtype, dims}     -> {"shape", "dtype", "format"} | error
  read {id, slot, rgba8?}                 -> {"ok", "us"} | error  (.numpy() into the slot; rgba8: a float
                                             (H, W, C) texture as (H, W, 4) uint8, as playground.to_rgba8)
  write {id, slot}                        -> {"ok"} | error  (.upload() from the slot)
  lose                                    -> {"ok"}          the device counts as lost (lose_device)
  exit, or the end of the socket          -> the worker exits (without tearing the device down)
error replies are {"error": text, "type": the exception's class name}. "type": "DeviceLost" means the
worker's device is unusable (sgl said VK_ERROR_DEVICE_LOST, or a failed op left a device that cannot
even be waited for, or lose): every later device op answers the same, and the parent restarts it.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypedDict

import numpy as np

__all__ = ["ArrayArg", "ArraySlot", "DeviceRef", "ErrorReply", "Reply", "is_device_lost"]


class ArraySlot(NamedTuple):
    """Where an array lies: bytes [offset, offset + nbytes) of shared segment `segment`."""

    segment: int
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    writeable: bool = True


class ArrayArg(NamedTuple):
    """A dispatch value that is the `position`-th array of the message."""

    position: int


class DeviceRef(NamedTuple):
    """A dispatch value that is the worker's device object `id` (a buffer or a texture)."""

    id: int


class ErrorReply(TypedDict):
    error: str
    type: str


class Reply(TypedDict, total=False):
    ok: bool
    text: str
    us: float            # run, read: microseconds the worker spent on it (the rest is the boundary)
    timing: list[Any]    # run with "timed": bind_upload_ms, run_ms, readback_ms, device_timestamps, how
    adapter: str
    describe: str
    pid: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    format: str
    error: str
    type: str


_LOST = ("device_lost", "device lost", "devicelost", "device_removed", "device removed", "device hung")


def is_device_lost(text: str) -> bool:
    """Whether a driver error means the device is gone (VK_ERROR_DEVICE_LOST and sgl's wordings)."""
    low = text.lower().replace("vk_error_", "")
    return any(w in low for w in _LOST)
