"""The Vulkan backend with its device in a worker process (Session(isolate=True), the default).

On a machine without a GPU the Vulkan device is Mesa's lavapipe, which runs shaders as CPU code in
the process that owns the device: a groupshared index out of range or a bad descriptor is a SIGSEGV.
Here that process is a worker (backends/vulkan/worker.py), so such a kernel costs one cell's
KernelCrash; the worker is started again at once, and kernels are rebuilt in it from the
CompiledKernel of their next dispatch. An endless shader is stopped by ending the worker
(Session(timeout=), or the notebook's stop button).

numpy arrays reach the worker through shared memory (one staging segment, reused; arrays already in
shared memory are used in place) and written ones are copied back into the caller's arrays; only
small values travel in the message. `buffer()`/`texture()` return handles to objects in the worker;
after the worker died, using one raises DeviceLost naming it. A handle's `frame()` (live views) is
read by the worker straight into a segment the handle owns and seen here through a view: one copy.

Device lost (sgl's VK_ERROR_DEVICE_LOST, or a device that fails even to be waited for after an op
failed, or lose_device()): the worker answers DeviceLost, the call raises DeviceLost naming its
kernel, and the worker is replaced at once by one with a new device, which the next call uses.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import weakref
from typing import Any, Mapping

import numpy as np

from ... import _ipc
from ...compiled import CompiledKernel
from ...errors import (BackendUnavailable, DeviceLost, KernelCrash, KernelInterrupted, KernelTimeout, ParameterError,
                      VulkanCompileError)
from .. import BackendConfig, DispatchTiming
from ..common import shm as _shm
from ..common.packing import copy_advice, describe
from .bounds_slang import Checked, dispatch_checked, is_variant, with_variants
from .finite import first_nonfinite_f32, scans
from .device import software_adapter
from .handles import VulkanBufferHandle, VulkanTextureHandle, _Handle
from .process import _Process
from .wire import ArrayArg, ArraySlot, DeviceRef, Reply

__all__ = ["IsolatedVulkanBackend", "VulkanBufferHandle", "VulkanTextureHandle"]

STAGING_KEEP = 256 << 20   # a staging segment larger than this is given back after the call
_ERRORS: dict[str, type[Exception]] = {
    "ParameterError": ParameterError, "VulkanCompileError": VulkanCompileError, "TypeError": TypeError,
    "ValueError": ValueError, "KeyError": KeyError, "IndexError": IndexError, "DeviceLost": DeviceLost,
    "NotImplementedError": NotImplementedError, "BackendUnavailable": BackendUnavailable}


class IsolatedVulkanBackend(_shm.SharedMemoryArrays, _ipc.WorkerOwner):
    """Vulkan (slangpy/sgl) with the device in a worker process: crash-safe, stoppable. The process
    boundary costs a round trip per dispatch and a copy of each numpy array into shared memory (and
    of each written one back); Session(isolate=False) has neither, and no protection."""

    name = "vulkan"
    target = "spirv"
    capabilities = frozenset({"device_buffers", "textures", "shared_arrays", "timing", "type_conformances", "replay",
                              "finite_scan"})

    _proc: _Process

    def __init__(self, config: BackendConfig | None = None) -> None:
        self.config = config = config or BackendConfig()
        self.timeout = config.timeout
        self._proc = _Process(config.include_paths)
        self._lock = self._proc.lock
        self._staging: _shm.Segment | None = None
        self._staging_bytes = np.empty(0, np.uint8)
        self.last_worker_us = 0.0   # what the worker spent on the last dispatch or frame() (the rest: the boundary)
        self._ids = itertools.count(1)
        self._frees: list[int] = []
        self._unmaps: list[int] = []
        self._lost: dict[int, str] = {}            # worker generation -> what happened to it
        self._writable: dict[str, frozenset[str]] = {}
        self._checked: dict[str, Checked] = {}   # Session(checked=True): kernel key -> its variant (_bounds_slang)
        self._free_lock = threading.Lock()
        self._proc.start()
        try:
            hello = self._ready()
        except BaseException:
            self._proc.close()
            raise
        self.adapter = str(hello.get("adapter", "?"))
        self.gpu = not software_adapter(self.adapter)
        self._describe = str(hello.get("describe", self.adapter))

    # -- protocol -----------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        return self._proc.generation

    def describe(self) -> str:
        return f"{self._describe}, isolated worker process"

    def compile_options(self, target: str) -> tuple[str, ...]:
        from .device import compile_options

        return compile_options(target)

    def reset(self) -> None:
        """A new worker and device: buffers and textures made before can no longer be used."""
        with self._lock:
            self._restart("was reset (Session.reset_device)")

    def lose_device(self) -> None:
        """Make the worker's device count as lost, as a driver's VK_ERROR_DEVICE_LOST does: the next
        call that uses it raises DeviceLost naming its kernel (or object) and a new worker with a new
        device takes over; objects made before say they are lost. For testing a notebook's recovery
        (as WebGL's WEBGL_lose_context.loseContext does)."""
        with self._lock:
            self._call({"op": "lose"}, "losing the device")

    def close(self) -> None:
        with self._lock:
            self._proc.close()
            self._drop_staging()

    # -- the worker ---------------------------------------------------------------------------------

    def _ready(self) -> Reply:
        """The worker's init reply (waits for it to start serving, once per worker)."""
        proc = self._proc
        proc.ensure()
        if proc.ready is None:
            assert proc.channel is not None
            try:
                reply: Reply = proc.channel.recv()
            except (EOFError, OSError) as exc:
                how = proc.death()
                proc.kill()
                raise BackendUnavailable(f"the Vulkan worker process could not start ({how}: {exc})") from None
            if "error" in reply:
                proc.kill()
                raise BackendUnavailable(reply["error"])
            proc.ready = reply
        return proc.ready

    def _restart(self, what: str) -> None:
        self._lost[self._proc.generation] = what
        self._proc.restart()
        self._frees.clear()
        self._unmaps.clear()

    def _call(self, msg: dict[str, Any], what: str, kernel: str = "", timeout: float | None = None,
              fds: tuple[int, ...] = ()) -> Reply:
        """One request and its reply. A death, a timeout or an interrupt while the worker works ends
        it (and starts the next one) and raises KernelCrash / KernelTimeout / KernelInterrupted."""
        proc = self._proc
        if proc.ready is None or proc.channel is None:   # no poll() per call: a worker gone while idle
            self._ready()                                # shows as a crash of this request
        channel = proc.channel
        assert channel is not None
        if self._frees or self._unmaps:
            self._flush_frees()
        t0 = time.perf_counter()
        try:
            data = _ipc.frame(msg)
        except Exception as exc:   # nothing was sent: the stream is in step
            raise ParameterError(f"{what}: a value cannot be sent to the Vulkan worker process ({exc}); pass "
                                 "numpy arrays, numbers, or backend.buffer()/.texture() objects") from None
        try:
            proc.in_flight = True
            channel.sock.sendall(data)
            if fds:
                channel.send_fds(fds)
            reply: Reply = channel.recv(None if timeout is None else time.monotonic() + timeout)
            proc.in_flight = False
        except BaseException as exc:
            self._failed(exc, what, kernel, time.perf_counter() - t0, timeout)
            raise
        if "error" in reply:
            kind = reply.get("type", "")
            if kind == "DeviceLost":   # the worker's device is unusable: a new worker makes a new one
                self._restart(f"lost its device in {what}")
                raise DeviceLost(f"{what}: {reply['error'].strip()}. The Vulkan worker was restarted with a new "
                                 "device: cells, kernels and functions still work (the next call runs on it); device "
                                 "buffers and textures made before are gone (make them again).")
            raise _ERRORS.get(kind, RuntimeError)(reply["error"])
        return reply

    def _failed(self, exc: BaseException, what: str, kernel: str, elapsed: float, timeout: float | None) -> None:
        proc = self._proc
        if not proc.in_flight and isinstance(exc, KeyboardInterrupt):
            return  # before anything was sent: the stream is in step
        after = "numpy arrays passed to this call are unchanged; device buffers and textures made before are lost"
        if isinstance(exc, (EOFError, OSError)) and not isinstance(exc, TimeoutError):
            how = proc.death()
            self._restart(f"crashed ({how}) in {what}")
            raise KernelCrash(
                f"{what} crashed the Vulkan worker ({how}) after {elapsed:.2f} s. The worker was restarted: every "
                f"cell, kernel and function of the session still works; {after}. On a software device (lavapipe) "
                "shaders run as CPU code, so an index out of range of groupshared memory or a local array, a null "
                "or wild pointer, or a bad descriptor kills the process where a GPU might not notice: check "
                "indices and pointers (the CPU backend's Session(checked=True) reports out-of-range buffer "
                "indices).",
                kernel, how.signal or str(how)) from None
        if isinstance(exc, TimeoutError):
            self._restart(f"was stopped after the timeout in {what}")
            raise KernelTimeout(
                f"{what} did not finish within {timeout:g} s (Session(timeout=...)): the Vulkan worker was ended "
                f"and restarted; {after}.", kernel, elapsed) from None
        if isinstance(exc, KeyboardInterrupt):
            self._restart(f"was stopped by an interrupt in {what}")
            raise KernelInterrupted(
                f"{what} interrupted after {elapsed:.1f} s: the Vulkan worker was ended and restarted; {after}.",
                kernel, elapsed) from None
        self._restart(f"failed in {what} ({type(exc).__name__})")   # the stream is out of step

    def _flush_frees(self) -> None:
        channel = self._proc.channel
        assert channel is not None
        with self._free_lock:
            frees, self._frees = self._frees, []
            unmaps, self._unmaps = self._unmaps, []
        if frees:
            channel.send({"op": "free", "ids": frees})
        if unmaps:
            channel.send({"op": "unmap", "ids": unmaps})

    def _freed(self, generation: int, obj_id: int) -> None:
        if generation == self._proc.generation:
            with self._free_lock:
                self._frees.append(obj_id)

    # -- shared memory ------------------------------------------------------------------------------

    def _mapped(self, seg: _shm.Segment) -> None:
        proc = self._proc
        if seg.id not in proc.mapped:
            self._call({"op": "map", "id": seg.id, "size": seg.size}, "mapping shared memory", fds=(seg.fd,))
            proc.mapped.add(seg.id)
            weakref.finalize(seg, self._segment_gone, proc.generation, seg.id)

    def _segment_gone(self, generation: int, seg_id: int) -> None:
        if generation == self._proc.generation:
            self._proc.mapped.discard(seg_id)
            with self._free_lock:
                self._unmaps.append(seg_id)

    def _stage(self, arrays: list[np.ndarray]) -> list[ArraySlot]:
        """Slots for these arrays: in place where they lie in shared memory, else copied into staging."""
        need = sum(-(-a.nbytes // _shm.ALIGN) * _shm.ALIGN for a in arrays if _shm.segment_of(a) is None)
        if need and (self._staging is None or self._staging.size < need):
            old = self._staging.size if self._staging is not None else 0
            self._new_staging(max(need + (need >> 3), 2 * old, 1 << 20))
        slots, off = [], 0
        for a in arrays:
            seg = _shm.segment_of(a)
            if seg is not None and a.flags.c_contiguous:
                self._mapped(seg)
                slots.append(ArraySlot(seg.id, a.ctypes.data - seg.addr, a.shape, a.dtype, a.flags.writeable))
                continue
            staging = self._staging
            assert staging is not None
            self._mapped(staging)
            slot = ArraySlot(staging.id, off, a.shape, a.dtype, a.flags.writeable)
            if a.nbytes:
                np.copyto(self._slot_array(slot), a)
            slots.append(slot)
            off += -(-a.nbytes // _shm.ALIGN) * _shm.ALIGN
        return slots

    def _slot_array(self, slot: ArraySlot) -> np.ndarray:
        """The staging bytes of a slot as an array (a view of one uint8 array over the whole segment:
        Segment.array per call costs ~50 us, a slice ~2)."""
        assert self._staging is not None and slot.segment == self._staging.id
        n = int(np.prod(slot.shape, dtype=np.int64)) * slot.dtype.itemsize
        out: np.ndarray = self._staging_bytes[slot.offset: slot.offset + n].view(slot.dtype).reshape(slot.shape)
        return out

    def _new_staging(self, nbytes: int) -> None:
        self._drop_staging()
        self._staging = _shm.Segment(nbytes, "slang-kernel-vulkan")
        self._staging_bytes = self._staging.array(self._staging.size, np.uint8)

    def _drop_staging(self) -> None:
        seg, self._staging = self._staging, None
        self._staging_bytes = np.empty(0, np.uint8)
        if seg is not None:
            seg.close()

    # -- dispatch -----------------------------------------------------------------------------------

    def dispatch_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                       values: Mapping[str, Any]) -> DispatchTiming:
        """The worker's split (timestamp queries on its device) plus this side's staging of inputs
        (bind/upload) and copying of outputs out of staging (readback)."""
        m: dict[str, Any] = {}
        self.dispatch(kernel, groups, values, m)
        bind, run, read, dev, how = m["timing"]
        return DispatchTiming(float(bind) + (m["bound"] - m["start"]) * 1000, float(run),
                              float(read) + (m["read"] - m["ran"]) * 1000, bool(dev), f"{how}, in the Vulkan worker")

    def prepare_step(self, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]) -> Any:
        """The "replay" capability (slang_kernel.steps.Step, which never asks a checked session): see step."""
        from .step import IsolatedStep

        return IsolatedStep(self, launches, next(self._ids))

    def scans(self, value: Any) -> bool:
        """The "finite_scan" capability: float32 buffers of this worker (see finite)."""
        return scans(self, value, VulkanBufferHandle)

    def first_nonfinite(self, value: Any) -> tuple[tuple[int, ...], float, int] | None:
        return first_nonfinite_f32(self, value)

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any],
                 marks: dict[str, Any] | None = None) -> None:
        if self.config.checked and marks is None and not is_variant(kernel):   # (profile: the kernel as written)
            return dispatch_checked(self.dispatch, self._checked, kernel, groups, values)
        arrays: list[np.ndarray] = []
        index: dict[int, int] = {}
        nested: list[int] = []   # arrays inside dicts/lists (a ParameterBlock's buffers): written back too
        sent: dict[str, Any] = {}
        for name, v in values.items():
            if isinstance(v, np.ndarray) and not v.dtype.hasobject:
                i = index.get(id(v))
                if i is None:
                    i = index[id(v)] = len(arrays)
                    arrays.append(v)
                sent[name] = ArrayArg(i)
            elif isinstance(v, (int, float, str)):
                sent[name] = v
            else:
                sent[name] = self._refs(v, name, arrays, index, nested)
        writable = self._writable.get(kernel.key)
        if writable is None:
            params = [*kernel.reflection.globals, *kernel.entry_point.uniforms]
            writable = self._writable[kernel.key] = frozenset(p.name for p in params if p.type.writable)
        for n in writable:  # as in-process: the kernel writes into that very memory (staging would hide it)
            v = values.get(n)
            if isinstance(v, np.ndarray) and not v.flags.c_contiguous:
                raise ParameterError(f"{kernel.entry}(): parameter `{n}` is written by the kernel and needs a "
                                     f"writable C-contiguous array; got {describe(v)}. {copy_advice(n)}")
        with self._lock:
            self._ensure_loaded(kernel)
            if marks is not None:
                marks["start"] = time.perf_counter()
            slots = self._stage(arrays)
            msg: dict[str, Any] = {"op": "run", "key": kernel.key, "groups": groups, "values": sent, "arrays": slots}
            if marks is not None:
                msg["timed"] = True
                marks["bound"] = time.perf_counter()
            reply = self._call(msg, kernel.entry, kernel.entry, self.timeout)
            self.last_worker_us = float(reply.get("us", 0.0))
            if marks is not None:
                marks["ran"] = time.perf_counter()
                marks["timing"] = reply["timing"]
            if writable or nested:
                back = {index[id(values[n])] for n in writable if id(values.get(n)) in index}
                back.update(i for i in nested if arrays[i].flags.writeable)
                for i in back:
                    slot = slots[i]
                    if self._staging is not None and slot.segment == self._staging.id and arrays[i].nbytes:
                        np.copyto(arrays[i], self._slot_array(slot))
            if marks is not None:
                marks["read"] = time.perf_counter()
            if self._staging is not None and self._staging.size > STAGING_KEEP:
                self._drop_staging()
        text = reply.get("text")
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()

    def _ensure_loaded(self, kernel: CompiledKernel) -> None:
        """Build the kernel in the worker unless it is there (the caller holds the lock)."""
        if kernel.key not in self._proc.loaded:
            self._call({"op": "load", "kernel": kernel}, f"{kernel.entry} (building it for Vulkan)", kernel.entry)
            self._proc.loaded.add(kernel.key)

    def run_step(self, step_id: int, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]],
                 times: int) -> None:
        """A replayed step's call (step.IsolatedStep): its launches, with device handles as
        references, to the worker's step `step_id` (made there at its first call): one round trip."""
        sent = [(k.key, g, {n: v if isinstance(v, (int, float, str)) else self._refs(v, n) for n, v in values.items()})
                for k, g, values in launches]
        entry = launches[0][0].entry
        with self._lock:
            for kernel, _, _ in launches:
                self._ensure_loaded(kernel)
            self._call({"op": "step", "id": step_id, "launches": sent, "times": times}, f"a step of {entry}", entry,
                       self.timeout)

    def _refs(self, v: Any, name: str, arrays: list[np.ndarray] | None = None, index: dict[int, int] | None = None,
              nested: list[int] | None = None) -> Any:
        """Device handles -> DeviceRef (a lost one raises); containers are looked into, and numpy
        arrays inside them cross through shared memory as ArrayArg (listed in `nested`)."""
        if isinstance(v, _Handle):
            return DeviceRef(v._live(self, f"parameter `{name}`"))
        if isinstance(v, np.ndarray) and arrays is not None and index is not None and not v.dtype.hasobject:
            i = index.get(id(v))
            if i is None:
                i = index[id(v)] = len(arrays)
                arrays.append(v)
            if nested is not None:
                nested.append(i)
            return ArrayArg(i)
        if isinstance(v, dict):
            return {k: self._refs(x, f"{name}.{k}", arrays, index, nested) for k, x in v.items()}
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(self._refs(x, f"{name}[{i}]", arrays, index, nested) for i, x in enumerate(v))
        if type(v).__module__.startswith("slangpy"):
            raise ParameterError(f"parameter `{name}`: an sgl object ({type(v).__name__}) lives in this process, and "
                                 "the Vulkan device is in a worker process: pass a numpy array or a backend.buffer()/"
                                 ".texture(), or use Session(isolate=False)")
        return v

    def forget(self, keys: list[str]) -> None:
        """Drop the worker's kernels of these revisions (replaced cells)."""
        keys = with_variants(keys, self._checked)
        with self._lock:
            keys = [k for k in keys if k in self._proc.loaded]
            if keys and self._proc.channel is not None:
                self._proc.loaded.difference_update(keys)
                self._proc.channel.send({"op": "forget", "keys": keys})

    # -- device-resident objects --------------------------------------------------------------------

    def buffer(self, array_or_shape: Any, dtype: Any = None) -> "VulkanBufferHandle":
        """A device buffer: from an array (uploaded) or a shape (+ dtype, default float32; zero-filled)."""
        reply, oid = self._new("buffer", array_or_shape, dtype, 2)
        return VulkanBufferHandle(self, oid, reply)

    def texture(self, array_or_shape: Any, dtype: Any = None, *, dims: int = 2) -> "VulkanTextureHandle":
        """A device texture from an (H, W, C) array (uint8 -> *8_unorm, float32 -> *32_float) or a shape."""
        reply, oid = self._new("texture", array_or_shape, dtype, dims)
        return VulkanTextureHandle(self, oid, reply, dims)

    def sampler(self, spec: Any = None) -> Any:
        """A sampler, made in the worker where it is used: None/"linear", "point"/"nearest" or a dict."""
        if spec is not None and not isinstance(spec, (str, Mapping)):
            raise ParameterError(f"a SamplerState needs None, 'linear', 'point' or a dict of options here (the "
                                 f"device is in a worker process); got {type(spec).__name__}")
        return spec

    def _new(self, kind: str, source: Any, dtype: Any, dims: int) -> tuple[Reply, int]:
        arrays: list[np.ndarray] = []
        if isinstance(source, np.ndarray) or (not isinstance(source, (int, tuple)) and hasattr(source, "__array__")):
            source = np.asarray(source)
            arrays.append(source)
        oid = next(self._ids)
        with self._lock:
            slots = self._stage(arrays)
            msg = {"op": "new", "id": oid, "kind": kind, "source": slots[0] if slots else source,
                   "dtype": dtype, "dims": dims}
            return self._call(msg, f"making a {kind}"), oid

    def _read(self, h: "_Handle") -> np.ndarray:
        with self._lock:
            oid = h._live(self, "")
            need = h.nbytes
            if self._staging is None or self._staging.size < need:
                self._new_staging(max(need, 1 << 20))
            staging = self._staging
            assert staging is not None
            self._mapped(staging)
            out = ArraySlot(staging.id, 0, h.shape, h.dtype)
            self._call({"op": "read", "id": oid, "slot": out}, f"reading {h.label}")
            data: np.ndarray = self._slot_array(out).copy()
            return data

    def _frame(self, h: "_Handle", rgba8: bool) -> np.ndarray:
        """The worker reads `h` straight into the handle's own frame segment (mapped once); the
        caller gets a read-only view on it: one host copy per frame instead of two. rgba8 (a float
        2D texture): the worker converts as it copies, and 1/4 of the bytes cross."""
        rgba8 = rgba8 and h.dtype.kind == "f" and len(h.shape) == 3
        shape, dtype = ((*h.shape[:2], 4), np.dtype(np.uint8)) if rgba8 else (h.shape, h.dtype)
        with self._lock:
            oid = h._live(self, "")
            if rgba8 not in h._frames:
                seg = _shm.Segment(max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1), "slang-kernel-frame")
                view = seg.array(shape, dtype)
                view.flags.writeable = False
                h._frames[rgba8] = (seg, view)
            seg, view = h._frames[rgba8]
            self._mapped(seg)
            reply = self._call({"op": "read", "id": oid, "slot": ArraySlot(seg.id, 0, shape, dtype), "rgba8": rgba8},
                               f"reading {h.label}")
            self.last_worker_us = float(reply.get("us", 0.0))
            return view

    def _write(self, h: "_Handle", array: Any) -> None:
        arr = np.asarray(array)
        with self._lock:
            oid = h._live(self, "")
            slots = self._stage([arr])
            self._call({"op": "write", "id": oid, "slot": slots[0]}, f"uploading to {h.label}")
