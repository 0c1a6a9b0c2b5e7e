"""A loaded slangtorch module: its kernels as attributes, bound with arguments, launched with `launchRaw`.

Kernels are the functions the compiler lowered to `__global__` functions: `[AutoPyBindCUDA]` ones as
`__kernel__NAME` (with `_fwd_diff`/`_bwd_diff` for `[Differentiable]` kernels), plain `[CUDAKernel]`
ones under their own name. Launches go on torch's current CUDA stream through the CUDA driver.
[TorchEntryPoint] functions are host code (_host_build, _host_abi): their `__dispatch_kernel` launches
come back here (`launch`) with the host code's argument pointers.
"""

from __future__ import annotations

import ctypes
import re
from collections import namedtuple
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...backends.common.generated import body
from ...backends.cuda.fp16 import half_options, uses_half
from ...compiler.reflection import FunctionInfo
from ._host_abi import HostLibrary
from ._layout import CType, Layouts, kernel_signatures, pack, reorder_rows, reorders, slang_name
from ._views import tensor_view

if TYPE_CHECKING:
    from ._debug import LaunchDebug

__all__ = ["BoundKernel", "HostFunction", "KernelHandle", "SlangTorchModule"]

_TENSOR_ELEMENT = re.compile(r"^TensorView<\s*(\w+)\s*>$")


class BoundKernel:
    """A kernel with its arguments packed; `launchRaw` launches it."""

    def __init__(self, module: "SlangTorchModule", symbol: str, info: FunctionInfo, args: Mapping[str, Any]) -> None:
        names = [p[0] for p in info.params]
        missing = [n for n in names if n not in args]
        extra = [n for n in args if n not in names]
        if missing or extra:
            problems = [f"missing {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(extra)}"] if extra else []
            raise TypeError(f"{info.name}(): " + "; ".join(problems)
                            + f". Parameters: {', '.join(f'{t} {n}' for n, t, _ in info.params)} (pass them by name)")
        self.module, self.symbol, self.name, self.names = module, symbol, info.name, names
        ctypes_ = module.param_types(symbol)
        self.keep = [args[n] for n in names]   # the tensors stay alive until the launch is queued
        self.data = []
        for (name, slang_type, _), ct in zip(info.params, ctypes_):
            element = _TENSOR_ELEMENT.match(slang_type)
            el = element.group(1) if element else None
            self.data.append(pack(ct, args[name], name, partial(_typed_view, el)))

    def launchRaw(self, blockSize: Sequence[int], gridSize: Sequence[int]) -> None:  # noqa: N802 - slangtorch's name
        import cupy

        holders = [ctypes.create_string_buffer(d, max(1, len(d))) for d in self.data]
        params = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        block = (tuple(blockSize) + (1, 1))[:3]
        grid = (tuple(gridSize) + (1, 1))[:3]

        def launch(fn: Any) -> None:
            cupy.cuda.driver.launchKernel(fn.ptr, *grid, *block, 0, _current_stream(), ctypes.addressof(params), 0)

        if self.module.debug is not None and self.module.debug.active:   # checked, NaN finder, timings
            from ._debug import run_launch

            run_launch(self.module, self.name, self.symbol, list(zip(self.names, self.keep)), grid, block, launch)
            return
        launch(self.module.function(self.symbol))


def _typed_view(element: str | None, value: Any, where: str) -> bytes:
    return tensor_view(value, where, element)


