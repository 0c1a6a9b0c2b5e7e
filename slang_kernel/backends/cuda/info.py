"""The CUDA backend's registry entry (slang_kernel.backends.registry)."""

from __future__ import annotations

import importlib.util

from ..registry import REPLAY, TEXTURES, TIMING, BackendInfo

__all__ = ["INFO"]


def _probe() -> str | None:
    return None if importlib.util.find_spec("cupy") else "CuPy is not installed: pip install 'slang-kernel[cuda]'"


INFO = BackendInfo(name="cuda", capabilities=frozenset({TEXTURES, TIMING, REPLAY}), targets=("cuda",), auto_rank=0,
                   factory="slang_kernel.backends.cuda.backend", probe=_probe, torch_device="cuda")
