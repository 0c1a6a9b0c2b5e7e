"""Waiting for a GPU dispatch by polling, so that Session(timeout=) and the notebook's stop button
work: the APIs' own waits block in native code, and a running GPU dispatch cannot be cancelled, so
the errors say what happens to it."""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["wait_polled"]


def wait_polled(finished: Callable[[], bool], entry: str, timeout: float | None, device: str, api: str) -> None:
    """Poll `finished()` (which may raise the device's error) with a backoff of 0.1 to 10 ms."""
    from ...errors import KernelInterrupted, KernelTimeout

    t0, pause = time.perf_counter(), 0.0
    try:
        while not finished():
            elapsed = time.perf_counter() - t0
            if timeout is not None and elapsed > timeout:
                raise KernelTimeout(
                    f"{entry} ran past the session's timeout of {timeout:g} s on {device}. A {api} dispatch "
                    "cannot be stopped: the device finishes it in the background (numpy arrays passed to "
                    "this call are unchanged). If it never ends, restart the notebook's kernel.", entry, elapsed)
            time.sleep(pause)
            pause = min(0.01, pause * 2 or 0.0001)
    except KeyboardInterrupt:
        elapsed = time.perf_counter() - t0
        raise KernelInterrupted(
            f"{entry} interrupted after {elapsed:.1f} s; the device still runs it to the end (a {api} "
            "dispatch cannot be cancelled); numpy arrays passed to this call are unchanged.", entry, elapsed) from None
