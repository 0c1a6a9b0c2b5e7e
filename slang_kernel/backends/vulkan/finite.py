"""The NaN/Inf finder's scan of a Vulkan device buffer, on the device (slang_kernel.engine.finite).

A float32 buffer's words are tested for an all-ones exponent (NaN or Inf) by a small compute kernel
that keeps the smallest such index (InterlockedMin); a second one-thread kernel reads that element.
The scan is a grid-stride loop over at most MAX_GROUPS groups: one thread per element would need
ceil(n / 256) groups in x, past Vulkan's guaranteed maxComputeWorkGroupCount[0] of 65535 from
2^24 floats on.
Only two uints come back, never the buffer. The kernels are a module of their own, built once per
device like any kernel (a CompiledKernel made here: its reflection is three plain parameters).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...cache import digest
from ...compiled import CompiledKernel, ModuleSource
from ...compiler.reflection import EntryPointInfo, ParamInfo, ProgramReflection
from ..common.packing import UINT, uint_buffer

__all__ = ["GROUP", "MAX_GROUPS", "first_nonfinite_f32", "scan_groups", "scans"]

GROUP = 256
MAX_GROUPS = 4096   # 2^20 threads: enough to fill a large GPU, far under the 65535 groups Vulkan guarantees
NONE = 0xFFFFFFFF
SOURCE = f"""
// slang-kernel: the NaN/Inf finder's device scan (backends/vulkan/finite.py)
[shader("compute")][numthreads({GROUP}, 1, 1)]
void sk_finite_scan(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<uint> sk_data,
                    uniform RWStructuredBuffer<uint> sk_first, uniform uint sk_n, uniform uint sk_stride)
{{
    for (uint i = t.x; i < sk_n; i += sk_stride)   // a thread's indices grow: its first hit is its smallest
    {{
        if ((sk_data[i] & 0x7F800000u) == 0x7F800000u)
        {{
            InterlockedMin(sk_first[0], i);
            return;
        }}
    }}
}}

[shader("compute")][numthreads(1, 1, 1)]
void sk_finite_pick(uint3 t: SV_DispatchThreadID, uniform StructuredBuffer<uint> sk_data,
                    uniform RWStructuredBuffer<uint> sk_first, uniform uint sk_n, uniform uint sk_stride)
{{
    if (sk_first[0] < sk_n)
        sk_first[1] = sk_data[sk_first[0]];
}}
"""
_PARAMS = (uint_buffer("sk_data", False), uint_buffer("sk_first", True), ParamInfo("sk_n", UINT),
           ParamInfo("sk_stride", UINT))


def _kernel(entry: str, numthreads: tuple[int, int, int]) -> CompiledKernel:
    tag = digest(SOURCE)[:12]
    ep = EntryPointInfo(entry, "compute", numthreads, _PARAMS, 0)
    refl = ProgramReflection("spirv", (ep,), (), 0)
    module = ModuleSource(f"sk_finite_{tag}", SOURCE, "sk_finite_scan", "")
    return CompiledKernel(f"sk_finite/{tag}/{entry}", entry, "spirv", "", refl, "sk_finite_scan", chain=(module,))


_SCAN = _kernel("sk_finite_scan", (GROUP, 1, 1))
_PICK = _kernel("sk_finite_pick", (1, 1, 1))


def scan_groups(n: int) -> tuple[int, int, int]:
    """The scan's thread groups for n elements: one thread per element up to MAX_GROUPS groups, then
    each thread strides over several (the x count stays within every device's limit)."""
    return (max(1, min(-(-n // GROUP), MAX_GROUPS)), 1, 1)


def scans(backend: Any, value: Any, kind: type) -> bool:
    """Whether `value` is a float32 buffer of `backend` (`kind`: its buffer class), scanned on its device."""
    if type(value) is not kind:
        return False
    v: Any = value
    return bool(v.backend is backend and v.dtype.base == np.float32 and v.dtype.names is None)


def first_nonfinite_f32(backend: Any, buffer: Any) -> tuple[tuple[int, ...], float, int] | None:
    """(index, value, element count) of the first NaN/Inf in a float32 device buffer of `backend` (a
    VulkanBuffer or a worker's handle, see `scans`), found on the device; None when all of it is finite."""
    n = int(buffer.nbytes // 4)
    if n == 0:
        return None
    if n >= NONE - MAX_GROUPS * GROUP:
        raise ValueError(f"the NaN/Inf scan counts elements in 32 bits: a buffer of {n} floats is too large")
    groups = scan_groups(n)
    values: dict[str, Any] = {"sk_data": buffer, "sk_first": np.array([NONE, 0], np.uint32), "sk_n": n, "sk_stride": groups[0] * GROUP}
    first = values["sk_first"]
    backend.dispatch(_SCAN, groups, values)
    if int(first[0]) == NONE:
        return None
    backend.dispatch(_PICK, (1, 1, 1), values)
    flat, v = int(first[0]), float(first[1:2].view(np.float32)[0])
    shape = (*buffer.shape, *buffer.dtype.shape) or (flat + 1,)
    return tuple(int(i) for i in np.unravel_index(flat, shape)), v, int(buffer.size)
