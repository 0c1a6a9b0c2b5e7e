"""Values and derivatives at every node of a function's data-flow graph, for GradientFlow.

The graph (``gradients.flow_graph``) is the function's ``-g`` IR, one node per instruction. A gradient
check says *which input* is wrong; this says *where*: it replays the function's straight-line IR on the
checked inputs, node by node, and gives each node

* ``value``: its primal value;
* ``grad``: the adjoint d<grad_out, result>/d(node), propagated backwards from the output. Calls of the
  cell's own functions go through the compiler's ``bwd_diff`` of the callee (so a wrong custom derivative
  shows up exactly at the operands of its call); arithmetic and intrinsics through local partials taken
  by central differences in float64;
* ``numeric``: the same adjoint by central finite differences of the *primal* from that node on.

A node whose ``grad`` and ``numeric`` disagree is ``bad``: the first such nodes on the way back from
the output sit right after the broken derivative. Primal values of the cell's own functions come from
the compiled function (the real compiler and backend), those of arithmetic and intrinsics from numpy.
Functions with control flow (several blocks) are not replayed (``note`` says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from .. import scanner

__all__ = ["NodeValue", "Callee", "Inst", "evaluate_flow", "json_floats", "split_args", "value_rank", "vector_size", "INTRINSICS"]


class Callee(Protocol):
    """A cell function the replay calls: primal and reverse mode (a SlangFunction fits)."""

    def __call__(self, *args: Any) -> Any: ...

    def bwd(self, *args: Any, grad_out: Any = 1.0) -> Any: ...


@dataclass(frozen=True)
class NodeValue:
    """What one graph node computed for the checked inputs (arrays: batch shape + element shape)."""

    value: np.ndarray | None
    grad: np.ndarray | None = None
    numeric: np.ndarray | None = None
    bad: bool = False
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        def arr(a: np.ndarray | None) -> Any:
            return None if a is None else json_floats(a)
        return {"value": arr(self.value), "grad": arr(self.grad), "numeric": arr(self.numeric),
                "bad": self.bad, "note": self.note}


def json_floats(a: Any) -> Any:
    """Numbers as JSON can carry them: rounded lists, a NaN/Inf as the string "nan"/"inf"/"-inf"
    (JSON has none; the browser shows the string)."""
    x = np.asarray(a, np.float64).round(8)
    if np.isfinite(x).all():
        return x.tolist()

    def one(v: float) -> Any:
        return v if np.isfinite(v) else ("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    if x.ndim == 0:
        return one(float(x))
    return np.vectorize(one, otypes=[object])(x).tolist()


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=-1))


def _length(a: np.ndarray) -> np.ndarray:
    return np.asarray(np.sqrt((a * a).sum(axis=-1)))


#: Intrinsics replayed with numpy: name -> (function, element rank of the result relative to the
#: first operand: 0 same, -1 one axis less (dot, length)).
INTRINSICS: dict[str, tuple[Callable[..., np.ndarray], int]] = {
    "max": (np.maximum, 0), "min": (np.minimum, 0), "abs": (np.abs, 0), "sqrt": (np.sqrt, 0),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0), "exp": (np.exp, 0), "exp2": (np.exp2, 0), "log": (np.log, 0),
    "log2": (np.log2, 0), "log10": (np.log10, 0), "sin": (np.sin, 0), "cos": (np.cos, 0), "tan": (np.tan, 0),
    "asin": (np.arcsin, 0), "acos": (np.arccos, 0), "atan": (np.arctan, 0), "atan2": (np.arctan2, 0),
    "sinh": (np.sinh, 0), "cosh": (np.cosh, 0), "tanh": (np.tanh, 0), "pow": (np.power, 0),
    "clamp": (np.clip, 0), "saturate": (lambda x: np.clip(x, 0.0, 1.0), 0),
    "lerp": (lambda a, b, t: a + (b - a) * t, 0), "floor": (np.floor, 0), "ceil": (np.ceil, 0),
    "dot": (_dot, -1), "length": (_length, -1), "normalize": (lambda a: a / _length(a)[..., None], 0),
}
_ARITH: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
}
_LITERAL = re.compile(r"^\s*(-?[0-9.eE+\-]+|true|false)\s*:\s*\w+")


def split_args(args: str) -> list[str]:
    """Top-level comma split of an instruction's operand text."""
    return scanner.split_commas(args)


def vector_size(t: str | None) -> int:
    """n of an IR ``Vec(Float, n : Int)`` type, else 0."""
    m = re.match(r"^Vec\(\w+, (\d+) : Int\)", (t or "").strip())
    return int(m.group(1)) if m else 0


def value_rank(t: str | None) -> int:
    """Element rank of an IR type: Float 0, Vec(Float, 3 : Int) 1, Mat(...) 2; -1 not a float value."""
    t = (t or "").strip()
    if t.startswith("Attributed("):
        t = t[len("Attributed("):]
    if t.startswith(("Float", "Double", "Half")):
        return 0
    if t.startswith("Vec(") and t[4:].startswith(("Float", "Double", "Half")):
        return 1
    if t.startswith("Mat(") and t[4:].startswith(("Float", "Double", "Half")):
        return 2
    return -1


