"""Waiting in tests on the condition a wait stands for, never for a fixed time.

A fixed `sleep` is too short on a loaded machine (a flaky test) and too long everywhere else; these
wait until what the test needs is true (a process gone, a worker busy), checking often, and fail
naming the condition when it does not come in time.
"""

from __future__ import annotations

import os
import time
from typing import Callable

__all__ = ["cpu_seconds", "process_gone", "wait_until"]


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, what: str = "the condition",
               poll: float = 0.02) -> None:
    """Return as soon as `predicate()` is true; raise AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain")
        time.sleep(poll)   # between two looks at the condition


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()   # the fields after "(comm)"
    except FileNotFoundError:
        return None


def process_gone(pid: int) -> bool:
    """Whether process `pid` has ended (no longer there, or a zombie its parent has yet to reap).
    A multi-threaded process shows its leader as a zombie while its other threads are still exiting
    (its files, sockets included, still open; waitpid not yet answering): all of them must be gone."""
    fields = _stat(pid)
    if fields is None:
        return True
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    return fields[0] in ("Z", "X") and len(threads) <= 1


def cpu_seconds(pid: int) -> float:
    """User and system CPU time process `pid` has used so far (0 once it is gone)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime (fields 14, 15)
