"""Binding one dispatch's Python values on Vulkan: numpy arrays become (pooled) sgl buffers and
textures, their data copied up from pooled host-visible buffers in the dispatch's own command
buffer and, for RW ones, copied down into others there too and read into the caller's arrays
afterwards; structs become dicts, typed buffers formatted buffers."""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from ...compiler.reflection import TypeInfo
from ..common.packing import (ParameterError, as_mapping, copy_advice, describe, buffer_array, copy_fields, element_dtype, numpy_dtype,
                       struct_array, texel, typed_element)
from .objects import (_TEX_DIMS, _ZERO_CHECK_BYTES, DeviceHost, VulkanBuffer, VulkanTexture, _buffer_format,
                              _writable_bytes)

__all__ = ["BindingHost", "_Binder"]


class BindingHost(DeviceHost, Protocol):
    """What the binder needs of the backend: its device, samplers and pooled staging buffers."""

    def sampler(self, spec: Any = None) -> Any: ...
    def _usage(self) -> Any: ...
    def _pool_take(self, nbytes: int, memory: str = "device", format: Any = None) -> Any: ...
    def _pool_give(self, buf: Any, memory: str = "device", format: Any = None) -> None: ...


class _Binder:
    """Converts one dispatch's Python values into what sgl's cursor takes, and writes RW data back."""

    def __init__(self, backend: BindingHost) -> None:
        self.b = backend
        self.spy = backend.spy
        self.writeback: list[Any] = []                # callables: device -> the user's numpy array
        self.by_id: dict[tuple[int, str], Any] = {}   # same array passed twice -> one device object
        self.clears: list[tuple[str, Any]] = []       # device objects to zero before the dispatch
        self.copies_in: list[Callable[[Any], None]] = []    # recorded before the dispatch (an encoder each)
        self.copies_out: list[Callable[[Any], None]] = []   # and after it
        self.pooled: list[tuple[Any, str, Any]] = []   # (buffer, memory, texel format or None)

    def release(self) -> None:
        for buf, memory, fmt in self.pooled:
            self.b._pool_give(buf, memory, fmt)
        self.pooled.clear()
        self.copies_in.clear()
        self.copies_out.clear()
        self.writeback.clear()
        self.by_id.clear()
        self.clears.clear()

    def read_back(self) -> None:
        for fn in self.writeback:
            fn()

    def _take(self, nbytes: int, memory: str, format: Any = None) -> Any:
        buf = self.b._pool_take(nbytes, memory, format)
        self.pooled.append((buf, memory, format))
        return buf

    def _stage_in(self, data: np.ndarray, record: Callable[[Any, Any], None]) -> None:
        """Write `data` (bytes) into a pooled upload buffer now; `record(encoder, it)` copies it up."""
        stage = self._take(data.nbytes, "upload")
        stage.copy_from_numpy(_writable_bytes(data))
        self.copies_in.append(lambda encoder: record(encoder, stage))

    def _stage_out(self, nbytes: int, record: Callable[[Any, Any], None]) -> Any:
        """A pooled read-back buffer that `record(encoder, it)` copies into after the dispatch."""
        stage = self._take(nbytes, "read_back")
        self.copies_out.append(lambda encoder: record(encoder, stage))
        return stage

    def value(self, t: TypeInfo, v: Any, name: str) -> Any:
        k = t.kind
        if k == "scalar":
            return _scalar(t, v, name)
        if k in ("vector", "matrix"):
            dt = numpy_dtype(t)
            base, shape = dt.subdtype if dt.subdtype is not None else (dt, ())
            if isinstance(v, np.ndarray) and v.dtype == base and v.shape == tuple(shape):
                return v
            src = np.asarray(v)
            if src.dtype.kind == "c" or (base.kind in "iub" and src.dtype.kind == "f") or src.dtype.kind in "OUS":
                raise _mismatch(t, v, name)
            try:
                arr = src.astype(base).reshape(shape) if src.size == int(np.prod(shape)) and (
                    src.shape == tuple(shape) or src.ndim == 1 and k == "vector") else None
            except (ValueError, TypeError):
                arr = None
            if arr is None:
                raise _mismatch(t, v, name)
            return arr
        if k == "struct":
            m = as_mapping(v, t, name)
            return {f.name: self.value(f.type, m[f.name], f"{name}.{f.name}") for f in t.fields}
        if k == "array" and t.element is not None:
            el = t.element
            try:
                seq = list(v)
            except TypeError:
                raise _mismatch(t, v, name) from None
            if t.count and len(seq) != t.count:
                raise ParameterError(f"parameter `{name}` ({t.name}) needs {t.count} elements; got {len(seq)}")
            return [self.value(el, x, f"{name}[{i}]") for i, x in enumerate(seq)]
        if k in ("constant_buffer", "parameter_block") and t.element is not None:
            return self.value(t.element, v, name)
        if k == "sampler":
            return self.b.sampler(v)
        if k == "resource":
            if t.is_buffer:
                return self.buffer(t, v, name)
            if t.shape == "texture_buffer":
                return self.typed_buffer(t, v, name)
            if t.is_texture:
                return self.texture(t, v, name)
        raise ParameterError(f"parameter `{name}` is {t.name} ({t.kind}{', ' + t.shape if t.shape else ''}): "
                             "the Vulkan backend cannot bind that kind of parameter yet")

    # buffers
    def _on_device(self, v: Any, kind: type[VulkanBuffer] | type[VulkanTexture], name: str) -> Any | None:
        """The sgl object of a device buffer/texture of this session, or an sgl one passed as is; None
        for anything else. Another session's is an error."""
        if isinstance(v, kind):
            if v.backend is not self.b:
                what = "buffer" if kind is VulkanBuffer else "texture"
                raise ParameterError(f"parameter `{name}`: that {what} belongs to another Vulkan session")
            return v.sgl
        sgl_name = "Buffer" if kind is VulkanBuffer else "Texture"
        return v if type(v).__name__ == sgl_name and hasattr(v, "to_numpy") else None

    def buffer(self, t: TypeInfo, v: Any, name: str) -> Any:
        dev = self._on_device(v, VulkanBuffer, name)
        if dev is not None:
            return dev
        if isinstance(v, VulkanTexture):
            raise ParameterError(f"parameter `{name}` is {t.name}: got a texture, need a buffer")
        staged = self._struct_stage(t, v, name)
        arr = staged if staged is not None else buffer_array(v, name, t)[0]
        return self._numpy_buffer(t, v, arr, "buf", staged=staged)

    def typed_buffer(self, t: TypeInfo, v: Any, name: str) -> Any:
        """A typed Buffer<T>/RWBuffer<T>: like a structured buffer, but the device buffer carries the
        texel format of T (Vulkan reads and writes typed buffers through a formatted view)."""
        base, shape = typed_element(t)
        fmt = _buffer_format(self.spy, base, shape)
        if fmt is None:
            raise ParameterError(f"parameter `{name}` is {t.name}: no Vulkan texel format holds {base} x "
                                 f"{shape[0] if shape else 1}; use a StructuredBuffer")
        dev = self._on_device(v, VulkanBuffer, name)
        if dev is not None:
            if isinstance(v, VulkanBuffer) and v.format != fmt:
                raise ParameterError(f"parameter `{name}` is {t.name}: that device buffer holds {v.dtype} "
                                     f"{v.shape}, not elements of {base}" + (f" x {shape[0]}" if shape else ""))
            return dev
        return self._numpy_buffer(t, v, buffer_array(v, name, t)[0], "typed", fmt)

    def _numpy_buffer(self, t: TypeInfo, v: Any, arr: np.ndarray, kind: str, format: Any = None,
                      staged: np.ndarray | None = None) -> Any:
        """A pooled device buffer (of texel `format` for a typed buffer) holding `arr`, the bytes of the
        user's `v`: they go up in the dispatch's own command buffer, and come back into `v` (field by
        field when `staged`, its repacked copy) if the kernel may write them. The same `v` twice in
        one dispatch is one buffer."""
        key = (id(v), kind)
        hit = self.by_id.get(key)
        if hit is not None:
            return hit
        buf = self._take(arr.nbytes, "device", format)
        nbytes = arr.nbytes
        if t.writable and nbytes >= _ZERO_CHECK_BYTES and not arr.reshape(-1).view(np.uint8).any():
            self.clears.append(("buf", buf))
        elif nbytes:
            self._stage_in(arr, lambda encoder, stage: encoder.copy_buffer(buf, 0, stage, 0, nbytes))
        self.by_id[key] = buf
        if t.writable and isinstance(v, np.ndarray) and nbytes:
            target = v
            out = self._stage_out(nbytes, lambda encoder, stage: encoder.copy_buffer(stage, 0, buf, 0, nbytes))

            def back() -> None:
                raw = np.asarray(out.to_numpy()).reshape(-1).view(np.uint8)[:nbytes]
                if staged is None:
                    target.reshape(-1).view(np.uint8)[:] = raw
                else:
                    copy_fields(target, raw.view(arr.dtype).reshape(arr.shape))

            self.writeback.append(back)
        return buf

    def _struct_stage(self, t: TypeInfo, v: Any, name: str) -> np.ndarray | None:
        """A structured array laid out differently from this target (e.g. made for the CPU backend):
        repacked field by field into the target layout (and written back field by field); None for
        any other value."""
        if t.shape != "structured_buffer" or t.element is None or t.element.kind != "struct":
            return None
        if not isinstance(v, np.ndarray) or v.dtype.names is None:
            return None
        want, _ = element_dtype(t.element)
        if v.dtype == want:
            return None
        return struct_array(v, name, t, want)   # fields matched by name, at every level

    # textures
    def texture(self, t: TypeInfo, v: Any, name: str) -> Any:
        dev = self._on_device(v, VulkanTexture, name)
        if dev is not None:
            return dev
        dims = _TEX_DIMS.get(t.shape or "")
        if dims is None or t.shape in ("texture_cube",):
            raise ParameterError(f"parameter `{name}` is {t.name}: the Vulkan backend binds numpy arrays to "
                                 "Texture1D/2D/3D and Texture1DArray/2DArray (and RW forms; arrays as (L, W, C) / "
                                 "(L, H, W, C)); pass an sgl Texture for other shapes")
        layered = (t.shape or "").endswith("_array")
        scalar, channels = texel(t)
        if not isinstance(v, np.ndarray):
            try:
                v2 = np.asarray(v, dtype=np.float32 if scalar.startswith("float") else None)
            except (TypeError, ValueError):
                raise _tex_mismatch(t, v, name, dims, channels) from None
        else:
            v2 = v
        shape = v2.shape
        if v2.ndim == dims and channels == 1:
            shape = (*shape, 1)
        if len(shape) != dims + 1 or shape[-1] != channels or 0 in shape:
            raise _tex_mismatch(t, v, name, dims, channels)
        if t.writable and not (isinstance(v, np.ndarray) and v.flags.writeable):
            raise ParameterError(f"parameter `{name}` ({t.name}) is written by the kernel: pass a writable numpy "
                                 f"array of shape {'(D, H, W, C)' if dims == 3 else '(H, W, C)' if dims == 2 else '(W, C)'} "
                                 f"with C = {channels}; got {describe(v)}"
                                 + (f". {copy_advice(name)}" if isinstance(v, np.ndarray) else ""))
        key = (id(v), "tex")
        hit = self.by_id.get(key)
        if hit is not None:
            return hit
        unorm8 = v2.dtype == np.uint8 and scalar.startswith("float")
        if t.writable and scalar.startswith("float") and not unorm8 and v2.dtype.kind != "f":
            raise _tex_mismatch(t, v, name, dims, channels)  # the kernel's floats would be truncated
        if t.writable:
            # storage images use the format Slang declares for the element type (float4 -> rgba32f)
            store_dt = {"float32": np.float32, "float16": np.float16, "uint32": np.uint32, "int32": np.int32}.get(scalar)
            if store_dt is None:
                raise ParameterError(f"parameter `{name}` ({t.name}): RW textures of {scalar} are not supported")
            data = v2.astype(np.float32) / 255.0 if unorm8 else v2
            dev_dtype = np.dtype(store_dt)
        else:
            dev_dtype = np.dtype(np.uint8) if unorm8 else np.dtype({"float16": np.float16, "uint32": np.uint32,
                                                                     "int32": np.int32}.get(scalar, np.float32))
            data = v2
        if dev_dtype.kind != data.dtype.kind and not unorm8:
            if data.dtype.kind == "f" and dev_dtype.kind in "iu":
                raise _tex_mismatch(t, v, name, dims, channels)
        tex = VulkanTexture(self.b, shape, dev_dtype, None, dims, layered)
        if t.writable and v.nbytes >= _ZERO_CHECK_BYTES and not np.any(v):
            self.clears.append(("texf" if dev_dtype.kind == "f" else "texu", tex.sgl))
        else:
            self._stage_in(tex.staged(np.asarray(data).reshape(shape)), tex.copy_in)
        self.by_id[key] = tex.sgl
        if t.writable:
            target = v
            out = self._stage_out(tex.staging_layout()[1], tex.copy_out)

            def back() -> None:
                got = tex.texels(np.asarray(out.to_numpy())).reshape(target.shape)
                if unorm8:
                    got = np.clip(np.rint(got * 255.0), 0, 255)
                np.copyto(target, got, casting="unsafe")

            self.writeback.append(back)
        return tex.sgl


