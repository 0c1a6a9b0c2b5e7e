"""The notebook's debugging views on a slangtorch module's launches: `debug_launches(m, ...)`.

* checked=True: each launch runs a build of the module whose TensorView accesses are bounds-checked
  against the tensor's extent (Slang's prelude has no checks); an out-of-range access is recorded,
  redirected to scratch memory so the CUDA context survives, and raised as BoundsError naming the
  kernel, the tensor parameter, the element and the thread (the `Session(checked=True)` prelude).
* check_finite=True: the NaN finder. The kernel's tensors are scanned (on their device, by torch)
  before and after each launch; the first that turned non-finite in the launch raises NonFiniteError
  with the launch's number, naming the tensors that were non-finite already (made by PyTorch).
* timings=True: CUDA events around each launch on torch's current stream; `m.debug.log` holds one
  LaunchTiming per launch and shows them per kernel as a table (as `k.profile()` times a cell's kernel).

Slang kernels are launched by `launchRaw`, so all of this costs nothing when it is off.
"""

from __future__ import annotations

import html
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from ...backends.common.bounds import CUDA_BOUNDS_REPORT
from ...errors import BoundsError
from ...engine.finite import NonFiniteError



class Launchable(Protocol):
    """What run_launch uses of a SlangTorchModule (_module imports this module, not the reverse)."""

    name: str
    code: str
    debug: "LaunchDebug | None"

    def function(self, symbol: str) -> Any: ...
    def build_options(self) -> tuple[str, ...]: ...
    def kernel_symbols(self) -> list[str]: ...
    def stream(self) -> int: ...
    def sync(self, stream: int) -> None: ...

__all__ = ["DispatchLog", "LaunchDebug", "LaunchTiming", "checked_code", "debug_launches", "first_nonfinite",
           "run_launch", "tensors_of"]

_TENSOR_VIEW = re.compile(r"\nstruct TensorView\s*\n\{.*?\n\};", re.DOTALL)
_ACCESS = re.compile(r"reinterpret_cast<T\s*\*>\(\s*data \+")
_CHECK = "sk_tv_checked<T>(data, strides, sizes, dimensionCount, data +"
# The first out-of-range access of a launch, recorded as the CUDA backend's checked prelude records it
# (the same header; read back by _raise_bounds).
_REPORT_PRELUDE = ("// slang-kernel checked slangtorch launch (slang_kernel.torch.slangtorch._debug)\n"
                   + CUDA_BOUNDS_REPORT.read_text())
_HELPER = """
// A TensorView access outside the tensor's extent is recorded and sent to scratch memory (sk_oob_slot)
// instead of faulting; `index` is the element offset.
template<typename T>
__device__ inline T* sk_tv_checked(unsigned char* data, const unsigned int* strides, const unsigned int* sizes,
                                   unsigned int dims, unsigned char* p)
{
    unsigned long long extent = sizeof(T);
    for (unsigned int i = 0; i < dims; ++i)
    {
        if (sizes[i] == 0) { extent = 0; break; }
        extent += (unsigned long long)(sizes[i] - 1) * strides[i];
    }
    unsigned long long offset = (unsigned long long)(p - data);
    if (offset + sizeof(T) > extent)
        return (T*)sk_oob_slot(sizeof(T), offset / sizeof(T), extent / sizeof(T), data);
    return reinterpret_cast<T*>(p);
}
"""


def checked_code(code: str) -> str:
    """The module's CUDA with every TensorView access bounds-checked (and the checked prelude first);
    ValueError if this compiler's prelude has no TensorView accesses of the form it patches."""
    m = _TENSOR_VIEW.search(code)
    if m is None:
        raise ValueError("checked launches: the generated CUDA has no `struct TensorView` to check")
    struct_text, n = _ACCESS.subn(_CHECK, m.group(0))
    if n == 0:
        raise ValueError("checked launches: Slang's TensorView in this compiler reads memory in a form this "
                         "version does not know; run without checked=True")
    return _REPORT_PRELUDE + _HELPER + code[:m.start()] + struct_text + code[m.end():]


