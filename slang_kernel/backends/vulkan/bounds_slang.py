"""Checked kernels for backends that build from Slang source (Vulkan): an instrumented variant.

Session(checked=True) on the CPU and CUDA checks every buffer access through the bound-check hooks
of Slang's C++/CUDA prelude (cpu_prelude.h, cuda_prelude.h). SPIR-V has no prelude, so the
Vulkan backend dispatches a variant of the kernel built from a rewritten copy of the kernel's cell:

- every `P[i]` of a buffer or texture parameter `P` of the kernel (entry-point uniforms, globals,
  and buffers inside struct/ConstantBuffer/ParameterBlock parameters, written `p.inner[i]`) becomes
  `P[sk_chk_(P, i, id)]`; `P.Load(a)`/`P.Store(a, v)` of a byte-address buffer likewise check `a`;
- `sk_chk_` compares the index with the resource's own size (GetDimensions) and, out of range,
  counts the access in a small report buffer (`sk_bounds_`, 8 uints: count, index, size, which
  parameter, thread id x/y/z), the first one in full, and returns an index far past the end, which
  Vulkan's robust buffer access turns into a dropped write or a zero read;
- the entry point gains a `SV_DispatchThreadID` parameter that sets the thread id the report names.

Lines keep their numbers (diagnostics point at the user's lines). The variant is a CompiledKernel of
its own (key `<key>/chk/checked`, module `<name>_chk_<entry>`), so unchecked kernels are untouched
and cost nothing. Where the rewritten cell does not compile (a helper function with a local array
named like a buffer parameter), the accesses in the entry point's body alone are checked. Only the
kernel's own cell is rewritten: accesses inside functions of imported cells, or through a buffer
passed to a helper function under another name, are not checked (the CPU and CUDA hooks check
those too). Texture accesses are checked per coordinate (index and size along the offending axis).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Mapping

import numpy as np

from ...compiled import CompiledKernel
from ...compiler.reflection import TypeInfo
from ...errors import BoundsError, VulkanCompileError
from ...scanner import apply_edits, blank, closing, entry_definition, index_sites, split_commas
from ..common.packing import uint_buffer

__all__ = ["REPORT", "Checked", "checked_paths", "checked_variant", "dispatch_checked", "instrument", "is_variant",
           "raise_report", "with_variants"]

REPORT = "sk_bounds_"          # the global report buffer the variant binds
_FAR = "0x7FFFFFFFu"          # the index an out-of-range access is sent to (dropped / reads 0)
REPORT_PARAM = uint_buffer(REPORT, True)

_BUFFERS = ("StructuredBuffer", "RWStructuredBuffer", "Buffer", "RWBuffer")
_TEXTURES = {"Texture1D": 1, "RWTexture1D": 1, "Texture2D": 2, "RWTexture2D": 2, "Texture3D": 3, "RWTexture3D": 3}


def _helpers() -> str:
    out = [
        "\n// slang-kernel bounds checks (Session(checked=True)): see backends/vulkan/bounds_slang.py",
        f"RWStructuredBuffer<uint> {REPORT};",
        "static uint3 sk_bounds_tid_ = uint3(0, 0, 0);",
        "uint sk_oob_(uint i, uint n, uint id) {",
        f"    uint k; InterlockedAdd({REPORT}[0], 1u, k);",
        f"    if (k == 0u) {{ {REPORT}[1] = i; {REPORT}[2] = n; {REPORT}[3] = id; {REPORT}[4] = sk_bounds_tid_.x;",
        f"                 {REPORT}[5] = sk_bounds_tid_.y; {REPORT}[6] = sk_bounds_tid_.z; }}",
        f"    return {_FAR}; }}",
        "uint sk_in_(uint i, uint n, uint id) { if (i < n) return i; return sk_oob_(i, n, id); }",
    ]
    for b in _BUFFERS:
        dims = "uint n, s; b.GetDimensions(n, s);" if "Structured" in b else "uint n; b.GetDimensions(n);"
        gen = "T" if "Structured" in b else "T : ITexelElement"
        out.append(f"uint sk_chk_<{gen}>({b}<T> b, int i, uint id) {{ {dims} return sk_in_(uint(i), n, id); }}")
        out.append(f"uint sk_chk_<{gen}>({b}<T> b, uint i, uint id) {{ {dims} return sk_in_(i, n, id); }}")
    for b in ("ByteAddressBuffer", "RWByteAddressBuffer"):
        # the report counts 4-byte words, as the CPU's does
        out.append(f"uint sk_chkb_({b} b, uint a, uint bytes, uint id) {{ uint n; b.GetDimensions(n); "
                   "if (n >= bytes && a <= n - bytes) return a; sk_oob_(a / 4u, n / 4u, id); return " + _FAR + "; }")
    for t, d in _TEXTURES.items():
        names = ["w", "h", "d"][:d]
        decl = "uint " + ", ".join(names) + ";"
        get = f"t.GetDimensions({', '.join(names)});" if t.startswith("RW") else \
            f"uint l; t.GetDimensions(0, {', '.join(names)}, l);"
        if d == 1:
            out.append(f"uint sk_chk_<T : ITexelElement>({t}<T> t, uint i, uint id) {{ {decl} {get} return sk_in_(i, w, id); }}")
            out.append(f"uint sk_chk_<T : ITexelElement>({t}<T> t, int i, uint id) {{ return sk_chk_(t, uint(i), id); }}")
            continue
        vec = f"uint{d}"
        comps = "".join(f" c.{a} = sk_in_(c.{a}, {n}, id);" for a, n in zip("xyz", names))
        out.append(f"{vec} sk_chk_<T : ITexelElement>({t}<T> t, {vec} c, uint id) {{ {decl} {get}{comps} return c; }}")
        out.append(f"{vec} sk_chk_<T : ITexelElement>({t}<T> t, int{d} c, uint id) {{ return sk_chk_(t, {vec}(c), id); }}")
    return "\n".join(out) + "\n"


_HELPERS = _helpers()


def checked_paths(kernel: CompiledKernel) -> list[tuple[str, TypeInfo]]:
    """The buffers and textures a checked variant checks, by the dotted path the source uses, in the
    order of their report ids: entry-point uniforms, then globals, each with its nested resources."""
    out: list[tuple[str, TypeInfo]] = []

    def walk(path: str, t: TypeInfo, depth: int) -> None:
        if t.is_buffer or (t.is_texture and t.shape in _SHAPES):
            out.append((path, t))
        elif depth < 4 and t.kind in ("struct", "constant_buffer", "parameter_block"):
            inner = t.element if t.kind != "struct" and t.element is not None else t
            for f in inner.fields:
                walk(f"{path}.{f.name}", f.type, depth + 1)

    for p in (*kernel.entry_point.uniforms, *kernel.reflection.globals):
        walk(p.name, p.type, 0)
    return out


_SHAPES = {"texture_1d", "texture_2d", "texture_3d"}


_LOAD_BYTES = {"Load": 4, "Load2": 8, "Load3": 12, "Load4": 16, "Store": 4, "Store2": 8, "Store3": 12, "Store4": 16}


def instrument(source: str, entry: str, paths: list[tuple[str, TypeInfo]], entry_only: bool = False) -> tuple[str, bool]:
    """The checked text of the kernel's cell (see the module docstring; lines keep their numbers), and
    whether it records the thread id (the entry point's definition was found in the text).
    entry_only: rewrite the accesses inside the entry point's body only (the fallback where a
    helper function has a local of a parameter's name, which the whole-cell rewrite cannot check)."""
    b = blank(source)
    edits: list[tuple[int, int, str]] = []
    at = entry_definition(source, entry, _b=b)
    lo, hi = 0, len(source)
    if at is not None:
        open_, close, body, end = at
        sep = ", " if b[open_ + 1:close].strip() else ""
        edits.append((close, close, f"{sep}uint3 sk_bounds_t_ : SV_DispatchThreadID"))
        edits.append((body, body, " sk_bounds_tid_ = sk_bounds_t_;"))
        if entry_only:
            lo, hi = body, end
    for pid, (path, t) in enumerate(paths):
        dotted = r"\s*\.\s*".join(re.escape(part) for part in path.split("."))
        if t.shape == "byte_address_buffer":
            pat = re.compile(rf"(?<![\w.]){dotted}\s*\.\s*(Load[234]?|Store[234]?)\s*(<[^<>()]*>)?\s*\(")
            for m in pat.finditer(b):
                start = m.end() - 1
                if not lo <= start < hi:
                    continue
                args = b[start + 1:closing(b, start) - 1]
                end = start + 1 + len(split_commas(args)[0])
                size = _LOAD_BYTES[m.group(1)]
                if m.group(2):   # Load<T>: T's size is not known here; check its first 4 bytes
                    size = 4
                edits.append((start + 1, start + 1, f"sk_chkb_({path}, uint("))
                edits.append((end, end, f"), {size}u, {pid}u)"))
            continue
        for _, open_, close in index_sites(source, path, lo, hi, _b=b):
            edits.append((open_ + 1, open_ + 1, f"sk_chk_({path}, "))
            edits.append((close, close, f", {pid}u)"))
    return apply_edits(source, edits) + _HELPERS, at is not None


@dataclasses.dataclass(frozen=True)
class Checked:
    """A checked variant, what its report ids mean, whether it knows the thread, how it was made."""

    kernel: CompiledKernel
    paths: tuple[str, ...]
    threads: bool = True
    entry_only: bool = False


def checked_variant(kernel: CompiledKernel, entry_only: bool = False) -> Checked:
    """The instrumented CompiledKernel of `kernel` (its own key and module name)."""
    if not kernel.chain:
        raise ValueError(f"{kernel.entry}: no module sources to instrument")
    paths = checked_paths(kernel)
    last = kernel.chain[-1]
    text, threads = instrument(last.source, kernel.entry, paths, entry_only)
    tag = "chke" if entry_only else "chk"
    chain = (*kernel.chain[:-1], dataclasses.replace(last, name=f"{last.name}_{tag}_{kernel.entry}", source=text,
                                                         path=f"{last.path} (checked {kernel.entry})"))
    refl = dataclasses.replace(kernel.reflection, globals=(*kernel.reflection.globals, REPORT_PARAM))
    variant = dataclasses.replace(kernel, key=f"{kernel.key}/{tag}/checked", chain=chain, reflection=refl,
                                  source=text)
    return Checked(variant, tuple(p for p, _ in paths), threads, entry_only)


def raise_report(entry: str, report: np.ndarray, paths: tuple[str, ...], threads: bool = True) -> None:
    """Raise the BoundsError a report buffer (8 uints) holds; nothing when it counted no access."""
    count, index, size, pid, x, y, z = (int(v) for v in report[:7])
    if count:
        name = paths[pid] if pid < len(paths) else None
        raise BoundsError(entry, count, index, size, name, (x, y, z) if threads else None)


def dispatch_checked(dispatch: Callable[[CompiledKernel, tuple[int, int, int], Mapping[str, Any]], None],
                     variants: dict[str, Checked], kernel: CompiledKernel, groups: tuple[int, int, int],
                     values: Mapping[str, Any]) -> None:
    """Run the checked variant of `kernel` through `dispatch` (the backend's own) with a fresh
    report buffer, and raise the BoundsError it reports (after in-range results were written back).
    Where the whole-cell rewrite does not compile (a helper's local array named like a buffer
    parameter), the accesses in the entry point's body alone are checked."""
    got = variants.get(kernel.key)
    if got is None:
        got = variants[kernel.key] = checked_variant(kernel)
    report = np.zeros(8, np.uint32)
    try:
        dispatch(got.kernel, groups, {**values, REPORT: report})
    except VulkanCompileError as exc:
        if got.entry_only:
            raise VulkanCompileError(
                f"{kernel.entry}: the bounds-checked variant of its cell (Session(checked=True)) does not "
                f"compile; the kernel itself does (run it unchecked, or on the CPU backend, which checks "
                f"every dispatch):\n{exc}") from None
        got = variants[kernel.key] = checked_variant(kernel, entry_only=True)
        dispatch(got.kernel, groups, {**values, REPORT: report})
    raise_report(kernel.entry, report, got.paths, got.threads)


def is_variant(kernel: CompiledKernel) -> bool:
    return kernel.key.endswith("/checked")


def with_variants(keys: list[str], variants: dict[str, Checked]) -> list[str]:
    """Keys to forget, their checked variants' keys included (and those variants dropped)."""
    for k in keys:
        variants.pop(k, None)
    return [*keys, *(f"{k}/{tag}/checked" for k in keys for tag in ("chk", "chke"))]
