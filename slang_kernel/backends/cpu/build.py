"""What the CPU backend's builds are made of: g++ flags, what Slang's CPU target cannot run, this CPU's
identity (for -march=native cache keys), the user's part of generated code, and a cache file check."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from ..common.generated import TYPED_AS_STRUCTURED, body

__all__ = ["CXXFLAGS", "TYPED_AS_STRUCTURED", "UNSUPPORTED", "body", "cpu_identity", "looks_like_so"]

# -march=native: the build cache key includes this CPU's identity (see _cpu_identity).
CXXFLAGS = ("-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math",
            "-fPIC", "-shared", "-w", "-fno-strict-aliasing")

UNSUPPORTED = [
    (re.compile(r"\bGroupMemoryBarrier\w*|\bAllMemoryBarrier\w*|\bDeviceMemoryBarrier\w*|_barrier\w*\("),
     "group barriers (GroupMemoryBarrierWithGroupSync and friends)"),
    (re.compile(r"\bInterlocked\w+|\batomic\w*\("), "atomics (Interlocked*)"),
    (re.compile(r"\bWave\w+\("), "wave intrinsics (Wave*)"),
]



def looks_like_so(path: Path) -> bool:
    """An existing, complete-looking shared object (a truncated cache entry is rebuilt)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(head) < 64 or head[:4] != b"\x7fELF":
        return False
    # e_shoff + e_shnum * e_shentsize: the section header table ends the file
    shoff = int.from_bytes(head[40:48], "little")
    shentsize = int.from_bytes(head[58:60], "little")
    shnum = int.from_bytes(head[60:62], "little")
    return size >= shoff + shentsize * shnum


@functools.lru_cache(maxsize=1)
def cpu_identity() -> str:
    """Model and feature flags of this CPU: builds with -march=native must not travel to another."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))][:2]
        return "".join(lines)
    except OSError:
        import platform

        return platform.processor() or platform.machine()
