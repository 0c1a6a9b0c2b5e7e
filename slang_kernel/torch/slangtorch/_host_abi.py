"""Calling [TorchEntryPoint] host code: the C ABI of host_include/torch_host.h, from Python.

A call hands the library its arguments as one array of SkValue nodes (a tree in pre-order: a tuple's
items follow it; tensors travel as a handle plus their metadata, never copied) and gets its result
back the same way, node by node, through the `emit` callback. While it runs, the host code allocates
tensors, fills them and launches kernels through the other callbacks: allocation makes torch tensors
(kept in the call's table, so the host code's handles stay valid), launches go to a `Launcher` (the
loaded module: its [CUDAKernel]s on torch's current stream). An exception in a callback is kept and
raised when the call returns; a C++ exception comes back as RuntimeError (TypeError for arguments).
"""

from __future__ import annotations

import ctypes
import numbers
import threading
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int32, c_int64, c_uint32, c_uint64
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

__all__ = ["DTYPE_CODES", "HostLibrary", "Launcher", "SkTensor", "SkValue"]

MAX_DIM = 8
NONE, INT, FLOAT, BOOL, TENSOR, TUPLE, STRING = range(7)
DTYPE_CODES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5, "float32": 6,
               "float64": 7, "bool": 11, "bfloat16": 15}   # c10::ScalarType
_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
_UNKNOWN_DTYPE = 127


class SkTensor(Structure):
    _fields_ = [("handle", c_int64), ("data", c_uint64), ("dtype", c_int32), ("is_cuda", c_int32),
                ("ndim", c_int32), ("pad", c_int32), ("sizes", c_int64 * MAX_DIM), ("strides", c_int64 * MAX_DIM)]


class SkValue(Structure):
    _fields_ = [("kind", c_int32), ("count", c_int32), ("i", c_int64), ("f", c_double), ("s", c_char_p),
                ("tensor", SkTensor)]


_ALLOC = CFUNCTYPE(c_int, c_int64, c_int32, c_int32, POINTER(c_int64), POINTER(SkTensor))
_FILL = CFUNCTYPE(c_int, c_int64, c_double)
_LAUNCH = CFUNCTYPE(c_int, c_char_p, POINTER(c_uint32), POINTER(c_uint32), ctypes.c_void_p, c_uint64, c_uint64)
_STREAM = CFUNCTYPE(c_uint64)
_SYNC = CFUNCTYPE(c_int, c_uint64)
_EMIT = CFUNCTYPE(c_int, POINTER(SkValue))


class SkHost(Structure):
    _fields_ = [("alloc", _ALLOC), ("fill", _FILL), ("launch", _LAUNCH), ("stream", _STREAM), ("sync", _SYNC),
                ("emit", _EMIT)]


class Launcher(Protocol):
    """Where the host code's kernel launches go (SlangTorchModule: its CUDA kernels)."""

    def launch(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], args: int,
               shared_mem: int, stream: int) -> None: ...

    def stream(self) -> int: ...

    def sync(self, stream: int) -> None: ...


class _Call:
    """One call's state: its tensors by handle, the emitted result nodes, a callback's exception."""

    def __init__(self) -> None:
        self.tensors: list[Any] = []
        self.emitted: list[tuple[int, int, int, float, bytes | None, int]] = []
        self.error: BaseException | None = None

    def register(self, tensor: Any, out: SkTensor) -> None:
        if tensor.dim() > MAX_DIM:
            raise ValueError(f"a tensor of {tensor.dim()} dimensions: host code takes at most {MAX_DIM}")
        out.handle = len(self.tensors)
        self.tensors.append(tensor)
        out.data = tensor.data_ptr()   # no copy; a tensor that requires grad is read in place too
        out.dtype = DTYPE_CODES.get(str(tensor.dtype).removeprefix("torch."), _UNKNOWN_DTYPE)
        out.is_cuda = int(bool(tensor.is_cuda))
        out.ndim = tensor.dim()
        for d, (n, s) in enumerate(zip(tensor.shape, tensor.stride())):
            out.sizes[d], out.strides[d] = n, s


