"""Torch tensors as the engine's arrays, checked before launch.

Where a tensor may go, by backend:
- cpu:    CPU tensors, as numpy views of the tensor's memory (no copy; RW buffers written in place).
- vulkan: CPU tensors, as numpy views; the Vulkan backend copies them to the device and back, as it
          does every numpy array (host copies, not interop).
- cuda:   CUDA tensors, as CuPy views (no copy), launched on torch's current stream; a function's
          results are CuPy arrays handed to torch without a copy.
A tensor on the other device is refused naming the parameter and both devices. Torch is imported
only here and in `autograd`, and only once a tensor has been met.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator, Mapping

import numpy as np

from ..backends.registry import info_of
from ..errors import ParameterError

__all__ = ["TensorSpec", "backend_device", "is_tensor", "kernel_call", "kernel_values", "on_torch_stream",
           "scalar_dtype", "tensor_params", "to_array", "to_tensor"]

_SCALARS = {"float": np.float32, "double": np.float64, "half": np.float16, "int": np.int32,
            "uint": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64, "int16_t": np.int16,
            "uint16_t": np.uint16, "int8_t": np.int8, "uint8_t": np.uint8, "bool": np.bool_}


_VECTOR = re.compile(r"^(bool|int|uint|float|half|double)(\d)?(?:x(\d))?$")


def is_tensor(value: object) -> bool:
    """A torch tensor, known without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(value, "requires_grad")


def scalar_dtype(slang_type: str) -> "np.dtype[Any] | None":
    """numpy dtype of the scalar of a Slang scalar/vector/matrix type name (`float3` -> float32);
    None for other types (structs), whose tensors are not dtype-checked."""
    for base in sorted(_SCALARS, key=len, reverse=True):
        rest = slang_type[len(base):]
        if slang_type.startswith(base) and (not rest or rest[0].isdigit()):
            return np.dtype(_SCALARS[base])
    return None


def backend_device(backend_name: str) -> str:
    """The torch device type a backend takes tensors on."""
    return info_of(backend_name).torch_device


class TensorSpec:
    """What one parameter takes, for the messages that refuse a tensor."""

    def __init__(self, where: str, param: str, slang_type: str, backend_name: str) -> None:
        self.where, self.param, self.slang_type, self.backend_name = where, param, slang_type, backend_name

    def refuse(self, what: str, advice: str) -> ParameterError:
        return ParameterError(f"{self.where}: parameter `{self.param}` ({self.slang_type}) {what}; {advice}")

    def element_shape(self) -> tuple[int, ...]:
        """The trailing dimensions one value of the parameter's type takes (`float3` -> (3,),
        `float2x2` -> (2, 2), a scalar or a struct -> ())."""
        m = _VECTOR.match(self.slang_type.partition("<")[2].rstrip(">") or self.slang_type)
        return tuple(int(d) for d in m.groups()[1:] if d) if m else ()

    def batch_shape(self, t: Any) -> tuple[int, ...]:
        """`t`'s shape less the element's own dimensions, refused where they do not match."""
        eshape, shape = self.element_shape(), tuple(t.shape)
        if eshape and shape[len(shape) - len(eshape):] != eshape:
            raise self.refuse(f"takes tensors whose last dimension{'s are' if len(eshape) > 1 else ' is'} "
                              f"{', '.join(map(str, eshape))}; got shape {shape}",
                              f"pass a tensor of shape (..., {', '.join(map(str, eshape))})")
        return shape[:len(shape) - len(eshape)]

    def check(self, t: Any, *, contiguous: bool = False, grad_ok: bool = False) -> None:
        """Device, dtype, layout and requires_grad of tensor `t`, before any launch."""
        want = backend_device(self.backend_name)
        if t.device.type != want:
            raise self.refuse(f"is on {t.device}, but the {self.backend_name} backend takes {want} tensors",
                              f"move it with `.to('{want}')` or use a Session(backend=...) on {t.device.type}")
        dt = scalar_dtype(self.slang_type.partition("<")[2].rstrip(">") or self.slang_type)
        if dt is not None and _np_dtype(t) != dt:
            raise self.refuse(f"takes {dt} tensors; got {t.dtype}",
                              f"convert it with `.to(torch.{_torch_name(dt)})`")
        if contiguous and not t.is_contiguous():
            raise self.refuse("is written in place and needs a contiguous tensor; got strides "
                              f"{tuple(t.stride())}", "pass `.contiguous()` of it (and read the result from that)")
        if t.requires_grad and not grad_ok:
            raise self.refuse("is not differentiable, but the tensor requires grad",
                              "pass `.detach()` of it, or mark the parameter differentiable "
                              "(a float type, not `no_diff`, in a [Differentiable] function)")


