"""Engine side of visual autodiff debugging: per-input gradient checks and the data-flow graph.

* :func:`gradient_report` - per input: primal value, ``bwd_diff`` gradient, ``fwd_diff`` directional
  derivatives (one-hot tangents per component) and central finite differences per component, so a
  vector input gets a per-component check (``SlangFunction.check_grad`` perturbs all components of
  a vector at once and is meant for scalar inputs).
* :func:`flow_graph` - the function's data-flow graph (instruction level) with inputs, no_diff
  parameters, ``no_diff``/[TreatAsDifferentiable] calls and calls of custom derivatives marked.
* :func:`flow_values` - per node of that graph, its value and its derivative at the checked inputs
  (``flow_eval``), so a broken derivative is seen at the node where it starts, and the first node
  whose value or derivative is not finite (where a NaN/Inf starts).

The IR views these build on (and the IRGraph widget's data) are in :mod:`.ir_views`; its names are
re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .flow_eval import Callee, Inst, evaluate_flow, json_floats, split_args, value_rank, vector_size
from .ir import AUTODIFF_OPS, IRFunction, parse_ir
from .ir_graph import to_graph
from .ir_views import (AUTODIFF_PASS, KNOWN_PASSES, IRViews, function_data, graph_data_from_views, ir_graph_data,
                       ir_views, is_function)

if TYPE_CHECKING:
    from ..engine.autodiff import SlangFunction
    from ..engine.session import Session

__all__ = [
    "AUTODIFF_PASS", "KNOWN_PASSES", "IRViews", "InputGrad", "GradientReport",
    "ir_views", "ir_graph_data", "graph_data_from_views", "function_data", "gradient_report", "flow_graph",
    "flow_values", "first_nonfinite_node",
]

_VEC = re.compile(r"^(float|half|double)(\d)?(?:x(\d))?$")


# -- gradient checks --------------------------------------------------------------------------------

@dataclass
class InputGrad:
    """One input of a gradient check. ``kind``: "diff", "no_diff" (marked so) or "nondiff" (its type)."""

    name: str
    type: str
    kind: str
    value: np.ndarray
    bwd: np.ndarray | None = None        # gradient from bwd_diff (times grad_out)
    fwd: np.ndarray | None = None        # directional derivatives from fwd_diff, one-hot tangent per component
    numeric: np.ndarray | None = None    # central finite differences, per component
    abs_error: np.ndarray | None = None  # |bwd - numeric|
    bad: np.ndarray | None = None        # bool per element/component: outside tolerance
    max_abs_error: float = 0.0
    ok: bool | None = None               # None: not checked (not differentiable, or not a float type)
    fwd_ok: bool | None = None           # fwd_diff agrees with bwd_diff

    def to_json(self) -> dict[str, Any]:
        def arr(a: np.ndarray | None) -> Any:
            return None if a is None else json_floats(a)
        return {"name": self.name, "type": self.type, "kind": self.kind, "value": arr(self.value),
                "bwd": arr(self.bwd), "fwd": arr(self.fwd), "numeric": arr(self.numeric),
                "abs_error": arr(self.abs_error), "bad": None if self.bad is None else np.asarray(self.bad).tolist(),
                "max_abs_error": json_floats(self.max_abs_error), "ok": self.ok, "fwd_ok": self.fwd_ok}


@dataclass
class GradientReport:
    """bwd_diff / fwd_diff / finite differences of one function at one point (or batch of points)."""

    function: str
    signature: str
    result: np.ndarray
    grad_out: np.ndarray
    inputs: list[InputGrad]
    eps: float
    rtol: float
    atol: float

    @property
    def flagged(self) -> list[str]:
        """Names of the inputs whose autodiff gradient disagrees with finite differences."""
        return [i.name for i in self.inputs if i.ok is False]

    @property
    def passed(self) -> bool:
        return not self.flagged

    def input(self, name: str) -> InputGrad:
        return next(i for i in self.inputs if i.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "signature": self.signature,
                "result": json_floats(self.result), "grad_out": json_floats(self.grad_out),
                "inputs": [i.to_json() for i in self.inputs], "flagged": self.flagged,
                "eps": self.eps, "rtol": self.rtol, "atol": self.atol}


def _elem_shape(t: str) -> tuple[int, ...] | None:
    m = _VEC.match(t)
    if not m:
        return None
    return tuple(int(x) for x in m.groups()[1:] if x)


def _project(res: np.ndarray, g: np.ndarray, rshape: tuple[int, ...]) -> np.ndarray:
    """<g, res> over the result's own components: one number per batch element."""
    prod = np.asarray(res, np.float64) * g
    return prod.sum(axis=tuple(range(prod.ndim - len(rshape), prod.ndim))) if rshape else prod


