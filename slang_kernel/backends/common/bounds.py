"""Out-of-range reports of a dispatch, as every backend gives them: BoundsError when the session is
checked, else an OutOfRangeWarning (the accesses were made harmless either way)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from ...errors import BoundsError, OutOfRangeWarning

__all__ = ["CUDA_BOUNDS_REPORT", "CUDA_REPORT_BYTES", "caller_level", "report"]

#: CUDA source of the out-of-range report (SkBoundsReport, sk_oob_slot) that checked CUDA code starts with:
#: the CUDA backend's checked prelude and checked slangtorch launches both read it back the same way.
CUDA_BOUNDS_REPORT = Path(__file__).with_name("cuda_bounds_report.h")
CUDA_REPORT_BYTES = 56   # SkBoundsReport: 7 unsigned 64-bit words


def report(error: BoundsError, checked: bool) -> None:
    """Raise `error` when checked, else warn with it (at the user's line)."""
    if checked:
        raise error
    warnings.warn(f"{error} Session(checked=True) makes this an error.", OutOfRangeWarning,
                  stacklevel=caller_level())


def caller_level() -> int:
    """The warnings stack level of the first frame outside this package: the user's call."""
    import inspect

    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    level = 0  # stacklevel 1 is the function that calls warnings.warn (report, our caller: stack()[1])
    for frame in inspect.stack(0)[1:]:
        level += 1
        if not os.path.abspath(frame.filename).startswith(package):
            break
    return level
