"""The NaN/Inf finder: after a dispatch, which written buffer or texture first holds a non-finite value.

A gradient that turns into NaN is the commonest autodiff failure, and the question is where it
started. With `k(..., check_finite=True)` (or `Session(check_finite=True)` for every call), each
dispatch is followed by a scan of the kernel's writable buffers and textures (in parameter order);
the first one holding a NaN or an infinity raises NonFiniteError naming the kernel, the dispatch (its
number in the session and the kernel's own call count), the parameter, the index and the value. As
every dispatch before it was clean, that dispatch wrote it (or its inputs carried it in from the
host). `SlangFunction.bwd(..., check_finite=True)` names the input whose gradient is not finite.

Where the data lives decides how it is scanned: numpy arrays on the host (they are there already),
CuPy/CUDA arrays on the device (an isfinite reduction; only the verdict and the first index come
back), a backend's own device objects by the backend on their device where it offers that (the
"finite_scan" capability: Vulkan's float32 buffers, by a scan kernel), other device objects
(textures, other dtypes) through their `.numpy()` (a read-back).
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

import numpy as np

from ..backends import Backend, finite_scan
from ..backends.registry import FINITE_SCAN, capability
from ..compiled import CompiledKernel
from ..compiler.reflection import ParamInfo

__all__ = ["FiniteCheck", "NonFiniteError", "check_gradients", "first_nonfinite", "written_params"]


class NonFiniteError(FloatingPointError):
    """A checked dispatch (check_finite=True) left a NaN or an infinity in a buffer or texture it writes."""

    def __init__(self, kernel: str, buffer: str, index: tuple[int, ...], value: float, dispatch: int = 0,
                 call: int = 0, size: int = 0, gradient_of: str | None = None) -> None:
        what = "NaN" if np.isnan(value) else ("+inf" if value > 0 else "-inf")
        where = index[0] if len(index) == 1 else index
        if gradient_of is not None:
            text = (f"{kernel}: the gradient of input `{gradient_of}` holds {what} at index {where}"
                    f"{f' (of {size})' if size else ''}; every gradient before it in the parameter list is finite.")
        else:
            text = (f"{kernel} (checked dispatch {dispatch} of this session, call {call} of {kernel}) left {what} in "
                    f"`{buffer}` at index {where}{f' (of {size} elements)' if size else ''}: the first non-finite "
                    "value after a dispatch whose predecessors were all finite, so this dispatch wrote it (or its "
                    "inputs carried it in).")
        super().__init__(text)
        self.kernel, self.buffer, self.index, self.value = kernel, buffer, index, value
        self.dispatch, self.call, self.size, self.gradient_of = dispatch, call, size, gradient_of


class FiniteCheck:
    """A session's NaN/Inf finder: on for every dispatch (Session(check_finite=True)) or per call, and
    the dispatch numbers it reports (the checked dispatches of the session, counted from 1)."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.dispatches = 0
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def dispatch(self, backend: Backend, kernel: CompiledKernel, groups: tuple[int, int, int],
                 values: Mapping[str, Any]) -> None:
        """One dispatch on `backend`, then the scan of what it wrote (NonFiniteError)."""
        numbers = self.count(kernel.entry)
        backend.dispatch(kernel, groups, values)
        self.after(kernel, values, numbers, backend)

    def count(self, kernel: str) -> tuple[int, int]:
        """Count one dispatch of `kernel`: (its number in the session, its number among kernel's calls)."""
        with self._lock:
            self.dispatches += 1
            self._calls[kernel] = call = self._calls.get(kernel, 0) + 1
            return self.dispatches, call

    def after(self, kernel: CompiledKernel, values: Mapping[str, Any], numbers: tuple[int, int],
              backend: Backend | None = None) -> None:
        """Scan what `kernel` writes (in parameter order), on `backend`'s device where it can scan;
        raise for the first non-finite value."""
        for p in written_params(kernel):
            v = values.get(p.name)
            if v is None:
                continue
            hit = first_nonfinite(v, backend)
            if hit is not None:
                index, value, size = hit
                raise NonFiniteError(kernel.entry, p.name, index, value, numbers[0], numbers[1], size)


def written_params(kernel: CompiledKernel) -> list[ParamInfo]:
    """The RW buffers and textures of a kernel: entry-point uniforms, then globals."""
    return [p for p in (*kernel.entry_point.uniforms, *kernel.reflection.globals)
            if p.type.kind == "resource" and p.type.writable]


def first_nonfinite(value: Any, backend: Backend | None = None) -> tuple[tuple[int, ...], float, int] | None:
    """(index, value, element count) of the first NaN/Inf in `value` (an array, CuPy array, or a
    device object with .numpy()), or None when all of it is finite or it holds no floats. `backend`:
    the backend whose objects these are; where it scans them on their device ("finite_scan"), it does."""
    dev = _device_array(value)
    if dev is not None:
        return _first_on_device(dev)
    if backend is not None and capability(backend, FINITE_SCAN):
        scan = finite_scan(backend)
        if scan.scans(value):
            return scan.first_nonfinite(value)
    if isinstance(value, np.ndarray):
        arr = value
    elif hasattr(value, "numpy") and callable(value.numpy):
        arr = np.asarray(value.numpy())
    else:
        return None
    for part in _float_parts(arr):
        bad = ~np.isfinite(part)
        if bad.any():
            flat = int(np.argmax(bad.reshape(-1)))
            idx = np.unravel_index(flat, part.shape)   # (a struct field: the element's index)
            index = tuple(int(i) for i in (idx[:arr.ndim] if arr.dtype.fields is not None else idx))
            return index, float(part.reshape(-1)[flat]), int(arr.size)
    return None


def _float_parts(arr: np.ndarray) -> Iterable[np.ndarray]:
    if arr.dtype.fields is not None:
        for name in arr.dtype.names or ():
            yield from _float_parts(arr[name])
    elif arr.dtype.kind == "f":
        yield arr
    elif arr.dtype.kind == "c":
        yield arr.real
        yield arr.imag


def _device_array(value: Any) -> Any | None:
    if isinstance(value, np.ndarray) or not hasattr(value, "__cuda_array_interface__"):
        return None
    import cupy

    return value if isinstance(value, cupy.ndarray) else cupy.asarray(value)


def _first_on_device(dev: Any) -> tuple[tuple[int, ...], float, int] | None:
    """A reduction on the GPU: isfinite over the array, then the first bad index (two scalars back)."""
    import cupy

    if dev.dtype.kind != "f":
        return None
    bad = ~cupy.isfinite(dev)
    if not bool(bad.any()):
        return None
    flat = int(cupy.argmax(bad.ravel()))
    idx = tuple(int(i) for i in np.unravel_index(flat, dev.shape))
    return idx, float(dev.ravel()[flat].get()), int(dev.size)


def check_gradients(function: str, names: Iterable[str], grads: Iterable[Any]) -> None:
    """`.bwd(check_finite=True)`: raise for the first input whose gradient holds a NaN/Inf."""
    for name, g in zip(names, grads):
        hit = first_nonfinite(np.asarray(g) if not hasattr(g, "__cuda_array_interface__") else g)
        if hit is not None:
            index, value, size = hit
            raise NonFiniteError(f"bwd_diff({function})", name, index, value, size=size, gradient_of=name)
