"""TensorView arguments: a torch tensor (or any CUDA array) as Slang's 56-byte TensorView, no copy.

Tensors that require grad are read through `.detach()` (a view: same storage), so a kernel runs inside
`torch.autograd.Function`; a broadcast (stride-0) tensor is refused, as slangtorch refuses it.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["BroadcastTensorError", "MAX_DIM", "SLANG_DTYPES", "tensor_view"]

MAX_DIM = 5  # kSlangTorchTensorMaxDim in Slang's CUDA prelude
_TENSOR_VIEW = struct.Struct(f"<Q{MAX_DIM}I{MAX_DIM}III")  # data, strides (bytes), sizes, ndim, pad: 56 bytes
SLANG_DTYPES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "uint": "uint32",
                "int64_t": "int64", "uint8_t": "uint8", "int8_t": "int8", "int16_t": "int16", "bool": "bool"}


class BroadcastTensorError(RuntimeError):
    """A tensor with a stride-0 (broadcast) dimension was passed where Slang needs real storage."""


def tensor_view(value: Any, where: str, element: str | None = None) -> bytes:
    """Pack `value` (torch tensor, or CuPy/DLPack array) as a TensorView; `element` is the Slang type."""
    if hasattr(value, "detach") and hasattr(value, "data_ptr"):   # torch: no __cuda_array_interface__ needed
        t = value.detach()
        device = None if t.is_cuda or not t.numel() else str(t.device)
        dtype = str(t.dtype).removeprefix("torch.")
        ptr, shape, strides = t.data_ptr(), list(t.shape), [s * t.element_size() for s in t.stride()]
    else:
        import cupy

        arr = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)   # DLPack / CAI: no copy
        dtype, ptr, shape, strides = str(arr.dtype), arr.data.ptr, list(arr.shape), list(arr.strides)
        device = None
    want = SLANG_DTYPES.get(element or "")
    if want is not None and dtype != want:
        raise TypeError(f"`{where}` is {dtype}; the kernel takes TensorView<{element}> ({want}): "
                        f"pass {where}.to(torch.{want})")
    if len(shape) > MAX_DIM:
        raise ValueError(f"`{where}` has {len(shape)} dimensions; TensorView takes at most {MAX_DIM}")
    for d, (n, s) in enumerate(zip(shape, strides)):
        if s == 0 and n > 1:
            raise BroadcastTensorError(f"`{where}` is broadcast (stride 0 in dimension {d}); Slang kernels need "
                                       f"real storage: pass {where}.contiguous()")
    if device is not None:
        raise TypeError(f"`{where}` is on {device}; TensorView takes a CUDA tensor: pass {where}.cuda()")
    pad = MAX_DIM - len(shape)
    return _TENSOR_VIEW.pack(ptr, *strides, *([0] * pad), *shape, *([0] * pad), len(shape), 0)