@dataclass(frozen=True)
class Inst:
    """One replayable instruction: id, opcode, callee name (calls), operand texts, result rank."""

    id: str
    op: str
    callee: str | None
    operands: tuple[str, ...]
    rank: int
    no_diff: bool = False   # a no_diff(...) call: no derivative flows back through it
    size: int = 0           # a vector result's length


def _align(vals: Sequence[np.ndarray], ranks: Sequence[int]) -> list[np.ndarray]:
    """Trailing axes so that a scalar broadcasts against a vector of the same batch."""
    top = max(ranks) if ranks else 0
    return [v.reshape(v.shape + (1,) * (top - r)) if r < top else v for v, r in zip(vals, ranks)]


class _Replay:
    def __init__(self, insts: Sequence[Inst], params: Mapping[str, tuple[np.ndarray, int]],
                 callees: Mapping[str, Callee], callee_diff: Mapping[str, Sequence[int]]) -> None:
        self.insts = list(insts)
        self.params = dict(params)
        self.callees = callees
        self.callee_diff = callee_diff
        self.rank: dict[str, int] = {k: r for k, (_, r) in params.items()}
        for i in insts:
            self.rank[i.id] = i.rank

    def operand(self, env: Mapping[str, np.ndarray], text: str) -> tuple[np.ndarray, int] | None:
        if text.startswith("%"):
            key = text[1:]
            return (env[key], self.rank.get(key, 0)) if key in env else None
        m = _LITERAL.match(text)
        if m:
            lit = m.group(1)
            return np.float64(1.0 if lit == "true" else 0.0 if lit == "false" else float(lit)), 0
        return None

    def apply(self, i: Inst, vals: list[np.ndarray], ranks: list[int]) -> np.ndarray:
        if i.op in _ARITH:
            return np.asarray(_ARITH[i.op](*_align(vals, ranks)), np.float64)
        if i.op == "call" and i.callee is not None and i.callee in self.callees:
            out = self.callees[i.callee](*[np.asarray(v, np.float32) for v in vals])
            return np.asarray(out, np.float64)
        if i.op == "call" and i.callee in INTRINSICS:
            fn, _ = INTRINSICS[i.callee]
            return np.asarray(fn(*_align(vals, ranks)), np.float64)
        if i.op in ("swizzle", "getElement") and vals and ranks[0] == 1:   # v.yz, v[1]
            idx = [int(x) for x in vals[1:]]
            v = np.asarray(vals[0], np.float64)
            return v[..., idx[0]] if len(idx) == 1 and i.rank == 0 else v[..., idx]
        if i.op == "makeVector" and vals and all(r in (0, 1) for r in ranks):   # float3(a, b.xy)
            parts = [np.asarray(v, np.float64) if r else np.asarray(v, np.float64)[..., None] for v, r in zip(vals, ranks)]
            batch = np.broadcast_shapes(*(p.shape[:-1] for p in parts))
            return np.concatenate([np.broadcast_to(p, batch + p.shape[-1:]) for p in parts], axis=-1)
        if i.op == "MakeVectorFromScalar" and len(vals) == 1 and i.size:   # float3(x)
            return np.repeat(np.asarray(vals[0], np.float64)[..., None], i.size, axis=-1)
        raise KeyError(i.op if i.op != "call" else f"call of {i.callee}")

    def forward(self, env: dict[str, np.ndarray], start: int = 0) -> dict[str, str]:
        """Fill `env` from instruction `start` on; returns id -> why it has no value."""
        missing: dict[str, str] = {}
        for i in self.insts[start:]:
            got = [self.operand(env, o) for o in i.operands]
            if any(g is None for g in got):
                missing[i.id] = "an operand has no value"
                env.pop(i.id, None)
                continue
            try:
                env[i.id] = self.apply(i, [g[0] for g in got if g], [g[1] for g in got if g])
            except Exception as exc:  # noqa: BLE001 - an op this replay lacks, a callee that fails
                missing[i.id] = f"not replayed ({type(exc).__name__}: {str(exc)[:200]})"
                env.pop(i.id, None)
        return missing

    def vjp(self, i: Inst, env: Mapping[str, np.ndarray], adj: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """Adjoints of the value operands of `i` given its own adjoint `adj`."""
        got = [self.operand(env, o) for o in i.operands]
        refs = [(k, o[1:]) for k, o in enumerate(i.operands) if o.startswith("%")]
        vals = [g[0] for g in got if g is not None]
        ranks = [g[1] for g in got if g is not None]
        if i.op == "call" and i.callee is not None and i.callee in self.callees:   # the compiler's bwd_diff
            diff = list(self.callee_diff.get(i.callee, ()))
            grads = self.callees[i.callee].bwd(*[np.asarray(v, np.float32) for v in vals],
                                               grad_out=np.asarray(adj, np.float32))
            grads = grads if isinstance(grads, tuple) else (grads,)
            by_pos = dict(zip(diff, grads))
            return [(ref, np.asarray(by_pos[k], np.float64)) for k, ref in refs if k in by_pos]
        out: list[tuple[str, np.ndarray]] = []
        ra = i.rank if i.rank >= 0 else 0
        adj_batch = adj.shape[:adj.ndim - ra]
        for k, ref in refs:
            rk = ranks[k]
            if rk < 0:
                continue
            x = np.asarray(vals[k], np.float64)
            eshape = x.shape[x.ndim - rk:] if rk else ()
            shape = np.broadcast_shapes(x.shape[:x.ndim - rk], adj_batch) + eshape
            base = np.broadcast_to(x, shape)
            g = np.zeros(shape)
            for c in np.ndindex(*eshape):
                sl = (Ellipsis, *c)
                h = 1e-6 * np.maximum(1.0, np.abs(base[sl]))
                plus, minus = base.copy(), base.copy()
                plus[sl] += h
                minus[sl] -= h
                d = (self.apply(i, [*vals[:k], plus, *vals[k + 1:]], ranks)
                     - self.apply(i, [*vals[:k], minus, *vals[k + 1:]], ranks))
                prod = d / (2 * h.reshape(h.shape + (1,) * ra)) * adj
                g[sl] = prod.sum(axis=tuple(range(prod.ndim - ra, prod.ndim))) if ra else prod
            out.append((ref, g))
        return out


def _project(v: np.ndarray, g: np.ndarray, rank: int) -> np.ndarray:
    prod = np.asarray(v, np.float64) * g
    return np.asarray(prod.sum(axis=tuple(range(prod.ndim - rank, prod.ndim)))) if rank else prod


def evaluate_flow(insts: Sequence[Inst], params: Mapping[str, tuple[np.ndarray, int]], output: str,
                  grad_out: np.ndarray, callees: Mapping[str, Callee], callee_diff: Mapping[str, Sequence[int]],
                  *, no_diff: Sequence[str] = (), rtol: float = 1e-2, atol: float = 1e-3,
                  max_numeric: int = 64) -> dict[str, NodeValue]:
    """Replay `insts` (one block, in order) on `params` (id -> (value, element rank)); `output` is the
    returned value's id; `no_diff`: parameters no derivative flows to. Returns id -> NodeValue for
    every parameter and instruction."""
    rp = _Replay(insts, params, callees, callee_diff)
    env: dict[str, np.ndarray] = {k: np.asarray(v, np.float64) for k, (v, _) in params.items()}
    missing = rp.forward(env)
    if output not in env:
        return {k: NodeValue(env.get(k), note=missing.get(k, "the output could not be replayed"))
                for k in [*params, *(i.id for i in insts)]}
    out_rank = rp.rank.get(output, 0)
    g = np.broadcast_to(np.asarray(grad_out, np.float64), env[output].shape)
    adj: dict[str, np.ndarray] = {output: g}
    notes: dict[str, str] = dict(missing)
    for i in reversed(insts):
        if i.id not in adj or i.id not in env:
            continue
        if i.no_diff:
            notes[i.id] = "no_diff: no derivative flows back through it"
            continue
        try:
            for ref, a in rp.vjp(i, env, adj[i.id]):
                adj[ref] = adj[ref] + a if ref in adj else a
        except Exception as exc:  # noqa: BLE001 - e.g. a callee without a derivative
            notes[i.id] = f"no derivative through it ({type(exc).__name__}: {str(exc)[:200]})"
    order = {i.id: n for n, i in enumerate(insts)}
    numeric: dict[str, np.ndarray] = {}
    budget = max_numeric
    for key in [*params, *(i.id for i in insts)]:
        if key not in env or key not in adj or rp.rank.get(key, 0) < 0:
            continue
        x = env[key]
        comps = list(np.ndindex(*x.shape[x.ndim - rp.rank[key]:])) if rp.rank.get(key, 0) else [()]
        budget -= len(comps)
        if budget < 0:
            notes.setdefault(key, "finite differences skipped (too many nodes)")
            continue
        num = np.zeros(np.broadcast_shapes(x.shape, adj[key].shape))
        start = order.get(key, -1) + 1
        for c in comps:
            sl = (Ellipsis, *c)
            base = np.broadcast_to(x, num.shape).copy()
            h = 1e-3 * np.maximum(1.0, np.abs(base[sl]))
            f = []
            for sign in (1, -1):
                e2 = dict(env)
                b = base.copy()
                b[sl] += sign * h
                e2[key] = b
                rp.forward(e2, start)
                f.append(_project(e2[output], g, out_rank) if output in e2 else None)
            if f[0] is None or f[1] is None:
                break
            num[sl] = (f[0] - f[1]) / (2 * h)
        else:
            numeric[key] = num
    for key in no_diff:
        adj.pop(key, None)
        numeric.pop(key, None)
        notes[key] = "no_diff: no derivative flows to it"
    result: dict[str, NodeValue] = {}
    for key in [*params, *(i.id for i in insts)]:
        ga, gn = adj.get(key), numeric.get(key)
        bad = bool(ga is not None and gn is not None and not np.allclose(ga, gn, rtol=rtol, atol=atol))
        note = notes.get(key) or (None if ga is not None or key not in env else "does not reach the output")
        result[key] = NodeValue(env.get(key), ga, gn, bad, note)
    return result
