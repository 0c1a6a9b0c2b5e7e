"""A Session function called with torch tensors: tensors out, and torch autograd through `bwd_diff`.

`call(function, args)` is where `SlangFunction.__call__` hands over when an argument is a tensor.
Every tensor is checked (device, dtype, requires_grad on a parameter that gets no gradient) before
any launch. When a differentiable input requires grad (and grad mode is on), the call is one
`torch.autograd.Function`: forward runs the function on the detached tensors, backward runs its
`.bwd(..., grad_out=)` and sums each gradient down to its input's shape (a 0-d tensor that
broadcast gets the summed gradient, as in torch). Python numbers and `no_diff` inputs get none.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
import torch  # this module is imported only once a tensor is met

from ..compiler.reflection import FunctionInfo
from ..errors import ParameterError
from .tensors import TensorSpec, is_tensor, on_torch_stream, to_array, to_tensor

__all__ = ["SessionFunction", "call", "plain_args"]


class SessionFunction(Protocol):
    """What of a SlangFunction this module uses (typed here: the function module imports this one)."""

    name: str

    @property
    def session(self) -> Any: ...

    def info(self, nargs: int | None = None) -> FunctionInfo: ...

    def differentiable_params(self, fn: FunctionInfo) -> list[int]: ...

    def __call__(self, *args: Any) -> Any: ...

    def bwd(self, *args: Any, grad_out: Any = 1.0, check_finite: bool | None = None) -> Any: ...


def _inputs(fn: FunctionInfo) -> list[tuple[int, str, str]]:
    return [(i, n, t) for i, (n, t, d) in enumerate(fn.params) if d != "out"]


def plain_args(function: SessionFunction, args: Sequence[Any], *, grad_ok: bool = False,
               host: bool = False) -> list[Any]:
    """`args` with each tensor checked and replaced by its (detached) array, a view on the backend's
    device (CuPy on CUDA) or, where `host`, a numpy array; what calls, `.bwd`, `.fwd` and
    `check_grad` run on. grad_ok: tensors that require grad are taken on any parameter."""
    fn = function.info(len(args))
    backend = function.session.backend.name
    where = "cpu" if host else backend
    diff = set(function.differentiable_params(fn)) if fn.differentiable else set()
    out = []
    batches: dict[str, tuple[int, ...]] = {}
    for (i, pname, ptype), value in zip(_inputs(fn), args):
        if isinstance(value, tuple):   # .fwd's (primal, tangent)
            value = tuple(to_array(v, where) if is_tensor(v) else v for v in value)
        elif is_tensor(value):
            spec = TensorSpec(f"{function.name}()", pname, ptype, backend)
            spec.check(value, grad_ok=grad_ok or i in diff)
            batches[pname] = spec.batch_shape(value)
            value = to_array(value, where)
        out.append(value)
    try:
        np.broadcast_shapes(*batches.values())
    except ValueError:
        raise ParameterError(f"{function.name}(): the shapes of " + ", ".join(f"`{n}` {s}" for n, s in batches.items())
                             + " do not broadcast together (as in torch: equal, or 1, from the last dimension); "
                             "reshape or expand them, e.g. `t[:, None]`") from None
    return out


def call(function: SessionFunction, args: Sequence[Any]) -> Any:
    """The function on tensors: its results as tensors on the first tensor's device, in the graph
    when a differentiable input requires grad."""
    fn = function.info(len(args))
    like = next(a for a in args if is_tensor(a))
    arrays = plain_args(function, args)
    diff = function.differentiable_params(fn)
    positions = [k for k, (i, _, _) in enumerate(_inputs(fn)) if i in diff]
    tracked = [k for k in positions if is_tensor(args[k]) and args[k].requires_grad]
    if not tracked or not torch.is_grad_enabled():
        with on_torch_stream(like):
            result = function(*arrays)
        return tuple(to_tensor(r, like) for r in result) if isinstance(result, tuple) else to_tensor(result, like)
    if not fn.differentiable or fn.result in ("void", "") or any(d != "in" for _, _, d in fn.params):
        raise TypeError(f"{function.name}(): autograd takes a [Differentiable] function with `in` parameters "
                        f"and a result; {fn.signature} is not one. Pass `.detach()` tensors to call it without "
                        "gradients")
    return _SlangCall.apply(function, arrays, positions, like, *args)  # type: ignore[no-untyped-call]


def _sum_to(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient down to the shape of the input it belongs to (as torch does)."""
    lead = grad.ndim - len(shape)
    g = grad.sum(axis=tuple(range(lead))) if lead > 0 else grad
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


class _SlangCall(torch.autograd.Function):
    """forward: the function on the detached arrays; backward: its `.bwd` with grad_out."""

    @staticmethod
    def forward(ctx: Any, function: SessionFunction, arrays: list[Any], positions: list[int], like: Any,
                *tensors: Any) -> Any:
        ctx.function, ctx.arrays, ctx.positions = function, arrays, positions
        ctx.shapes = [tuple(np.shape(a)) for a in arrays]
        with on_torch_stream(like):
            return to_tensor(function(*arrays), like)

    @staticmethod
    def backward(ctx: Any, *grad_outs: Any) -> Any:
        function: SessionFunction = ctx.function
        grad_out = grad_outs[0]
        with on_torch_stream(grad_out):
            g = function.bwd(*ctx.arrays, grad_out=to_array(grad_out, function.session.backend.name))
        grads = g if isinstance(g, tuple) else (g,)
        out: list[Any] = [None] * (4 + len(ctx.arrays))
        for k, grad in zip(ctx.positions, grads):
            if ctx.needs_input_grad[4 + k]:
                out[4 + k] = to_tensor(_sum_to(grad, ctx.shapes[k]), grad_out)
        return tuple(out)
