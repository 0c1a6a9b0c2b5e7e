"""CUDA backend: Slang's CUDA output compiled by NVRTC through CuPy, launched on CuPy arrays.

Calling convention (SLANG_FACTS.md, checked on an H200): entry-point uniforms are separate kernel
arguments, buffers are {pointer, count} structs passed by value, globals live in
`__constant__ SLANG_globalParams`. Launches go through cuLaunchKernel with one pointer per
argument, so every argument's size and alignment come from the compiled kernel itself.
Data already on the GPU (CuPy arrays, anything with __cuda_array_interface__ or DLPack) is used in
place; numpy arrays are copied in and RW ones copied back. Textures, surfaces and samplers are in
textures (CUDA arrays with texture/surface objects); `half` needs CUDA's fp16 header (fp16).
ParameterBlock<T> and ConstantBuffer<T> are pointers to the packed struct (resources inside included).
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...compiler.reflection import TypeInfo
from .. import BackendConfig, DispatchTiming
from ...compiled import CompiledKernel
from ...errors import BackendUnavailable
from .fp16 import half_options, uses_half
from .textures import (CudaSampler, CudaTexture, TextureBinder, dispatch_sampler, sampler_from, sampler_paths,
                             unsupported_texture_use)
from ..common.packing import Packer, ParameterError, buffer_array, element_dtype, fast_writer
from ..common.bounds import CUDA_BOUNDS_REPORT, CUDA_REPORT_BYTES
from ..common.wait import wait_polled
from ..common.generated import TYPED_AS_STRUCTURED, body as _body


__all__ = ["CudaBackend", "create"]

NVRTC_OPTIONS = ("--std=c++17", "-default-device", "-lineinfo")
CHECKED_PRELUDE = Path(__file__).with_name("cuda_prelude.h")   # after common/cuda_bounds_report.h


@functools.cache
def _checked_prelude() -> str:
    """What checked CUDA code starts with: the out-of-range report, then the bound-check macros (read once)."""
    return CUDA_BOUNDS_REPORT.read_text() + CHECKED_PRELUDE.read_text()


def create(config: BackendConfig) -> "CudaBackend":
    return CudaBackend(config)


def _on_device(value: Any) -> Any | None:
    """A CuPy view of data that is already on the GPU, without copying; None for host data."""
    import cupy

    if isinstance(value, cupy.ndarray):
        return value
    if hasattr(value, "__cuda_array_interface__"):
        return cupy.asarray(value)
    if hasattr(value, "__dlpack_device__") and not isinstance(value, np.ndarray):
        dev_type, _ = value.__dlpack_device__()
        if dev_type in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
            return cupy.from_dlpack(value)
    return None


class CudaBackend:
    capabilities: frozenset[str] = frozenset({"textures", "timing", "replay"})   # CuPy arrays are device-resident buffers already
    name = "cuda"
    target = "cuda"
    gpu = True

    def __init__(self, config: BackendConfig | None = None) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailable(
                f"CuPy is not installed ({exc}): pip install 'slang-kernel[cuda]' (cupy-cuda12x) or "
                "the cupy-cuda13x wheel matching your driver") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # no driver, no device
            raise BackendUnavailable(f"no CUDA device: {exc}") from None
        if count == 0:
            raise BackendUnavailable("no CUDA device")
        self.cupy = cupy
        self.config = config or BackendConfig()
        self.device = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(self.device.id)
        self._name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self._modules: dict[str, Any] = {}
        self._plans: dict[tuple[str, bool], _Plan] = {}  # (kernel key, checked)
        self._launch = cupy.cuda.driver.launchKernel
        self._stream = cupy.cuda.get_current_stream
        # plans of kernels with only argument slots (no globals, textures, printf, bounds report, timeout):
        # a call with the very objects of the previous call is one cuLaunchKernel (_Plan.relaunch)
        self._plain: dict[str, _Plan] = {}
        self._last_pointers: dict[int, str] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"{self._name} (CUDA, CuPy {self.cupy.__version__})"

    def compile_options(self, target: str) -> tuple[str, ...]:
        """Slang's CUDA target compiles typed Buffer<T>/RWBuffer<T> accesses to nothing (2026.12: an empty
        kernel, shader-slang/slang#12274), as its C++ target does: the typed names mean the structured
        ones here too ({T* data; size_t count}), which bind like any structured buffer."""
        return TYPED_AS_STRUCTURED if target == "cuda" else ()

    @property
    def checked(self) -> bool:
        return self.config.checked

    def load(self, kernel: CompiledKernel) -> tuple[Any, Any]:
        key = f"{kernel.key}/checked" if self.checked else kernel.key
        with self._lock:
            hit = self._modules.get(key)
            if hit is None:
                code = kernel.code
                if self.checked:
                    code = _checked_prelude() + code
                options: tuple[str, ...] = NVRTC_OPTIONS
                body = _body(kernel.code)
                refused = unsupported_texture_use(body)
                if refused is not None:
                    raise NotImplementedError(f"{kernel.entry} ({kernel.cell}) {refused}")
                if uses_half(body):
                    options = (*options, *half_options(self.cupy, kernel.entry, kernel.cell))
                try:
                    mod = self.cupy.RawModule(code=code, options=options)
                    fn = mod.get_function(kernel.entry)
                    fn = getattr(fn, "kernel", fn)  # CuPy 13+: RawKernel wraps the driver Function
                except self.cupy.cuda.compiler.CompileException as exc:
                    raise RuntimeError(
                        f"NVRTC could not compile the CUDA Slang generated for {kernel.entry} ({kernel.cell}):\n"
                        f"{str(exc)[-3000:]}") from None
                hit = self._modules[key] = (mod, fn)
        return hit

    # -- textures (the "textures" capability) -------------------------------------------------------

    def texture(self, array_or_shape: Any, dtype: Any = None, *, dims: int = 2, layered: bool = False) -> CudaTexture:
        """A device texture from an (H, W, C) numpy/CuPy array ((W, C) 1D, (D, H, W, C) 3D, (L, H, W, C) with
        layered=True for a Texture2DArray), or from a shape and dtype (float32 by default)."""
        nd = dims + (1 if layered else 0)
        if not isinstance(array_or_shape, (int, tuple, list)):
            arr = array_or_shape if isinstance(array_or_shape, self.cupy.ndarray) else np.asarray(array_or_shape)
            if dtype is not None:
                arr = arr.astype(dtype, copy=False)
            tex = CudaTexture(self.cupy, self, tuple(arr.shape) if arr.ndim > nd else (*arr.shape, 1), arr.dtype,
                              dims, layered)
            tex.upload(arr)
            return tex
        shape = (array_or_shape,) if isinstance(array_or_shape, int) else tuple(array_or_shape)
        tex = CudaTexture(self.cupy, self, shape, np.dtype(dtype or np.float32), dims, layered)
        tex.upload(np.zeros(tex.shape, tex.dtype))
        return tex

    def sampler(self, spec: Any = None) -> CudaSampler:
        """A sampler state: None/"linear", "point"/"nearest", "linear_clamp", "point_clamp", or a dict
        ({"filter": "point", "address": "clamp"}); on CUDA it is applied inside each texture object."""
        return sampler_from(spec)

    # -- packing ------------------------------------------------------------------------------------

    def _bind(self, writebacks: list[tuple[np.ndarray, Any]], textures: TextureBinder | None = None) -> Any:
        cupy = self.cupy

        def bind(name: str, t: TypeInfo, value: Any, packer: Packer) -> bytes:
            if t.kind in ("constant_buffer", "parameter_block") and t.element is not None:
                inner = packer.encode(t.element, value, name)   # nested resources bind through here too
                dev = cupy.asarray(np.frombuffer(inner, np.uint8))
                packer.keepalive.append(dev)
                return struct.pack("<Q", dev.data.ptr)
            if t.kind == "sampler":
                sampler_from(value)   # checked here; its state went into the dispatch's texture objects
                return struct.pack("<Q", 0)
            if t.is_texture:
                if textures is None:
                    raise ParameterError(f"parameter `{name}` is {t.name}: no texture binder for this dispatch")
                return struct.pack("<Q", textures.bind(name, t, value))
            if not t.is_buffer:
                raise ParameterError(
                    f"parameter `{name}` is {t.name}: the CUDA backend does not bind {t.shape or t.kind}")
            dev = _on_device(value)
            if dev is not None:
                count = self._check_device_array(dev, name, t)
            else:
                host, count = buffer_array(value, name, t)
                dev = cupy.asarray(host)
                if t.writable:
                    writebacks.append((host, dev))
            packer.keepalive.append(dev)
            if self.checked:
                self._last_pointers[int(dev.data.ptr)] = name  # to name a buffer in a bounds report
            return struct.pack("<QQ", dev.data.ptr, count)

        return bind

    def _check_device_array(self, dev: Any, name: str, t: TypeInfo) -> int:
        if t.shape == "byte_address_buffer":
            return int(dev.nbytes)
        base, shape = element_dtype(t.element) if t.element is not None else (np.dtype(np.uint8), ())
        if dev.dtype != base or not dev.flags.c_contiguous:
            raise ParameterError(
                f"parameter `{name}` ({t.name}) needs a C-contiguous GPU array of {base}"
                f"{' with trailing shape ' + str(shape) if shape else ''}; got {dev.dtype} {dev.shape}")
        if shape and tuple(dev.shape[-len(shape):]) != shape:
            raise ParameterError(f"parameter `{name}` ({t.name}): trailing shape must be {shape}; got {dev.shape}")
        return int(dev.size // max(1, int(np.prod(shape))))

    def _plan(self, kernel: CompiledKernel) -> "_Plan":
        key = (kernel.key, self.checked)
        plan = self._plans.get(key)
        if plan is None:
            mod, fn = self.load(kernel)
            plan = self._plans[key] = _Plan(kernel, self.cupy, mod, fn, self.checked)
            if plan.plain and self.config.timeout is None:
                self._plain[kernel.key] = plan
        return plan

    # -- what a replayed step uses (step.CudaHost) ----------------------------------------------

    def plan(self, kernel: CompiledKernel) -> "_Plan":
        """The kernel's launch plan (argument slots, encoders, globals) on this backend."""
        return self._plans.get((kernel.key, self.checked)) or self._plan(kernel)

    def device_binder(self) -> Any:
        """The general packer's binder for device-resident values only (no host copies, no textures)."""
        return self._bind([], None)

    def launch(self, fn: int, groups: tuple[int, int, int], block: tuple[int, int, int], stream: int,
               params: int) -> None:
        """One cuLaunchKernel of a plan's function with its argument block."""
        self._launch(fn, *groups, *block, 0, stream, params, 0)

    def prepare_step(self, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]) -> Any:
        """The "replay" capability (slang_kernel.steps.Step, which never asks a checked session): see step."""
        from .step import CudaStep

        return CudaStep(self, launches)

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any],
                 marks: dict[str, Any] | None = None) -> None:
        try:
            plain = self._plain.get(kernel.key)
            if plain is not None and marks is None and plain.relaunch(values, groups, self._stream().ptr):
                return
            self._dispatch(kernel, groups, values, marks)
        except (self.cupy.cuda.driver.CUDADriverError, self.cupy.cuda.runtime.CUDARuntimeError) as exc:
            raise _device_lost(kernel.entry, exc) from exc

    def dispatch_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                       values: Mapping[str, Any]) -> DispatchTiming:
        """A dispatch with the run timed by CUDA events around the launch; binding/uploads and
        readbacks by the wall clock (the timed path waits for the kernel before reading back)."""
        m: dict[str, Any] = {"events": (self.cupy.cuda.Event(), self.cupy.cuda.Event())}
        self.dispatch(kernel, groups, values, m)
        start, end = m["events"]
        run = float(self.cupy.cuda.get_elapsed_time(start, end))
        return DispatchTiming((m["bound"] - m["start"]) * 1000, run, (m["read"] - m["ran"]) * 1000, True, "CUDA events")

    def _dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any],
                  marks: dict[str, Any] | None = None) -> None:
        plan = self._plans.get((kernel.key, self.checked)) or self._plan(kernel)
        if marks is not None:
            marks["start"] = time.perf_counter()
        if plan.report is not None:
            self._last_pointers.clear()
        writebacks: list[tuple[np.ndarray, Any]] = []
        binder = TextureBinder(self.cupy, self, dispatch_sampler(plan.samplers, values, kernel.entry), _on_device) \
            if plan.textured else None
        stream = self.cupy.cuda.get_current_stream()
        with plan.lock:  # the argument slots are reused from launch to launch
            packer = plan.pack(values, lambda: Packer(self._bind(writebacks, binder)))
            if plan.globals:
                held = tuple(values.get(g.name) for g in plan.globals)
                if plan.last_globals is None or any(a is not b for a, b in zip(held, plan.last_globals)):
                    plan.last_globals = None
                    packer = packer or Packer(self._bind(writebacks, binder))
                    plan.upload_globals(plan.pack_globals(packer, values))
                    # the same objects again need no upload where their bytes cannot change: Python
                    # scalars and CuPy arrays (a pointer and a count), as the argument slots above
                    if all(v is None or _unchanging(v, self.cupy.ndarray) for v in held):
                        plan.last_globals = held
            if plan.report is not None:
                plan.report.memset_async(0, CUDA_REPORT_BYTES, stream)
            if marks is not None:
                marks["bound"] = time.perf_counter()
                marks["events"][0].record(stream)
            self._launch(plan.fn_ptr, *groups, *plan.block, 0, stream.ptr, plan.params_ptr, 0)
            if marks is not None:
                marks["events"][1].record(stream)
        timeout = self.config.timeout
        if timeout is not None:  # (a plain synchronize reports a faulting kernel at once; polling is the opt-in)
            self._wait(stream, kernel.entry, timeout)
        if marks is not None:
            marks["events"][1].synchronize()
            marks["ran"] = time.perf_counter()
        for host, dev in writebacks:
            dev.get(out=host, stream=stream)
        if binder is not None:
            binder.write_back()
        if writebacks or plan.printf:
            stream.synchronize()
        if marks is not None:
            marks["read"] = time.perf_counter()
        if plan.report is not None:   # after the write-back: in-range results reach the arrays, as on the CPU
            self._check_bounds(plan.report, kernel, values, stream, packer)

    def _wait(self, stream: Any, entry: str, timeout: float | None) -> None:
        """With Session(timeout=): poll an event recorded after the launch (see _wait.wait_polled)."""
        done = self.cupy.cuda.Event(disable_timing=True)
        done.record(stream)
        query = self.cupy.cuda.runtime.eventQuery  # raises on a failed kernel; 0 when done
        wait_polled(lambda: query(done.ptr) == 0, entry, timeout, self._name, "CUDA")

    def _check_bounds(self, device_report: Any, kernel: CompiledKernel, values: Mapping[str, Any],
                      stream: Any, packer: Packer | None) -> None:
        """Checked sessions: read the device's report of the first out-of-range index, name its buffer."""
        from ...errors import BoundsError

        report = np.zeros(7, np.uint64)
        stream.synchronize()
        device_report.copy_to_host(report.ctypes.data, CUDA_REPORT_BYTES)
        count, index, size, data, x, y, z = (int(v) for v in report)
        if not count:
            return
        pointers = dict(self._last_pointers)
        for name, v in values.items():
            dev = _on_device(v) if not isinstance(v, np.ndarray) else None
            if dev is not None:
                pointers[int(dev.data.ptr)] = name
        raise BoundsError(kernel.entry, count, index, size, pointers.get(data) or ("a local array" if not data else None),
                          (x, y, z))

    def forget(self, keys: list[str]) -> None:
        gone = set(keys)
        with self._lock:
            for plan in [p for p in self._plans if p[0] in gone]:
                del self._plans[plan]
            for mod in [m for m in self._modules if m.removesuffix("/checked") in gone]:
                del self._modules[mod]

    def reset(self) -> None:
        """Drop the loaded modules (a CUDA context that a sticky error broke cannot be reset in-process)."""
        self.close()

    def close(self) -> None:
        self._modules.clear()
        self._plans.clear()