def _scalar(t: TypeInfo, v: Any, name: str) -> Any:
    if isinstance(v, (bool, np.bool_)) and t.scalar == "bool":
        return bool(v)
    arr = np.asarray(v)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        raise _mismatch(t, v, name)
    x = arr.reshape(()).item()
    s = t.scalar or "float32"
    if s == "bool":
        return bool(x)
    if s.startswith(("int", "uint")):
        if arr.dtype.kind == "f":
            raise _mismatch(t, v, name)
        return int(x)
    return float(x)


def _mismatch(t: TypeInfo, v: Any, name: str) -> ParameterError:
    try:
        dt = numpy_dtype(t)
        what = f"{t.kind} of {dt.subdtype[0] if dt.subdtype else dt}" + (
            f" with shape {dt.subdtype[1]}" if dt.subdtype else "")
    except ParameterError:
        what = t.kind
    return ParameterError(f"parameter `{name}` is {t.name}: it needs a {what}; got {describe(v)}")


def _tex_mismatch(t: TypeInfo, v: Any, name: str, dims: int, channels: int) -> ParameterError:
    want = {1: "(W, C)", 2: "(H, W, C)", 3: "(D, H, W, C)"}[dims]
    return ParameterError(f"parameter `{name}` is {t.name}: pass a numpy array of shape {want} with C = {channels} "
                          f"(float32, or uint8 for 0..1 values), or a backend.texture(...); got {describe(v)}")
