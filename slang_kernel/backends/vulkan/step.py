"""Vulkan replay of a step (slang_kernel.steps.Step): every launch of a call in one command buffer.

A call dispatches each kernel with its own command encoder and submission. A step binds its
launches' values once (device buffers and textures, scalars, small values the _Binder makes without
uploading anything) and, per `run(times)`, records `times` rounds of all launches into one command
encoder (a compute pass each, so slang-rhi puts its barriers between them) with one submission.
In the worker process (`isolated`) one round trip then carries a whole `run`.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import numpy as np

from ...compiled import CompiledKernel
from ...compiler.reflection import TypeInfo
from ..common.packing import ParameterError
from .binding import BindingHost, _Binder
from .prepared import Prepared, bind_values

__all__ = ["IsolatedHost", "IsolatedStep", "VulkanHost", "VulkanStep"]


class VulkanHost(BindingHost, Protocol):
    """What a step in this process uses of the Vulkan backend (device.VulkanBackend)."""

    def prepare(self, kernel: CompiledKernel) -> Prepared: ...
    def replay(self, launches: list[tuple[Prepared, tuple[int, int, int], list[Any], str]], times: int,
               wait: bool = False) -> None: ...


class IsolatedHost(Protocol):
    """What a step of the worker process uses of its backend (isolated.IsolatedVulkanBackend)."""

    def run_step(self, step_id: int, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]],
                 times: int) -> None: ...


class VulkanStep:
    mode = "one command buffer per call"

    def __init__(self, backend: VulkanHost, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]
                 ) -> None:
        self.backend = backend
        self.items: list[tuple[Prepared, tuple[int, int, int], list[Any], str]] = []
        self._binder = _Binder(backend)   # holds what it made (no uploads: refused below) while the step lives
        for kernel, groups, values in launches:
            if 0 in groups:
                continue
            pk = backend.prepare(kernel)
            if pk.printf:
                raise ParameterError(f"Step: {kernel.entry} uses printf, which a replayed step does not show; "
                                     "call the kernel instead")
            self.items.append((pk, groups, bind_values(pk, values, backend, self._no_host(kernel.entry)), kernel.entry))

    def _no_host(self, entry: str) -> Any:
        """The _Binder for what it makes without uploads (vectors, structs, samplers); host data refused."""
        binder = self._binder

        def slow(t: TypeInfo, v: Any, name: str) -> Any:
            obj = binder.value(t, v, name)
            if binder.copies_in or binder.clears or binder.writeback:
                raise ParameterError(
                    f"Step: {entry}'s parameter `{name}` is host data, which a replayed step would have to upload "
                    "and read back at every launch: pass backend.buffer(...) / backend.texture(...), used in place")
            return obj
        return slow

    def run(self, times: int, wait: bool = False) -> None:
        if times and self.items:
            self.backend.replay(self.items, times, wait)

    def close(self) -> None:
        self._binder.release()


class IsolatedStep:
    """The step of a device in the worker process: one message (and one wait) per `run`."""

    mode = "one command buffer and one round trip per call (worker process)"

    def __init__(self, backend: IsolatedHost, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]],
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
        if times and self.launches:
            self.backend.run_step(self.id, self.launches, times)
