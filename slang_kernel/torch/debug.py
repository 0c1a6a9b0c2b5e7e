"""The notebook's debugging views on torch code: what the engine's views call when given tensors.

A training loop hands the views torch tensors that require grad (parameters), whose `.numpy()`
torch refuses. The views compute on host arrays, so:
- `host_inputs`: `gradient_report`/`GradientFlow.check`/`flow_values` take tensors (detached,
  checked as a call checks them, copied to the host where they live on a GPU).
- `dispatch_times(f, ...)`: every dispatch the Slang functions `f` make inside the block (their
  calls and the `bwd_diff` of `loss.backward()`) runs through the profiler, and is listed with the
  function and the mode, so a training step's time is seen per dispatch.
- `profile_function`: `SlangFunction.profile(*args, mode=)`, one dispatch of a call or `.bwd`.
Torch is not imported here: these take tensors through `slang_kernel.torch.autograd`/`tensors`.
"""

from __future__ import annotations

import contextlib
import html
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

from .tensors import is_tensor, to_array

__all__ = ["DispatchTimes", "Profiled", "dispatch_times", "host_inputs", "profile_function"]


class ProfileLike(Protocol):
    """What these views read of a slang_kernel.views.profiling.Profile (the engine's profile hook makes
    them; naming the class would be an arrow from the engine's torch hooks into the views)."""

    @property
    def kernel(self) -> str: ...
    @property
    def bind_upload_ms(self) -> float: ...
    @property
    def run_ms(self) -> float: ...
    @property
    def readback_ms(self) -> float: ...
    @property
    def total_ms(self) -> float: ...


class Profiled(Protocol):
    """What of a SlangFunction this module uses: its name, calls and the `timings` list that its
    dispatches append their Profile to while it is not None."""

    name: str
    timings: list[Any] | None   # ProfileLike, from the engine's profile hook

    def __call__(self, *args: Any) -> Any: ...

    def bwd(self, *args: Any, grad_out: Any = 1.0, check_finite: bool | None = None) -> Any: ...

    def _untorch(self, args: tuple[Any, ...], host: bool = False) -> tuple[Any, ...]: ...


def host_inputs(fn: Profiled, args: Sequence[Any], grad_out: Any) -> tuple[tuple[Any, ...], Any]:
    """`args` and `grad_out` as host arrays where they are tensors (checked per parameter, as a
    call checks them); other values as given."""
    out = tuple(args)
    if any(is_tensor(a) or isinstance(a, tuple) and any(map(is_tensor, a)) for a in out):
        out = fn._untorch(out, host=True)
    return out, (to_array(grad_out, "cpu") if is_tensor(grad_out) else grad_out)


def profile_function(fn: Profiled, args: Sequence[Any], mode: str, grad_out: Any) -> ProfileLike:
    """One call (mode "call") or `.bwd` (mode "bwd") of `fn` with its wrapper dispatch profiled."""
    if mode not in ("call", "bwd"):
        raise ValueError(f"{fn.name}.profile(): mode is 'call' or 'bwd', not {mode!r}")
    with dispatch_times(fn) as times:
        if mode == "bwd":
            fn.bwd(*args, grad_out=grad_out)
        else:
            fn(*args)
    if not times.profiles:
        raise ValueError(f"{fn.name}.profile(): nothing was dispatched (the arguments broadcast to no "
                         "elements); pass non-empty arrays")
    return times.profiles[-1]


@dataclass
class DispatchTimes:
    """The profiled dispatches of a `dispatch_times` block, in order. `kernel` of each Profile names
    the function and mode (`render.call`, `render.bwd`)."""

    profiles: list[ProfileLike] = field(default_factory=list)

    def total_ms(self, mode: str | None = None) -> float:
        """Wall clock of the dispatches (of one mode, "call" or "bwd", if given)."""
        return sum(p.total_ms for p in self.profiles if mode is None or p.kernel.endswith("." + mode))

    def text(self) -> str:
        def ms(v: float) -> str:
            return "n/a" if math.isnan(v) else f"{v:.3f}"
        rows = [f"{p.kernel:<24} {ms(p.bind_upload_ms):>10} {ms(p.run_ms):>10} {ms(p.readback_ms):>10} "
                f"{ms(p.total_ms):>10}" for p in self.profiles]
        head = f"{'dispatch':<24} {'bind (ms)':>10} {'run (ms)':>10} {'read (ms)':>10} {'total (ms)':>10}"
        return "\n".join([head, *rows])

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        def ms(v: float) -> str:
            return "n/a" if math.isnan(v) else f"{v:.3f}"
        rows = "".join(f"<tr><td>{html.escape(p.kernel)}</td><td>{ms(p.bind_upload_ms)}</td><td>{ms(p.run_ms)}</td>"
                       f"<td>{ms(p.readback_ms)}</td><td>{ms(p.total_ms)}</td></tr>" for p in self.profiles)
        return ("<table><tr><th>dispatch</th><th>bind/upload ms</th><th>run ms</th><th>readback ms</th>"
                f"<th>total ms</th></tr>{rows}</table>")


@contextlib.contextmanager
def dispatch_times(*functions: Profiled) -> Iterator[DispatchTimes]:
    """Profile every dispatch of `functions` inside the block (forward calls and the backward of
    `loss.backward()` alike); they run as usual, only timed (slang_kernel.views.profiling)."""
    times = DispatchTimes()
    before = [f.timings for f in functions]
    for f in functions:
        f.timings = times.profiles
    try:
        yield times
    finally:
        for f, old in zip(functions, before):
            f.timings = old