def gradient_report(fn: "SlangFunction", *args: Any, grad_out: Any = None, eps: float = 1e-3,
                    rtol: float = 1e-2, atol: float = 1e-3) -> GradientReport:
    """Check every differentiable input of `fn` at `args`: bwd_diff vs central finite differences,
    per component, plus fwd_diff with one-hot tangents. Flags exactly the inputs that disagree."""
    from ..torch.debug import host_inputs   # tensors (a training loop's parameters) as host arrays

    args, grad_out = host_inputs(fn, args, grad_out)
    info = fn.info(len(args))
    if not info.differentiable:
        raise TypeError(f"{fn.name} is not [Differentiable]: mark it so to check its gradients")
    diff = fn.differentiable_params(info)
    idx = [i for i, (_, _, d) in enumerate(info.params) if d != "out"]
    by_param = dict(zip(idx, args))
    result = np.asarray(fn(*args))
    rshape = _elem_shape(info.result) or ()
    g = np.ones_like(result, np.float64) if grad_out is None else np.broadcast_to(
        np.asarray(grad_out, np.float64), result.shape)
    grads = fn.bwd(*args, grad_out=g.astype(np.float32)) if diff else ()
    grads = grads if isinstance(grads, tuple) else (grads,)
    inputs: list[InputGrad] = []
    k = 0
    for i in idx:
        pname, t, _ = info.params[i]
        value = np.asarray(by_param[i])
        if i not in diff:
            kind = "no_diff" if pname in info.no_diff and fn._is_diff_type(t) else "nondiff"
            inputs.append(InputGrad(pname, t, kind, value))
            continue
        auto = np.asarray(grads[k], np.float64)
        k += 1
        ig = InputGrad(pname, t, "diff", value, bwd=auto)
        eshape = _elem_shape(t)
        if eshape is None:  # a struct type: autodiff only
            inputs.append(ig)
            continue
        x = np.asarray(value, np.float64)
        base = np.broadcast_to(x, auto.shape).copy()
        numeric = np.zeros(auto.shape)
        fwd = np.zeros(auto.shape)
        comps = list(np.ndindex(*eshape)) if eshape else [()]
        for c in comps:
            sl = (Ellipsis, *c)
            onehot = np.zeros(auto.shape, np.float32)
            onehot[sl] = 1.0
            h = eps * np.maximum(1.0, np.abs(base[sl]))
            plus, minus = base.copy(), base.copy()
            plus[sl] += h
            minus[sl] -= h
            a_plus, a_minus = list(args), list(args)
            pos = idx.index(i)
            a_plus[pos], a_minus[pos] = plus.astype(np.float32), minus.astype(np.float32)
            f_plus = _project(np.asarray(fn(*a_plus)), g, rshape)
            f_minus = _project(np.asarray(fn(*a_minus)), g, rshape)
            numeric[sl] = (f_plus - f_minus) / (2 * h)
            fargs = [(a, np.zeros_like(np.asarray(a, np.float32))) if j in diff and j != i else a
                     for j, a in zip(idx, args)]
            fargs[pos] = (base.astype(np.float32), onehot)
            _, d = fn.fwd(*fargs)
            fwd[sl] = _project(np.asarray(d), g, rshape)
        ig.numeric, ig.fwd = numeric, fwd
        ig.abs_error = np.abs(auto - numeric)
        ig.bad = ~np.isclose(auto, numeric, rtol=rtol, atol=atol)
        ig.max_abs_error = float(ig.abs_error.max()) if ig.abs_error.size else 0.0
        ig.ok = not bool(ig.bad.any())
        ig.fwd_ok = bool(np.allclose(fwd, auto, rtol=1e-3, atol=1e-5))
        inputs.append(ig)
    return GradientReport(fn.name, info.signature, result, g, inputs, eps, rtol, atol)


