"""The oracle's compile step: `compilePlayground` of the public shader-slang/slang-playground at 461eaa9
(`engine/slang-compilation-engine/src/playgroundCompiler.ts`, with `compilationUtils.ts`), ported line
by line (test-only, no slang_kernel code): bindings, resource commands, uniform controllers, uniform
size and call commands, all read off Slang's reflection JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import wgpu

from .slang_wgsl import CompiledShader

__all__ = ["ACCESS", "TEXEL_BYTES", "CallCommand", "CompiledPlayground", "compile_playground", "scalar_bits",
           "size_of", "texture_format"]


# -- playgroundCompiler.ts / compilationUtils.ts ------------------------------------------------------

_FORMATS = {"rgba32f": "rgba32float", "rgba16f": "rgba16float", "rg32f": "rg32float", "r32f": "r32float",
            "r16f": "r16float", "rgba8": "rgba8unorm", "rg8": "rg8unorm", "r8": "r8unorm", "r32ui": "r32uint",
            "r32i": "r32sint", "rgba32ui": "rgba32uint", "rgba32i": "rgba32sint", "rgba8ui": "rgba8uint"}
ACCESS = {"readWrite": "read-write", "write": "write-only", "read": "read-only"}
TEXEL_BYTES = {"r8unorm": 1, "r32float": 4, "r32uint": 4, "r32sint": 4, "rgba8unorm": 4, "rg32float": 8,
                "rgba16float": 8, "rgba32float": 16, "rgba32uint": 16, "rgba32sint": 16, "r16float": 2,
                "rg8unorm": 2, "rgba8uint": 4}


def scalar_bits(scalar: str) -> int:
    return int("".join(c for c in scalar if c.isdigit()))


def texture_format(refl_param: dict[str, Any], access: str | None) -> str:
    """getBindingDescriptor / getTextureFormat: [format] if given, else from the texel type."""
    if refl_param.get("format"):
        return _FORMATS[refl_param["format"]]
    rt = refl_param["type"]["resultType"]
    if rt["kind"] == "scalar":
        n, scalar = 1, rt["scalarType"]
    else:
        n, scalar = rt["elementCount"], rt["elementType"]["scalarType"]
    if access == "read-write" and n > 1:
        raise ValueError("There are no texture formats available with more than 1 component that are read-write")
    kind = scalar.rstrip("0123456789")
    kind = "sint" if kind == "int" else kind
    rep = f"{scalar_bits(scalar)}{kind}"
    return ("r" if n == 1 else "rg" if n == 2 else "rgba") + rep


def size_of(t: dict[str, Any]) -> int:
    """getSize(reflectionType)."""
    if t["kind"] == "scalar":
        return scalar_bits(t["scalarType"]) // 8
    if t["kind"] == "vector":
        n = 4 if t["elementCount"] == 3 else t["elementCount"]
        return n * size_of(t["elementType"])
    if t["kind"] == "struct":
        align = max(f["binding"]["size"] for f in t["fields"])
        end = max(f["binding"]["offset"] + f["binding"]["size"] for f in t["fields"])
        return math.ceil(end / align) * align
    raise ValueError(f"getSize: unsupported {t['kind']}")


def _binding(p: dict[str, Any]) -> dict[str, Any]:
    """getBindingDescriptor: the GPUBindGroupLayoutEntry of one parameter."""
    t, b = p["type"], p["binding"]
    entry: dict[str, Any] = {"binding": b["index"] if b["kind"] == "descriptorTableSlot" else 0,
                             "visibility": wgpu.ShaderStage.COMPUTE}
    if t["kind"] == "resource":
        if t["baseShape"] in ("texture2D", "texture3D"):
            dim = "3d" if t["baseShape"] == "texture3D" else "2d"
            if t.get("access") is None:
                entry["texture"] = {"view_dimension": dim}
            else:
                access = ACCESS[t["access"]]
                entry["storage_texture"] = {"access": access, "format": texture_format(p, access),
                                            "view_dimension": dim}
        elif t["baseShape"] == "structuredBuffer":
            entry["buffer"] = {"type": "storage" if t.get("access") == "readWrite" else "read-only-storage"}
        else:
            raise ValueError(f"Could not generate binding for {p['name']}")
    elif t["kind"] == "samplerState":
        entry["sampler"] = {}
    elif b["kind"] == "uniform":
        entry["buffer"] = {"type": "uniform"}
    return entry


@dataclass
class CallCommand:
    fn: str
    type: str                   # FIXED_SIZE, RESOURCE_BASED, INDIRECT
    size: tuple[int, ...] = ()
    resource: str = ""
    element_size: int | None = None
    offset: int = 0
    once: bool = False


@dataclass
class CompiledPlayground:
    shader: CompiledShader
    layout: dict[str, dict[str, Any]]
    resource_commands: list[tuple[str, str, list[Any], dict[str, Any]]]   # (name, type, args, param)
    uniforms: list[tuple[str, str, int, str, list[Any]]]   # (name, type, offset, scalarType, args)
    uniform_size: int
    calls: list[CallCommand]


def compile_playground(shader: CompiledShader) -> CompiledPlayground:
    refl = shader.reflection
    params = refl["parameters"]
    layout = {p["name"]: _binding(p) for p in params}
    if any(p["binding"]["kind"] == "uniform" for p in params):
        for p in params:
            if p["binding"]["kind"] == "uniform":
                layout.pop(p["name"], None)
        layout["uniformInput"] = {"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE,
                                  "buffer": {"type": "uniform"}}
    resources: list[tuple[str, str, list[Any], dict[str, Any]]] = []
    uniforms: list[tuple[str, str, int, str, list[Any]]] = []
    for p in params:
        for a in p.get("userAttribs") or []:
            if not a["name"].startswith("playground_"):
                continue
            kind, args = a["name"][len("playground_"):], list(a.get("arguments", []))
            if kind in ("ZEROS", "SAMPLER", "RAND", "BLACK", "BLACK_3D", "BLACK_SCREEN", "URL", "DATA"):
                resources.append((p["name"], kind, args, p))
            elif kind in ("SLIDER", "COLOR_PICK", "TIME", "FRAME_ID", "MOUSE_POSITION", "KEY"):
                t = p["type"]
                scalar = t.get("scalarType") or (t.get("elementType") or {}).get("scalarType", "float32")
                uniforms.append((p["name"], kind, p["binding"]["offset"], scalar, args))
    size = 0
    for p in params:
        if p["binding"]["kind"] == "uniform":
            size = max(size, p["binding"]["offset"] + p["binding"]["size"])
    calls: list[CallCommand] = []
    for ep in refl["entryPoints"]:
        cmd: CallCommand | None = None
        once = False
        for a in ep.get("userAttribs") or []:
            n, args = a["name"], a.get("arguments", [])
            if n == "playground_CALL_SIZE_OF":
                rp = next(q for q in params if q["name"] == args[0])
                es = size_of(rp["type"]["resultType"]) if rp["type"].get("baseShape") == "structuredBuffer" else None
                cmd = CallCommand(ep["name"], "RESOURCE_BASED", resource=args[0], element_size=es)
            elif n == "playground_CALL":
                cmd = CallCommand(ep["name"], "FIXED_SIZE", size=tuple(int(x) for x in args))
            elif n == "playground_CALL_INDIRECT":
                cmd = CallCommand(ep["name"], "INDIRECT", resource=args[0], offset=int(args[1]))
            elif n == "playground_CALL_ONCE":
                once = True
        if cmd is not None:
            cmd.once = once
            calls.append(cmd)
    return CompiledPlayground(shader, layout, resources, uniforms, math.ceil(size / 16) * 16, calls)
