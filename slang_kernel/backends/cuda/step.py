"""CUDA replay of a step (slang_kernel.steps.Step): argument blocks packed once, launched as they are.

Each launch gets its own argument slots, written once by the same encoders a call uses; a replay
is then one cuLaunchKernel per launch with no Python packing. Where every kernel's globals stay the
same through the step (each kernel has its own module, so only one kernel launched twice with
different globals prevents it), one step is captured as a CUDA graph through CuPy and replayed with
one graph launch per step. The globals (`__constant__ SLANG_globalParams`) are uploaded once per
`run`, since an ordinary call of the same kernel may have changed them in between.
"""

from __future__ import annotations

import ctypes
from typing import Any, Mapping, Protocol

import numpy as np

from ...compiled import CompiledKernel
from ..common.packing import Packer, ParameterError

__all__ = ["CudaHost", "CudaStep"]


class CudaHost(Protocol):
    """What a step uses of the CUDA backend (cuda.py), and nothing else."""

    cupy: Any

    def plan(self, kernel: CompiledKernel) -> Any: ...
    def device_binder(self) -> Any: ...
    def launch(self, fn: int, groups: tuple[int, int, int], block: tuple[int, int, int], stream: int,
               params: int) -> None: ...


class _Item:
    __slots__ = ("plan", "fn", "groups", "block", "params_ptr", "glob")

    def __init__(self, plan: Any, groups: tuple[int, int, int], params_ptr: int, glob: bytes | None) -> None:
        self.plan, self.fn, self.groups, self.block = plan, plan.fn_ptr, groups, plan.block
        self.params_ptr, self.glob = params_ptr, glob


class CudaStep:
    def __init__(self, backend: CudaHost, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]],
                 graph: bool = True) -> None:
        self.cupy = backend.cupy
        self._launch = backend.launch
        self.items: list[_Item] = []
        self._keep: list[Any] = []
        globs: dict[int, bytes] = {}
        conflict = False
        for kernel, groups, values in launches:
            if 0 in groups:
                continue
            plan = backend.plan(kernel)
            what = "textures" if plan.textured else "printf" if plan.printf else None
            if what is not None:
                raise ParameterError(f"Step: {kernel.entry} uses {what}, which a replayed step does not support "
                                     "on CUDA; call the kernel instead")
            bind = _device_only(backend.device_binder(), kernel.entry)
            made: list[Packer] = []     # one general packer per launch, made when first needed

            def packer_of(bind: Any = bind, made: list[Packer] = made) -> Packer:
                if not made:
                    made.append(Packer(bind))
                return made[0]

            slots = [ctypes.create_string_buffer(len(s)) for s in plan.slots]
            plan.pack(values, packer_of, slots)
            glob = None
            if plan.globals:
                glob = plan.pack_globals(packer_of(), values)
                seen = globs.setdefault(id(plan.module), glob)
                conflict = conflict or seen != glob
            params = (ctypes.c_void_p * max(1, len(slots)))(*[ctypes.addressof(b) for b in slots])
            self._keep += [slots, params, made]
            self.items.append(_Item(plan, groups, ctypes.addressof(params), glob))
        self.reupload = conflict      # one kernel launched with two sets of globals: upload before each launch
        self.graph: Any = None
        self._try_graph = graph and not conflict
        self.mode = "cached launches"

    def _upload(self, item: _Item) -> None:
        if item.glob is not None:
            item.plan.upload_globals(item.glob)   # a call of this kernel uploads its own globals again

    def _launch_all(self, stream_ptr: int) -> None:
        launch = self._launch
        for it in self.items:
            if self.reupload and it.glob is not None:
                self._upload(it)
            launch(it.fn, it.groups, it.block, stream_ptr, it.params_ptr)

    def _capture(self) -> None:
        """One step as a CUDA graph (kernel nodes copy their arguments when captured)."""
        self._try_graph = False
        cupy = self.cupy
        side = cupy.cuda.Stream(non_blocking=True)
        try:
            with side:
                side.begin_capture()
                try:
                    self._launch_all(side.ptr)
                finally:
                    graph = side.end_capture()
        except Exception as exc:   # CuPy or the driver refused the capture: cached launches, saying why
            self.mode = f"cached launches (no CUDA graph: {type(exc).__name__}: {str(exc)[:200]})"
            return
        self.graph, self._side = graph, side
        self.mode = "cuda graph"

    def run(self, times: int) -> None:
        if not self.reupload:
            for it in self.items:
                self._upload(it)
        if self._try_graph:
            self._capture()
        stream = self.cupy.cuda.get_current_stream()
        if self.graph is not None:
            launch = self.graph.launch
            for _ in range(times):
                launch(stream)
            return
        ptr = stream.ptr
        for _ in range(times):
            self._launch_all(ptr)


def _device_only(bind: Any, entry: str) -> Any:
    """The backend's binder, refusing host (numpy) buffers: a replayed step would use the copy made
    when it was bound, and could not copy written ones back."""
    def checked(name: str, t: Any, value: Any, packer: Packer) -> bytes:
        if t.is_buffer and isinstance(value, np.ndarray):
            raise ParameterError(f"Step: {entry}'s parameter `{name}` is a numpy array, which a replayed step would "
                                 f"copy only once: pass a CuPy array, used in place (`{name} = cupy.asarray({name})`)")
        data: bytes = bind(name, t, value, packer)
        return data
    return checked