# -- data-flow graph of a function ------------------------------------------------------------------

def flow_graph(session: "Session", name: str, views: IRViews | None = None) -> dict[str, Any]:
    """Instruction-level data-flow graph of `name` (from the ``-g`` module IR) for GradientFlow.

    Nodes: params (``param``: the input's index), instructions, with ``marks`` among "no_diff"
    (parameter or call), "treat_as_differentiable" (callee has [TreatAsDifferentiable]),
    "custom_derivative" (callee has a user-written derivative), "output" (returned value).
    """
    v = views or ir_views(session, name, autodiff=False)
    mod = parse_ir(v.views["module"])
    f = mod.function(name)
    if f is None:
        return {"nodes": [], "edges": [], "function": name}
    g = to_graph(mod, f.id, level="instruction")
    links = to_graph(mod, level="function")
    dnodes = {n["id"]: n for n in links["nodes"]}
    custom = {e["target"] for e in links["edges"] if e["kind"] == "derivative"
              and dnodes.get(e["source"], {}).get("opcode") not in AUTODIFF_OPS}
    funcs = {x.id: x for x in mod.functions}
    params = [p for p in (f.blocks[0].params if f.blocks else ())]
    pindex = {p.id: k for k, p in enumerate(params)}
    insts = {f"{f.id}:{i.id or 'L%d' % i.line}": i for b in f.blocks for i in (*b.params, *b.insts)}
    returned = {e["source"] for e in g["edges"]
                if insts.get(e["target"]) is not None and insts[e["target"]].opcode == "return_val"}

    def callee_of(i) -> IRFunction | None:
        cid = i.callee
        seen = 0
        while cid and cid in {x.id for x in mod.globals} and seen < 8:
            gl = next(x for x in mod.globals if x.id == cid)
            cid = gl.operands[0] if gl.opcode == "specialize" and gl.operands else None
            seen += 1
        fn = funcs.get(cid or "")
        if fn is not None and fn.kind == "generic":
            fn = next((x for x in mod.funcs if x.parent == fn.id), fn)
        return fn

    for n in g["nodes"]:
        i = insts.get(n["id"])
        marks = []
        if i is None:
            continue
        if n["kind"] == "param" and i.id in pindex and n["block"] == f.blocks[0].label:
            n["param"] = pindex[i.id]
            n["name"] = i.name or i.id
            if (i.type or "").startswith("Attributed("):
                marks.append("no_diff")
        if any("treatCallAsDifferentiable" in d or d == "TreatAsDifferentiable" for d, _ in i.decorations):
            marks.append("no_diff")
        if i.opcode == "call":
            c = callee_of(i)
            if c is not None:
                n["callee"] = c.name
                if any("treatasdifferentiable" in d.lower() for d, _ in c.decorations):
                    marks.append("treat_as_differentiable")
                if c.id in custom:
                    marks.append("custom_derivative")
        if n["id"] in returned:
            marks.append("output")
        if i.loc and i.loc.path in (v.cell, None):
            n["loc"] = [i.loc.line - v.line_offset, i.loc.column]
        else:
            n["loc"] = None
        n["marks"] = marks
    return {"function": name, "cell": v.cell, "source": v.source, "nodes": g["nodes"], "edges": g["edges"]}


