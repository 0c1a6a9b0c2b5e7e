"""IR views of a function's cell for visual autodiff debugging, and their JSON for the IRGraph widget.

* :func:`ir_views` - the IR of a function's cell (``-g``, so instructions carry source lines), the
  post-autodiff IR (``-dump-ir-after finalizeAutoDiffPass``: ``s_fwd_*``, ``s_apply_*``,
  ``s_bwdProp_*`` ...) of a generated kernel that calls ``fwd_diff`` and ``bwd_diff`` of it, and
  optionally the IR before/after any other compiler pass.
* :func:`ir_graph_data` - those views as JSON for the IRGraph widget (functions, blocks, instructions,
  def-use operands, CFG edges, source locations mapped to cell lines, derivative relations).

Gradient checks and the data-flow graph built on these views are in :mod:`.gradients`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..cache import digest
from ..engine.cells import Cell
from ..compiler.diagnostics import SlangCompileError, parse_diagnostics
from .ir import IRFunction, IRInst, IRModule, classify_autodiff, demangle, demangle_text, parse_ir, split_dump
from .ir_graph import back_edges, to_graph
from .ir_names import readable

if TYPE_CHECKING:
    from ..compiler.reflection import FunctionInfo
    from ..engine.protocols import IRSource

__all__ = ["AUTODIFF_PASS", "KNOWN_PASSES", "IRViews", "function_data", "graph_data_from_views", "ir_graph_data",
           "ir_views", "is_function"]

AUTODIFF_PASS = "finalizeAutoDiffPass"
#: Pass names seen in ``-dump-ir`` output (for messages; any pass name the compiler knows works).
KNOWN_PASSES = (
    "finalizeAutoDiffPass", "specializeModule", "finalizeSpecialization", "simplifyIR", "eliminateDeadCode",
    "performForceInlining", "lowerExistentials", "lowerTuples", "legalizeVectorTypes", "legalizeMatrixTypes",
    "eliminatePhis", "checkAutodiffPatterns", "transformParamsToConstRef", "specializeResourceUsage",
)
_ENTRY = "sk_ir_entry"


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


def is_function(session: "IRSource", name: str) -> bool:
    """Whether `name` is a function of the session (not a kernel or a cell)."""
    try:
        session.store.function_info(name)
        return True
    except (KeyError, TypeError):
        return False


def _cell_of(session: "IRSource", name: str) -> "Cell":
    """The cell `name` names (a cell name, unless a function has that name) or that defines it."""
    if name in session.store.cells and not is_function(session, name):
        return session.store.cell(name)
    return session.store.owner(name)


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


def ir_views(session: "IRSource", name: str, pass_: str | None = None, *, autodiff: bool = True,
             target: str | None = None) -> IRViews:
    """IR of `name`'s cell (with ``-g``), post-autodiff IR when it is [Differentiable], and
    ``BEFORE pass_`` / ``AFTER pass_`` when a pass is named. `name` may also be a cell name."""
    cell = _cell_of(session, name)
    module = "sk_irv_" + digest(cell.source, cell.digest)[:12]
    req = session.compile_service.request("disassemble", cell=cell.name, module=module, options=["-g"])
    offset = req.line_offset
    out = IRViews(name, cell.name, cell.source, offset)
    reply = session.compile_service.call(req)
    if not reply["ok"]:
        raise SlangCompileError(f"could not disassemble {cell.shown}",
                                parse_diagnostics(reply["diagnostics"], {cell.shown: offset}),
                                {cell.shown: cell.source})
    out.views["module"] = reply["ir"]
    fn_info, diff = None, list[int]()
    if is_function(session, name):
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
        reply = session.compile_service.call(session.compile_service.request(
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
    back = back_edges(f)
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
            callee = callees.get(i.callee or "", i.callee)
            text = demangle_text(i.text)   # shown; the raw text on hover (raw_text)
            insts.append({"id": i.id or f"L{i.line}", "name": i.name, "op": i.opcode, "type": i.type,
                          "text": text, "loc": loc, "ops": list(dict.fromkeys(i.operands)),
                          "callee": callee, "nodiff": any("TreatAsDifferentiable" in n or
                                                          "treatCallAsDifferentiable" in n for n, _ in i.decorations),
                          **({"raw_text": i.text} if text != i.text else {}),
                          **({"callee_label": demangle(callee)} if callee and demangle(callee) != callee else {})})
        blocks.append({"label": b.label, "insts": insts, "succ": list(b.successors),
                       "structure": [list(s) for s in b.structure],
                       "back": [t for s, t in back if s == b.label]})
    return {"id": f.id, "name": f.name, "label": demangle(f.name), "role": role, "primal": primal, "user": _user_func(f),
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


def ir_graph_data(session: "IRSource", name: str, pass_: str | None = None, **kwargs: Any) -> dict[str, Any]:
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
    return readable({"name": v.name, "cell": v.cell, "source": v.source, "views": views, "related": related,
                     "compare": pair if len(pair) == 2 else [], "notes": v.notes})
