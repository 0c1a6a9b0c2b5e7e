"""The Vulkan worker: the sgl device (a GPU driver, or Mesa lavapipe) outside the notebook's process.

Started by backends.vulkan.isolated as `python -c BOOTSTRAP SOCKET_FD PARENT_PID`. It runs the
in-process backend (backends.vulkan.VulkanBackend) on its own device: a shader that kills the process
(lavapipe runs shaders as CPU code, so a wild groupshared index is a SIGSEGV) or never ends costs the
notebook one cell's error and this process, nothing else. Nothing here is the only copy of anything
the session needs: kernels arrive as CompiledKernels (their module chain as sources), numpy arrays lie
in the parent's shared memory. Device buffers and textures do live only here: the parent's handles
say so when this process is gone. The protocol is in wire.
"""

from __future__ import annotations

import mmap
import os
import sys
import time
from typing import Any, Callable, Mapping, cast

import numpy as np

from ... import _ipc
from ...compiled import CompiledKernel
from ...errors import VulkanCompileError
from .. import BackendConfig
from .wire import ArrayArg, ArraySlot, DeviceRef, Reply, is_device_lost
from .device import VulkanBackend, VulkanBuffer, VulkanTexture
from .step import VulkanStep

__all__ = ["Worker", "main"]


class Worker:
    def __init__(self, channel: _ipc.Channel) -> None:
        self.channel = channel
        self.backend: VulkanBackend | None = None
        self.segments: dict[int, mmap.mmap] = {}
        self.kernels: dict[str, CompiledKernel] = {}
        self.objects: dict[int, VulkanBuffer | VulkanTexture] = {}
        self.lost: str | None = None   # why the device is gone: every later op says so (the parent restarts us)
        self.ops: dict[str, Callable[[dict[str, Any]], Reply]] = {
            "init": self.init, "load": self.load, "run": self.run, "new": self.new, "read": self.read,
            "write": self.write, "lose": self.lose, "step": self.step}
        self.steps: dict[int, VulkanStep] = {}   # replayed steps by id (the latest few)

    def serve(self) -> None:
        channel = self.channel
        while True:
            try:
                msg = cast("dict[str, Any]", channel.recv())
            except EOFError:
                return
            op = msg["op"]
            if op == "exit":
                return
            if op == "map":
                channel.send(self._guard(lambda m: self.map(m, channel.recv_fds(1)[0]), msg))
            elif op == "unmap":
                for i in msg["ids"]:
                    self.segments.pop(i, None)   # views of it may still be alive: the GC unmaps
            elif op == "free":
                for i in msg["ids"]:
                    self.objects.pop(i, None)
            elif op == "forget":
                for k in msg["keys"]:
                    self.kernels.pop(k, None)
                if self.backend is not None:
                    self.backend.forget(list(msg["keys"]))
            else:
                channel.send(self._guard(self.ops[op], msg))

    def _guard(self, fn: Callable[[dict[str, Any]], Reply], msg: dict[str, Any]) -> Reply:
        try:
            return fn(msg)
        except Exception as exc:
            text = str(exc)
            if self.lost is None and msg["op"] in _DEVICE_OPS and not isinstance(exc, _CALLER_ERRORS):
                self.lost = lost_reason(text, self.backend)
            if self.lost is not None:
                return {"error": self.lost if self.lost == text else f"{self.lost}: {text}", "type": "DeviceLost"}
            return {"error": text, "type": type(exc).__name__}

    # -- ops ----------------------------------------------------------------------------------------

    def init(self, msg: dict[str, Any]) -> Reply:
        self.backend = VulkanBackend(BackendConfig(include_paths=tuple(msg["include_paths"])))
        return {"adapter": self.backend.adapter, "describe": self.backend.describe(), "pid": os.getpid()}

    def lose(self, msg: dict[str, Any]) -> Reply:
        """Treat the device as lost from now on (IsolatedVulkanBackend.lose_device: a notebook's test
        of its recovery, as WebGL's WEBGL_lose_context). The device is left as it is, not closed:
        sgl crashes on a closed one, and this process ends anyway."""
        self.lost = "the device was lost (lose_device() was called)"
        return {"ok": True}

    def map(self, msg: dict[str, Any], fd: int) -> Reply:
        try:
            self.segments[msg["id"]] = mmap.mmap(fd, msg["size"])
        finally:
            os.close(fd)
        return {"ok": True}

    def load(self, msg: dict[str, Any]) -> Reply:
        kernel: CompiledKernel = msg["kernel"]
        self._backend().prepare(kernel)
        self.kernels[kernel.key] = kernel
        return {"ok": True}

    def run(self, msg: dict[str, Any]) -> Reply:
        kernel = self.kernels[msg["key"]]
        views = [self._view(s) for s in msg["arrays"]]
        values = {k: self._resolve(v, views) for k, v in msg["values"].items()}
        t0 = time.perf_counter()
        if msg.get("timed"):  # ComputeKernel.profile: the device's split travels back
            text, t = self._backend().run_timed(kernel, tuple(msg["groups"]), values)
            return {"ok": True, "text": text, "us": (time.perf_counter() - t0) * 1e6,
                    "timing": [t.bind_upload_ms, t.run_ms, t.readback_ms, t.device_timestamps, t.how]}
        text = self._backend().run(kernel, tuple(msg["groups"]), values, wait=True)
        return {"ok": True, "text": text, "us": (time.perf_counter() - t0) * 1e6}

    def step(self, msg: dict[str, Any]) -> Reply:
        """Replay a step (slang_kernel.steps.Step) `times` times: one command buffer, waited for."""
        st = self.steps.get(msg["id"])
        if st is None:
            launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]] = [
                (self.kernels[key], (int(g[0]), int(g[1]), int(g[2])), {k: self._resolve(v, []) for k, v in values.items()})
                for key, g, values in msg["launches"]]
            st = VulkanStep(self._backend(), launches)
            while len(self.steps) >= 16:
                self.steps.pop(next(iter(self.steps))).close()
            self.steps[msg["id"]] = st
        t0 = time.perf_counter()
        st.run(msg["times"], wait=True)
        return {"ok": True, "us": (time.perf_counter() - t0) * 1e6}

    def new(self, msg: dict[str, Any]) -> Reply:
        b = self._backend()
        source = msg["source"]
        if isinstance(source, ArraySlot):
            source = self._view(source)
        obj: VulkanBuffer | VulkanTexture
        if msg["kind"] == "buffer":
            obj = b.buffer(source, msg["dtype"])
        else:
            obj = b.texture(source, msg["dtype"], dims=msg["dims"])
        self.objects[msg["id"]] = obj
        fmt = obj.format.name if isinstance(obj, VulkanTexture) else ""
        return {"shape": tuple(obj.shape), "dtype": obj.dtype, "format": fmt}

    def read(self, msg: dict[str, Any]) -> Reply:
        self._backend()
        t0 = time.perf_counter()
        data = self.objects[msg["id"]].numpy()
        out = self._view(msg["slot"])
        if msg.get("rgba8") and data.ndim == 3 and out.shape == (*data.shape[:2], 4) and out.dtype == np.uint8:
            pass
        elif out.shape != data.shape or out.dtype != data.dtype:
            raise RuntimeError(f"read: the device object is {data.dtype} {data.shape}, the slot {out.dtype} {out.shape}")
        if msg.get("rgba8"):
            _rgba8_into(out, data)
        else:
            np.copyto(out, data)
        return {"ok": True, "us": (time.perf_counter() - t0) * 1e6}

    def write(self, msg: dict[str, Any]) -> Reply:
        self._backend()
        self.objects[msg["id"]].upload(self._view(msg["slot"]))
        return {"ok": True}

    # -- helpers ------------------------------------------------------------------------------------

    def _backend(self) -> VulkanBackend:
        if self.lost is not None:
            raise RuntimeError(self.lost)
        if self.backend is None:
            raise RuntimeError("the Vulkan worker was not initialised")
        return self.backend

    def _view(self, slot: ArraySlot) -> np.ndarray:
        arr: np.ndarray = np.ndarray(slot.shape, slot.dtype, buffer=self.segments[slot.segment], offset=slot.offset)
        if not slot.writeable:
            arr.flags.writeable = False
        return arr

    def _resolve(self, v: Any, views: list[np.ndarray]) -> Any:
        if isinstance(v, ArrayArg):
            return views[v.position]
        if isinstance(v, DeviceRef):
            return self.objects[v.id]
        if isinstance(v, dict):
            return {k: self._resolve(x, views) for k, x in v.items()}
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(self._resolve(x, views) for x in v)
        return v