# Errors after which CUDA refuses the context for good, as CUDA/CuPy spell them without "_" and case.
_STICKY = ("illegaladdress", "invalidaddressspace", "launchfail", "illegalinstruction", "misalignedaddress",
           "hardwarestackerror", "invalidpc", "assert", "illegal memory access", "unspecified launch failure")


def _device_lost(entry: str, exc: Exception) -> Exception:
    """A CUDA error while running `entry`: sticky ones break the context for good, so say what to do."""
    from ...errors import DeviceLost

    text = str(exc)
    flat = text.replace("_", "").lower()
    if any(word in flat for word in _STICKY):
        return DeviceLost(
            f"{entry}: the GPU reported {text}. CUDA keeps this error for the rest of the process, so "
            "this Python kernel can no longer use the GPU: restart the notebook's kernel (your cells "
            "re-run as before). To find the out-of-range index, run it with Session(checked=True), "
            "which reports the kernel, buffer and index instead of breaking the context.")
    return RuntimeError(f"{entry}: CUDA error {text}")


class _Plan:
    """Per-kernel fast encoders for the common argument kinds (scalars, CuPy arrays as buffers), so
    a launch costs little more than CuPy's own; anything else takes the general packer."""

    def __init__(self, kernel: CompiledKernel, cupy: Any, module: Any, fn: Any, checked: bool = False) -> None:
        self.entry = kernel.entry_point
        self.module, self.fn_ptr = module, fn.ptr
        self.block = self.entry.numthreads
        # a kernel that uses none of its module's globals has no SLANG_globalParams symbol to fill
        self.globals = kernel.reflection.globals if "SLANG_globalParams" in _body(kernel.code) else ()
        self.params = [(p, fast_writer(p.type, cupy.ndarray, _device_pointer)) for p in self.entry.uniforms]
        self.slots = [ctypes.create_string_buffer(max(16, p.type.size)) for p in self.entry.uniforms]
        self.args = [(p.name, w, slot) for (p, w), slot in zip(self.params, self.slots)]
        # per slot, the value it was last written from by a fast writer (kept alive here, so that an
        # identical object means identical bytes): a loop passing the same arrays packs nothing
        self.last: list[Any] = [_UNSET] * len(self.slots)
        self.last_globals: tuple[Any, ...] | None = None   # the globals' values at the last upload, likewise
        self._params = (ctypes.c_void_p * max(1, len(self.slots)))(*[ctypes.addressof(b) for b in self.slots])
        self.params_ptr = ctypes.addressof(self._params)
        self.lock = threading.Lock()
        self.printf = "printf" in _body(kernel.code)
        self.report = module.get_global("sk_bounds_report") if checked else None
        every = [*self.entry.uniforms, *self.globals]
        self.samplers = sampler_paths(every)
        self.textured = bool(self.samplers) or any(_has_texture(p.type) for p in every)
        self.globals_size = kernel.reflection.globals_size
        self.name = kernel.entry
        self.plain = not (self.globals or self.textured or self.printf or checked)
        self._launch = cupy.cuda.driver.launchKernel
        self._names = tuple(p.name for p in self.entry.uniforms)
        self.array_type = cupy.ndarray

    def relaunch(self, values: Mapping[str, Any], groups: tuple[int, int, int], stream: int) -> bool:
        """Launch at once if every argument is the very object its slot was last written from (their
        bytes cannot have changed: see pack); False (nothing done) otherwise, for the full path."""
        if 0 in groups:
            return False
        with self.lock:
            last = self.last
            i = 0
            try:
                for name in self._names:
                    if values[name] is not last[i]:
                        return False
                    i += 1
            except KeyError:
                return False
            self._launch(self.fn_ptr, groups[0], groups[1], groups[2], *self.block, 0, stream, self.params_ptr, 0)
            return True

    def pack(self, values: Mapping[str, Any], new_packer: Callable[[], Packer],
             slots: list[Any] | None = None) -> Packer | None:
        """Write each argument into its slot: the fast writers where they take the value, else the
        general packer (made by `new_packer` at the first such value; returned, to keep what it holds
        alive). slots: other slots than the plan's own (a replayed step's), written in full; the
        plan's own skip a value that is the very object they were last written from (held in
        `last`, so its id cannot be reused): a loop passing the same arrays packs nothing."""
        packer: Packer | None = None
        own = slots is None
        last = self.last
        for i, (name, write, slot) in enumerate(self.args):
            v = values[name]
            if own:
                if v is last[i]:
                    continue
            else:
                slot = slots[i]   # type: ignore[index]
            if write is not None and write(v, slot):
                if own:
                    last[i] = v if _unchanging(v, self.array_type) else _UNSET
                continue
            if own:
                last[i] = _UNSET
            p = self.params[i][0]
            packer = packer or new_packer()
            data = packer.encode(p.type, v, p.name)
            if len(data) > len(slot):
                raise ParameterError(f"{self.name}: `{p.name}` encoded to {len(data)} bytes, more than its "
                                     f"{len(slot)}-byte argument slot")
            ctypes.memmove(slot, data, len(data))
        return packer

    def pack_globals(self, packer: Packer, values: Mapping[str, Any]) -> bytes:
        """The bytes of `__constant__ SLANG_globalParams` for these values."""
        return bytes(packer.pack_struct(self.globals, self.globals_size, values, ""))

    def upload_globals(self, data: bytes) -> None:
        """Upload the globals' bytes (a call after it packs and uploads its own again)."""
        host = np.frombuffer(data, np.uint8)
        self.module.get_global("SLANG_globalParams").copy_from_host(host.ctypes.data, host.nbytes)
        self.last_globals = None


_UNSET = object()


def _unchanging(v: Any, array_type: type[Any]) -> bool:
    """Whether the bytes packed from `v` cannot change while the object lives, so that the very object
    again needs no packing: Python and numpy scalars, and CuPy arrays (a pointer and a count); not a
    0-d numpy array, whose value can be set in place."""
    t = type(v)
    return t is float or t is int or t is bool or t is array_type or isinstance(v, np.generic)


def _device_pointer(a: Any) -> int:
    return int(a.data.ptr)


def _has_texture(t: TypeInfo) -> bool:
    """Does a parameter of type `t` hold a texture somewhere (fields, arrays, parameter blocks)?"""
    if t.is_texture:
        return True
    if t.kind in ("struct",):
        return any(_has_texture(f.type) for f in t.fields)
    return t.element is not None and t.kind in ("array", "constant_buffer", "parameter_block") and _has_texture(t.element)
