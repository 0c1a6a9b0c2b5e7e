"""How big a notebook's workload is on the device it finds: the full size on a GPU, a small one elsewhere.

A training notebook written for a GPU takes hours on the CPU or on software Vulkan (lavapipe runs
shaders as CPU code), so a notebook asks `notebook_size` once, prints what it picked and why, and
takes its sizes from `.full`. The order: the notebook's own `FULL_SIZE` line (True/False), then
$SLANG_KERNEL_QUICK ("1": small, "0": full), then the device (`Backend.gpu`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from .backends import Backend
from .backends.registry import info_of

__all__ = ["Size", "notebook_size"]

QUICK_VAR = "SLANG_KERNEL_QUICK"


@dataclass(frozen=True)
class Size:
    """The size a notebook picked. full: run the GPU workload; why: what decided it; device: the
    backend's description; small/large: what each size is, with roughly how long it takes."""

    full: bool
    why: str
    device: str
    small: str
    large: str

    def __str__(self) -> str:
        picked, other = ("full", "small") if self.full else ("small", "full")
        how = ("FULL_SIZE = False in the sizes cell, or SLANG_KERNEL_QUICK=1" if self.full
               else "FULL_SIZE = True in the sizes cell, or SLANG_KERNEL_QUICK=0 before starting Jupyter")
        return (f"{picked} size: {self.large if self.full else self.small}\n"
                f"  on {self.device} ({self.why})\n"
                f"  the {other} size ({self.small if self.full else self.large}): {how}")

def notebook_size(backend: Backend, full: bool | None = None, *, small: str, large: str,
                  environ: Mapping[str, str] | None = None) -> Size:
    """The size to run at on `backend`. full: the notebook's FULL_SIZE (None: decide); small/large:
    what each size is and roughly how long it takes, for the printed summary."""
    env = os.environ if environ is None else environ
    quick = env.get(QUICK_VAR, "").strip()
    if full is not None:
        why = f"FULL_SIZE = {full} in the notebook"
    elif quick in ("0", "1"):
        full, why = quick == "0", f"{QUICK_VAR}={quick}"
    else:
        if quick:
            raise ValueError(f"{QUICK_VAR}={quick!r}: use 1 (the small size) or 0 (the full size), or unset it "
                             "(the full size on a GPU, the small one elsewhere)")
        full = backend.gpu
        why = ("a GPU" if full else "the CPU" if info_of(backend.name).host else "a software device, not a GPU")
    return Size(full, why, backend.describe(), small, large)
