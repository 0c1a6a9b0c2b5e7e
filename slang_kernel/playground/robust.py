"""WebGPU's defined out-of-range behaviour for Slang Playground programs, on every backend.

The Playground runs on WebGPU, where no index is out of range: WGSL's compilers (Tint in Chrome, naga
in wgpu) clamp every array index to the array (`min(u32(i), N - 1)`), workgroup (groupshared) arrays
included, and storage-buffer indices to the buffer's length. Playground demos rely on it: gsplat2d's
256-entry tile list overflows on nearly every tile (`blobs[blobCount++] = i`), which on WebGPU keeps
overwriting the last entry and elsewhere writes past the array (lavapipe's heap is corrupted, CUDA
raises an illegal address, an NVIDIA Vulkan driver overwrites the next groupshared array).

:func:`webgpu_kernel` gives a compiled kernel of a Playground program the same behaviour:
- CUDA: Slang's CUDA indexes fixed-size arrays (groupshared ones included) and structured buffers
  through `FixedArray::operator[]` / `RWStructuredBuffer::operator[]`, which call the
  `SLANG_BOUND_CHECK*` macros; defined here before Slang's prelude, they clamp the index as Tint does.
  (With Session(checked=True) the checked prelude, prepended after this one, defines them first:
  then an out-of-range index is reported as a BoundsError instead.)
- Vulkan: sgl builds kernels from Slang source (`CompiledKernel.chain`), so the cell's module is
  rewritten: each index of a top-level `groupshared` / `static` fixed-size array becomes
  `_sk_webgpu_index(uint(i), N)` (= min(i, N - 1)). Storage buffers are left to the device's
  robustness (robustBufferAccess, core in Vulkan 1.0: out-of-range reads return zero or a value of
  the buffer, writes are dropped or land in the buffer, as WGSL allows).
- CPU: Slang's C++ indexes fixed-size arrays through the same `FixedArray` and macro: redefined at the
  top of the kernel's code to clamp. Buffers keep the backend's own handling (an out-of-range index
  goes to a scratch block: a dropped write, a zero read, which WGSL also allows).
The kernel's key gains "/webgpu", so these builds are cached apart from the plain ones.
"""

from __future__ import annotations

import dataclasses
import re

from ..compiled import CompiledKernel
from ..scanner import apply_edits, blank, declarations, index_sites

__all__ = ["CPP_PRELUDE", "CUDA_PRELUDE", "clamp_array_indices", "webgpu_kernel"]

CUDA_PRELUDE = """// slang_kernel.playground.robust: WebGPU's index clamping (Tint's min(i, N - 1)) for Playground programs
#ifndef SLANG_BOUND_CHECK
#define SLANG_BOUND_CHECK(index, count) \\
    if ((unsigned long long)(index) >= (unsigned long long)(count)) index = (count) > 0 ? (count) - 1 : 0;
#define SLANG_BOUND_CHECK_FIXED_ARRAY(index, count) \\
    if ((unsigned long long)(index) >= (unsigned long long)(count)) index = (count) - 1;
#define SLANG_BOUND_CHECK_BYTE_ADDRESS(index, elemSize, sizeInBytes) \\
    if ((unsigned long long)(index) + (unsigned long long)(elemSize) > (unsigned long long)(sizeInBytes)) \\
        index = (sizeInBytes) >= (elemSize) ? ((sizeInBytes) - (elemSize)) & ~3ull : 0;
#endif
"""

CPP_PRELUDE = """// slang_kernel.playground.robust: WebGPU's index clamping for fixed-size arrays (a checked
// session, -DSK_CHECKED, keeps the backend's reporting instead)
#ifndef SK_CHECKED
#undef SLANG_BOUND_CHECK_FIXED_ARRAY
#define SLANG_BOUND_CHECK_FIXED_ARRAY(index, count) \\
    if ((size_t)(index) >= (size_t)(count)) index = (count) - 1;
#endif
"""

_HELPER = "\n// slang_kernel.playground.robust\nuint _sk_webgpu_index(uint i, uint n) { return min(i, n - 1u); }\n"
_QUALIFIED = re.compile(r"\b(?:groupshared|static)\b")


def _top_level_arrays(text: str, b: str) -> dict[str, tuple[int, str]]:
    """Top-level `groupshared` / `static` one-dimensional arrays: name -> (end of declaration, size)."""
    out: dict[str, tuple[int, str]] = {}
    for d in declarations(text, _b=b):
        if d.kind != "variable" or not _QUALIFIED.search(b, d.head, d.end):
            continue
        for name in d.names:
            m = re.compile(rf"\b{re.escape(name)}\s*\[([^\[\]]+)\](?!\s*\[)").search(b, d.head, d.end)
            if m is not None:
                out[name] = (d.end, m.group(1).strip())
    return out


_WORD_BEFORE = re.compile(r"([A-Za-z_]\w*)\s*$")


def _declares(b: str, at: int) -> bool:
    """Is the name at `at` being declared (a type name right before it), not used?"""
    m = _WORD_BEFORE.search(b, max(0, at - 64), at)
    return m is not None and m.group(1) not in ("return", "case", "else", "do", "in", "out", "inout")


def clamp_array_indices(source: str) -> str:
    """Slang source with every index of its top-level groupshared / static fixed-size arrays clamped
    to the array (WGSL's semantics); unchanged when it declares none."""
    masked = blank(source)
    arrays = _top_level_arrays(source, masked)
    if not arrays:
        return source
    edits: list[tuple[int, int, str]] = []
    for name, (after, size) in arrays.items():
        for at, open_, close in index_sites(source, name, after, _b=masked):
            if _declares(masked, at):                   # `int a[2]`: another `a`, declared here
                continue
            # insertions only, so indices nested inside this one are rewritten too
            edits.append((open_ + 1, open_ + 1, "_sk_webgpu_index(uint("))
            edits.append((close, close, f"), uint({size}))"))
    return apply_edits(source, edits) + _HELPER


def webgpu_kernel(ck: CompiledKernel) -> CompiledKernel:
    """`ck` built with WebGPU's out-of-range behaviour for its target (see the module docstring)."""
    if ck.target == "cuda":
        return dataclasses.replace(ck, key=ck.key + "/webgpu", code=CUDA_PRELUDE + ck.code)
    if ck.target == "cpp" and "FixedArray<" in ck.code:
        return dataclasses.replace(ck, key=ck.key + "/webgpu", code=CPP_PRELUDE + ck.code)
    if ck.target in ("spirv", "spirv-asm", "glsl") and ck.chain:
        last = ck.chain[-1]
        rewritten = clamp_array_indices(last.source)
        if rewritten == last.source:
            return ck
        chain = (*ck.chain[:-1], dataclasses.replace(last, name=last.name + "_webgpu", source=rewritten))
        return dataclasses.replace(ck, key=ck.key + "/webgpu", chain=chain)
    return ck
