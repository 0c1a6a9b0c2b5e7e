"""CUDA backend: Slang's CUDA output compiled by NVRTC through CuPy, launched on CuPy arrays.

Calling convention (SLANG_FACTS.md, checked on an H200): entry-point uniforms are separate kernel
arguments, buffers are {pointer, count} structs passed by value, globals live in
`__constant__ SLANG_globalParams`. Launches go through cuLaunchKernel with one pointer per
argument, so every argument's size and alignment come from the compiled kernel itself.
Data already on the GPU (CuPy arrays, anything with __cuda_array_interface__ or DLPack) is used in
place; numpy arrays are copied in and RW ones copied back.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..compiler.reflection import TypeInfo
from . import BackendUnavailable
from ._packing import Packer, ParameterError, buffer_array, element_dtype

if TYPE_CHECKING:
    from ..session import CompiledKernel, Session

__all__ = ["CudaBackend", "create"]

NVRTC_OPTIONS = ("--std=c++17", "-default-device", "-lineinfo")


def create(session: "Session") -> "CudaBackend":
    return CudaBackend(session)


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
    name = "cuda"
    target = "cuda"

    def __init__(self, session: "Session") -> None:
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
        self.session = session
        self.device = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(self.device.id)
        self._name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self._modules: dict[str, Any] = {}
        self._plans: dict[str, _Plan] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"{self._name} (CUDA, CuPy {self.cupy.__version__})"

    def compile_options(self, target: str) -> tuple[str, ...]:
        return ()

    def load(self, kernel: "CompiledKernel") -> tuple[Any, Any]:
        with self._lock:
            hit = self._modules.get(kernel.key)
            if hit is None:
                try:
                    mod = self.cupy.RawModule(code=kernel.code, options=NVRTC_OPTIONS)
                    fn = mod.get_function(kernel.entry)
                    fn = getattr(fn, "kernel", fn)  # CuPy 13+: RawKernel wraps the driver Function
                except self.cupy.cuda.compiler.CompileException as exc:
                    raise RuntimeError(
                        f"NVRTC could not compile the CUDA Slang generated for {kernel.entry} ({kernel.cell}):\n"
                        f"{str(exc)[-3000:]}") from None
                hit = self._modules[kernel.key] = (mod, fn)
        return hit

    # -- packing ------------------------------------------------------------------------------------

    def _bind(self, writebacks: list[tuple[np.ndarray, Any]]) -> Any:
        cupy = self.cupy

        def bind(name: str, t: TypeInfo, value: Any, packer: Packer) -> bytes:
            if t.kind == "constant_buffer" and t.element is not None:
                inner = packer.encode(t.element, value, name)
                dev = cupy.asarray(np.frombuffer(inner, np.uint8))
                packer.keepalive.append(dev)
                return struct.pack("<Q", dev.data.ptr)
            if not t.is_buffer:
                raise ParameterError(
                    f"parameter `{name}` is {t.name}: the CUDA backend does not bind {t.shape or t.kind} yet; "
                    "use Session(backend='vulkan') for textures and samplers")
            dev = _on_device(value)
            if dev is not None:
                count = self._check_device_array(dev, name, t)
            else:
                host, count = buffer_array(value, name, t)
                dev = cupy.asarray(host)
                if t.writable:
                    writebacks.append((host, dev))
            packer.keepalive.append(dev)
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

    def _plan(self, kernel: "CompiledKernel") -> "_Plan":
        plan = self._plans.get(kernel.key)
        if plan is None:
            plan = self._plans[kernel.key] = _Plan(kernel, self.cupy)
        return plan

    def dispatch(self, kernel: "CompiledKernel", groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        cupy = self.cupy
        mod, fn = self.load(kernel)
        plan = self._plan(kernel)
        writebacks: list[tuple[np.ndarray, Any]] = []
        packer = Packer(self._bind(writebacks))
        ep = plan.entry
        args = [fast(values[p.name]) if fast is not None and (b := fast(values[p.name])) is not None
                else packer.encode(p.type, values[p.name], p.name) for p, fast in plan.params]
        refl = kernel.reflection
        if refl.globals:
            glob = packer.pack_struct(refl.globals, refl.globals_size, values, "")
            ptr = mod.get_global("SLANG_globalParams")
            host = np.frombuffer(bytes(glob), np.uint8)
            ptr.copy_from_host(host.ctypes.data, host.nbytes)
        holders = [ctypes.create_string_buffer(a, max(len(a), 1)) for a in args]
        params = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        bx, by, bz = ep.numthreads
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.driver.launchKernel(fn.ptr, *groups, bx, by, bz, 0, stream.ptr, ctypes.addressof(params), 0)
        for host, dev in writebacks:
            dev.get(out=host, stream=stream)
        if writebacks or "printf" in kernel.code:
            stream.synchronize()
        del packer, holders

    def close(self) -> None:
        self._modules.clear()
        self._plans.clear()


_FORMATS = {"float32": "<f", "float64": "<d", "int32": "<i", "uint32": "<I", "int64": "<q", "uint64": "<Q",
            "int16": "<h", "uint16": "<H", "int8": "<b", "uint8": "<B"}


class _Plan:
    """Per-kernel fast encoders for the common argument kinds (scalars, CuPy arrays as buffers), so
    a launch costs little more than CuPy's own; anything else takes the general packer."""

    def __init__(self, kernel: "CompiledKernel", cupy: Any) -> None:
        self.entry = kernel.entry_point
        self.params = [(p, self._fast(p.type, cupy)) for p in self.entry.uniforms]

    @staticmethod
    def _fast(t: TypeInfo, cupy: Any) -> Any:
        if t.kind == "scalar" and t.scalar in _FORMATS:
            packer = struct.Struct(_FORMATS[t.scalar]).pack
            caster = float if t.scalar.startswith("float") else int

            def scalar(v: Any) -> bytes | None:
                try:
                    return packer(caster(v))
                except (TypeError, ValueError, struct.error):
                    return None
            return scalar
        if t.is_buffer and t.shape == "structured_buffer" and t.element is not None:
            try:
                base, shape = element_dtype(t.element)
            except ParameterError:
                return None
            per = int(np.prod(shape)) if shape else 1
            ndarray, pack = cupy.ndarray, struct.Struct("<QQ").pack

            def buffer(v: Any) -> bytes | None:
                if type(v) is ndarray and v.dtype == base and v.flags.c_contiguous and (
                        not shape or v.shape[-len(shape):] == shape):
                    return pack(v.data.ptr, v.size // per)
                return None
            return buffer
        return None