def flow_values(fn: "SlangFunction", *args: Any, grad_out: Any = None, views: IRViews | None = None,
                graph: dict[str, Any] | None = None, rtol: float = 1e-2, atol: float = 1e-3) -> dict[str, Any]:
    """Per node of ``flow_graph(fn.name)``: its value, its adjoint through the compiler's derivatives
    (``grad``), the same by finite differences of the primal (``numeric``), ``bad`` where they differ
    (see :mod:`.flow_eval`). Returns {"nodes": {node id: NodeValue.to_json()}, "note": str | None}."""
    from ..torch.debug import host_inputs   # tensors (a training loop's parameters) as host arrays

    args, grad_out = host_inputs(fn, args, grad_out)
    session = fn.session
    v = views or ir_views(session, fn.name, autodiff=False)  # type: ignore[arg-type]
    g = graph or flow_graph(session, fn.name, v)  # type: ignore[arg-type]
    f = parse_ir(v.views["module"]).function(fn.name)
    if f is None or not f.blocks:
        return {"nodes": {}, "note": f"no IR body for {fn.name}"}
    if len(f.blocks) > 1:
        return {"nodes": {}, "note": f"{fn.name} has control flow ({len(f.blocks)} blocks): node values are "
                                     "shown for straight-line functions only"}
    key = {i.id or f"L{i.line}": f"{f.id}:{i.id or 'L%d' % i.line}" for i in (*f.blocks[0].params, *f.blocks[0].insts)}
    nodes = {n["id"]: n for n in g.get("nodes", [])}
    callee_name = {k: n.get("callee") for k, n in nodes.items()}
    inputs = f.blocks[0].params
    if len(inputs) != len(args):
        return {"nodes": {}, "note": f"{fn.name}: {len(inputs)} IR parameters for {len(args)} arguments"}
    params = {p.id or "": (np.asarray(a, np.float64), value_rank(p.type)) for p, a in zip(inputs, args)}
    insts: list[Inst] = []
    callees: dict[str, Callee] = {}
    cdiff: dict[str, list[int]] = {}
    output: str | None = None
    for i in f.blocks[0].insts:
        if i.opcode.startswith("Debug") or not i.id and i.opcode != "return_val":
            continue
        if i.opcode == "return_val":
            output = i.operands[0] if i.operands else None
            continue
        name = callee_name.get(key.get(i.id or "", ""))
        if i.opcode == "call" and name and is_function(session, name):  # type: ignore[arg-type]
            c = type(fn)(session, name)   # the callee as a SlangFunction of the same session
            callees[name] = c
            cdiff[name] = c.differentiable_params(c.info(len(split_args(i.args))))
        node = nodes.get(key.get(i.id or "", ""), {})
        insts.append(Inst(i.id or "", i.opcode, name, tuple(split_args(i.args)), value_rank(i.type),
                          "no_diff" in node.get("marks", ()), vector_size(i.type)))
    if output is None:
        return {"nodes": {}, "note": f"{fn.name} returns no value"}
    gout = np.float64(1.0) if grad_out is None else np.asarray(grad_out, np.float64)
    no_diff = [p.id or "" for p in inputs if "no_diff" in nodes.get(key.get(p.id or "", ""), {}).get("marks", ())]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):   # a NaN/Inf is reported, not warned
        vals = evaluate_flow(insts, params, output, gout, callees, cdiff, no_diff=no_diff, rtol=rtol, atol=atol)
    first = first_nonfinite_node([(key.get(k, f"{f.id}:{k}"), nv.value, nv.grad) for k, nv in vals.items()])
    return {"nodes": {key.get(k, f"{f.id}:{k}"): nv.to_json() for k, nv in vals.items()}, "note": None,
            "first_nonfinite": first}


def first_nonfinite_node(nodes: Sequence[tuple[str, Any, Any]]) -> dict[str, str] | None:
    """Where a NaN/Inf starts, given (node, value, derivative) in evaluation order: the first node
    whose value is not finite; when every value is, the first whose derivative is not, in the order
    backpropagation reaches them (the reverse one). {"node", "what": "value"|"derivative", "kind"}."""
    def bad(a: Any) -> str | None:
        if a is None:
            return None
        x = np.asarray(a, np.float64)
        if np.isfinite(x).all():
            return None
        return "NaN" if np.isnan(x).any() else "inf"

    for node, value, _ in nodes:
        kind = bad(value)
        if kind:
            return {"node": node, "what": "value", "kind": kind}
    for node, _, grad in reversed(nodes):
        kind = bad(grad)
        if kind:
            return {"node": node, "what": "derivative", "kind": kind}
    return None

