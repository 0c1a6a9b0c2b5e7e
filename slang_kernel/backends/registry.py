"""Which backends exist and what each offers: one frozen `BackendInfo` per backend, declared in the
backend's own package (`cpu/info.py`, ...) and listed here once.

Everything outside `backends/` asks this module (or a backend instance's `capabilities`, through
`capability`) instead of spelling backend names or capability strings itself, so adding a backend
touches its own folder and one line of `_BUILTIN`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from . import Backend

__all__ = ["BackendInfo", "info_of", "DEVICE_BUFFERS", "FINITE_SCAN", "KERNEL_PATHS", "REPLAY", "SHARED_ARRAYS", "TEXTURES",
           "TIMING", "TYPE_CONFORMANCES", "AUTO", "backend_info", "backend_names", "capability", "choices",
           "auto_order", "infos"]

# The capability names (backends/__init__.py's CAPABILITIES, one protocol each there)
KERNEL_PATHS = "kernel_paths"
DEVICE_BUFFERS = "device_buffers"
TEXTURES = "textures"
SHARED_ARRAYS = "shared_arrays"
TIMING = "timing"
TYPE_CONFORMANCES = "type_conformances"
REPLAY = "replay"
FINITE_SCAN = "finite_scan"

AUTO = "auto"   # the pseudo-backend: the first of auto_order() that starts here


@dataclass(frozen=True)
class BackendInfo:
    """What a backend is before one is made: its name, the capabilities it may offer (an instance
    states its own subset: e.g. in-process Vulkan has no "shared_arrays"), the Slang targets it runs,
    its place in "auto" (lower first), where its `create(config)` lives, and a cheap availability
    probe (None: worth trying; else why not; creating it is still the real test)."""

    name: str
    capabilities: frozenset[str]
    targets: tuple[str, ...]
    auto_rank: int
    factory: str                          # module holding `create(config: BackendConfig) -> Backend`
    probe: Callable[[], str | None]
    host: bool = False                    # runs on this machine's CPU (no device at all)
    torch_device: str = "cpu"             # the torch device type it takes tensors on
    globals_by_name: bool = False         # binds globals by name: two globals of one name cannot both be filled


# One registration line per built-in backend: the module declaring its INFO.
_BUILTIN = ("slang_kernel.backends.cpu.info", "slang_kernel.backends.vulkan.info", "slang_kernel.backends.cuda.info")
_infos: dict[str, BackendInfo] | None = None


def infos() -> dict[str, BackendInfo]:
    """Every built-in backend's info by name (imports only the small info modules)."""
    global _infos
    if _infos is None:
        found = [importlib.import_module(m).INFO for m in _BUILTIN]
        _infos = {i.name: i for i in found}
    return dict(_infos)


def backend_names() -> tuple[str, ...]:
    """The built-in backends' names, in their declaration order ("cpu", "vulkan", "cuda")."""
    return tuple(infos())


def choices() -> tuple[str, ...]:
    """What a `--backend` option accepts: every built-in backend and "auto"."""
    return (*backend_names(), AUTO)


def auto_order() -> tuple[str, ...]:
    """The order "auto" tries the backends in (best first)."""
    return tuple(i.name for i in sorted(infos().values(), key=lambda i: i.auto_rank))


def backend_info(name: str) -> BackendInfo | None:
    """The info of a built-in backend, None for an unknown (or user-registered) one."""
    return infos().get(name)


def info_of(name: str) -> BackendInfo:
    """The info of a built-in backend; for a user-registered one, a BackendInfo with the defaults
    (a device of its own, CPU tensors, globals bound by position)."""
    found = backend_info(name)
    return found if found is not None else BackendInfo(name=name, capabilities=frozenset(), targets=(),
                                                       auto_rank=99, factory="", probe=lambda: None)


def capability(backend: "Backend", name: str) -> bool:
    """Whether this backend instance states capability `name` (one of the constants above)."""
    return name in backend.capabilities