class HostLibrary:
    """A built host library: its functions by name, called with Python values.

    `device` is where allocations go: "cuda" (what the generated code asks for); tests without a GPU
    pass "cpu" to run the host logic up to its first kernel launch.
    """

    def __init__(self, path: str | Path, launcher: Launcher, device: str = "cuda") -> None:
        self.path, self.launcher, self.device = Path(path), launcher, device
        self._lib = ctypes.CDLL(str(path))
        self._lib.sk_call.restype = c_int
        self._lib.sk_call.argtypes = [POINTER(SkHost), c_char_p, POINTER(SkValue), c_int32, c_int32,
                                      c_char_p, c_int32]
        self._lib.sk_functions.restype = c_int64
        self._lib.sk_functions.argtypes = [c_char_p, c_int64]
        need = self._lib.sk_functions(None, 0)
        buf = ctypes.create_string_buffer(int(need))
        self._lib.sk_functions(buf, need)
        self.functions = tuple(n for n in buf.value.decode().split("\n") if n)
        self._local = threading.local()
        self._host = SkHost(_ALLOC(self._guard(self._alloc)), _FILL(self._guard(self._fill)),
                            _LAUNCH(self._guard(self._launch)), _STREAM(self._stream),
                            _SYNC(self._guard(self._sync)), _EMIT(self._guard(self._emit)))

    # -- callbacks (each records its exception for the call and returns nonzero) ------------------
    @property
    def _call(self) -> _Call:
        call: _Call | None = getattr(self._local, "call", None)
        if call is None:
            raise RuntimeError("host callback outside a call")
        return call

    def _guard(self, fn: Callable[..., None]) -> Callable[..., int]:
        def wrapped(*args: Any) -> int:
            try:
                fn(*args)
                return 0
            except BaseException as exc:   # noqa: BLE001 - raised again when sk_call returns
                call = getattr(self._local, "call", None)
                if call is not None and call.error is None:
                    call.error = exc
                return 1
        return wrapped

    def _alloc(self, like: int, dtype: int, ndim: int, sizes: Any, out: Any) -> None:
        import torch

        name = _DTYPES.get(dtype)
        if name is None:
            raise TypeError(f"host code allocated a tensor of unknown dtype code {dtype}")
        dt = getattr(torch, name)
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("[TorchEntryPoint] host code allocates CUDA tensors, and torch has no CUDA device "
                               "here (CPU-only torch, or no GPU): run it on a machine with an NVIDIA GPU")
        call = self._call
        if like >= 0:
            tensor = torch.empty_like(call.tensors[like], dtype=dt, device=self.device)
        else:
            tensor = torch.empty([sizes[d] for d in range(ndim)], dtype=dt, device=self.device)
        call.register(tensor, out.contents)

    def _fill(self, handle: int, value: float) -> None:
        self._call.tensors[handle].fill_(value)

    def _launch(self, kernel: bytes, grid: Any, block: Any, args: int | None, shared_mem: int, stream: int) -> None:
        self.launcher.launch(kernel.decode(), (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]),
                             args or 0, shared_mem, stream)

    def _stream(self) -> int:
        try:
            return self.launcher.stream()
        except BaseException as exc:   # noqa: BLE001 - no error channel here: 0 is the default stream
            call = getattr(self._local, "call", None)
            if call is not None and call.error is None:
                call.error = exc
            return 0

    def _sync(self, stream: int) -> None:
        self.launcher.sync(stream)

    def _emit(self, value: Any) -> None:
        v = value.contents
        self._call.emitted.append((v.kind, v.count, v.i, v.f, v.s, v.tensor.handle))

    # -- calls -----------------------------------------------------------------------------------
    def call(self, name: str, args: Sequence[Any], params: Sequence[str] = ()) -> Any:
        """`name(*args)`; `params` (the Slang parameter names) only make errors clearer."""
        call = _Call()
        nodes: list[SkValue] = []
        for i, a in enumerate(args):
            _flatten(a, nodes, call, f"{name}() argument {i + 1}" + (f" ({params[i]})" if i < len(params) else ""))
        array = (SkValue * max(1, len(nodes)))(*nodes)
        error = ctypes.create_string_buffer(2048)
        self._local.call = call
        try:
            rc = self._lib.sk_call(ctypes.byref(self._host), name.encode(), array, len(nodes), len(args),
                                   error, len(error))
        finally:
            self._local.call = None
        if call.error is not None:
            raise call.error
        if rc != 0:
            message = error.value.decode(errors="replace")
            if message.startswith("TypeError:"):
                raise TypeError(_name_argument(message.removeprefix("TypeError:"), params))
            raise RuntimeError(message)
        result, _ = _rebuild(call.emitted, 0, call.tensors)
        return result


def _name_argument(message: str, params: Sequence[str]) -> str:
    """`f() argument 2: ...` -> `f() argument 2 (B): ...` where the Slang parameter names are known."""
    import re

    m = re.search(r"argument (\d+)", message)
    if m and 0 < int(m.group(1)) <= len(params):
        return message[:m.end()] + f" ({params[int(m.group(1)) - 1]})" + message[m.end():]
    return message


def _flatten(value: Any, out: list[SkValue], call: _Call, where: str) -> None:
    node = SkValue()
    if hasattr(value, "data_ptr") and hasattr(value, "stride"):     # a torch tensor
        node.kind = TENSOR
        call.register(value, node.tensor)
        out.append(node)
    elif isinstance(value, (tuple, list)):                          # namedtuples too: structs, vectors
        node.kind, node.count = TUPLE, len(value)
        out.append(node)
        for i, item in enumerate(value):
            _flatten(item, out, call, f"{where}[{i}]")
    elif isinstance(value, bool):
        node.kind, node.i = BOOL, int(value)
        out.append(node)
    elif isinstance(value, numbers.Integral):
        node.kind, node.i = INT, int(value)
        out.append(node)
    elif isinstance(value, numbers.Real):
        node.kind, node.f = FLOAT, float(value)
        out.append(node)
    elif value is None:
        out.append(node)
    else:
        raise TypeError(f"{where}: a {type(value).__name__} cannot be passed to host code; pass a tensor, a "
                        "number, or a tuple/list (structs and vectors are tuples, in field order)")


def _rebuild(nodes: list[tuple[int, int, int, float, bytes | None, int]], at: int, tensors: list[Any]) -> tuple[Any, int]:
    kind, count, i, f, s, handle = nodes[at]
    at += 1
    if kind == TUPLE:
        items = []
        for _ in range(count):
            item, at = _rebuild(nodes, at, tensors)
            items.append(item)
        return tuple(items), at
    if kind == TENSOR:
        return tensors[handle], at
    if kind == INT:
        return i, at
    if kind == BOOL:
        return bool(i), at
    if kind == FLOAT:
        return f, at
    if kind == STRING:
        return (s or b"").decode(), at
    return None, at
