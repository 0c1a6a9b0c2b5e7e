"""Engine side of visual autodiff debugging: IR views with derivatives, per-input gradient checks.

* :func:`ir_views` - the IR of a function's cell (``-g``, so instructions carry source lines), the
  post-autodiff IR (``-dump-ir-after finalizeAutoDiffPass``: ``s_fwd_*``, ``s_apply_*``,
  ``s_bwdProp_*`` ...) of a generated kernel that calls ``fwd_diff`` and ``bwd_diff`` of it, and
  optionally the IR before/after any other compiler pass.
* :func:`ir_graph_data` - those views as JSON for the IRGraph widget (functions, blocks, instructions,
  def-use operands, CFG edges, source locations mapped to cell lines, derivative relations).
* :func:`gradient_report` - per input: primal value, ``bwd_diff`` gradient, ``fwd_diff`` directional
  derivatives (one-hot tangents per component) and central finite differences per component, so a
  vector input gets a per-component check (``SlangFunction.check_grad`` perturbs all components of
  a vector at once and is meant for scalar inputs).
* :func:`flow_graph` - the function's data-flow graph (instruction level) with inputs, no_diff
  parameters, ``no_diff``/[TreatAsDifferentiable] calls and calls of custom derivatives marked.
* :func:`flow_values` - per node of that graph, its value and its derivative at the checked inputs
  (``flow_eval``), so a broken derivative is seen at the node where it starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .cache import digest
from .cells import Cell
from .compiler.diagnostics import SlangCompileError, parse_diagnostics
from .flow_eval import Callee, Inst, evaluate_flow, split_args, value_rank, vector_size
from .ir import (AUTODIFF_OPS, IRFunction, IRInst, IRModule, _back_edges, classify_autodiff, parse_ir, split_dump,
                 to_graph)

if TYPE_CHECKING:
    from .autodiff import SlangFunction
    from .compiler.reflection import FunctionInfo
    from .session import Session

__all__ = [
    "AUTODIFF_PASS", "KNOWN_PASSES", "IRViews", "InputGrad", "GradientReport",
    "ir_views", "ir_graph_data", "function_data", "gradient_report", "flow_graph", "flow_values",
]

AUTODIFF_PASS = "finalizeAutoDiffPass"
#: Pass names seen in ``-dump-ir`` output (for messages; any pass name the compiler knows works).
KNOWN_PASSES = (
    "finalizeAutoDiffPass", "specializeModule", "finalizeSpecialization", "simplifyIR", "eliminateDeadCode",
    "performForceInlining", "lowerExistentials", "lowerTuples", "legalizeVectorTypes", "legalizeMatrixTypes",
    "eliminatePhis", "checkAutodiffPatterns", "transformParamsToConstRef", "specializeResourceUsage",
)
_ENTRY = "sk_ir_entry"
_VEC = re.compile(r"^(float|half|double)(\d)?(?:x(\d))?$")


# -- IR views ----------------------------------------------------------------------------------------

@dataclass
class IRViews:
    """IR texts of one function's cell: ``views`` maps a title to IR text, in display order."""

    name: str
    cell: str
    source: str
    line_offset: int                      # IR line - line_offset = line in the cell
    views: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _is_function(session: "Session", name: str) -> bool:
    try:
        session.function_info(name)
        return True
    except (KeyError, TypeError):
        return False


def _cell_of(session: "Session", name: str) -> "Cell":
    """The cell `name` names (a cell name, unless a function has that name) or that defines it."""
    if name in session.cells and not _is_function(session, name):
        return session.cell(name)
    return session.owner(name)


def _ad_wrapper(name: str, fn: "FunctionInfo", diff: Sequence[int]) -> str:
    """A kernel that calls fwd_diff and bwd_diff of `name` once (so both get generated)."""
    params, pre, bargs, fargs, post = [], [], [], [], []
    for i, (_, t, d) in enumerate(fn.params):
        if d != "in":
            raise TypeError(f"{name}: only `in` parameters are supported for the autodiff IR view")
        params.append(f"uniform {t} sk_a{i}")
        if i in diff:
            pre.append(f"var sk_p{i} = diffPair(sk_a{i});")
            bargs.append(f"sk_p{i}")
            fargs.append(f"diffPair(sk_a{i}, sk_a{i})")
            params.append(f"uniform RWStructuredBuffer<{t}> sk_g{i}")
            post.append(f"sk_g{i}[0] = sk_p{i}.d;")
        else:
            bargs.append(f"sk_a{i}")
            fargs.append(f"sk_a{i}")
    if fn.result not in ("void", ""):
        params += [f"uniform {fn.result} sk_dout", f"uniform RWStructuredBuffer<{fn.result}> sk_r"]
        bargs.append("sk_dout")
        fwd = f"var sk_res = fwd_diff({name})({', '.join(fargs)}); sk_r[0] = sk_res.p; sk_r[1] = sk_res.d;"
    else:
        fwd = f"fwd_diff({name})({', '.join(fargs)});"
    lines = ['[shader("compute")][numthreads(1, 1, 1)]', f"void {_ENTRY}({', '.join(params)})", "{",
             *pre, f"bwd_diff({name})({', '.join(bargs)});", *post, fwd, "}"]
    return "\n\n" + "\n    ".join(lines) + "\n"


