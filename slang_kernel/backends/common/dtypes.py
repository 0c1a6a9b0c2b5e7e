"""Slang types as numpy dtypes (split from packing): scalars, vectors as trailing dimensions, structs as
structured dtypes with the target's offsets, texel formats; one place for every backend."""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...compiler.reflection import ParamInfo, TypeInfo
from ...errors import ParameterError

__all__ = ["numpy_dtype", "element_dtype", "describe", "typed_element", "texel", "texel_dtype"]

_SCALAR_DTYPES = {
    "bool": np.dtype(np.bool_), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16), "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32), "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "intptr": np.dtype(np.intp), "uintptr": np.dtype(np.uintp),
}


def _scalar(t: TypeInfo) -> np.dtype:
    dt = _SCALAR_DTYPES.get(t.scalar or "")
    if dt is None:
        raise ParameterError(f"Slang type {t.name} (scalar {t.scalar}) has no numpy equivalent")
    if t.scalar == "bool" and t.size not in (0, 1):
        return np.dtype(f"u{t.size // max(1, t.count or (t.rows * t.cols) or 1)}")
    return dt


def numpy_dtype(t: TypeInfo) -> np.dtype:
    """The numpy dtype of one value of `t` laid out as this target does (structs keep offsets)."""
    if t.kind == "scalar":
        return _scalar(t)
    if t.kind == "vector":
        return np.dtype((_scalar(t), (t.count,)))
    if t.kind == "matrix":
        base = _scalar(t)
        row = t.size // t.rows if t.rows else 0
        if row == t.cols * base.itemsize:
            return np.dtype((base, (t.rows, t.cols)))
        return np.dtype({"names": [f"r{i}" for i in range(t.rows)],
                         "formats": [np.dtype((base, (t.cols,)))] * t.rows,
                         "offsets": [i * row for i in range(t.rows)], "itemsize": t.size})
    if t.kind == "array" and t.element is not None and t.count:
        el = numpy_dtype(t.element)
        if t.stride == el.itemsize:
            return np.dtype((el, (t.count,)))
        return np.dtype({"names": [f"e{i}" for i in range(t.count)], "formats": [el] * t.count,
                         "offsets": [i * t.stride for i in range(t.count)], "itemsize": t.size})
    if t.kind == "struct":
        names = [f.name for f in t.fields]
        return np.dtype({"names": names, "formats": [numpy_dtype(f.type) for f in t.fields],
                         "offsets": [f.offset for f in t.fields], "itemsize": max(t.stride, t.size)})
    raise ParameterError(f"Slang type {t.name} ({t.kind}) cannot be held in a numpy array")


def element_dtype(t: TypeInfo) -> tuple[np.dtype, tuple[int, ...]]:
    """(base dtype, trailing shape) of a buffer element: float3 -> (float32, (3,)); structs keep
    their structured dtype with the target's offsets, padded to the element stride."""
    dt = numpy_dtype(t)
    if t.kind == "struct" or dt.fields is not None:
        stride = max(t.stride, t.size)
        if dt.itemsize != stride:
            fields: Mapping[str, tuple[Any, ...]] = dt.fields or {}  # None only if dt.names is None
            dt = np.dtype({"names": list(dt.names or ()), "formats": [fields[n][0] for n in dt.names or ()],
                           "offsets": [fields[n][1] for n in dt.names or ()], "itemsize": stride})
        return dt, ()
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        if t.stride and base.itemsize * int(np.prod(shape)) != t.stride and t.stride != t.size:
            raise ParameterError(f"buffer element {t.name} is padded on this target; pass a structured array")
        return base, tuple(shape)
    return dt, ()


def describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        flags = "" if value.flags.c_contiguous else ", not C-contiguous"
        flags += "" if value.flags.writeable else ", read-only"
        return f"a {value.dtype} array of shape {value.shape}{flags}"
    return f"{type(value).__name__} {value!r}"[:120]


_TYPED_NAME = re.compile(r"^(float|half|double|int|uint|int16_t|uint16_t|int8_t|uint8_t|int64_t|uint64_t|bool)([1-4])?$")
_TYPED_SCALARS = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "uint": "uint32",
                  "int16_t": "int16", "uint16_t": "uint16", "int8_t": "int8", "uint8_t": "uint8",
                  "int64_t": "int64", "uint64_t": "uint64", "bool": "uint32"}


def typed_element(t: TypeInfo) -> tuple[np.dtype, tuple[int, ...]]:
    """(base dtype, trailing shape) of a typed buffer's element (`Buffer<float4>` -> float32, (4,)):
    reflection gives typed buffers' elements only by name."""
    el = t.element
    if el is not None and el.kind in ("scalar", "vector") and el.scalar:
        return _scalar(el), ((el.count,) if el.kind == "vector" and el.count > 1 else ())
    m = _TYPED_NAME.match((el.name if el is not None else "").replace(" ", ""))
    if m is None:
        raise ParameterError(f"{t.name}: typed buffers hold scalars or vectors of 1-4 components "
                             "(use a StructuredBuffer for other element types)")
    n = int(m.group(2) or 1)
    return _SCALAR_DTYPES[_TYPED_SCALARS[m.group(1)]], ((n,) if n > 1 else ())



def texel(t: TypeInfo) -> tuple[str, int]:
    """(numpy scalar name, channels) of a texture's texel type, as `typed_element` reads it;
    float4 when reflection names none (the texture backends size their resources from this)."""
    try:
        base, shape = typed_element(t)
    except ParameterError:
        return "float32", 4
    return base.name, (shape[0] if shape else 1)

def texel_dtype(t: TypeInfo) -> tuple[np.dtype[Any], int]:
    """(host dtype, channels) of a texture's texels as arrays hold them: floats as float32 (half
    stays float16), 32-bit ints as they are, anything else float32; float4 when reflection names none."""
    try:
        base, shape = typed_element(t)
    except ParameterError:
        return np.dtype(np.float32), 4
    if base.kind == "f" and base != np.float16:
        base = np.dtype(np.float32)
    elif base not in (np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.float16)):
        base = np.dtype(np.float32)
    return base, (shape[0] if shape else 1)


def _dtype_text(dt: np.dtype) -> str:
    """A dtype as the user would write it (structured dtypes with their fields, offsets and size)."""
    if dt.names is None:
        return str(dt)
    fields: Mapping[str, tuple[Any, ...]] = dt.fields or {}
    parts = ", ".join(f"{n}: {fields[n][0].base}{list(fields[n][0].shape) if fields[n][0].shape else ''} @{fields[n][1]}"
                      if fields[n][0].names is None else f"{n}: {_dtype_text(fields[n][0])} @{fields[n][1]}"
                      for n in dt.names)
    return f"{{{parts}}} ({dt.itemsize} bytes)"
