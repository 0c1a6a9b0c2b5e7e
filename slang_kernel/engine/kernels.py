"""ComputeKernel: a compute entry point of the session, callable with numpy arrays."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .. import hooks
from ..backends import Backend
from ..backends.registry import KERNEL_PATHS, TEXTURES, capability
from ..compiled import CompiledKernel, Specialization
from .protocols import KernelService
from .specialize import SpecializationError
from ..compiler.reflection import EntryPointInfo, ParamInfo
from ..errors import BoundsError, DeviceLost, KernelCrash, KernelInterrupted, KernelTimeout, OutOfRangeWarning, ParameterError

if TYPE_CHECKING:
    from .cells import Cell

__all__ = ["BoundsError", "ComputeKernel", "DeviceLost", "KernelCrash", "KernelInterrupted",
           "KernelTimeout", "OutOfRangeWarning", "check_parameters", "groups_for"]


def _triple(v: int | Sequence[int], what: str) -> tuple[int, int, int]:
    if isinstance(v, int):
        v = (v,)
    t = tuple(int(x) for x in v)
    if not 1 <= len(t) <= 3 or any(x < 0 for x in t):
        raise ValueError(f"{what} must be 1 to 3 non-negative integers; got {v!r}")
    return (t + (1, 1))[:3]  # type: ignore[return-value]


def groups_for(ep: EntryPointInfo, threads: Any = None, groups: Any = None) -> tuple[int, int, int]:
    """Thread groups to dispatch for `threads=` (rounded up by numthreads) or `groups=`."""
    if type(threads) is int and groups is None and threads >= 0:
        return (-(-threads // max(1, ep.numthreads[0])), 1, 1)
    if (threads is None) == (groups is None):
        raise TypeError(f"{ep.name}(): pass exactly one of threads=(x, y, z) or groups=(x, y, z)")
    if groups is not None:
        return _triple(groups, "groups")
    t = _triple(threads, "threads")
    return tuple(math.ceil(n / max(1, g)) for n, g in zip(t, ep.numthreads))  # type: ignore[return-value]


def _param_text(p: ParamInfo) -> str:
    return f"`{p.name}` ({p.type.name})"


def check_parameters(kernel: CompiledKernel, values: Mapping[str, Any]) -> None:
    """Missing or unknown parameters are an error that names them, with their Slang types.

    Globals that the kernel's code never touches (from other cells) may be left out."""
    if values.keys() == kernel.parameter_names:
        return
    ep = kernel.entry_point
    every = {p.name: p for p in (*ep.uniforms, *kernel.reflection.globals)}
    missing = [every[n] for n in kernel.parameter_names if n not in values]
    extra = [n for n in values if n not in every]
    if not missing and not extra:
        return
    parts = []
    if missing:
        parts.append("missing " + ", ".join(_param_text(p) for p in missing))
    if extra:
        parts.append("unknown " + ", ".join(f"`{n}`" for n in extra))
    sig = ", ".join(_param_text(every[n]) for n in every if n in kernel.parameter_names) or "none"
    raise ParameterError(f"{ep.name}(): {'; '.join(parts)}. Its parameters: {sig}.")


