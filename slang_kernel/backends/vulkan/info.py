"""The Vulkan backend's registry entry (slang_kernel.backends.registry)."""

from __future__ import annotations

import importlib.util

from ..registry import (DEVICE_BUFFERS, FINITE_SCAN, REPLAY, SHARED_ARRAYS, TEXTURES, TIMING, TYPE_CONFORMANCES,
                        BackendInfo)

__all__ = ["INFO"]


def _probe() -> str | None:
    return None if importlib.util.find_spec("slangpy") else "slangpy is not installed: pip install slangpy==0.43.1"


INFO = BackendInfo(name="vulkan", capabilities=frozenset({DEVICE_BUFFERS, TEXTURES, SHARED_ARRAYS, TIMING,
                                                          TYPE_CONFORMANCES, REPLAY, FINITE_SCAN}),
                   targets=("spirv",), auto_rank=1, factory="slang_kernel.backends.vulkan.backend", probe=_probe,
                   globals_by_name=True)
