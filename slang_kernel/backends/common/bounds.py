"""Out-of-range reports of a dispatch, as every backend gives them: BoundsError when the session is
checked, else an OutOfRangeWarning (the accesses were made harmless either way)."""

from __future__ import annotations

import os
import warnings

from ...errors import BoundsError, OutOfRangeWarning

__all__ = ["caller_level", "report"]


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
