"""Where a dispatch's time goes: `ComputeKernel.profile(**params) -> Profile`.

A backend that states the "timing" capability splits a dispatch into binding/upload, run and
readback (`Backend.dispatch_timed`): the CPU backend by the wall clock inside its worker, Vulkan
by timestamp queries on the device, CUDA by events. A backend without it is timed as a whole by
the wall clock here, and the Profile says so. Numbers are for looking at, never for asserting.
"""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping

from ..backends import Backend, DispatchTiming, timing
from ..backends.registry import TIMING, capability
from ..compiled import CompiledKernel

__all__ = ["Profile", "profile_dispatch"]


@dataclass(frozen=True)
class Profile:
    """One dispatch of `kernel`, split (ms). NaN where the backend could not tell a part apart."""

    kernel: str
    backend: str
    bind_upload_ms: float
    run_ms: float
    readback_ms: float
    device_timestamps: bool     # run_ms measured on the device (GPU timestamps / CUDA events)
    total_ms: float             # wall clock of the whole call (a first call also builds the kernel)
    groups: tuple[int, int, int] = (1, 1, 1)
    note: str = ""              # how run_ms was measured, or why there is no split

    def text(self) -> str:
        def ms(v: float) -> str:
            return "n/a" if math.isnan(v) else f"{v:.3f} ms"
        return (f"{self.kernel} on {self.backend}, groups {self.groups}: bind/upload {ms(self.bind_upload_ms)}, "
                f"run {ms(self.run_ms)}, readback {ms(self.readback_ms)}; total {ms(self.total_ms)}"
                + (f" ({self.note})" if self.note else ""))

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        parts = [("bind/upload", self.bind_upload_ms), ("run", self.run_ms), ("readback", self.readback_ms)]
        known = sum(v for _, v in parts if not math.isnan(v)) or 1.0
        colours = {"bind/upload": "#8ab", "run": "#e94", "readback": "#7b7"}
        bar = "".join(f"<div title='{n}: {v:.3f} ms' style='display:inline-block;height:10px;"
                      f"width:{max(1.0, 300 * v / known):.0f}px;background:{colours[n]}'></div>"
                      for n, v in parts if not math.isnan(v))
        cells = "".join(f"<td>{html.escape(n)}</td><td>{'n/a' if math.isnan(v) else f'{v:.3f} ms'}</td>"
                        for n, v in parts)
        note = f"<div style='color:#666'>{html.escape(self.note)}</div>" if self.note else ""
        return (f"<div class='sk-profile'><b>{html.escape(self.kernel)}</b> on {html.escape(self.backend)} "
                f"(total {self.total_ms:.3f} ms)<div>{bar}</div><table><tr>{cells}</tr></table>{note}</div>")


def profile_dispatch(backend: Backend, kernel: CompiledKernel, groups: tuple[int, int, int],
                     values: Mapping[str, Any]) -> Profile:
    """Run one dispatch through the backend's timed path (or the plain one, timed here as a whole)."""
    t0 = time.perf_counter()
    if capability(backend, TIMING):
        t: DispatchTiming = timing(backend).dispatch_timed(kernel, groups, values)
        total = (time.perf_counter() - t0) * 1000
        note = t.how or ("device timestamps" if t.device_timestamps else "wall clock where it runs")
        return Profile(kernel.entry, backend.name, t.bind_upload_ms, t.run_ms, t.readback_ms, t.device_timestamps,
                       total, groups, note)
    backend.dispatch(kernel, groups, values)
    total = (time.perf_counter() - t0) * 1000
    nan = float("nan")
    return Profile(kernel.entry, backend.name, nan, total, nan, False, total, groups,
                   f"the {backend.name} backend has no timing split: run is the wall clock of the whole dispatch")
