"""Backends: one narrow protocol, a registry, and "auto" selection (cuda > vulkan > cpu, by what works here).

A backend never sees the Session: it is made from a frozen `BackendConfig` and is handed
`CompiledKernel`s, which carry their code, reflection and module chain. What the playground and
the widgets may use beyond dispatch is stated here as capabilities, not found by poking at a
backend's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, cast

import numpy as np

from ..cache import DiskCache
from ..compiled import CompiledKernel
from ..errors import BackendUnavailable
from .registry import (AUTO, DEVICE_BUFFERS, FINITE_SCAN, KERNEL_PATHS, REPLAY, SHARED_ARRAYS, TEXTURES, TIMING,
                       TYPE_CONFORMANCES, BackendInfo, auto_order, backend_info, backend_names, capability)

__all__ = ["CAPABILITIES", "Backend", "BackendInfo", "backend_info", "backend_names", "capability", "BackendConfig", "BackendUnavailable", "DeviceBuffers", "SharedArrays",
           "Textures", "available_backends", "create_backend", "device_buffers", "register_backend", "shared_arrays",
           "textures", "timing", "DispatchTiming", "Timing", "KernelPaths", "kernel_paths", "Replay", "ReplayStep",
           "replay", "FiniteScan", "finite_scan"]

# What a backend offers beyond dispatch, by name; each is a protocol below that the backend then
# satisfies (`device_buffers(backend)` and friends check and narrow). Without "textures", texture
# parameters are (H, W, C) numpy arrays; without "device_buffers", buffers are the arrays themselves;
# "type_conformances": a backend that builds from Slang source links `type_conformances=` itself.
CAPABILITIES = frozenset({KERNEL_PATHS, DEVICE_BUFFERS, TEXTURES, SHARED_ARRAYS, TIMING, TYPE_CONFORMANCES, REPLAY,
                          FINITE_SCAN})


class DeviceBuffers(Protocol):
    """"device_buffers": device-resident buffers kernels use in place (.numpy() reads back, .upload())."""

    def buffer(self, array_or_shape: Any, dtype: Any = None) -> Any: ...


class Textures(Protocol):
    """"textures": device textures from (H, W, C) arrays or shapes, and samplers ("linear", "point")."""

    def texture(self, array_or_shape: Any, dtype: Any = None, *, dims: int = 2) -> Any: ...
    def sampler(self, spec: Any = None) -> Any: ...


class SharedArrays(Protocol):
    """"shared_arrays": numpy arrays that kernels read and write without a copy."""

    def empty(self, shape: Any, dtype: Any = ...) -> np.ndarray: ...
    def zeros(self, shape: Any, dtype: Any = ...) -> np.ndarray: ...
    def shared(self, a: Any, dtype: Any = None) -> np.ndarray: ...


@dataclass(frozen=True)
class DispatchTiming:
    """Where one dispatch's time went (ms): binding parameters and uploading inputs, running the
    kernel, reading outputs back. device_timestamps: run_ms was measured on the device (GPU
    timestamp queries, CUDA events); else by the wall clock around the run where it happens."""

    bind_upload_ms: float
    run_ms: float
    readback_ms: float
    device_timestamps: bool
    how: str = ""            # what measured run_ms, e.g. "Vulkan timestamp queries"


class Timing(Protocol):
    """"timing": a dispatch that reports where its time went."""

    def dispatch_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                       values: Mapping[str, Any]) -> DispatchTiming: ...


class ReplayStep(Protocol):
    """A step's launches bound once (slang_kernel.steps.Step); `run(times)` replays them in order."""

    mode: str

    def run(self, times: int) -> None: ...


class Replay(Protocol):
    """"replay": launches bound once and replayed without binding them again (CUDA graphs, one
    command buffer per call on Vulkan). `launches`: (kernel, groups, values) in order. Only asked for
    unchecked launches: a checked session (config.checked) or the NaN/Inf finder dispatches them one
    by one instead (slang_kernel.steps decides, once)."""

    def prepare_step(self, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]
                     ) -> ReplayStep: ...


def replay(backend: "Backend") -> Replay:
    """The backend as Replay; a clear error when it does not state "replay"."""
    return cast(Replay, _require(backend, "replay"))


class FiniteScan(Protocol):
    """"finite_scan": the NaN/Inf finder (slang_kernel.engine.finite) scans this backend's own device objects
    on their device, so only the verdict comes back, never the data. `scans(value)`: whether it scans
    this value there (else the finder reads it back); `first_nonfinite(value)`: (index, value,
    element count) of its first NaN/Inf, None when all of it is finite."""

    def scans(self, value: Any) -> bool: ...
    def first_nonfinite(self, value: Any) -> tuple[tuple[int, ...], float, int] | None: ...


