"""Backends: one narrow protocol, a registry, and "auto" selection (cuda > vulkan > cpu, by what works here).

A backend never sees the Session: it is made from a frozen `BackendConfig` and is handed
`CompiledKernel`s, which carry their code, reflection and module chain. What the playground and
the widgets may use beyond dispatch is stated here as capabilities, not found by poking at a
backend's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ..cache import DiskCache
from ..compiled import CompiledKernel
from ..errors import BackendUnavailable

__all__ = ["Backend", "BackendConfig", "BackendUnavailable", "CAPABILITIES", "available_backends", "create_backend",
           "register_backend"]

# device_buffers: backend.buffer(array_or_shape, dtype) -> an object with .numpy()/.upload(), used in
#   place by kernels; textures: backend.texture(array_or_shape, dtype, dims=2) -> likewise, for texture
#   parameters (without it, textures are (H, W, C) numpy arrays); shared_arrays: backend.empty/zeros/
#   shared(...) -> numpy arrays that kernels use without a copy.
CAPABILITIES = frozenset({"device_buffers", "textures", "shared_arrays"})


@dataclass(frozen=True)
class BackendConfig:
    """What a backend is told about the session it serves, and nothing more."""

    threads: int | None = None            # CPU: worker threads (None: every core)
    checked: bool = False                 # report out-of-range buffer indices (BoundsError)
    timeout: float | None = None          # seconds before a dispatch is stopped (KernelTimeout)
    isolate: bool = True                  # CPU: kernels in a worker process (crash-safe)
    include_paths: tuple[str, ...] = ()   # where `import playground;` and friends are found
    cache: DiskCache = field(default_factory=DiskCache, compare=False)   # built kernels (CPU .so files)


class Backend(Protocol):
    name: str                       # "cpu" | "vulkan" | "cuda"
    target: str                     # the Slang target it consumes: "cpp", "spirv", "cuda"
    capabilities: frozenset[str]    # a subset of CAPABILITIES

    def describe(self) -> str:
        """The device, e.g. "g++ 12.2, 2 threads" or "llvmpipe (software Vulkan)"."""

    def compile_options(self, target: str) -> tuple[str, ...]:
        """Extra slangc options this backend needs for `target`."""

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        """Run `kernel` over `groups` thread groups; RW buffers are written back into the given arrays."""

    def reset(self) -> None:
        """Start afresh (a new worker or device) after a kernel left the backend in a bad state."""

    def close(self) -> None: ...


Factory = Callable[[BackendConfig], Backend]
_BUILTIN = ("cpu", "vulkan", "cuda")
_AUTO_ORDER = ("cuda", "vulkan", "cpu")
_registry: dict[str, Factory] = {}


def register_backend(name: str, factory: Factory) -> None:
    """Add (or replace) a backend; the built-in ones stay available beside it."""
    _registry[name] = factory


def _factory(name: str) -> Factory | None:
    if name in _registry:
        return _registry[name]
    if name not in _BUILTIN:
        return None
    import importlib

    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        return None
    factory: Factory = module.create
    return factory


def available_backends() -> list[str]:
    return [*(n for n in _BUILTIN if n not in _registry), *_registry]


def create_backend(name: str, config: BackendConfig) -> Backend:
    if name == "auto":
        reasons = []
        for candidate in _AUTO_ORDER:
            factory = _factory(candidate)
            if factory is None:
                continue
            try:
                return factory(config)
            except BackendUnavailable as exc:
                reasons.append(f"{candidate}: {exc}")
        raise BackendUnavailable("no backend works here:\n" + "\n".join(reasons))
    factory = _factory(name)
    if factory is None:
        raise BackendUnavailable(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    return factory(config)