def _rgba8_into(out: np.ndarray, a: np.ndarray) -> None:
    """An (H, W, C) float image into (H, W, 4) uint8 as playground.to_rgba8 makes it (clamped to
    [0, 1], x255 + 0.5, truncated; missing channels: gray from one, blue 0 for two, alpha 255), here,
    so that a live frame crosses as 1 MB of shared memory instead of 4 and is not converted again."""
    t = np.clip(a, 0.0, 1.0)
    t *= 255.0
    t += 0.5
    c = a.shape[2]
    if c == 4:
        np.copyto(out, t, casting="unsafe")
        return
    np.copyto(out[..., :3], t[..., :3] if c >= 3 else t[..., :1], casting="unsafe")
    if c == 2:
        np.copyto(out[..., 1], t[..., 1], casting="unsafe")
        out[..., 2] = 0
    out[..., 3] = 255


_DEVICE_OPS = frozenset({"load", "run", "new", "read", "write"})
# What the caller got wrong: the device is fine (a failure of anything else makes us ask it, lost_reason)
_CALLER_ERRORS = (TypeError, ValueError, KeyError, IndexError, NotImplementedError, VulkanCompileError)


def lost_reason(text: str, backend: VulkanBackend | None) -> str | None:
    """Why the device is gone after an op failed with `text`, or None while it still works: sgl's
    wording of VK_ERROR_DEVICE_LOST, or (a dead device that says something else) waiting for it
    failing too."""
    if is_device_lost(text):
        return "the device was lost"
    if backend is None:
        return None
    try:
        backend.device.wait_for_idle()
    except Exception as exc:  # noqa: BLE001 - any failure of the probe means the device is unusable
        return f"the device stopped working (waiting for it failed: {exc})"
    return None


def main() -> None:
    channel = _ipc.connect_to_parent()
    if channel is None:
        return
    try:
        Worker(channel).serve()
    finally:
        # Leave without tearing the device down: drivers have crashed in their teardown after a shader
        # misbehaved (and at interpreter exit), and the process's end frees everything anyway.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