def finite_scan(backend: "Backend") -> FiniteScan:
    """The backend as FiniteScan; a clear error when it does not state "finite_scan"."""
    return cast(FiniteScan, _require(backend, "finite_scan"))


class KernelPaths(Protocol):
    """"kernel_paths": which code path a kernel takes on this backend, e.g. the CPU's
    "simd (avx2, 8 lanes)" or "scalar: groupshared memory"."""

    def path(self, kernel: CompiledKernel) -> str: ...


def kernel_paths(backend: "Backend") -> KernelPaths:
    """The backend as KernelPaths; a clear error when it does not state "kernel_paths"."""
    return cast(KernelPaths, _require(backend, "kernel_paths"))


def _require(backend: "Backend", name: str) -> "Backend":
    """The backend, when it states capability `name`; else BackendUnavailable saying what it offers."""
    if name not in backend.capabilities:
        raise BackendUnavailable(f"the {backend.name} backend has no {name.replace('_', ' ')} "
                                 f"(it offers: {', '.join(sorted(backend.capabilities)) or 'none'})")
    return backend


def device_buffers(backend: "Backend") -> DeviceBuffers:
    """The backend as DeviceBuffers; a clear error when it does not state "device_buffers"."""
    return cast(DeviceBuffers, _require(backend, "device_buffers"))


def textures(backend: "Backend") -> Textures:
    """The backend as Textures; a clear error when it does not state "textures"."""
    return cast(Textures, _require(backend, "textures"))


def timing(backend: "Backend") -> Timing:
    """The backend as Timing; a clear error when it does not state "timing"."""
    return cast(Timing, _require(backend, "timing"))


def shared_arrays(backend: "Backend") -> SharedArrays:
    """The backend as SharedArrays; a clear error when it does not state "shared_arrays"."""
    return cast(SharedArrays, _require(backend, "shared_arrays"))


@dataclass(frozen=True)
class BackendConfig:
    """What a backend is told about the session it serves, and nothing more."""

    threads: int | None = None            # CPU: worker threads (None: every core)
    checked: bool = False                 # report out-of-range buffer indices (BoundsError)
    timeout: float | None = None          # seconds before a dispatch is stopped (KernelTimeout)
    isolate: bool = True                  # CPU: kernels in a worker process (crash-safe)
    include_paths: tuple[str, ...] = ()   # where `import playground;` and friends are found
    fast_math: bool = False               # CPU: -ffast-math (reassociation, no NaN/inf care; opt-in)
    cache: DiskCache = field(default_factory=DiskCache, compare=False)   # built kernels (CPU .so files)


class Backend(Protocol):
    name: str                       # "cpu" | "vulkan" | "cuda"
    target: str                     # the Slang target it consumes: "cpp", "spirv", "cuda"
    capabilities: frozenset[str]    # a subset of CAPABILITIES
    config: BackendConfig           # what it was made with (checked, timeout, ...)
    gpu: bool                       # runs on a hardware GPU (not the CPU, not a software device such as lavapipe)

    def describe(self) -> str:
        """The device, e.g. "g++ 12.2, 2 threads" or "llvmpipe (software Vulkan)"."""

    def compile_options(self, target: str) -> tuple[str, ...]:
        """Extra slangc options this backend needs for `target`."""

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        """Run `kernel` over `groups` thread groups; RW buffers are written back into the given arrays."""

    def reset(self) -> None:
        """Start afresh (a new worker or device) after a kernel left the backend in a bad state."""

    def forget(self, keys: list[str]) -> None:
        """Drop what was built for these CompiledKernel keys (revisions that were replaced); a key
        dispatched again later is simply built again."""

    def close(self) -> None: ...


Factory = Callable[[BackendConfig], Backend]
_registry: dict[str, Factory] = {}


def register_backend(name: str, factory: Factory) -> None:
    """Add (or replace) a backend; the built-in ones stay available beside it."""
    _registry[name] = factory


def _factory(name: str) -> Factory | None:
    if name in _registry:
        return _registry[name]
    info = backend_info(name)
    if info is None:
        return None
    import importlib

    try:
        module = importlib.import_module(info.factory)
    except ModuleNotFoundError as exc:
        if exc.name != info.factory:
            raise
        return None
    factory: Factory = module.create
    return factory


def available_backends() -> list[str]:
    return [*(n for n in backend_names() if n not in _registry), *_registry]


def create_backend(name: str, config: BackendConfig) -> Backend:
    if name == AUTO:
        reasons = []
        for candidate in auto_order():
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