def ir_views(session: "Session", name: str, pass_: str | None = None, *, autodiff: bool = True,
             target: str | None = None) -> IRViews:
    """IR of `name`'s cell (with ``-g``), post-autodiff IR when it is [Differentiable], and
    ``BEFORE pass_`` / ``AFTER pass_`` when a pass is named. `name` may also be a cell name."""
    cell = _cell_of(session, name)
    module = "sk_irv_" + digest(cell.source, cell.digest)[:12]
    req = session.request("disassemble", cell=cell.name, module=module, options=["-g"])
    offset = req.line_offset
    out = IRViews(name, cell.name, cell.source, offset)
    reply = session.call(req)
    if not reply["ok"]:
        raise SlangCompileError(f"could not disassemble {cell.shown}",
                                parse_diagnostics(reply["diagnostics"], {cell.shown: offset}),
                                {cell.shown: cell.source})
    out.views["module"] = reply["ir"]
    fn_info, diff = None, []
    if _is_function(session, name):
        fn_obj = session.function(name)
        fn_info = fn_obj.info()
        diff = fn_obj.differentiable_params(fn_info) if fn_info.differentiable else []
    wrapper = ""
    if autodiff and fn_info is not None and diff:
        try:
            wrapper = _ad_wrapper(name, fn_info, diff)
        except TypeError as exc:
            out.notes.append(str(exc))
    elif autodiff and fn_info is not None:
        out.notes.append(f"{name} is not [Differentiable] (or has no differentiable inputs): no derivative IR")
    wanted = [p for p in dict.fromkeys([AUTODIFF_PASS if wrapper else None, pass_]) if p]
    if wanted:
        entry = _ENTRY if wrapper else None
        if entry is None:  # a pass view without autodiff: compile the cell's own entry points, if any
            entry = next(iter(cell.entry_points), None)
        if entry is None:
            out.notes.append(f"{cell.name} has no entry point and {name} is not differentiable: "
                             f"no pass views (the compiler runs passes on linked kernels)")
            return out
        opts = ["-g"]
        for p in wanted:
            opts += ["-dump-ir-after", p] + (["-dump-ir-before", p] if p == pass_ else [])
        reply = session.call(session.request(
            "compile", cell=cell.name, append=wrapper, module=module + "_ad", entries=[entry], target=target,
            options=opts, reflect=False))
        if not reply["ok"]:
            diags = parse_diagnostics(reply["diagnostics"], {cell.shown: 1 + offset})
            out.notes.append("the derivative kernel did not compile: "
                             + "; ".join(str(d) for d in diags if d.severity == "error")[:400])
            return out
        sections = split_dump(reply["diagnostics"])
        order = [("BEFORE " + pass_) if pass_ else None, ("AFTER " + pass_) if pass_ else None,
                 "AFTER " + AUTODIFF_PASS if wrapper else None]
        for title in filter(None, dict.fromkeys(order)):
            text = next((b for t, b in sections if t == title), None)
            if text is None:
                out.notes.append(f"no IR dump '{title}': is '{title.split()[-1]}' a pass name? "
                                 f"Known: {', '.join(KNOWN_PASSES)}")
            else:
                out.views[title] = text
    return out


# -- graph data for IRGraph ---------------------------------------------------------------------------

def _user_func(f: IRFunction) -> bool:
    return bool(classify_autodiff(f.name)) or any(i.loc for i in f.insts)


def _callee_names(mod: IRModule) -> dict[str, str]:
    """Name of the function a call operand refers to (through ``specialize`` and generics)."""
    names = {f.id: f.name for f in mod.functions}
    for f in reversed(mod.funcs):  # a generic -> the function inside it
        if f.parent is not None and f.parent in names:
            names[f.parent] = f.name
    glob = {g.id: g for g in mod.globals if g.id}
    out = dict(names)
    for gid, g in glob.items():
        cur: IRInst | None = g
        depth = 0
        while cur is not None and cur.opcode == "specialize" and cur.operands and depth < 8:
            target = cur.operands[0]
            if target in names:
                out[gid] = names[target]
                break
            cur, depth = glob.get(target), depth + 1
    return out


