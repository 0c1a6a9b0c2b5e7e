"""Where NVRTC finds CUDA's cuda_fp16.h, which Slang's CUDA prelude includes for `half` types.

Slang guards its half support with SLANG_CUDA_ENABLE_HALF; with it defined the prelude includes
<cuda_fp16.h>, which NVRTC does not carry built in: it comes from a CUDA toolkit (CUDA_PATH, nvcc's
folder), NVIDIA's pip header packages, or the copies CuPy's wheels ship for their own fp16 kernels.
Only kernels that use half pay for the header (NVRTC parses ~5k lines more).
"""

from __future__ import annotations

import functools
import glob
import os
from pathlib import Path
from typing import Any

__all__ = ["HALF_DEFINE", "fp16_include_dir", "half_options", "uses_half"]

HALF_DEFINE = "-DSLANG_CUDA_ENABLE_HALF=1"
_HEADER = "cuda_fp16.h"


def uses_half(body: str) -> bool:
    """Does the generated code after the prelude use a half type (__half, __half2, __half4...)?"""
    return "__half" in body


def _candidates(cupy: Any) -> list[Path]:
    roots: list[Path] = []
    for var in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"):
        if os.environ.get(var):
            roots.append(Path(os.environ[var]) / "include")
    for getter in ("get_cuda_path", "get_nvcc_path"):
        try:
            found = getattr(cupy.cuda, getter)()
        except Exception:  # CuPy versions differ in what they expose
            found = None
        if found:
            p = Path(str(found).split()[0])
            roots.append((p.parent.parent if p.name.startswith("nvcc") else p) / "include")
    roots += [Path("/usr/local/cuda/include"), Path("/usr/include")]
    import importlib.util

    spec = importlib.util.find_spec("nvidia")   # NVIDIA's pip wheels (nvidia-cuda-runtime-cu12, ...)
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        roots += [Path(p).parent for p in glob.glob(os.path.join(base, "*", "include", _HEADER))]
        roots += [Path(p).parent for p in glob.glob(os.path.join(base, "*", "*", "include", _HEADER))]
    cupy_dir = Path(cupy.__file__).parent
    bundled = sorted(glob.glob(str(cupy_dir / "_core" / "include" / "cupy" / "_cuda" / "*" / _HEADER)), reverse=True)
    roots += [Path(p).parent for p in bundled]
    return roots


@functools.lru_cache(maxsize=None)
def fp16_include_dir(cupy: Any) -> tuple[str | None, tuple[str, ...]]:
    """(the folder holding cuda_fp16.h or None, the folders looked in)."""
    looked: list[str] = []
    for root in _candidates(cupy):
        looked.append(str(root))
        if (root / _HEADER).is_file():
            return str(root), tuple(looked)
    return None, tuple(looked)


def half_options(cupy: Any, entry: str, cell: str) -> tuple[str, ...]:
    """NVRTC options for a kernel that uses half; a clear error when the header is nowhere."""
    found, looked = fp16_include_dir(cupy)
    if found is None:
        raise RuntimeError(
            f"{entry} ({cell}) uses half types, and NVRTC needs CUDA's {_HEADER} for them, which is not in any of: "
            f"{', '.join(looked)}. Install the CUDA toolkit headers (e.g. pip install nvidia-cuda-runtime-cu12, "
            "or the CUDA toolkit) or set CUDA_PATH to a CUDA install; or use float instead of half.")
    return (HALF_DEFINE, f"-I{found}")
