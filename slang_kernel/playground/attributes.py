"""The Playground's attributes as one table: every `[playground::NAME(args)]` the Slang Playground has,
what it marks and which function here serves it. PlaygroundProgram looks an attribute up in these
tables; adding one is a line here and its handler, not another branch in the program.

- RESOURCES: globals the program creates (buffers, textures, samplers), served by resources.py.
- INPUTS: globals the notebook's controls drive (sliders, colour, mouse, time), their start values
  served by values.py.
- CALLS: an entry point's dispatch size per frame (a fixed size, a resource's size, an indirect buffer).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..compiler.reflection import EntryPointInfo, TypeInfo
from ..errors import PlaygroundError
from ..engine.kernels import groups_for
from .resources import Resource, buffer_resource, sampler_resource, texture_resource
from .values import color_default, mouse_default, slider_default, zero_default

__all__ = ["CALLS", "INPUTS", "RESOURCES", "call_groups", "read_resource"]

ResourceMaker = Callable[..., Resource]                      # resources.buffer_resource's signature
InputDefault = Callable[[Sequence[Any], TypeInfo], Any]
CallSize = Callable[[EntryPointInfo, tuple[Any, ...], Mapping[str, Resource]], tuple[int, int, int]]

RESOURCES: dict[str, ResourceMaker] = {
    "ZEROS": buffer_resource, "RAND": buffer_resource, "DATA": buffer_resource,
    "BLACK": texture_resource, "BLACK_3D": texture_resource, "BLACK_SCREEN": texture_resource,
    "URL": texture_resource, "SAMPLER": sampler_resource,
}

INPUTS: dict[str, InputDefault] = {
    "TIME": zero_default, "FRAME_ID": zero_default, "MOUSE_POSITION": mouse_default, "KEY": zero_default,
    "SLIDER": slider_default, "COLOR_PICK": color_default,
}


def read_resource(r: Resource) -> np.ndarray:
    """A resource's contents as a numpy array (device buffers read back)."""
    v = r.value
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def _call(ep: EntryPointInfo, args: tuple[Any, ...], resources: Mapping[str, Resource]) -> tuple[int, int, int]:
    """[playground::CALL(x, y, z)]: that many threads."""
    xyz = [int(a) for a in args] + [1, 1, 1]
    return groups_for(ep, threads=tuple(xyz[:3]))


def _call_size_of(ep: EntryPointInfo, args: tuple[Any, ...], resources: Mapping[str, Resource]
                  ) -> tuple[int, int, int]:
    """[playground::CALL::SIZE_OF("resource")]: one thread per element (texel) of the resource."""
    rname = str(args[0])
    r = resources.get(rname)
    if r is None or not r.shape:
        raise PlaygroundError(f"{ep.name}: [playground::CALL::SIZE_OF(\"{rname}\")] names no resource of "
                              f"this program (resources: {', '.join(resources) or 'none'})")
    size = tuple(r.shape[::-1]) if r.type.is_texture else r.shape
    return groups_for(ep, threads=tuple(size))


def _call_indirect(ep: EntryPointInfo, args: tuple[Any, ...], resources: Mapping[str, Resource]
                   ) -> tuple[int, int, int]:
    """[playground::CALL_INDIRECT("buffer", offset)]: the group counts the buffer holds at offset."""
    bname, offset = str(args[0]), int(args[1])
    r = resources.get(bname)
    if r is None or not r.type.is_buffer:
        raise PlaygroundError(f"{ep.name}: [playground::CALL_INDIRECT] names no buffer `{bname}`")
    raw = read_resource(r).reshape(-1).view(np.uint8)
    g = np.frombuffer(raw[offset:offset + 12].tobytes(), np.uint32)
    return (int(g[0]), int(g[1]), int(g[2])) if g.size == 3 else (0, 0, 0)


CALLS: dict[str, CallSize] = {"CALL": _call, "CALL_SIZE_OF": _call_size_of, "CALL_INDIRECT": _call_indirect}


def call_groups(ep: EntryPointInfo, attrs: Mapping[str, tuple[Any, ...]], resources: Mapping[str, Resource]
                ) -> tuple[int, int, int]:
    """The groups an entry point's CALL attribute asks for this frame; (0, 0, 0) without one."""
    kind = next((k for k in CALLS if k in attrs), None)
    return CALLS[kind](ep, attrs[kind], resources) if kind is not None else (0, 0, 0)