def tensors_of(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(label, tensor) for every tensor in an argument: a DiffTensorView pair as `x` and `x.grad`,
    struct fields as `s.field`, in order."""
    if hasattr(value, "data_ptr") and hasattr(value, "detach"):   # a torch tensor
        yield name, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from tensors_of(f"{name}.{k}", v)
    elif getattr(value, "_fields", None) == ("value", "grad"):   # m.DiffTensorView(value, grad)
        yield from tensors_of(name, tuple(value))
    elif hasattr(value, "_fields"):
        for k in value._fields:
            yield from tensors_of(f"{name}.{k}", getattr(value, k))
    elif isinstance(value, (tuple, list)):
        labels = [name, f"{name}.grad"] if len(value) == 2 else [f"{name}[{i}]" for i in range(len(value))]
        for label, v in zip(labels, value):
            if isinstance(v, (tuple, list)) and len(v) == 1:   # slangtorch's (primal, (grad,)) spelling
                v = v[0]
            yield from tensors_of(label, v)


def first_nonfinite(tensor: Any) -> tuple[tuple[int, ...], float] | None:
    """(index, value) of the first NaN/Inf of a torch tensor, scanned on its own device; None if finite."""
    import torch

    t = tensor.detach()
    if not t.is_floating_point() or t.numel() == 0:
        return None
    bad = ~torch.isfinite(t)
    if not bool(bad.any()):
        return None
    flat = int(torch.argmax(bad.reshape(-1).to(torch.uint8)))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), t.shape))
    return index, float(t.reshape(-1)[flat])


@dataclass(frozen=True)
class LaunchTiming:
    """One timed launch: its run time on the GPU (CUDA events) and the wall clock of the whole call."""

    kernel: str
    symbol: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    run_ms: float
    total_ms: float

    def __str__(self) -> str:
        return (f"{self.symbol} grid {self.grid} block {self.block}: run {self.run_ms:.3f} ms on the GPU "
                f"(CUDA events on torch's current stream), {self.total_ms:.3f} ms in all")


class DispatchLog:
    """The launches of a debugged module: counts per kernel, and one Profile per timed launch."""

    def __init__(self) -> None:
        self.launches = 0
        self.calls: dict[str, int] = {}
        self.profiles: list[LaunchTiming] = []
        self.checked_functions: dict[str, Any] = {}
        self.checked_module: Any = None

    def count(self, kernel: str) -> tuple[int, int]:
        self.launches += 1
        self.calls[kernel] = self.calls.get(kernel, 0) + 1
        return self.launches, self.calls[kernel]

    def summary(self) -> list[tuple[str, int, float, float, float]]:
        """Per kernel: (name, timed launches, mean, min, max run ms)."""
        out = []
        for k in dict.fromkeys(p.kernel for p in self.profiles):
            runs = [p.run_ms for p in self.profiles if p.kernel == k]
            out.append((k, len(runs), sum(runs) / len(runs), min(runs), max(runs)))
        return out

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td>{n}</td><td>{mean:.3f}</td><td>{lo:.3f}</td>"
                       f"<td>{hi:.3f}</td></tr>" for k, n, mean, lo, hi in self.summary())
        return (f"<div><b>{self.launches} launches</b> ({len(self.profiles)} timed with CUDA events)<table><tr><th>"
                f"kernel</th><th>launches</th><th>mean ms</th><th>min ms</th><th>max ms</th></tr>{rows}</table></div>")

    def __repr__(self) -> str:
        return f"{self.launches} launches; " + "; ".join(
            f"{k}: {n} timed, mean {mean:.3f} ms (min {lo:.3f}, max {hi:.3f})" for k, n, mean, lo, hi in self.summary())


@dataclass(frozen=True)
class LaunchDebug:
    """What `launchRaw` does around each launch of the module (see the module docstring)."""

    checked: bool = False
    check_finite: bool = False
    timings: bool = False
    log: DispatchLog = field(default_factory=DispatchLog, compare=False)

    @property
    def active(self) -> bool:
        return self.checked or self.check_finite or self.timings


def debug_launches(module: Launchable, *, checked: bool = False, check_finite: bool = False,
                   timings: bool = False) -> LaunchDebug:
    """Turn the debugging views on (or, with no flags, off) for every launch of `module`'s kernels."""
    module.debug = LaunchDebug(checked, check_finite, timings)
    return module.debug


def run_launch(module: Launchable, kernel: str, symbol: str, args: list[tuple[str, Any]],
               grid: tuple[int, ...], block: tuple[int, ...],
               launch: Callable[[Any], None]) -> None:
    """One launch under the module's LaunchDebug; `launch(fn)` launches CUDA function `fn` (the
    module's own, or its checked build's) on torch's current stream."""
    debug = module.debug
    assert debug is not None
    numbers = debug.log.count(kernel)
    tensors = [lt for name, value in args for lt in tensors_of(name, value)]
    # tensors already non-finite before the launch (inputs PyTorch made so, or uninitialised outputs)
    before = {label for label, t in tensors if first_nonfinite(t) is not None} if debug.check_finite else set()
    fn = _checked_function(module, symbol) if debug.checked else module.function(symbol)
    report = _zero_report(debug.log) if debug.checked else None
    stream = module.stream()
    t0 = time.perf_counter()
    if debug.timings:
        import cupy

        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        ext = cupy.cuda.ExternalStream(stream)
        start.record(ext)
        launch(fn)
        end.record(ext)
        end.synchronize()
        run = cupy.cuda.get_elapsed_time(start, end)
        debug.log.profiles.append(LaunchTiming(kernel, symbol, tuple(grid), tuple(block), float(run),
                                               (time.perf_counter() - t0) * 1000))
    else:
        launch(fn)
    if report is not None:
        module.sync(stream)
        _raise_bounds(report, kernel, tensors)
    if debug.check_finite:
        for label, t in tensors:
            hit = first_nonfinite(t) if label not in before else None
            if hit is not None:
                error = NonFiniteError(kernel, label, hit[0], hit[1], numbers[0], numbers[1], int(t.numel()))
                if before:
                    error.args = (f"{error} Already non-finite before this launch (from PyTorch or the host, "
                                  f"or never written): {', '.join(sorted(before))}.",)
                raise error


def _checked_function(module: Launchable, symbol: str) -> Any:
    import cupy

    log = module.debug.log if module.debug is not None else DispatchLog()
    if log.checked_module is None:   # built as the module's own CUDA is (SlangTorchModule.function)
        log.checked_module = cupy.RawModule(code=checked_code(module.code), options=module.build_options(),
                                            name_expressions=module.kernel_symbols())
    fn = log.checked_functions.get(symbol)
    if fn is None:
        raw = log.checked_module.get_function(symbol)
        fn = log.checked_functions[symbol] = getattr(raw, "kernel", raw)
    return fn


_REPORT = struct.Struct("<7Q")   # SkBoundsReport: count, index, size, data, thread[3]


def _zero_report(log: DispatchLog) -> Any:
    ptr = log.checked_module.get_global("sk_bounds_report")
    ptr.memset(0, _REPORT.size)
    return ptr


def _raise_bounds(ptr: Any, kernel: str, tensors: list[tuple[str, Any]]) -> None:
    import numpy as np

    host = np.zeros(_REPORT.size, np.uint8)
    ptr.copy_to_host(host.ctypes.data, _REPORT.size)
    count, index, size, data, tx, ty, tz = _REPORT.unpack(host.tobytes())
    if count:
        name = next((label for label, t in tensors if int(t.data_ptr()) == data), "a tensor")
        raise BoundsError(kernel, int(count), int(index), int(size), name, (int(tx), int(ty), int(tz)))