def function_data(f: IRFunction, cell: str, offset: int, include_debug: bool = False,
                  callees: dict[str, str] | None = None) -> dict[str, Any]:
    """One function: blocks of instructions (id, label, opcode, type, text, loc, operands), CFG."""
    callees = callees or {}
    back = _back_edges(f)
    role, primal = classify_autodiff(f.name) or (None, None)
    blocks = []
    for b in f.blocks:
        insts = []
        for i in (*b.params, *b.insts):
            if i.opcode.startswith("Debug") and not include_debug:
                continue
            loc = None
            if i.loc and (i.loc.path in (cell, None)):
                loc = [i.loc.line - offset, i.loc.column]
            insts.append({"id": i.id or f"L{i.line}", "name": i.name, "op": i.opcode, "type": i.type,
                          "text": i.text, "loc": loc, "ops": list(dict.fromkeys(i.operands)),
                          "callee": callees.get(i.callee or "", i.callee), "nodiff": any("TreatAsDifferentiable" in n or
                                                            "treatCallAsDifferentiable" in n for n, _ in i.decorations)})
        blocks.append({"label": b.label, "insts": insts, "succ": list(b.successors),
                       "structure": [list(s) for s in b.structure],
                       "back": [t for s, t in back if s == b.label]})
    return {"id": f.id, "name": f.name, "role": role, "primal": primal, "user": _user_func(f),
            "decorations": [n for n, _ in f.decorations], "blocks": blocks,
            "n_insts": sum(len(b["insts"]) for b in blocks)}


def _view_data(vid: str, title: str, mod: IRModule, cell: str, offset: int) -> dict[str, Any]:
    fg = to_graph(mod, level="function")
    callees = _callee_names(mod)
    funcs = [function_data(f, cell, offset, callees=callees) for f in mod.funcs if f.blocks]
    ids = {f["id"] for f in funcs}
    edges = [e for e in fg["edges"] if e["source"] in ids and e["target"] in ids]
    derivs = [n for n in fg["nodes"] if n["kind"] == "derivative" and n.get("primal") in ids]
    return {"id": vid, "title": title, "functions": funcs, "edges": edges, "derivatives": derivs,
            "errors": list(mod.errors[:20])}


def ir_graph_data(session: "Session", name: str, pass_: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """JSON for the IRGraph widget: every view, the cell's source and what belongs together."""
    v = ir_views(session, name, pass_, **kwargs)
    return graph_data_from_views(v)


def graph_data_from_views(v: IRViews) -> dict[str, Any]:
    views = []
    for k, (title, text) in enumerate(v.views.items()):
        vid = "module" if title == "module" else f"v{k}"
        views.append(_view_data(vid, "module (-g)" if title == "module" else title, parse_ir(text), v.cell,
                                v.line_offset))
    # the function, then its generated derivatives (s_fwd_*, s_apply_*, s_bwdProp_* ...) beside it
    related: list[list[str]] = []
    for view in views:
        for f in view["functions"]:
            if f["name"] == v.name and view["id"] == "module":
                related.insert(0, [view["id"], f["id"]])
            elif f["primal"] == v.name and view["title"] == "AFTER " + AUTODIFF_PASS:
                related.append([view["id"], f["id"]])
    order = {"backward_primal": 1, "forward": 0, "backward_propagate": 2, "rematerialize": 3, "context": 4}
    fn_role = {(vw["id"], f["id"]): f["role"] for vw in views for f in vw["functions"]}
    related[1:] = sorted(related[1:], key=lambda r: order.get(fn_role.get((r[0], r[1])) or "", 9))
    pair = [vw["id"] for vw in views if vw["title"].startswith(("BEFORE ", "AFTER "))
            and not (vw["title"] == "AFTER " + AUTODIFF_PASS and len(views) > 3)][:2]
    return {"name": v.name, "cell": v.cell, "source": v.source, "views": views, "related": related,
            "compare": pair if len(pair) == 2 else [], "notes": v.notes}


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
            return None if a is None else np.asarray(a, np.float64).round(8).tolist()
        return {"name": self.name, "type": self.type, "kind": self.kind, "value": arr(self.value),
                "bwd": arr(self.bwd), "fwd": arr(self.fwd), "numeric": arr(self.numeric),
                "abs_error": arr(self.abs_error), "bad": None if self.bad is None else np.asarray(self.bad).tolist(),
                "max_abs_error": self.max_abs_error, "ok": self.ok, "fwd_ok": self.fwd_ok}


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
                "result": np.asarray(self.result, np.float64).round(8).tolist(),
                "grad_out": np.asarray(self.grad_out, np.float64).tolist(),
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
        if i.opcode == "call" and name and _is_function(session, name):  # type: ignore[arg-type]
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
    vals = evaluate_flow(insts, params, output, gout, callees, cdiff, no_diff=no_diff, rtol=rtol, atol=atol)
    return {"nodes": {key.get(k, f"{f.id}:{k}"): nv.to_json() for k, nv in vals.items()}, "note": None}

