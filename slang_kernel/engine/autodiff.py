"""SlangFunction: a plain Slang function called from Python, vectorised over numpy arrays.

Calls, `fwd_diff` and `bwd_diff` all go through generated Slang wrapper kernels (one thread per
element), so every backend runs them the same way it runs user kernels.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Protocol, Sequence

import numpy as np

from .. import hooks, scanner
from ..backends import Backend
from ..backends.common.packing import element_dtype
from .cells import Cell
from ..compiled import CompiledKernel, CompileRequest
from ..compiler.reflection import FunctionInfo
from ..errors import ParameterError
from .finite import check_gradients
from .protocols import FunctionService

__all__ = ["GradCheck", "SlangFunction"]


ENTRY = "sk_entry"
GROUP = 64
_FLOATY = re.compile(r"^(float|half|double)(\d(x\d)?)?$")


@dataclass(frozen=True)
class GradCheck:
    """Autodiff gradients against central finite differences, per differentiable input."""

    names: tuple[str, ...]
    autodiff: tuple[np.ndarray, ...]
    numeric: tuple[np.ndarray, ...]
    max_abs_error: tuple[float, ...]
    ok: tuple[bool, ...]

    @property
    def passed(self) -> bool:
        return all(self.ok)


def _is_tensor(value: object) -> bool:
    """A torch tensor, known without importing torch (the one test before handing over to slang_kernel.torch)."""
    return type(value).__module__.startswith("torch")


_SLANG_SCALAR = re.compile(r"^(bool|int|uint|float|half|double|int64_t|uint64_t|int16_t|uint16_t|int8_t|uint8_t)"
                           r"(?:(\d)(?:x(\d))?)?$")
_KIND = {"bool": "b", "int": "i", "uint": "u", "float": "f", "half": "f", "double": "f"}


def _arg_dtype(value: Any) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """A Python argument's element type as Slang would type the literal: a Python float is float, an
    int is int (numpy values keep their own dtype)."""
    if isinstance(value, bool):
        return np.dtype(np.bool_), ()
    if isinstance(value, int):
        return np.dtype(np.int32), ()
    if isinstance(value, float):
        return np.dtype(np.float32), ()
    a = np.asarray(value)
    return a.dtype, a.shape


def _describe_arg(value: Any) -> str:
    dt, shape = _arg_dtype(value)
    return f"{dt}{list(shape) if shape else ''}"


def _conversion_cost(value: Any, slang_type: str) -> float:
    """How far an argument is from a parameter type: 0 exact, 1 same kind of another size, 2 a
    conversion (int to float...), inf when the shape cannot fit (a vector for a scalar). Types this
    cannot read (structs, generics) cost 1: the compiler has the last word."""
    m = _SLANG_SCALAR.match(" ".join(slang_type.split()))
    if m is None:
        return 1
    base, n, cols = m.groups()
    want_shape = (int(n), int(cols)) if cols else (int(n),) if n else ()
    dt, shape = _arg_dtype(value)
    if dt.kind not in "biuf":
        return math.inf
    if want_shape and tuple(shape[len(shape) - len(want_shape):]) != want_shape:
        return math.inf
    want_kind = _KIND.get(base, "i" if base.startswith("int") else "u")
    want_size = {"half": 2, "double": 8, "bool": 1}.get(base, 8 if "64" in base else 2 if "16" in base
                                                       else 1 if "8_t" in base else 4)
    if dt.kind == want_kind:
        return 0 if dt.itemsize == want_size else 1
    return 2


class SlangFunction:
    """Call with numpy arrays (broadcast like numpy); `.fwd` and `.bwd` give derivatives."""

    def __init__(self, session: FunctionService, name: str) -> None:
        self.session = session
        self.name = name
        self._last: dict[tuple[str, str, str, int], tuple[CompiledKernel, list[tuple[str, str, str]]]] = {}
        self.timings: list[Any] | None = None   # Profile views; while a list: each dispatch profiled into it (.profile)

    # -- introspection ------------------------------------------------------------------------------

    def overloads(self) -> tuple[FunctionInfo, ...]:
        return self.session.function_info(self.name)[1]

    def info(self, nargs: int | None = None, args: Sequence[Any] | None = None) -> FunctionInfo:
        """The overload a call with `nargs` arguments reaches, as Slang picks it: by argument count,
        then (given the arguments) the fewest conversions; a tie is ambiguous, as in Slang."""
        fns = self.overloads()
        if nargs is None:
            return fns[0]
        inputs = [f for f in fns if sum(d != "out" for _, _, d in f.params) == nargs]
        if not inputs:
            sigs = "; ".join(f.signature for f in fns)
            counts = sorted({sum(d != "out" for *_, d in f.params) for f in fns})
            raise TypeError(f"{self.name}() takes {' or '.join(map(str, counts))} argument(s), got {nargs}. "
                            f"Signature{'s' if len(fns) > 1 else ''}: {sigs}")
        if len(inputs) == 1 or args is None:
            return inputs[0]
        costs = [sum(_conversion_cost(a, t) for a, (_, t, _) in zip(args, [p for p in f.params if p[2] != "out"]))
                 for f in inputs]
        best = min(costs)
        if best == math.inf:
            raise TypeError(f"{self.name}(): no overload takes arguments {', '.join(_describe_arg(a) for a in args)}; "
                            f"overloads: {'; '.join(f.signature for f in inputs)}")
        winners = [f for f, c in zip(inputs, costs) if c == best]
        if len(winners) > 1:
            raise TypeError(f"{self.name}(): ambiguous call with {', '.join(_describe_arg(a) for a in args)}: "
                            f"{'; '.join(f.signature for f in winners)} fit equally; pass numpy arrays of "
                            "the parameter types (e.g. np.float32(1.0), np.int32(1))")
        return winners[0]

    @property
    def signature(self) -> str:
        return "; ".join(f.signature for f in self.overloads())

    def __repr__(self) -> str:
        try:
            return f"<SlangFunction {self.signature}>"
        except Exception as exc:
            return f"<SlangFunction {self.name} [{type(exc).__name__}]>"

    def differentiable_params(self, fn: FunctionInfo) -> list[int]:
        return [i for i, (n, t, d) in enumerate(fn.params)
                if d != "out" and n not in fn.no_diff and self._is_diff_type(t)]

    def _is_diff_type(self, tname: str) -> bool:
        if _FLOATY.match(tname):
            return True
        for cell_name in self.session.cells:
            cell = self.session.cell(cell_name)
            if "IDifferentiable" in scanner.conformances(cell.source, tname):
                return True
        return False

    # -- wrapper generation ---------------------------------------------------------------------------

    def _wrapper(self, fn: FunctionInfo, mode: str) -> tuple[str, list[tuple[str, str, str]]]:
        """Slang source of a one-thread-per-element kernel, and its buffers (name, role, Slang type)."""
        diff = set(self.differentiable_params(fn)) if mode != "call" else set()
        if mode != "call" and not fn.differentiable:
            raise TypeError(f"{self.name} is not [Differentiable]: mark it so to use .{mode}()")
        if mode != "call" and not diff:
            raise TypeError(f"{self.name} has no differentiable inputs (float-based, not no_diff)")
        bufs: list[tuple[str, str, str]] = []
        pre, args, post = [], [], []
        for i, (pname, t, d) in enumerate(fn.params):
            a = f"sk_a{i}"
            if d != "out":
                bufs.append((a, f"in:{i}", t))
            if mode == "call":
                if d == "in":
                    args.append(f"{a}[sk_i]")
                else:
                    init = "{}" if d == "out" else f"{a}[sk_i]"  # out: a default value; inout: the input
                    pre.append(f"{t} sk_v{i} = {init};")
                    args.append(f"sk_v{i}")
                    bufs.append((f"sk_o{i}", f"out:{i}", t))
                    post.append(f"sk_o{i}[sk_i] = sk_v{i};")
            elif i in diff:
                if mode == "fwd":
                    bufs.append((f"sk_d{i}", f"tangent:{i}", t))
                    args.append(f"diffPair({a}[sk_i], sk_d{i}[sk_i])")
                else:
                    pre.append(f"var sk_p{i} = diffPair({a}[sk_i]);")
                    args.append(f"sk_p{i}")
                    bufs.append((f"sk_g{i}", f"grad:{i}", t))
                    post.append(f"sk_g{i}[sk_i] = sk_p{i}.d;")
            else:
                if d != "in":
                    raise TypeError(f"{self.name}: .{mode}() supports only `in` parameters ({pname} is {d})")
                args.append(f"{a}[sk_i]")
        call = ", ".join(args)
        has_result = fn.result not in ("void", "")
        if mode == "call":
            body = f"sk_r[sk_i] = {self.name}({call});" if has_result else f"{self.name}({call});"
            if has_result:
                bufs.append(("sk_r", "result", fn.result))
        elif mode == "fwd":
            body = f"var sk_res = fwd_diff({self.name})({call}); sk_r[sk_i] = sk_res.p; sk_rd[sk_i] = sk_res.d;"
            bufs += [("sk_r", "result", fn.result), ("sk_rd", "result_d", fn.result)]
        else:
            if has_result:
                bufs.append(("sk_dout", "grad_out", fn.result))
                call = f"{call}, sk_dout[sk_i]" if call else "sk_dout[sk_i]"
            body = f"bwd_diff({self.name})({call});"
        decls = "".join(
            f"uniform {'RW' if role.split(':')[0] in ('out', 'result', 'result_d', 'grad') else ''}"
            f"StructuredBuffer<{t}> {b}, " for b, role, t in bufs)
        lines = [
            f'[shader("compute")][numthreads({GROUP}, 1, 1)]',
            f"void {ENTRY}(uint3 sk_tid: SV_DispatchThreadID, {decls}uniform uint sk_n)",
            "{",
            "    uint sk_i = sk_tid.x;",
            "    if (sk_i >= sk_n) return;",
            *("    " + p for p in pre),
            "    " + body,
            *("    " + p for p in post),
            "}",
        ]
        return "\n".join(lines) + "\n", bufs

    def _compile(self, fn: FunctionInfo, mode: str, target: str | None = None) -> tuple[CompiledKernel, list[tuple[str, str, str]]]:
        """The wrapper kernel for the function's current revision (re-run cells take effect)."""
        s = self.session
        target = target or s.backend.target
        fast = (fn.signature, mode, target, s.revision)
        hit = self._last.get(fast)
        if hit is not None:
            return hit
        body, bufs = self._wrapper(fn, mode)
        owner, _ = s.function_info(self.name)
        req = s.request("compile", source=body, upto=owner.name, what=f"{self.name}.{mode} wrapper",
                        entries=[ENTRY], target=target)
        ck = s.compile(req)[ENTRY]
        if len(self._last) > 16:
            self._last.clear()
        self._last[fast] = (ck, bufs)
        return ck, bufs

    def code(self, target: str = "hlsl", mode: str = "call") -> str:
        return self._compile(self.info(), mode, target)[0].code

    # -- running ------------------------------------------------------------------------------------

    def _run(self, fn: FunctionInfo, mode: str, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        ck, bufs = self._compile(fn, mode)
        params = {p.name: p for p in ck.entry_point.uniforms}
        elem: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
        for b, _, _ in bufs:
            t = params[b].type
            if t.element is None:
                raise ParameterError(f"{self.name}: cannot map {t.name} to numpy")
            elem[b] = element_dtype(t.element)
        xp: Any = np
        if any(hasattr(v, "__cuda_array_interface__") for v in inputs.values()):
            import cupy   # device arrays (CuPy views of CUDA tensors): broadcast and allocate on the device

            xp = cupy
        arrays: dict[str, np.ndarray] = {}
        batch: list[tuple[int, ...]] = []
        for b, value in inputs.items():
            dt, shp = elem[b]
            try:
                arr = xp.asarray(value, dtype=dt) if dt.fields is None else np.asarray(value)
            except (TypeError, ValueError):
                raise ParameterError(f"{self.name}: argument for {params[b].type.element.name} "  # type: ignore[union-attr]
                                     f"could not be converted to {dt}") from None
            if shp and tuple(arr.shape[arr.ndim - len(shp):]) != shp:
                raise ParameterError(f"{self.name}: an argument of Slang type {params[b].type.element.name} "  # type: ignore[union-attr]
                                     f"needs trailing shape {shp}; got {arr.shape}")
            arrays[b] = arr
            batch.append(arr.shape[: arr.ndim - len(shp)])
        try:
            shape = np.broadcast_shapes(*batch) if batch else ()
        except ValueError:
            raise ParameterError(f"{self.name}: argument shapes {batch} do not broadcast together") from None
        n = math.prod(shape)
        values: dict[str, Any] = {"sk_n": np.uint32(n)}
        for b, arr in arrays.items():
            _, shp = elem[b]
            values[b] = xp.ascontiguousarray(xp.broadcast_to(arr, shape + shp)).reshape((n,) + shp)
        outputs = {}
        for b, role, _ in bufs:
            if b not in values:
                dt, shp = elem[b]
                outputs[b] = xp.zeros((max(n, 1),) + shp, dt)
                values[b] = outputs[b]
        if n:
            s = self.session
            if self.timings is None:
                s.backend.dispatch(ck, (math.ceil(n / GROUP), 1, 1), values)
            else:   # profiled: SlangFunction.profile, slang_kernel.torch.debug.dispatch_times
                p = hooks.view(hooks.PROFILE_DISPATCH)(s.backend, ck, (math.ceil(n / GROUP), 1, 1), values)
                self.timings.append(replace(p, kernel=f"{self.name}.{mode}"))
        return {b: a[:n].reshape(shape + elem[b][1]) for b, a in outputs.items()}

    def _bind_args(self, args: Sequence[Any], fn: FunctionInfo) -> dict[int, Any]:
        idx = [i for i, (_, _, d) in enumerate(fn.params) if d != "out"]
        return dict(zip(idx, args))

    def _untorch(self, args: tuple[Any, ...], host: bool = False) -> tuple[Any, ...]:
        """Tensor arguments checked and as arrays (slang_kernel.torch; torch is imported only if one is
        here): views on the backend's device, or numpy arrays where `host`."""
        if not any(_is_tensor(a) or isinstance(a, tuple) and any(map(_is_tensor, a)) for a in args):
            return args
        from ..torch.autograd import plain_args

        return tuple(plain_args(self, args, grad_ok=True, host=host))

    def __call__(self, *args: Any) -> Any:
        """Results as numpy arrays; with torch tensors, as tensors, in torch's autograd graph where a
        differentiable input requires grad (slang_kernel.torch.autograd)."""
        if any(_is_tensor(a) for a in args):
            from ..torch.autograd import call

            return call(self, args)
        fn = self.info(len(args), args)
        given = self._bind_args(args, fn)
        out = self._run(fn, "call", {f"sk_a{i}": v for i, v in given.items()})
        results = ([out["sk_r"]] if "sk_r" in out else []) + [out[k] for k in sorted(out) if k.startswith("sk_o")]
        return results[0] if len(results) == 1 else tuple(results)

    def fwd(self, *args: Any) -> tuple[np.ndarray, np.ndarray]:
        """Forward mode: each differentiable input as (primal, tangent) (a plain value means tangent 0).
        Returns (value, directional derivative)."""
        args = self._untorch(args, host=True)
        fn = self.info(len(args))
        diff = set(self.differentiable_params(fn))
        inputs: dict[str, Any] = {}
        for i, v in self._bind_args(args, fn).items():
            if i in diff:
                p, d = v if isinstance(v, tuple) and len(v) == 2 else (v, np.zeros_like(np.asarray(v, np.float32)))
                inputs[f"sk_a{i}"], inputs[f"sk_d{i}"] = p, d
            else:
                inputs[f"sk_a{i}"] = v
        out = self._run(fn, "fwd", inputs)
        return out["sk_r"], out["sk_rd"]

    def bwd(self, *args: Any, grad_out: Any = 1.0, check_finite: bool | None = None) -> Any:
        """Reverse mode: gradients of each differentiable input (a tuple if several), scaled by grad_out.
        check_finite (default: the session's): raise NonFiniteError naming the first input whose
        gradient holds a NaN/Inf (slang_kernel.engine.finite)."""
        args = self._untorch(args)
        if _is_tensor(grad_out):
            from ..torch.tensors import to_array

            grad_out = to_array(grad_out, self.session.backend.name)
        fn = self.info(len(args))
        inputs = {f"sk_a{i}": v for i, v in self._bind_args(args, fn).items()}
        if fn.result not in ("void", ""):
            inputs["sk_dout"] = grad_out
        out = self._run(fn, "bwd", inputs)
        diff = self.differentiable_params(fn)
        grads = [out[f"sk_g{i}"] for i in diff]
        if check_finite or (check_finite is None and self.session.finite.enabled):
            check_gradients(self.name, [fn.params[i][0] for i in diff], grads)
        return grads[0] if len(grads) == 1 else tuple(grads)

    def profile(self, *args: Any, mode: str = "call", grad_out: Any = 1.0) -> Any:
        """One call (mode "call") or `.bwd` (mode "bwd"), its dispatch split into bind/upload, run and
        readback (a slang_kernel.views.profiling.Profile); arrays or tensors. A training loop: torch.debug.dispatch_times."""
        from ..torch.debug import profile_function

        return profile_function(self, args, mode, grad_out)

    def check_grad(self, *args: Any, eps: float = 1e-3, rtol: float = 1e-2, atol: float = 1e-3) -> GradCheck:
        """Compare .bwd with central finite differences of the primal, for scalar float inputs."""
        args = self._untorch(args, host=True)
        fn = self.info(len(args))
        diff = self.differentiable_params(fn)
        auto = self.bwd(*args)
        auto = auto if isinstance(auto, tuple) else (auto,)
        numeric, errs, oks = [], [], []
        for k, i in enumerate(diff):
            x = np.asarray(args[i], np.float64)
            plus = list(args)
            minus = list(args)
            plus[i] = (x + eps).astype(np.float32)
            minus[i] = (x - eps).astype(np.float32)
            num = (np.asarray(self(*plus), np.float64) - np.asarray(self(*minus), np.float64)) / (2 * eps)
            if num.shape != np.shape(auto[k]):
                num = np.broadcast_to(num, np.shape(auto[k]))
            err = float(np.max(np.abs(num - auto[k]))) if np.size(num) else 0.0
            numeric.append(num)
            errs.append(err)
            oks.append(bool(np.allclose(auto[k], num, rtol=rtol, atol=atol)))
        names = tuple(fn.params[i][0] for i in diff)
        return GradCheck(names, tuple(auto), tuple(numeric), tuple(errs), tuple(oks))


