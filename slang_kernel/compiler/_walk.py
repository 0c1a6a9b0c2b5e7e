"""Walk Slang's reflection objects (ctypes pointers) into the frozen dataclasses.

Runs in the compiler worker only.
"""

from __future__ import annotations

import ctypes
import re
from ctypes import byref, c_void_p
from typing import Any

from ._lib import blob_bytes
from .reflection import DeclInfo, EntryPointInfo, FunctionInfo, ParamInfo, ProgramReflection, TypeInfo

__all__ = ["module_decls", "pretty_type", "program_reflection"]

UNIFORM = 8
VARYING_INPUT = 5
_KINDS = {
    1: "struct", 2: "array", 3: "matrix", 4: "vector", 5: "scalar", 6: "constant_buffer",
    7: "resource", 8: "sampler", 9: "texture_buffer", 10: "storage_buffer", 11: "parameter_block",
    13: "interface", 16: "specialized", 18: "pointer", 20: "enum",
}
_SCALARS = {
    2: "bool", 3: "int32", 4: "uint32", 5: "int64", 6: "uint64", 7: "float16", 8: "float32",
    9: "float64", 10: "int8", 11: "uint8", 12: "int16", 13: "uint16", 14: "intptr", 15: "uintptr",
}
_SHAPES = {
    1: "texture_1d", 2: "texture_2d", 3: "texture_3d", 4: "texture_cube", 5: "texture_buffer",
    6: "structured_buffer", 7: "byte_address_buffer", 9: "acceleration_structure",
}
_ACCESS = {1: "read", 2: "read_write", 3: "raster_ordered", 4: "append", 5: "consume", 6: "write"}
_TYPE_KIND_INTERFACE = 13
_DECL_KINDS = {1: "struct", 2: "function", 3: "module", 4: "generic", 5: "variable", 6: "namespace", 7: "enum"}


def _s(b: bytes | None) -> str:
    return b.decode("utf-8", "replace") if b else ""


_VEC = re.compile(r"\bvector<(\w+),\s*(\d+)>")
_MAT = re.compile(r"\bmatrix<(\w+),\s*(\d+),\s*(\d+)(?:,\s*\d+)?>")
_LAYOUT = re.compile(r",\s*(?:DefaultDataLayout|Std430DataLayout|Std140DataLayout|ScalarDataLayout)>")


def pretty_type(name: str) -> str:
    """Write types as users do: vector<float,3> -> float3, drop default layout arguments."""
    name = _LAYOUT.sub(">", name)
    name = _MAT.sub(lambda m: f"{m.group(1)}{m.group(2)}x{m.group(3)}", name)
    return _VEC.sub(lambda m: f"{m.group(1)}{m.group(2)}", name)


def _type_name(L: Any, t: int | None) -> str:
    if not t:
        return ""
    out = c_void_p()
    if L.spReflectionType_GetFullName(t, byref(out)) >= 0 and out.value:
        return pretty_type(blob_bytes(out.value).decode("utf-8", "replace"))
    return _s(L.spReflectionType_GetName(t))


