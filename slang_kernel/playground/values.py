"""Values of a Slang Playground program: its live inputs, what TIME / FRAME_ID / MOUSE_POSITION hold in
the uniform's own type, and the rgba8 image a texture becomes (split out of program.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..backends import Backend
from ..backends.common.packing import numpy_dtype
from ..compiled import CompiledKernel
from ..compiler.reflection import TypeInfo
from ..engine.kernels import check_parameters
from .resources import Declaration

__all__ = ["Input", "as_scalar", "dispatch", "color_default", "mouse_default", "slider_default", "zero_default", "to_rgba8", "vector_scalar", "zero_value"]


def dispatch(backend: Backend, ck: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
    """Dispatch one compiled kernel with checked parameters."""
    check_parameters(ck, values)
    if 0 in groups:
        return
    backend.dispatch(ck, groups, values)


def to_rgba8(a: np.ndarray) -> np.ndarray:
    """An (H, W[, C]) image as (H, W, 4) uint8 RGBA, floats clamped to [0, 1] and rounded (what an rgba8
    texture stores): 1 MB per 512x512 frame instead of 4 MB of float32. Missing channels: gray from one, blue
    0 for two, alpha 255. A uint8 RGBA array comes back as it is."""
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[..., None]
    c = a.shape[2]
    if a.dtype == np.uint8 and c == 4:
        return a
    if a.dtype.kind == "f":   # x * 255 in float32, rounded to nearest even: what lavapipe's rgba8 store does
        a = np.clip(a, 0.0, 1.0, dtype=np.float32)
        a *= np.float32(255.0)
        np.rint(a, out=a)
        if c == 4:
            return a.astype(np.uint8)  # one contiguous cast: 0.3 ms at 512x512, channel by channel 1.4
    out = np.empty((*a.shape[:2], 4), np.uint8)
    out[..., :3] = a[..., :3] if c >= 3 else a[..., :1]
    if c == 2:
        out[..., 1], out[..., 2] = a[..., 1], 0
    out[..., 3] = a[..., 3] if c == 4 else 255
    return out


# -- the program --------------------------------------------------------------------------------------

@dataclass
class Input:
    """A live uniform of the program: its playground kind, Slang type and current value."""

    name: str
    kind: str             # SLIDER, COLOR_PICK, TIME, FRAME_ID, MOUSE_POSITION, KEY
    type: TypeInfo
    args: tuple[Any, ...]
    value: Any
    declared: Declaration | None = field(default=None, repr=False)


def zero_value(t: TypeInfo) -> Any:
    """A plain uniform's value before the user sets one: zeros of its type."""
    if t.kind == "scalar":
        return 0 if (t.scalar or "").startswith(("int", "uint")) else 0.0
    if t.kind in ("vector", "matrix", "struct", "array"):
        return np.zeros((), numpy_dtype(t))[()] if t.kind == "struct" else np.zeros(numpy_dtype(t).shape,
                                                                                    numpy_dtype(t).base)
    return None


def slider_default(args: Sequence[Any], t: TypeInfo) -> Any:
    """[playground::SLIDER(default, min, max)] starts at its default."""
    return float(args[0]) if args else 0.0


def color_default(args: Sequence[Any], t: TypeInfo) -> Any:
    """[playground::COLOR_PICK(r, g, b)] starts at its colour."""
    return np.array([float(a) for a in (list(args) + [0, 0, 0])[:3]], np.float32)


def mouse_default(args: Sequence[Any], t: TypeInfo) -> Any:
    """[playground::MOUSE_POSITION] starts at zeros of the uniform's vector type."""
    return np.zeros(4, vector_scalar(t))


def zero_default(args: Sequence[Any], t: TypeInfo) -> Any:
    """TIME, FRAME_ID, KEY: a zero of the uniform's scalar type (frames set TIME and FRAME_ID)."""
    return 0 if (t.scalar or "").startswith(("int", "uint")) else 0.0


def as_scalar(t: TypeInfo, x: float) -> int | float:
    """A TIME (seconds) / FRAME_ID value for a uniform of type t: int and uint truncated toward zero
    and wrapped to 32 bits (JavaScript's DataView.setInt32 / setUint32, as the Playground writes
    them), else a float."""
    s = t.scalar or "float32"
    if s.startswith("uint"):
        return int(x) & 0xFFFFFFFF
    if s.startswith("int"):
        return (int(x) + 2**31) % 2**32 - 2**31
    return float(x)


def vector_scalar(t: TypeInfo) -> np.dtype:
    """The numpy scalar of a vector uniform (int4 mousePosition -> int32); float32 when unknown."""
    return np.dtype({"int32": np.int32, "uint32": np.uint32, "float16": np.float16}.get(t.scalar or "", np.float32))