def _current_stream() -> int:
    """torch's current CUDA stream where torch is loaded, else CuPy's."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return int(torch.cuda.current_stream().cuda_stream)
    import cupy

    return int(cupy.cuda.get_current_stream().ptr)


class KernelHandle:
    """`m.square(...)`, with `.fwd(...)` and `.bwd(...)` for [Differentiable] kernels."""

    def __init__(self, module: "SlangTorchModule", name: str, info: FunctionInfo, symbol: str) -> None:
        self.module, self.name, self.info, self.symbol = module, name, info, symbol

    def __call__(self, **args: Any) -> BoundKernel:
        return BoundKernel(self.module, self.symbol, self.info, args)

    def _diff(self, mode: str, args: Mapping[str, Any]) -> BoundKernel:
        symbol = f"{self.symbol}_{mode}_diff"
        if not self.module.has_symbol(symbol):
            raise TypeError(f"{self.name} has no .{mode}(): it needs [Differentiable] and [AutoPyBindCUDA]")
        return BoundKernel(self.module, symbol, self.info, args)

    def fwd(self, **args: Any) -> BoundKernel:
        return self._diff("fwd", args)

    def bwd(self, **args: Any) -> BoundKernel:
        return self._diff("bwd", args)


class SlangTorchModule:
    """What `loadModule` returns: kernels and struct types (namedtuples) by name; `DiffTensorView(value, grad)`."""

    DiffTensorView = namedtuple("DiffTensorView", ["value", "grad"])
    origin: Any = None   # _load.ModuleOrigin, set by the loader (_load imports this module): what views compile again
    debug: "LaunchDebug | None" = None     # checked launches, the NaN finder, timings (_debug.debug_launches)

    def __init__(self, name: str, code: str, functions: Mapping[str, FunctionInfo], nvrtc_options: Sequence[str],
                 host_code: str = "", entry_points: Sequence[str] = (), host_library: str | Path | None = None) -> None:
        self.name, self.code, self.nvrtc_options = name, code, tuple(nvrtc_options)
        self.host_code = host_code   # Slang's torch-binding C++ (the host code of [TorchEntryPoint] functions)
        self._signatures = kernel_signatures(code)
        self._layouts = Layouts(code)
        self._handles: dict[str, KernelHandle] = {}
        for fname, info in functions.items():
            for symbol in (f"__kernel__{fname}", fname):
                if symbol in self._signatures and len(self._signatures[symbol]) == len(info.params):
                    self._handles[fname] = KernelHandle(self, fname, info, symbol)
                    break
        self.host_library = HostLibrary(host_library, self) if host_library is not None else None
        self._host = {n: HostFunction(self.host_library, n, functions.get(n))
                      for n in entry_points if self.host_library is not None}
        self._structs = self._struct_types()
        self._cuda_module: Any = None
        self._functions: dict[str, Any] = {}

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self._handles)

    @property
    def entry_points(self) -> tuple[str, ...]:
        """The [TorchEntryPoint] functions (host code), called as `m.name(...)`."""
        return tuple(self._host)

    def kernel_symbols(self) -> list[str]:
        """Every `__global__` function of the module's CUDA code."""
        return list(self._signatures)

    def has_symbol(self, symbol: str) -> bool:
        return symbol in self._signatures

    def param_types(self, symbol: str) -> list[CType]:
        return [self._layouts.ctype(t) for t, _ in self._signatures[symbol]]

    def _struct_types(self) -> dict[str, type]:
        """A namedtuple per struct a kernel takes (slangtorch's `m.Foo(A=..., B=...)`)."""
        out: dict[str, type] = {}
        todo = [ct for h in self._handles.values() for ct in self.param_types(h.symbol)]
        while todo:
            ct = todo.pop()
            if ct.element is not None:
                todo.append(ct.element)
            if ct.kind == "struct" and not ct.name.startswith(("_VectorStorage", "_MatrixStorage", "DiffTensorView")):
                out.setdefault(slang_name(ct.name), namedtuple(slang_name(ct.name), [n for n, _, _ in ct.fields]))
                todo.extend(f for _, _, f in ct.fields)
        return out

    def prepare(self) -> None:
        """Build the CUDA code now (NVRTC, cached on disk by CuPy) instead of at the first launch."""
        for symbol in self._signatures:
            self.function(symbol)

    def build_options(self) -> tuple[str, ...]:
        """NVRTC's options for this module's code (and its checked build, _debug)."""
        import cupy

        options = self.nvrtc_options
        if uses_half(body(self.code)):   # Slang's prelude includes cuda_fp16.h only when asked
            options += half_options(cupy, self.name, self.name)
        return options

    def function(self, symbol: str) -> Any:
        """The CUDA function, built by NVRTC on first use (CuPy caches the binary on disk)."""
        import cupy

        if self._cuda_module is None:
            self._cuda_module = cupy.RawModule(code=self.code, options=self.build_options(),
                                               name_expressions=list(self._signatures))
        fn = self._functions.get(symbol)
        if fn is None:
            raw = self._cuda_module.get_function(symbol)
            fn = self._functions[symbol] = getattr(raw, "kernel", raw)
        return fn

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in d.get("_handles", {}):
            return d["_handles"][name]
        if name in d.get("_structs", {}):
            return d["_structs"][name]
        if name in d.get("_host", {}):
            return d["_host"][name]
        raise AttributeError(f"module {d.get('name')!r} has no kernel, function or struct {name!r}; kernels: "
                             f"{', '.join(d.get('_handles', {})) or 'none'}; [TorchEntryPoint] functions: "
                             f"{', '.join(d.get('_host', {})) or 'none'}")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        """A notebook shows a module as it shows a cell: its kernels, code, reflection (_notebook)."""
        from ._notebook import module_views

        return module_views(self)._repr_mimebundle_(**kwargs)

    # -- Launcher: where the host code's `__dispatch_kernel` launches go ---------------------------
    def launch(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], args: int,
               shared_mem: int, stream: int) -> None:
        """Launch [CUDAKernel] `kernel` with the host code's argument pointers (no copies)."""
        import cupy

        if kernel not in self._signatures:
            raise RuntimeError(f"host code launched {kernel}, which is not a kernel of module {self.name!r}")
        fn = self.function(kernel)
        self.host_args_for_kernel(kernel, args)
        cupy.cuda.driver.launchKernel(fn.ptr, *grid, *block, shared_mem, stream, args, 0)

    def host_args_for_kernel(self, kernel: str, args: int) -> None:
        """Slang's host code stores matrices row by row; in a row-major compile the kernel reads them
        from other slots: move them there, in place (`args`: the host code's `void*[]`)."""
        types = self.param_types(kernel)
        if not any(reorders(t) for t in types):
            return
        pointers = (ctypes.c_void_p * len(types)).from_address(args)
        for t, p in zip(types, pointers):
            if reorders(t) and p:
                data = bytearray(ctypes.string_at(p, t.size))
                reorder_rows(t, data)
                ctypes.memmove(p, bytes(data), t.size)

    def stream(self) -> int:
        return _current_stream()

    def sync(self, stream: int) -> None:
        import cupy

        cupy.cuda.runtime.streamSynchronize(stream)


