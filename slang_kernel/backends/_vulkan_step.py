"""Vulkan replay of a step (slang_kernel.steps.Step): every launch of a call in one command buffer.

A call dispatches each kernel with its own command encoder and submission. A step binds its
launches' values once (device buffers and textures, scalars, small values the _Binder makes without
uploading anything) and, per `run(times)`, records `times` rounds of all launches into one command
encoder (a compute pass each, so slang-rhi puts its barriers between them) with one submission.
In the worker process (`_vulkan_isolated`) one round trip then carries a whole `run`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..compiled import CompiledKernel
from .packing import ParameterError
from ._vulkan_binding import _Binder
from ._vulkan_objects import VulkanBuffer, VulkanTexture
from ._vulkan_prepared import F_BUF, F_FLOAT, F_INT, F_TEX, MISSING, Prepared, write_changed

__all__ = ["IsolatedStep", "VulkanStep"]


class VulkanStep:
    mode = "one command buffer per call"

    def __init__(self, backend: Any, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]
                 ) -> None:
        self.backend = backend
        self.device = backend.device
        self.items: list[tuple[Prepared, tuple[int, int, int], list[Any], str]] = []
        self._binder = _Binder(backend)   # holds what it made (no uploads: refused below) while the step lives
        for kernel, groups, values in launches:
            if 0 in groups:
                continue
            pk = backend._prepare(kernel)
            if pk.printf:
                raise ParameterError(f"Step: {kernel.entry} uses printf, which a replayed step does not show; "
                                     "call the kernel instead")
            objs: list[Any] = []
            for name, t, fast, _ in pk.params:
                v = values.get(name, MISSING)
                tv = type(v)
                if v is MISSING:
                    objs.append(v)
                elif fast == F_BUF and tv is VulkanBuffer and v.backend is backend:
                    objs.append(v.sgl)
                elif fast == F_TEX and tv is VulkanTexture and v.backend is backend:
                    objs.append(v.sgl)
                elif fast == F_INT and tv is int:
                    objs.append(v)
                elif fast == F_FLOAT and (tv is float or tv is int):
                    objs.append(float(v))
                else:
                    objs.append(self._binder.value(t, v, name))
                    if self._binder.uploads or self._binder.clears or self._binder.writeback:
                        raise ParameterError(
                            f"Step: {kernel.entry}'s parameter `{name}` is host data, which a replayed step would "
                            "have to upload and read back at every launch: pass backend.buffer(...) / "
                            "backend.texture(...), used in place")
            self.items.append((pk, groups, objs, kernel.entry))

    def run(self, times: int, wait: bool = False) -> None:
        if times == 0 or not self.items:
            return
        b = self.backend
        with b._lock:
            encoder = self.device.create_command_encoder()
            for _ in range(times):
                for pk, groups, objs, entry in self.items:
                    write_changed(pk, objs, b._by_ref, entry)   # sgl snapshots the bindings per dispatch
                    with encoder.begin_compute_pass() as cpass:
                        cpass.bind_pipeline(pk.sk.pipeline, pk.root)
                        cpass.dispatch_compute(groups)
            submit = self.device.submit_command_buffer(encoder.finish())
        timeout = b.config.timeout
        if wait and timeout is None:
            self.device.wait_for_submit(submit)
        elif wait or timeout is not None:
            b._wait(submit, self.items[0][3], timeout)

    def close(self) -> None:
        self._binder.release()


class IsolatedStep:
    """The step of a device in the worker process: one message (and one wait) per `run`."""

    mode = "one command buffer and one round trip per call (worker process)"

    def __init__(self, backend: Any, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]],
                 step_id: int) -> None:
        self.backend, self.id = backend, step_id
        self.launches = [(k, g, v) for k, g, v in launches if 0 not in g]
        for kernel, _, values in self.launches:
            for name, v in values.items():
                if isinstance(v, np.ndarray):
                    raise ParameterError(
                        f"Step: {kernel.entry}'s parameter `{name}` is a numpy array, which a replayed step would "
                        "have to copy at every launch: pass backend.buffer(...) / backend.texture(...)")

    def run(self, times: int) -> None:
        if times == 0 or not self.launches:
            return
        b = self.backend
        sent = [(k.key, g, {n: v if isinstance(v, (int, float, str)) else b._refs(v, n) for n, v in values.items()})
                for k, g, values in self.launches]
        entry = self.launches[0][0].entry
        with b._lock:
            for kernel, _, _ in self.launches:
                if kernel.key not in b._proc.loaded:
                    b._call({"op": "load", "kernel": kernel}, f"{kernel.entry} (building it for Vulkan)", kernel.entry)
                    b._proc.loaded.add(kernel.key)
            b._call({"op": "step", "id": self.id, "launches": sent, "times": times}, f"a step of {entry}", entry,
                    b.timeout)
