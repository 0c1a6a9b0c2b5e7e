"""A compute kernel and its backward kernel as one differentiable torch op (`KernelOp`).

Where it makes sense, and how. A Session function joins autograd by itself (its `bwd_diff` is
generated); a kernel does not, because what a kernel computes is not known from its signature: it
may scatter, keep state, or update a buffer in place. A kernel pair is a differentiable op when
1. the forward kernel writes its outputs from its inputs only: no buffer is both read and written,
   nothing is kept between calls (an optimizer step, a random-number state, an accumulation into
   an input are not ops: run them as plain kernels, outside the graph);
2. the backward kernel is its adjoint: it takes the same inputs (same names), `grad_<output>` for
   each output (the gradient torch hands back, read-only) and writes `grad_<input>` for each input
   it differentiates, the sum over outputs of d output / d input times grad_<output>; typically one
   thread calls `bwd_diff(f)` of the per-thread function `f` the forward kernel calls;
3. each element of a `grad_<input>` buffer is written by one thread (the CPU target has no atomics),
   or, on a GPU, accumulated with `InterlockedAdd`. The buffers start at zero.
An input whose `grad_<input>` the backward kernel does not declare gets no gradient (as `no_diff`);
passing it a tensor that requires grad is refused before launch. Scalars (`uniform float scale`)
pass through to both kernels and get no gradient.

    op = KernelOp(s.kernel("shade"), s.kernel("shade_bwd"), inputs=("albedo", "light"), outputs=("color",))
    color = op(albedo=a, light=l, exposure=2.0)      # a tensor in the graph; color.sum().backward()

By default the op is element-wise: tensor inputs share one shape, outputs take it, one thread per
element. Otherwise give `outputs={"name": shape_fn}` and `threads=fn`, both of the inputs dict.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import torch

from ..errors import ParameterError
from .tensors import is_tensor

__all__ = ["KernelOp"]

ShapeFn = Callable[[Mapping[str, Any]], Sequence[int]]


class KernelOp:
    """A forward ComputeKernel and its backward kernel as a torch op (see the module docstring)."""

    def __init__(self, forward: Any, backward: Any, *, inputs: Sequence[str],
                 outputs: Sequence[str] | Mapping[str, ShapeFn],
                 threads: Callable[[Mapping[str, Any]], Any] | None = None) -> None:
        self.forward, self.backward = forward, backward
        self.inputs = tuple(inputs)
        self.outputs: dict[str, ShapeFn | None] = (dict(outputs) if isinstance(outputs, Mapping)
                                                   else {o: None for o in outputs})
        self.threads = threads
        self.elementwise = not isinstance(outputs, Mapping)
        fparams = {p.name for p in forward.params}
        for name in (*self.inputs, *self.outputs):
            if name not in fparams:
                raise ParameterError(f"KernelOp: {forward.name} has no parameter `{name}`; its parameters: "
                                     f"{', '.join(sorted(fparams))}")
        bparams = {p.name for p in backward.params}
        missing = [n for n in (*self.inputs, *(f"grad_{o}" for o in self.outputs)) if n not in bparams]
        if missing:
            raise ParameterError(f"KernelOp: the backward kernel {backward.name} takes the forward's inputs and "
                                 f"`grad_<output>` for each output; it lacks {', '.join(f'`{m}`' for m in missing)}")
        self.differentiable = tuple(n for n in self.inputs if f"grad_{n}" in bparams)

    @property
    def name(self) -> str:
        return f"KernelOp({self.forward.name}, {self.backward.name})"

    def _check(self, tensors: Mapping[str, Any]) -> None:
        """What the kernels cannot check: all inputs given, contiguous, one shape (element-wise),
        requires_grad only where the backward kernel writes a gradient. Before any launch."""
        where = f"{self.name}"
        for name in self.inputs:
            if name not in tensors:
                raise ParameterError(f"{where}: input `{name}` is missing; pass {name}=<tensor>")
        first = self.inputs[0]
        for name in self.inputs:
            t = tensors[name]
            if not is_tensor(t):
                raise ParameterError(f"{where}: input `{name}` takes a torch tensor; got {type(t).__name__}")
            if not t.is_contiguous():
                raise ParameterError(f"{where}: input `{name}` is indexed as a flat buffer and needs a contiguous "
                                     f"tensor; got strides {tuple(t.stride())}; pass `.contiguous()` of it")
            if self.elementwise and t.shape != tensors[first].shape:
                raise ParameterError(f"{where}: input `{name}` has shape {tuple(t.shape)}, but `{first}` has "
                                     f"{tuple(tensors[first].shape)}; this element-wise op takes one shape "
                                     "(expand and `.contiguous()` it, or give outputs= shapes and threads=)")
            if t.requires_grad and name not in self.differentiable:
                raise ParameterError(f"{where}: input `{name}` gets no gradient ({self.backward.name} writes no "
                                     f"`grad_{name}`), but the tensor requires grad; pass `.detach()` of it")

    def __call__(self, **params: Any) -> Any:
        """The forward kernel on `params` (tensors for the inputs, anything else for uniforms):
        its outputs as new tensors, in the graph where a differentiable input requires grad."""
        tensors = {n: params[n] for n in self.inputs if n in params}
        self._check(tensors)
        for name in self.outputs:
            if name in params:
                raise ParameterError(f"{self.name}: `{name}` is an output; the op allocates it, do not pass it")
        uniforms = {k: v for k, v in params.items() if k not in tensors}
        outs = _KernelFn.apply(self, uniforms, *(tensors[n] for n in self.inputs))  # type: ignore[no-untyped-call]
        return outs[0] if len(outs) == 1 else outs

    def _elem(self, kernel: Any, name: str) -> tuple[Any, tuple[int, ...]]:
        """Torch dtype and element shape of buffer `name` (`float3` -> float32, (3,))."""
        dt = kernel.dtype(name)
        base, shape = dt.subdtype if dt.subdtype else (dt, ())
        if base.fields is not None:
            raise ParameterError(f"{self.name}: `{name}` is a buffer of structs; an op takes "
                                 "buffers of scalars, vectors or matrices")
        return getattr(torch, base.name), tuple(shape)

    def batch(self, tensors: Mapping[str, Any]) -> tuple[int, ...]:
        """The element-wise shape: the first input's, less its element's own dimensions (float3: 3)."""
        first = self.inputs[0]
        eshape = self._elem(self.forward, first)[1]
        shape = tuple(tensors[first].shape)
        return shape[:len(shape) - len(eshape)]

    def run_forward(self, tensors: Mapping[str, Any], uniforms: Mapping[str, Any]) -> tuple[Any, ...]:
        like = tensors[self.inputs[0]]
        outs = {}
        for name, shape_fn in self.outputs.items():
            dtype, eshape = self._elem(self.forward, name)
            shape = self.batch(tensors) + eshape if shape_fn is None else tuple(shape_fn(tensors))
            outs[name] = torch.zeros(shape, dtype=dtype, device=like.device)
        self.forward(threads=self._threads(tensors), **uniforms, **tensors, **outs)
        return tuple(outs.values())

    def run_backward(self, tensors: Mapping[str, Any], uniforms: Mapping[str, Any],
                     grad_outs: Sequence[Any]) -> dict[str, Any]:
        grads = {f"grad_{n}": torch.zeros_like(tensors[n]) for n in self.differentiable}
        given = {f"grad_{o}": g.contiguous() for o, g in zip(self.outputs, grad_outs)}   # torch's may be expanded
        self.backward(threads=self._threads(tensors), **uniforms, **tensors, **given, **grads)
        return {n: grads[f"grad_{n}"] for n in self.differentiable}

    def _threads(self, tensors: Mapping[str, Any]) -> Any:
        return self.threads(tensors) if self.threads is not None else math.prod(self.batch(tensors))


class _KernelFn(torch.autograd.Function):
    """forward: the forward kernel into new outputs; backward: the backward kernel into zeroed grads."""

    @staticmethod
    def forward(ctx: Any, op: KernelOp, uniforms: Mapping[str, Any], *inputs: Any) -> Any:
        tensors = {n: t.detach() for n, t in zip(op.inputs, inputs)}
        ctx.op, ctx.uniforms, ctx.tensors = op, uniforms, tensors
        outs = op.run_forward(tensors, uniforms)
        ints = [o for o in outs if not o.is_floating_point()]
        if ints:
            ctx.mark_non_differentiable(*ints)
        return outs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, *grad_outs: Any) -> Any:
        op: KernelOp = ctx.op
        grads = op.run_backward(ctx.tensors, ctx.uniforms, grad_outs)
        return (None, None, *(grads.get(n) if ctx.needs_input_grad[2 + k] else None
                              for k, n in enumerate(op.inputs)))