def _values_of(value: Any) -> Any:
    """A tensor's values as nested lists (a 0-d tensor's as a number); anything else as it is."""
    if hasattr(value, "data_ptr") and hasattr(value, "tolist"):
        return value.tolist()
    return value


class HostFunction:
    """A [TorchEntryPoint] function: called as slangtorch calls it (positional arguments, tensors in and
    out; a struct is a tuple of its fields in order), or with its parameters by name."""

    def __init__(self, library: HostLibrary, name: str, info: FunctionInfo | None) -> None:
        self.library, self.name, self.info = library, name, info
        self.params = tuple(p[0] for p in info.params) if info is not None else ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            unknown = [k for k in kwargs if k not in self.params[len(args):]]
            missing = [p for p in self.params[len(args):] if p not in kwargs]
            if unknown or missing:
                raise TypeError(f"{self.name}(): " + "; ".join(
                    ([f"unknown or repeated {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing {', '.join(missing)}"] if missing else []))
                    + f". Parameters: {', '.join(self.params)}")
            args = args + tuple(kwargs[p] for p in self.params[len(args):])
        if self.info is not None:   # a tensor given for a vector, matrix, array or scalar: its values
            args = tuple(_values_of(a) if i < len(self.info.params) and "TorchTensor" not in self.info.params[i][1]
                         else a for i, a in enumerate(args))
        return self.library.call(self.name, args, self.params)

    def __repr__(self) -> str:
        return f"<[TorchEntryPoint] {self.info.signature if self.info else self.name}>"