def _np_dtype(t: Any) -> "np.dtype[Any] | None":
    name = str(t.dtype).removeprefix("torch.")
    return np.dtype(name) if name in {"float16", "float32", "float64", "int8", "int16", "int32", "int64",
                                      "uint8", "uint16", "uint32", "uint64", "bool"} else None


def _torch_name(dt: "np.dtype[Any]") -> str:
    return "bool" if dt == np.bool_ else dt.name


def to_array(t: Any, backend_name: str) -> Any:
    """The detached tensor as the backend's array: a numpy view for CPU tensors, a CuPy view on the
    CUDA backend (kernels), else a host copy."""
    d = t.detach()
    if d.device.type == "cpu":
        return d.numpy()
    if backend_device(backend_name) == "cuda":
        import cupy

        return cupy.asarray(d)
    return d.cpu().numpy()


def to_tensor(array: Any, like: Any) -> Any:
    """A result array as a tensor on `like`'s device (a view of numpy memory for CPU)."""
    import torch

    if isinstance(array, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t if like.device.type == "cpu" else t.to(like.device)
    return torch.as_tensor(array, device=like.device)


@contextlib.contextmanager
def on_torch_stream(like: Any) -> Iterator[None]:
    """For a CUDA tensor: CuPy's current stream is torch's, so the backend launches (and its
    copies run) in order with torch's work; otherwise nothing."""
    if like.device.type != "cuda":
        yield
        return
    import cupy
    import torch

    with cupy.cuda.ExternalStream(torch.cuda.current_stream(like.device).cuda_stream):
        yield


def kernel_call(kernel: Any, build: Any, threads: Any, groups: Any, check_finite: bool | None,
                params: Mapping[str, Any]) -> None:
    """A ComputeKernel call (`kernel.__call__` hands over here when a parameter is a tensor): the
    tensors checked and viewed, then the one dispatch path, on torch's stream."""
    values = tensor_params(kernel, build, params)
    like = next(v for v in params.values() if is_tensor(v))
    with on_torch_stream(like):
        kernel.dispatch_build(build, kernel.checked_groups(build, threads, groups, values), check_finite, values)


def tensor_params(kernel: Any, build: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` of a ComputeKernel with each tensor checked against `build`'s reflection and viewed."""
    types = {p.name: p.type.name for p in (*build.entry_point.uniforms, *build.reflection.globals)}
    return kernel_values(kernel.name, params, types, kernel.session.backend.name)


def kernel_values(kernel_name: str, params: Mapping[str, Any], types: Mapping[str, str],
                  backend_name: str) -> dict[str, Any]:
    """A kernel's parameters with each tensor checked and replaced by its array view. `types`: each
    parameter's Slang type; a buffer that is not read-only (RW...) is written into the tensor in
    place, so it must be contiguous."""
    out = dict(params)
    for name, value in params.items():
        if not is_tensor(value):
            continue
        tname = types.get(name, "?")
        spec = TensorSpec(f"{kernel_name}()", name, tname, backend_name)
        spec.check(value, contiguous=tname.startswith(("RW", "Append", "Consume")))
        out[name] = to_array(value, backend_name)
    return out
