"""Reflection as plain frozen dataclasses, per target (layouts differ between CPU, CUDA, ...).

Built in the compiler worker from Slang's reflection API and pickled to the notebook process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "DeclInfo",
    "EntryPointInfo",
    "FunctionInfo",
    "ParamInfo",
    "ProgramReflection",
    "TypeInfo",
]


@dataclass(frozen=True)
class TypeInfo:
    """A Slang type with its layout on one target.

    kind is one of: scalar, vector, matrix, struct, array, resource, constant_buffer,
    sampler, interface, other. For vectors `count` is the length; for arrays the element count
    (0 for unsized); for resources `shape` is e.g. "structured_buffer" and `access` "read" or
    "read_write"; `element` is the element type of arrays, buffers and constant buffers.
    """

    kind: str
    name: str
    size: int = 0
    alignment: int = 0
    stride: int = 0
    scalar: str | None = None
    count: int = 0
    rows: int = 0
    cols: int = 0
    fields: tuple["ParamInfo", ...] = ()
    element: "TypeInfo | None" = None
    shape: str | None = None
    access: str | None = None

    @property
    def is_buffer(self) -> bool:
        return self.kind == "resource" and self.shape in ("structured_buffer", "byte_address_buffer")

    @property
    def is_texture(self) -> bool:
        return self.kind == "resource" and self.shape is not None and self.shape.startswith("texture")

    @property
    def writable(self) -> bool:
        return self.access in ("read_write", "write", "append", "raster_ordered")


@dataclass(frozen=True)
class ParamInfo:
    """A parameter, global or struct field: name, type, byte offset in its parent on this target."""

    name: str
    type: TypeInfo
    offset: int = 0
    semantic: str | None = None
    varying: bool = False
    attributes: tuple[tuple[str, tuple[Any, ...]], ...] = ()


@dataclass(frozen=True)
class EntryPointInfo:
    name: str
    stage: str
    numthreads: tuple[int, int, int]
    params: tuple[ParamInfo, ...]
    params_size: int
    attributes: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def uniforms(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if not p.varying)


@dataclass(frozen=True)
class ProgramReflection:
    target: str
    entry_points: tuple[EntryPointInfo, ...]
    globals: tuple[ParamInfo, ...]
    globals_size: int

    def entry_point(self, name: str) -> EntryPointInfo:
        for ep in self.entry_points:
            if ep.name == name:
                return ep
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FunctionInfo:
    """A function's signature from the front end (no target layout needed)."""

    name: str
    result: str
    params: tuple[tuple[str, str, str], ...]  # (name, Slang type, direction: in|out|inout)
    differentiable: bool
    no_diff: tuple[str, ...] = ()

    @property
    def signature(self) -> str:
        args = ", ".join(
            ("no_diff " if n in self.no_diff else "") + (f"{d} " if d != "in" else "") + f"{t} {n}"
            for n, t, d in self.params
        )
        prefix = "[Differentiable] " if self.differentiable else ""
        return f"{prefix}{self.result} {self.name}({args})"


@dataclass(frozen=True)
class DeclInfo:
    """What a cell defines at top level, for binding names and completing them."""

    name: str
    kind: str  # function, struct, variable, generic, namespace, enum, entry_point
    type: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    functions: tuple[FunctionInfo, ...] = ()