def _attributes(L: Any, count: int, get: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    attrs = []
    for i in range(count):
        a = get(i)
        if not a:
            continue
        args: list[Any] = []
        for j in range(L.spReflectionUserAttribute_GetArgumentCount(a)):
            iv, fv, sz = ctypes.c_int(), ctypes.c_float(), ctypes.c_size_t()
            if L.spReflectionUserAttribute_GetArgumentValueInt(a, j, byref(iv)) >= 0:
                args.append(iv.value)
            elif L.spReflectionUserAttribute_GetArgumentValueFloat(a, j, byref(fv)) >= 0:
                args.append(fv.value)
            else:
                s = L.spReflectionUserAttribute_GetArgumentValueString(a, j, byref(sz))
                args.append(_s(ctypes.string_at(s, sz.value)) if s else None)
        attrs.append((_s(L.spReflectionUserAttribute_GetName(a)), tuple(args)))
    return tuple(attrs)


def _type(L: Any, tl: int, depth: int = 0) -> TypeInfo:
    t = L.spReflectionTypeLayout_GetType(tl)
    kind_id = L.spReflectionTypeLayout_getKind(tl)
    kind = _KINDS.get(kind_id, "other")
    name = _type_name(L, t)
    size = L.spReflectionTypeLayout_GetSize(tl, UNIFORM)
    align = L.spReflectionTypeLayout_getAlignment(tl, UNIFORM)
    stride = L.spReflectionTypeLayout_GetStride(tl, UNIFORM)
    common = dict(kind=kind, name=name, size=size, alignment=align, stride=stride)
    if depth > 16:
        return TypeInfo(**common)
    if kind == "scalar":
        return TypeInfo(**common, scalar=_SCALARS.get(L.spReflectionType_GetScalarType(t), "other"))
    if kind in ("vector", "matrix"):
        return TypeInfo(
            **common,
            scalar=_SCALARS.get(L.spReflectionType_GetScalarType(t), "other"),
            count=L.spReflectionType_GetElementCount(t) if kind == "vector" else 0,
            rows=L.spReflectionType_GetRowCount(t),
            cols=L.spReflectionType_GetColumnCount(t),
        )
    if kind == "struct":
        fields = []
        for i in range(L.spReflectionTypeLayout_GetFieldCount(tl)):
            fields.append(_param(L, L.spReflectionTypeLayout_GetFieldByIndex(tl, i), depth + 1))
        return TypeInfo(**common, fields=tuple(fields))
    if kind == "array":
        el = L.spReflectionTypeLayout_GetElementTypeLayout(tl)
        return TypeInfo(
            **{**common, "stride": L.spReflectionTypeLayout_GetElementStride(tl, UNIFORM)},
            count=L.spReflectionType_GetElementCount(t),
            element=_type(L, el, depth + 1) if el else None,
        )
    if kind == "resource":
        shape_id = L.spReflectionType_GetResourceShape(t)
        el = L.spReflectionTypeLayout_GetElementTypeLayout(tl)
        element = _type(L, el, depth + 1) if el else None
        if element is None or element.kind == "other":
            rt = L.spReflectionType_GetResourceResultType(t)
            if rt:
                element = TypeInfo(kind="other", name=_type_name(L, rt))
        return TypeInfo(
            **common,
            shape=_SHAPES.get(shape_id & 0x0F, f"shape_{shape_id}") + ("_array" if shape_id & 0x40 else ""),
            access=_ACCESS.get(L.spReflectionType_GetResourceAccess(t), "none"),
            element=element,
        )
    if kind in ("constant_buffer", "parameter_block", "storage_buffer", "texture_buffer", "pointer"):
        el = L.spReflectionTypeLayout_GetElementTypeLayout(tl)
        return TypeInfo(**common, element=_type(L, el, depth + 1) if el else None)
    return TypeInfo(**common)


def _param(L: Any, vl: int, depth: int = 0) -> ParamInfo:
    var = L.spReflectionVariableLayout_GetVariable(vl)
    tl = L.spReflectionVariableLayout_GetTypeLayout(vl)
    category = L.spReflectionTypeLayout_GetParameterCategory(tl) if tl else 0
    name = _s(L.spReflectionVariable_GetName(var)) if var else ""
    attrs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    if var:
        attrs = _attributes(L, L.spReflectionVariable_GetUserAttributeCount(var),
                            lambda i: L.spReflectionVariable_GetUserAttribute(var, i))
    semantic = _s(L.spReflectionVariableLayout_GetSemanticName(vl)) or None
    return ParamInfo(
        name=name,
        type=_type(L, tl, depth) if tl else TypeInfo(kind="other", name=""),
        offset=L.spReflectionVariableLayout_GetOffset(vl, UNIFORM),
        semantic=semantic,
        varying=category == VARYING_INPUT or (semantic or "").upper().startswith("SV_"),
        attributes=attrs,
    )


def _struct_of(L: Any, vl: int | None) -> tuple[tuple[ParamInfo, ...], int]:
    """Fields and size of the struct a params var layout points at (through its constant buffer)."""
    if not vl:
        return (), 0
    tl = L.spReflectionVariableLayout_GetTypeLayout(vl)
    if L.spReflectionTypeLayout_getKind(tl) in (6, 11):  # constant buffer / parameter block
        inner = L.spReflectionTypeLayout_GetElementTypeLayout(tl)
        tl = inner or tl
    size = L.spReflectionTypeLayout_GetSize(tl, UNIFORM)
    fields = tuple(_param(L, L.spReflectionTypeLayout_GetFieldByIndex(tl, i))
                   for i in range(L.spReflectionTypeLayout_GetFieldCount(tl)))
    return fields, size


def program_reflection(L: Any, req: int, target: str) -> ProgramReflection:
    refl = L.spGetReflection(req)
    eps = []
    for i in range(L.spReflection_getEntryPointCount(refl)):
        ep = L.spReflection_getEntryPointByIndex(refl, i)
        sizes = (ctypes.c_uint64 * 3)()
        L.spReflectionEntryPoint_getComputeThreadGroupSize(ep, 3, sizes)
        params = tuple(_param(L, L.spReflectionEntryPoint_getParameterByIndex(ep, j))
                       for j in range(L.spReflectionEntryPoint_getParameterCount(ep)))
        fields, size = _struct_of(L, L.spReflectionEntryPoint_getVarLayout(ep))
        offsets = {f.name: f.offset for f in fields}
        params = tuple(
            ParamInfo(p.name, p.type, offsets.get(p.name, p.offset), p.semantic, p.varying, p.attributes)
            for p in params
        )
        fn = L.spReflectionEntryPoint_getFunction(ep)
        attrs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
        if fn:
            attrs = _attributes(L, L.spReflectionFunction_GetUserAttributeCount(fn),
                                lambda k, fn=fn: L.spReflectionFunction_GetUserAttribute(fn, k))
        eps.append(EntryPointInfo(
            name=_s(L.spReflectionEntryPoint_getName(ep)),
            stage={6: "compute"}.get(L.spReflectionEntryPoint_getStage(ep), "other"),
            numthreads=(int(sizes[0]), int(sizes[1]), int(sizes[2])),
            params=params,
            params_size=size,
            attributes=attrs,
        ))
    gfields, gsize = _struct_of(L, L.spReflection_getGlobalParamsVarLayout(refl))
    return ProgramReflection(target=target, entry_points=tuple(eps), globals=gfields, globals_size=gsize)


def _function(L: Any, fn: int) -> FunctionInfo:
    params = []
    no_diff = []
    for i in range(L.spReflectionFunction_GetParameterCount(fn)):
        v = L.spReflectionFunction_GetParameter(fn, i)
        pname = _s(L.spReflectionVariable_GetName(v))
        direction = "in"
        if L.spReflectionVariable_FindModifier(v, 10):
            direction = "inout"
        elif L.spReflectionVariable_FindModifier(v, 9):
            direction = "out"
        if L.spReflectionVariable_FindModifier(v, 1):
            no_diff.append(pname)
        params.append((pname, _type_name(L, L.spReflectionVariable_GetType(v)), direction))
    return FunctionInfo(
        name=_s(L.spReflectionFunction_GetName(fn)),
        result=_type_name(L, L.spReflectionFunction_GetResultType(fn)),
        params=tuple(params),
        differentiable=bool(L.spReflectionFunction_FindModifier(fn, 6)),
        no_diff=tuple(no_diff),
    )


def module_decls(L: Any, decl: int) -> list[DeclInfo]:
    """Top-level declarations of a module (functions merged by name into overload sets)."""
    out: dict[str, DeclInfo] = {}
    for i in range(L.spReflectionDecl_getChildrenCount(decl)):
        d = L.spReflectionDecl_getChild(decl, i)
        kind = _DECL_KINDS.get(L.spReflectionDecl_getKind(d), "other")
        name = _s(L.spReflectionDecl_getName(d))
        if kind == "other" and name:  # interfaces are not a decl kind of their own: ask the type
            t = L.spReflection_getTypeFromDecl(d)
            if t and L.spReflectionType_GetKind(t) == _TYPE_KIND_INTERFACE:
                out[name] = DeclInfo(name, "interface", name)
            continue
        if not name or kind == "module":
            continue
        if kind == "generic":
            inner = L.spReflectionGeneric_GetInnerDecl(L.spReflectionDecl_castToGeneric(d))
            ik = _DECL_KINDS.get(L.spReflectionGeneric_GetInnerKind(L.spReflectionDecl_castToGeneric(d)), "other")
            kind = f"generic {ik}" if inner else "generic"
            out.setdefault(name, DeclInfo(name, kind))
            continue
        if kind == "function":
            info = _function(L, L.spReflectionDecl_castToFunction(d))
            prev = out.get(name)
            fns = (prev.functions if prev else ()) + (info,)
            out[name] = DeclInfo(name, "function", info.result, functions=fns)
        elif kind == "struct":
            t = L.spReflection_getTypeFromDecl(d)
            fields = []
            if t:
                for j in range(L.spReflectionType_GetFieldCount(t)):
                    v = L.spReflectionType_GetFieldByIndex(t, j)
                    fields.append((_s(L.spReflectionVariable_GetName(v)),
                                   _type_name(L, L.spReflectionVariable_GetType(v))))
            out[name] = DeclInfo(name, "struct", name, fields=tuple(fields))
        elif kind == "variable":
            v = L.spReflectionDecl_castToVariable(d)
            out[name] = DeclInfo(name, "variable", _type_name(L, L.spReflectionVariable_GetType(v)) if v else "")
        else:
            out[name] = DeclInfo(name, kind)
    return list(out.values())
