"""Fast parameter encoders (split from packing): a struct.pack plan per uniform block for the common
case of scalars, vectors and arrays; anything else falls back to the general Packer."""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

import numpy as np

from ...compiler.reflection import ParamInfo, TypeInfo
from ...errors import ParameterError
from .dtypes import describe, element_dtype

__all__ = ["fast_encoder", "fast_writer", "Encoder"]

_FORMATS = {"float32": "<f", "float64": "<d", "int32": "<i", "uint32": "<I", "int64": "<q", "uint64": "<Q",
            "int16": "<h", "uint16": "<H", "int8": "<b", "uint8": "<B"}
Encoder = Callable[[Any], "bytes | None"]


def _fast_parts(t: TypeInfo, array_type: type[Any], pointer: Callable[[Any], int]
                ) -> tuple[struct.Struct, Callable[[Any], "tuple[Any, ...] | None"]] | None:
    """For the common cases (a scalar; a contiguous array of the exact element dtype as a structured
    buffer): the struct layout and a converter from a value to its fields, which returns None for
    any value it does not take (the caller falls back to the general Packer, which also words the
    errors)."""
    if t.kind == "scalar" and t.scalar in _FORMATS:
        caster: Callable[[Any], Any] = float if t.scalar.startswith("float") else int

        def scalar(v: Any) -> tuple[Any, ...] | None:
            if isinstance(v, (bool, complex, str)) or (caster is int and isinstance(v, float)):
                return None
            try:
                return (caster(v),)
            except (TypeError, ValueError, OverflowError):
                return None
        return struct.Struct(_FORMATS[t.scalar]), scalar
    if t.is_buffer and t.shape == "structured_buffer" and t.element is not None:
        try:
            base, shape = element_dtype(t.element)
        except ParameterError:
            return None
        per = int(np.prod(shape)) if shape else 1
        writable = t.writable

        def buffer(v: Any) -> tuple[Any, ...] | None:
            if type(v) is not array_type or v.dtype != base:
                return None
            flags = v.flags
            if not flags.c_contiguous or (writable and not getattr(flags, "writeable", True)):
                return None
            if shape and tuple(v.shape[-len(shape):]) != shape:
                return None
            return (pointer(v), v.size // per)
        return struct.Struct("<QQ"), buffer
    return None


def fast_encoder(t: TypeInfo, array_type: type[Any], pointer: Callable[[Any], int]) -> Encoder | None:
    """Bytes of a value for the common cases, or None (see _fast_parts)."""
    parts = _fast_parts(t, array_type, pointer)
    if parts is None:
        return None
    layout, convert = parts
    pack = layout.pack

    def encode(v: Any) -> bytes | None:
        fields = convert(v)
        return None if fields is None else pack(*fields)
    return encode


def fast_writer(t: TypeInfo, array_type: type[Any], pointer: Callable[[Any], int]
                ) -> Callable[[Any, Any], bool] | None:
    """Like fast_encoder, but writes into a buffer (offset 0) and says whether it took the value."""
    parts = _fast_parts(t, array_type, pointer)
    if parts is None:
        return None
    layout, convert = parts
    pack_into = layout.pack_into

    def write(v: Any, into: Any) -> bool:
        fields = convert(v)
        if fields is None:
            return False
        pack_into(into, 0, *fields)
        return True
    return write
