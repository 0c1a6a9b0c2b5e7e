"""A Vulkan kernel revision ready to dispatch (_Prepared) and how its parameters are written.

Split from device: the per-revision root shader object with one cursor per parameter, which
values bind without the _Binder (`fast_kind`), and `write_changed`, which writes only the parameters
whose value changed since the last dispatch, and `bind_values`, which turns a call's values into
what is written (both used by a call and by a replayed step alike).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...compiled import CompiledKernel
from ...compiler.reflection import ParamInfo, TypeInfo
from ..common.packing import ParameterError
from .objects import VulkanBuffer, VulkanTexture

__all__ = ["MISSING", "BY_VALUE", "F_BUF", "F_FLOAT", "F_INT", "F_NONE", "F_TEX", "Prepared", "SET0_ANCHOR",
           "bind_values", "cursor", "fast_kind", "needs_set0_anchor", "write_changed"]

# sgl 0.43 / slang-rhi: when the global scope holds only ParameterBlocks that contain resources, and
# the entry point has uniforms, the kernel reads a wrong descriptor (SIGSEGV on lavapipe). One more
# global resource of the kernel's own scope (declared, never used or bound) puts the layout right;
# sgl's copy of the entry module gets it (our own reflection and every other backend do not).
SET0_ANCHOR = "\nRWStructuredBuffer<uint> sk_vulkan_set0_anchor;\n"


def needs_set0_anchor(kernel: CompiledKernel) -> bool:
    globs = kernel.reflection.globals
    if not kernel.entry_point.uniforms or any(g.type.kind in ("resource", "sampler") for g in globs):
        return False
    return any(g.type.kind == "parameter_block" and g.type.element is not None and _holds_resources(g.type.element)
               for g in globs)


def _holds_resources(t: TypeInfo, depth: int = 0) -> bool:
    if t.kind in ("resource", "sampler", "parameter_block", "constant_buffer"):
        return True
    if depth > 8:
        return False
    return any(_holds_resources(f.type, depth + 1) for f in t.fields) or (
        t.element is not None and t.kind == "array" and _holds_resources(t.element, depth + 1))


def cursor(parent: Any, p: ParamInfo) -> Any:
    """The cursor a parameter's value is written through. sgl writes a ConstantBuffer<S> or
    ParameterBlock<S> of a struct from a dict at the block itself, but a block of anything else
    (ConstantBuffer<float4x4>) only at its dereferenced element ("Expected dict" otherwise)."""
    c = parent[p.name]
    t = p.type
    if t.kind in ("constant_buffer", "parameter_block") and t.element is not None and t.element.kind != "struct":
        return c.dereference()
    return c


MISSING: Any = object()
BY_VALUE = (int, float, bool)   # scalars: an equal value needs no rewrite
F_NONE, F_BUF, F_TEX, F_INT, F_FLOAT = range(5)


def fast_kind(t: TypeInfo) -> int:
    """Which values of this parameter type the dispatch binds without the _Binder."""
    if t.kind == "scalar":
        s = t.scalar or "float32"
        if s.startswith(("int", "uint")):
            return F_INT
        if s.startswith("float"):
            return F_FLOAT
        return F_NONE
    if t.kind == "resource":
        if t.is_buffer:
            return F_BUF
        if t.is_texture:
            return F_TEX
    return F_NONE


class Prepared:
    """A kernel revision ready to dispatch: its sgl kernel, a persistent root shader object, a cursor
    per parameter (globals, then entry-point uniforms) and the values last written through them."""

    __slots__ = ("sk", "printf", "root", "params", "last")

    def __init__(self, sk: Any, printf: bool, root: Any, params: list[tuple[str, TypeInfo, int, Any]]) -> None:
        self.sk, self.printf, self.root, self.params = sk, printf, root, params
        self.last: list[Any] = [MISSING] * len(params)


def write_changed(pk: Prepared, objs: list[Any], by_ref: frozenset[type], entry: str) -> None:
    """Write each value into its cursor unless it is what the cursor already holds (the same sgl
    object, an equal scalar); MISSING: a global left out. The caller holds the backend's lock."""
    last = pk.last
    for i, o in enumerate(objs):
        if o is MISSING:
            continue
        was = last[i]
        to = type(o)
        if to is type(was) and ((to in by_ref and o is was) or (to in BY_VALUE and o == was)):
            continue
        last[i] = MISSING
        param = pk.params[i]
        try:
            param[3].write(o)
        except Exception as exc:
            raise ParameterError(f"{entry}(): could not bind parameter `{param[0]}` on Vulkan: {exc}") from None
        last[i] = o


def bind_values(pk: Prepared, values: Mapping[str, Any], owner: Any, slow: Callable[[TypeInfo, Any, str], Any]
                ) -> list[Any]:
    """The objects to write for `values`, in `pk.params` order: `owner`'s own device buffers and
    textures and plain scalars as they are (the hot path), MISSING for a global left out, anything
    else (numpy arrays, structs, vectors) through `slow(type, value, name)` (a _Binder's value)."""
    objs: list[Any] = []
    for name, t, fast, _ in pk.params:
        v = values.get(name, MISSING)
        if v is MISSING:       # a global the kernel never touches, left out
            objs.append(v)
            continue
        tv = type(v)
        if fast == F_BUF and tv is VulkanBuffer and v.backend is owner:
            objs.append(v.sgl)
        elif fast == F_INT and tv is int:
            objs.append(v)
        elif fast == F_FLOAT and (tv is float or tv is int):
            objs.append(float(v))
        elif fast == F_TEX and tv is VulkanTexture and v.backend is owner:
            objs.append(v.sgl)
        else:
            objs.append(slow(t, v, name))
    return objs
