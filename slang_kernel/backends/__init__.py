"""Backends: one protocol, a registry, and "auto" selection (cuda > vulkan > cpu, by what works here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

if TYPE_CHECKING:
    from ..session import CompiledKernel, Session

__all__ = ["Backend", "BackendUnavailable", "available_backends", "create_backend", "register_backend"]


class BackendUnavailable(RuntimeError):
    """This backend cannot run here (no driver, no GPU, missing package); the message says what to install."""


class Backend(Protocol):
    name: str      # "cpu" | "vulkan" | "cuda"
    target: str    # the Slang target it consumes: "cpp", "spirv", "cuda"

    def describe(self) -> str:
        """The device, e.g. "g++ 12.2, 2 threads" or "llvmpipe (software Vulkan)"."""

    def compile_options(self, target: str) -> tuple[str, ...]:
        """Extra slangc options this backend needs for `target`."""

    def dispatch(self, kernel: "CompiledKernel", groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        """Run `kernel` over `groups` thread groups; RW buffers are written back into the given arrays."""

    def close(self) -> None: ...


_REGISTRY: dict[str, Callable[["Session"], Backend]] = {}
_AUTO_ORDER = ("cuda", "vulkan", "cpu")


def register_backend(name: str, factory: Callable[["Session"], Backend]) -> None:
    _REGISTRY[name] = factory


def _load_builtin() -> None:
    if _REGISTRY:
        return
    from . import cpu

    register_backend("cpu", cpu.CpuBackend)
    for mod in ("vulkan", "cuda"):
        try:
            module = __import__(f"{__name__}.{mod}", fromlist=["create"])
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{mod}":
                raise
            continue
        register_backend(mod, module.create)


def available_backends() -> list[str]:
    _load_builtin()
    return list(_REGISTRY)


def create_backend(name: str, session: "Session") -> Backend:
    _load_builtin()
    if name == "auto":
        reasons = []
        for candidate in _AUTO_ORDER:
            if candidate not in _REGISTRY:
                continue
            try:
                return _REGISTRY[candidate](session)
            except BackendUnavailable as exc:
                reasons.append(f"{candidate}: {exc}")
        raise BackendUnavailable("no backend works here:\n" + "\n".join(reasons))
    if name not in _REGISTRY:
        raise BackendUnavailable(f"unknown backend {name!r}; available: {', '.join(_REGISTRY)}")
    return _REGISTRY[name](session)
