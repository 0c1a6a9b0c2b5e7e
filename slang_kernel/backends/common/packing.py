"""Parameter packing from reflection (public: the Vulkan worker, playground resources, layouts and kernels use it too): Python/numpy values -> the bytes a target expects.

Shared by the CPU and CUDA backends (their layouts differ, so everything here is driven by the
per-target reflection). Resources are handed to the backend's `bind_resource`, which knows how
that target represents a buffer (pointer + count on CPU and CUDA).
"""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...compiler.reflection import ParamInfo, TypeInfo
from ...errors import ParameterError
from .dtypes import _dtype_text, describe, element_dtype, numpy_dtype, texel, texel_dtype, typed_element
from .encoders import fast_encoder, fast_writer

__all__ = [
    "copy_advice",
    "UINT",
    "ParameterError",
    "uint_buffer",
    "as_mapping",
    "describe",
    "texel",
    "texel_dtype",
    "Packer",
    "StructPlan",
    "fast_encoder",
    "fast_writer",
    "buffer_array",
    "copy_fields",
    "element_dtype",
    "numpy_dtype",
    "struct_array",
    "typed_element",
]


def struct_array(value: Any, param: str, t: TypeInfo, dt: np.dtype) -> np.ndarray:
    """Elements of a struct buffer as a structured array of dtype `dt`, from a structured array (fields
    matched by name, so another target's layout works too), a dict of arrays (field -> one value per
    element) or a list of dicts. Missing or unknown fields are named in the error."""
    if isinstance(value, np.ndarray) and value.dtype == dt:
        return value
    where = f"parameter `{param}` ({t.name})"
    el = t.element if t.element is not None else t
    try:
        if isinstance(value, np.ndarray) and value.dtype.names is not None:
            out = np.zeros(value.shape, dt)
            _fill(out, value, el, where)
            return out
        if isinstance(value, Mapping):
            first = next(iter(value.values()), None)
            n = len(first) if first is not None and hasattr(first, "__len__") else 1
            out = np.zeros(n, dt)
            _fill(out, value, el, where)
            return out
        if isinstance(value, (list, tuple)) and all(isinstance(v, (Mapping, np.void)) for v in value):
            out = np.zeros(len(value), dt)
            for i, v in enumerate(value):
                _fill(out[i], v, el, f"{where}, element {i}")
            return out
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"{where}: {exc}; its elements are {_dtype_text(dt)}") from None
    raise ParameterError(
        f"{where} holds structs {el.name} {_dtype_text(dt)}: pass a structured array of that dtype "
        f"(np.zeros(n, s.dtype('{el.name}')) or k.dtype('{param}')), a dict of arrays (field -> values) "
        f"or a list of dicts; got {describe(value)}")