class ComputeKernel:
    """A compute entry point, following its name: re-running its cell (or a later cell defining the
    same name) takes effect at the next call. While the new revision does not compile, the last good
    one keeps running (`compiled()` still returns it; the session's `store.failure(cell)` has the error).
    `specialization`: what `Session.kernel(name, specialize=..., type_conformances=...)` fixed (None:
    the kernel as written); each specialization is its own compiled kernel."""

    def __init__(self, session: KernelService, name: str, specialization: Specialization | None = None) -> None:
        self.session = session
        self.name = name
        self.specialization = specialization or None
        self._last: tuple[int, Backend, CompiledKernel] | None = None
        self._group_cache: dict[tuple[Any, ...], tuple[int, int, int]] = {}

    def compiled(self, target: str | None = None) -> CompiledKernel:
        if target is not None:
            return self.session.compile_entry(self.name, target, self.specialization)
        last, s = self._last, self.session
        if last is not None and last[0] == s.revision and last[1] is s.backend:
            return last[2]  # the hot path of every call: nothing in the session changed
        ck = s.compile_entry(self.name, None, self.specialization)
        self._last = (s.revision, s.backend, ck)
        return ck

    @property
    def params(self) -> tuple[ParamInfo, ...]:
        """Entry-point uniforms and globals, with types and layouts of the session's backend target."""
        ck = self.compiled()
        return (*ck.entry_point.uniforms, *ck.reflection.globals)

    def dtype(self, param: str) -> "np.dtype[Any]":
        """The numpy dtype of parameter `param` as the session's backend target lays it out: of one
        element for a buffer (`StructuredBuffer<P>` -> P's structured dtype, with the target's field
        offsets and padding, vector fields as subarrays), else of the value itself (a struct, an
        array, a vector). Fill a struct buffer with `np.zeros(n, k.dtype("ps"))`."""
        from ..backends.common.packing import element_dtype, numpy_dtype

        p = next((q for q in self.params if q.name == param), None)
        if p is None:
            raise ParameterError(f"{self.name}(): no parameter `{param}`; its parameters: "
                                 + ", ".join(_param_text(q) for q in self.params))
        t = p.type
        if t.kind in ("resource", "constant_buffer", "parameter_block") and t.element is not None:
            if t.kind == "resource":
                base, shape = element_dtype(t.element)
                return np.dtype((base, shape)) if shape else base
            t = t.element
        return numpy_dtype(t)

    @property
    def path(self) -> str:
        """Which code path this kernel takes on the session's backend: on the CPU "simd (avx2, 8 lanes)"
        (the threads of a group run in vector lanes) or "scalar: <why>"; other backends: their name."""
        from ..backends import kernel_paths

        backend = self.session.backend
        if not capability(backend, KERNEL_PATHS):
            return backend.name
        return kernel_paths(backend).path(self.compiled())

    @property
    def numthreads(self) -> tuple[int, int, int]:
        return self.compiled().entry_point.numthreads

    def code(self, target: str = "hlsl") -> str:
        if self.specialization:
            return self.compiled(target).code
        return self.session.code(self.name, target)

    def ir(self) -> str:
        return self.session.ir(self.name)

    def specialize(self, type_conformances: Sequence[Sequence[Any]] = (), **values: Any) -> "ComputeKernel":
        """This kernel specialized (`scaled.specialize(T="Double", N=4)`): what
        `Session.kernel(name, specialize=values, type_conformances=...)` gives, for a kernel that a cell
        bound by name. The values replace any it was specialized with."""
        return ComputeKernel(self.session, self.name, self.session.specialization(self.name, values, type_conformances))

    def run_build(self, build: CompiledKernel, *, threads: Any = None, groups: Any = None,
                  check_finite: bool | None = None, **params: Any) -> None:
        """Dispatch `build`, a revision of this kernel (`compiled()` gives the current one): the one
        dispatch path (a call runs the current revision through it; a live view keeps running the
        last good one while its cell's new one does not compile or take the view's parameters)."""
        self.dispatch_build(build, self.checked_groups(build, threads, groups, params), check_finite, params)

    def dispatch_build(self, build: CompiledKernel, g: tuple[int, int, int], check_finite: bool | None,
                       params: Mapping[str, Any]) -> None:
        """Dispatch `build` over groups `g` (from checked_groups): the one dispatch of calls and steps."""
        if 0 in g:
            return
        s = self.session
        if check_finite or (check_finite is None and s.finite.enabled):
            s.finite.dispatch(s.backend, build, g, params)
            return
        s.backend.dispatch(build, g, params)

    def checked_groups(self, build: CompiledKernel, threads: Any, groups: Any,
                       params: Mapping[str, Any]) -> tuple[int, int, int]:
        """groups_for and check_parameters, remembered per (revision, threads, groups, parameter
        names): a repeated call does one dict lookup. A miss (or an error) takes the full path, so
        its errors are exactly those of groups_for and check_parameters."""
        try:
            key = (build.key, type(threads), threads, type(groups), groups, *params)
            return self._group_cache[key]
        except KeyError:
            pass
        except TypeError:   # a list given as threads=: not hashable, not remembered
            g = groups_for(build.entry_point, threads, groups)
            check_parameters(build, params)
            return g
        g = groups_for(build.entry_point, threads, groups)
        check_parameters(build, params)
        if len(self._group_cache) >= 64:
            self._group_cache.clear()
        self._group_cache[key] = g
        return g

    def new_texture(self, param: str, width: int, height: int) -> Any:
        """A zeroed texture for texture parameter `param`, height x width, of its texel type: on a
        backend that keeps textures on the device, a device texture there; elsewhere the (H, W, C)
        numpy array itself."""
        from ..backends import textures
        from ..backends.common.packing import texel_dtype

        p = next((q for q in self.params if q.name == param), None)
        if p is None or not p.type.is_texture:
            raise ParameterError(f"{self.name}(): `{param}` is not a texture parameter"
                                 + (f" ({p.type.name})" if p is not None else ""))
        dtype, channels = texel_dtype(p.type)   # reflection names a texture's texel type only as text
        arr = np.zeros((height, width, channels), dtype)
        backend = self.session.backend
        return textures(backend).texture(arr) if capability(backend, TEXTURES) else arr

    @property
    def current(self) -> bool:
        """Whether the revision last compiled is still the current one of every cell it was made of."""
        return self._last is not None and self.session.is_current(self._last[2])

    def __call__(self, *, threads: Any = None, groups: Any = None, check_finite: bool | None = None,
                 **params: Any) -> None:
        """One dispatch of the current revision. check_finite: afterwards, raise NonFiniteError for the
        first written buffer or texture holding a NaN/Inf (default: the session's check_finite;
        slang_kernel.engine.finite)."""
        last, s = self._last, self.session
        if last is not None and last[0] == s.revision and last[1] is s.backend:
            build = last[2]   # the hot path (as compiled()), inlined: one call costs a few µs
        else:
            build = self.compiled()
        for v in params.values():
            if type(v).__module__.startswith("torch"):   # a torch tensor: checked and viewed (slang_kernel.torch)
                from ..torch.tensors import kernel_call

                return kernel_call(self, build, threads, groups, check_finite, params)
        self.dispatch_build(build, self.checked_groups(build, threads, groups, params), check_finite, params)

    def debug(self, thread: Sequence[int] = (0, 0, 0), *, threads: Any = None, groups: Any = None,
              **params: Any) -> Any:
        """Run one dispatch (buffers are written as by a call) and return what thread (x, y, z) (its
        SV_DispatchThreadID) printed with printf, and the values it marked with `debug_value("name", v)`
        (`import debug;`). It builds an instrumented copy of the kernel's cell once per revision;
        any thread can then be asked for without another build (a slang_kernel.views.thread_debug.ThreadDebug,
        through slang_kernel.hooks)."""
        if self.specialization:
            raise NotImplementedError(
                f"{self.name}.debug(): the thread debugger builds the kernel as its cell writes it, not a "
                f"specialization ({self.specialization}); debug a kernel without specialize=/type_conformances= "
                "(e.g. a cell with a concrete entry point calling the generic code)")
        ck = self.compiled()
        g = groups_for(ck.entry_point, threads, groups)
        check_parameters(ck, params)
        return hooks.view(hooks.DEBUG_DISPATCH)(self.session, self.name, thread, g, params, threads)

    def profile(self, *, threads: Any = None, groups: Any = None, **params: Any) -> Any:
        """Run one dispatch, as a call does, and say where its time went: bind/upload, run (GPU
        timestamps on Vulkan and CUDA) and readback, in ms (a slang_kernel.views.profiling.Profile, through
        slang_kernel.hooks)."""
        ck = self.compiled()
        if any(type(v).__module__.startswith("torch") for v in params.values()):
            from ..torch.tensors import tensor_params   # tensors checked and viewed, as a call does

            params = tensor_params(self, ck, params)
        g = groups_for(ck.entry_point, threads, groups)
        check_parameters(ck, params)
        return hooks.view(hooks.PROFILE_DISPATCH)(self.session.backend, ck, g, params)

    @property
    def signature(self) -> str:
        spec = f"<{self.specialization}>" if self.specialization else ""
        return f"{self.name}{spec}(" + ", ".join(f"{p.type.name} {p.name}" for p in self.params) + ")"

    def __repr__(self) -> str:
        try:
            sig = self.signature
        except SpecializationError as exc:  # a generic kernel not yet specialized: say how
            return f"<ComputeKernel {self.name}: {exc}>"
        except Exception as exc:  # a broken cell must not break repr
            spec = f"<{self.specialization}>" if self.specialization else ""
            sig = f"{self.name}{spec}(...) [{type(exc).__name__}]"
        return f"<ComputeKernel {sig} numthreads={self.numthreads if 'Error' not in sig else '?'}>"
