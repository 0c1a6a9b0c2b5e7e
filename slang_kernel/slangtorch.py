"""A slangtorch-style surface on the CUDA backend, so the slangtorch guide's examples translate line
for line (without PyTorch's extension build: kernels are launched through CuPy, tensors by DLPack):

    m = slang_kernel.slangtorch.loadModule("square.slang")         # or Slang source text
    m.square(input=A, output=out).launchRaw(blockSize=(32, 1, 1), gridSize=(64, 1, 1))
    m.square.bwd(input=(x, x_grad), output=(y, y_grad)).launchRaw(blockSize=..., gridSize=...)

Kernels are the module's `[CUDAKernel]` functions; parameters of type `TensorView<T>` take any GPU
array (PyTorch, CuPy, JAX), `DiffTensorView` takes an array or a (primal, derivative) pair. For
`[Differentiable]` kernels, `.fwd` and `.bwd` launch `fwd_diff`/`bwd_diff` of the kernel.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
from pathlib import Path
from typing import Any, Mapping, Sequence

from .compiler.reflection import FunctionInfo
from .session import Session

__all__ = ["BoundKernel", "KernelHandle", "SlangTorchModule", "loadModule"]

MAX_DIM = 5  # kSlangTorchTensorMaxDim in Slang's CUDA prelude
_TENSOR_VIEW = struct.Struct(f"<Q{MAX_DIM}I{MAX_DIM}III")  # data, strides (bytes), sizes, ndim, pad: 56 bytes
_KERNEL = re.compile(r"\[\s*CUDAKernel\s*\](?:\s*\[[^\]]*\])*\s*void\s+(\w+)\s*\(")
_DIFF = re.compile(r"\[\s*Differentiable\s*\]")


def _tensor_view(value: Any, name: str) -> bytes:
    import cupy

    arr = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)  # DLPack / CAI: no copy
    if arr.ndim > MAX_DIM:
        raise ValueError(f"`{name}` has {arr.ndim} dimensions; TensorView takes at most {MAX_DIM}")
    strides = list(arr.strides) + [0] * (MAX_DIM - arr.ndim)
    sizes = list(arr.shape) + [0] * (MAX_DIM - arr.ndim)
    return _TENSOR_VIEW.pack(arr.data.ptr, *strides, *sizes, arr.ndim, 0)


def _encode(type_name: str, value: Any, name: str) -> bytes:
    if type_name.startswith("DiffTensorView"):
        primal, diff = value if isinstance(value, tuple) else (value, None)
        if diff is None:
            import cupy

            diff = cupy.zeros_like(cupy.asarray(primal))
        return _tensor_view(primal, name) + _tensor_view(diff, name + ".d")
    if type_name.startswith("TensorView"):
        return _tensor_view(value, name)
    fmt = {"float": "<f", "int": "<i", "uint": "<I", "double": "<d"}.get(type_name)
    if fmt is None:
        raise TypeError(f"`{name}` is {type_name}: slangtorch-style kernels here take TensorView, "
                        "DiffTensorView and scalar float/int/uint parameters")
    return struct.pack(fmt, value)


class BoundKernel:
    """A kernel with its arguments bound; `launchRaw` launches it."""

    def __init__(self, module: "SlangTorchModule", entry: str, info: FunctionInfo, args: Mapping[str, Any]) -> None:
        names = [p[0] for p in info.params]
        missing = [n for n in names if n not in args]
        extra = [n for n in args if n not in names]
        if missing or extra:
            problems = [f"missing {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(extra)}"] if extra else []
            raise TypeError(f"{info.name}(): " + "; ".join(problems)
                            + f". Parameters: {', '.join(f'{t} {n}' for n, t, _ in info.params)} (pass them by name)")
        self.module, self.entry = module, entry
        self.data = [_encode(t, args[n], n) for n, t, _ in info.params]

    def launchRaw(self, blockSize: Sequence[int], gridSize: Sequence[int]) -> None:  # noqa: N802 - slangtorch's name
        import cupy

        fn = self.module._function(self.entry)
        holders = [ctypes.create_string_buffer(d, len(d)) for d in self.data]
        params = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        block = (tuple(blockSize) + (1, 1))[:3]
        grid = (tuple(gridSize) + (1, 1))[:3]
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.driver.launchKernel(fn.ptr, *grid, *block, 0, stream.ptr, ctypes.addressof(params), 0)


class KernelHandle:
    """`m.square(...)`, with `.fwd(...)` and `.bwd(...)` for [Differentiable] kernels."""

    def __init__(self, module: "SlangTorchModule", name: str, info: FunctionInfo, differentiable: bool) -> None:
        self.module, self.name, self.info, self.differentiable = module, name, info, differentiable

    def __call__(self, **args: Any) -> BoundKernel:
        return BoundKernel(self.module, self.name, self.info, args)

    def _diff(self, mode: str, args: Mapping[str, Any]) -> BoundKernel:
        if not self.differentiable:
            raise TypeError(f"{self.name} is not [Differentiable]: .{mode}() needs it")
        return BoundKernel(self.module, f"{self.name}#{mode}", self.info, args)

    def fwd(self, **args: Any) -> BoundKernel:
        return self._diff("fwd", args)

    def bwd(self, **args: Any) -> BoundKernel:
        return self._diff("bwd", args)


class SlangTorchModule:
    def __init__(self, source: str, name: str, defines: Mapping[str, Any] | None, session: Session | None) -> None:
        self.session = session or Session(backend="cuda")
        result = self.session.run_cell(source, name=name, defines={k: str(v) for k, v in (defines or {}).items()})
        kernels = _KERNEL.findall(source)
        infos = {d.name: d.functions[0] for d in self.session.cell(result.name).decls if d.functions}
        wrappers = []
        self._handles: dict[str, KernelHandle] = {}
        for k in kernels:
            head = source[: source.find(f"void {k}")]
            attrs = head[max(head.rfind("}"), head.rfind(";")) + 1:]  # the attributes before the kernel
            diff = bool(_DIFF.search(attrs))
            self._handles[k] = KernelHandle(self, k, infos[k], diff)
            if diff and "AutoPyBindCUDA" not in attrs:
                params = ", ".join(f"{t} {n}" for n, t, _ in infos[k].params)
                call = ", ".join(n for n, _, _ in infos[k].params)
                for mode in ("fwd", "bwd"):
                    wrappers.append(f"[CUDAKernel] void sk_{mode}_{k}({params}) {{ {mode}_diff({k})({call}); }}")
        extra = "\n" + "\n".join(wrappers) + "\n"
        req = self.session.engine.request("compile", cell=result.name, append=extra, module=self.session.cell(result.name).module,
                                   target="cuda")
        self._compiled = self.session.engine.compile(req)[""]
        self._module: Any = None
        self._functions: dict[str, Any] = {}

    def _function(self, entry: str) -> Any:
        """The __global__ function: [AutoPyBindCUDA] emits `__kernel__NAME[_fwd_diff|_bwd_diff]`;
        without it, the kernel itself and our `sk_fwd_`/`sk_bwd_` wrappers."""
        import cupy

        if self._module is None:
            from .backends.cuda import NVRTC_OPTIONS

            # [CUDAKernel] functions are not extern "C": NVRTC resolves their C++ names for us.
            names = re.findall(r"__global__ void (\w+)\(", self._compiled.code)
            self._module = cupy.RawModule(code=self._compiled.code, options=NVRTC_OPTIONS, name_expressions=names)
        fn = self._functions.get(entry)
        if fn is None:
            name, _, mode = entry.partition("#")
            candidates = ([f"__kernel__{name}_{mode}_diff", f"sk_{mode}_{name}"] if mode
                          else [f"__kernel__{name}", name])
            symbol = next(c for c in candidates if re.search(rf"__global__ void {c}\(", self._compiled.code))
            raw = self._module.get_function(symbol)
            fn = self._functions[entry] = getattr(raw, "kernel", raw)
        return fn

    def __getattr__(self, name: str) -> KernelHandle:
        handles = self.__dict__.get("_handles", {})
        if name in handles:
            return handles[name]
        raise AttributeError(f"no [CUDAKernel] named {name!r}; kernels: {', '.join(handles) or 'none'}")


def loadModule(source_or_path: str | os.PathLike[str], defines: Mapping[str, Any] | None = None,  # noqa: N802
               session: Session | None = None) -> SlangTorchModule:
    """Like slangtorch.loadModule: a path to a .slang file, or Slang source text."""
    text = str(source_or_path)
    path = Path(text)
    if "\n" not in text and path.suffix == ".slang" and path.exists():
        return SlangTorchModule(path.read_text(), path.stem, defines, session)
    return SlangTorchModule(text, "slangtorch_module", defines, session)