def _fill(out: Any, value: Any, t: TypeInfo, where: str) -> None:
    """Write `value` (a Mapping, a structured array or record) into the structured array/record `out`
    field by field; nested struct fields take the same forms."""
    names = [f.name for f in t.fields]
    have = list(value.dtype.names or ()) if isinstance(value, (np.ndarray, np.void)) else list(value)
    missing = [n for n in names if n not in have]
    extra = [str(k) for k in have if k not in names]
    if missing or extra:
        raise ParameterError(
            f"{where}: struct {t.name} has fields {', '.join(names)}; "
            + (f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(extra)}" if extra else ""))
    for f in t.fields:
        v = value[f.name]
        if f.type.kind == "struct" and (isinstance(v, Mapping) or (
                isinstance(v, (np.ndarray, np.void)) and v.dtype.names is not None)):
            _fill(out[f.name], v, f.type, f"{where}, field {f.name}")
        elif f.type.kind == "struct" and isinstance(v, (list, tuple)):
            sub = out[f.name]
            for i, x in enumerate(v):
                _fill(sub[i], x, f.type, f"{where}, field {f.name}[{i}]")
        else:
            src = np.asarray(v)
            target = out[f.name]
            tshape = np.shape(target)
            if src.dtype.kind in "cOUS" or (np.dtype(out.dtype[f.name].base).kind in "iub" and src.dtype.kind == "f"):
                raise ParameterError(f"{where}: field {f.name} is {f.type.name}; got {describe(v)}")
            if src.shape != tshape and not (src.size == 1 and src.ndim <= 1):
                raise ParameterError(f"{where}: field {f.name} ({f.type.name}) needs shape {tshape}; got {src.shape}")
            if isinstance(out, np.void):
                out[f.name] = src.reshape(tshape) if src.size != 1 or tshape else src.reshape(())
            else:
                target[...] = src


def copy_fields(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy structured `src` into structured `dst` field by field, by name at every level (numpy's
    own structured assignment goes by position)."""
    for f in dst.dtype.names or ():
        if dst.dtype[f].names is not None:
            copy_fields(dst[f], src[f])
        else:
            dst[f] = src[f]


def copy_advice(param: str, dtype: np.dtype[Any] | None = None) -> str:
    """Advice for a numpy array a kernel cannot write in place (read-only, another dtype, not C order):
    code naming the parameter that makes a writable copy, to run as printed."""
    kw = f"dtype=np.{dtype.name}, " if dtype is not None else ""
    return (f"Run `{param} = np.array({param}, {kw}order=\"C\")` and pass {param}={param}: the kernel writes "
            "into that new array.")


def _writable_advice(value: Any, param: str, base: np.dtype[Any], t: TypeInfo) -> str:
    """What to run before passing `param` again, as code naming the parameter (a user follows it word
    for word: tests/test_bad_input.py runs it). Numbers convertible by numpy are copied into a new
    writable C-order array; anything else gets a fresh zeroed one."""
    if base.names is not None:
        count = f"len({param})" if isinstance(value, (np.ndarray, list, tuple)) and np.ndim(value) > 0 else "1024"
        return (f"Make one with `{param} = np.zeros({count}, k.dtype('{param}'))`, where k is this kernel, "
                f"fill its fields and pass {param}={param}.")
    try:
        numeric = isinstance(value, (np.ndarray, list, tuple)) and np.asarray(value).dtype.kind in "biuf"
    except ValueError:   # a ragged list
        numeric = False
    if numeric:
        return copy_advice(param, base)
    return (f"Make one, e.g. `{param} = np.zeros(1024, np.{base.name})` for 1024 elements, "
            f"and pass {param}={param}.")


def buffer_array(value: Any, param: str, t: TypeInfo) -> tuple[np.ndarray, int]:
    """Check/convert a value for a structured/byte-address/typed buffer; returns (array, element count).

    Writable buffers need the exact dtype, C order and a writable array, because the kernel writes
    into that very memory. Read-only buffers accept anything numpy converts without losing kind;
    struct buffers also a dict of arrays or a list of dicts (see struct_array).
    """
    shape: tuple[int, ...]
    if t.shape == "byte_address_buffer":
        base, shape = np.dtype(np.uint32), ()
    elif t.shape == "texture_buffer":
        base, shape = typed_element(t)
    elif t.element is None:
        raise ParameterError(f"parameter `{param}` ({t.name}): element type unknown")
    else:
        base, shape = element_dtype(t.element)
    want = (_dtype_text(base) if base.names is not None else f"{base}") + (
        f" with trailing shape {shape}" if shape else "")
    if t.writable:
        if not isinstance(value, np.ndarray) or getattr(value, "__cuda_array_interface__", None):
            also = (" (a dict of arrays or a list of dicts is taken by read-only buffers only: the kernel "
                    "writes into the array itself)" if isinstance(value, (Mapping, list, tuple)) else "")
            raise ParameterError(
                f"parameter `{param}` ({t.name}) is written by the kernel: pass a numpy array of {want}"
                f"{also}; got {describe(value)}. {_writable_advice(value, param, base, t)}")
        ok_dtype = value.dtype == base or (t.shape == "byte_address_buffer" and value.dtype.itemsize % 4 == 0)
        if not ok_dtype or not value.flags.c_contiguous or not value.flags.writeable:
            raise ParameterError(
                f"parameter `{param}` ({t.name}) is written back in place, so it needs a writable "
                f"C-contiguous array of {want}; got {describe(value)}. {_writable_advice(value, param, base, t)}")
        arr = value
    elif base.names is not None:
        arr = np.ascontiguousarray(struct_array(value, param, t, base))
    else:
        try:
            src = np.asarray(value)
            if t.shape == "byte_address_buffer":
                arr = np.ascontiguousarray(src)
            else:
                if src.dtype.names is not None or src.dtype.kind in "OUSc":
                    raise ParameterError("")
                if src.dtype != base and not np.can_cast(src.dtype, base, "same_kind") and src.dtype.kind != base.kind:
                    if not (src.dtype.kind in "iub" and base.kind in "iuf"):
                        raise ParameterError("")
                arr = np.ascontiguousarray(src, dtype=base)
        except (ValueError, TypeError, ParameterError):
            raise ParameterError(
                f"parameter `{param}` ({t.name}) needs an array of {want}; got {describe(value)}") from None
    if t.shape == "byte_address_buffer":
        return arr, arr.nbytes
    if shape:
        if arr.ndim < len(shape) or tuple(arr.shape[-len(shape):]) != shape:
            el_name = t.element.name if t.element else "?"
            raise ParameterError(
                f"parameter `{param}` ({t.name}): elements are {el_name}, so the "
                f"array's trailing shape must be {shape}; got shape {arr.shape}")
        return arr, int(arr.size // int(np.prod(shape)))
    return arr, int(arr.size)


@dataclasses.dataclass
class Packer:
    """Packs a struct of parameters into bytes; resources go through `bind_resource`."""

    bind_resource: Callable[[str, TypeInfo, Any, "Packer"], bytes]
    keepalive: list[Any] = dataclasses.field(default_factory=list)

    def pack_struct(self, fields: Sequence[ParamInfo], size: int, values: Mapping[str, Any],
                    where: str) -> bytearray:
        buf = bytearray(size)
        for f in fields:
            if f.varying or f.name not in values:  # an unused global may be left out: it stays zero
                continue
            self.write(buf, f.offset, f.type, values[f.name], f"{where}{f.name}")
        return buf

    def write(self, buf: bytearray, offset: int, t: TypeInfo, value: Any, name: str) -> None:
        data = self.encode(t, value, name)
        buf[offset:offset + len(data)] = data

    def encode(self, t: TypeInfo, value: Any, name: str) -> bytes:
        if t.kind in ("resource", "constant_buffer", "parameter_block", "sampler"):
            return self.bind_resource(name, t, value, self)
        if t.kind == "struct":
            return bytes(self.pack_struct(t.fields, t.size, as_mapping(value, t, name), name + "."))
        if t.kind == "array" and t.element is not None and t.element.kind in ("struct", "resource"):
            seq = list(value)
            if len(seq) != t.count:
                raise ParameterError(f"parameter `{name}` ({t.name}) needs {t.count} elements; got {len(seq)}")
            buf = bytearray(t.size)
            for i, v in enumerate(seq):
                self.write(buf, i * t.stride, t.element, v, f"{name}[{i}]")
            return bytes(buf)
        dt = numpy_dtype(t)
        try:
            if dt.fields is not None and not isinstance(value, np.ndarray):
                arr = np.zeros((), dt)
                first = dt.fields[(dt.names or ())[0]][0]  # names is set whenever fields is
                flat = np.asarray(value, dtype=np.float64 if first.base.kind == "f" else None)
                for i, n in enumerate(dt.names or ()):
                    arr[n] = flat[i]
                return arr.tobytes()
            base, shape = (dt.subdtype if dt.subdtype is not None else (dt, ()))
            while base.subdtype is not None:  # float2 c[2]: a (2, 2) array, float3x3 m[4]: (4, 3, 3)
                base, inner = base.subdtype
                shape = (*shape, *inner)
            src = np.asarray(value)
            if src.dtype.kind == "c" or (base.kind in "iub" and src.dtype.kind == "f"):
                raise ParameterError("")
            arr = np.asarray(src, dtype=base)
            if arr.shape != tuple(shape):
                if t.kind == "scalar" and arr.size == 1:
                    arr = arr.reshape(())
                else:
                    raise ParameterError("")
            return arr.tobytes()
        except (ValueError, TypeError, ParameterError, IndexError):
            shape_txt = "" if t.kind == "scalar" else f" of shape {dt.shape or (dt.subdtype[1] if dt.subdtype else ())}"
            raise ParameterError(
                f"parameter `{name}` is {t.name}: it needs a {t.kind}{shape_txt} of "
                f"{(dt.subdtype[0] if dt.subdtype else dt)}; got {describe(value)}") from None


def as_mapping(value: Any, t: TypeInfo, name: str) -> Mapping[str, Any]:
    names = [f.name for f in t.fields]
    if isinstance(value, Mapping):
        missing = [n for n in names if n not in value]
        extra = [k for k in value if k not in names]
        if missing or extra:
            raise ParameterError(
                f"parameter `{name}` is struct {t.name} with fields {', '.join(names)}; "
                + (f"missing {', '.join(missing)}" if missing else "")
                + ("; " if missing and extra else "") + (f"unknown {', '.join(map(str, extra))}" if extra else ""))
        return value
    if isinstance(value, np.void) and value.dtype.names:
        return {n: value[n] for n in value.dtype.names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if all(hasattr(value, n) for n in names):
        return {n: getattr(value, n) for n in names}
    raise ParameterError(
        f"parameter `{name}` is struct {t.name}: pass a dict (or object) with fields {', '.join(names)}; "
        f"got {describe(value)}")


class StructPlan:
    """Packs one parameter struct (entry-point uniforms or globals) with precomputed encoders."""

    def __init__(self, fields: Sequence[ParamInfo], size: int, array_type: type[Any],
                 pointer: Callable[[Any], int]) -> None:
        self.size = size
        self.fields = [(f, fast_encoder(f.type, array_type, pointer)) for f in fields if not f.varying]

    def pack(self, values: Mapping[str, Any], packer: Packer) -> bytearray:
        buf = bytearray(self.size)
        for f, fast in self.fields:
            if f.name not in values:  # an unused global the caller left out: it stays zero
                continue
            v = values[f.name]
            data = fast(v) if fast is not None else None
            if data is None:
                data = packer.encode(f.type, v, f.name)
            else:
                packer.keepalive.append(v)
            buf[f.offset:f.offset + len(data)] = data
        return buf


# The reflection of the backends' own helper kernels' parameters (the NaN/Inf scan, a checked
# variant's report buffer), made here once: those kernels never pass through the session's compiler.
UINT = TypeInfo(kind="scalar", name="uint", size=4, alignment=4, stride=4, scalar="uint32")


def uint_buffer(name: str, writable: bool) -> ParamInfo:
    """A `StructuredBuffer<uint>` (or `RWStructuredBuffer<uint>`) parameter, as reflection states one."""
    prefix = "RW" if writable else ""
    return ParamInfo(name, TypeInfo(kind="resource", name=f"{prefix}StructuredBuffer<uint>", alignment=1, element=UINT,
                                    shape="structured_buffer", access="read_write" if writable else "read"))
