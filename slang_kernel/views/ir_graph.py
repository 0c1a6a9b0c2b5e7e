"""Graphs of a parsed IR module (ir.IRModule) as JSON-able data for the IRGraph widget: functions and
derivative requests with call/derivative/copy edges, basic blocks with control flow, instructions with
def-use edges."""

from __future__ import annotations

import re
from typing import Any

from .ir import AUTODIFF_OPS, IRFunction, IRModule, classify_autodiff, ids as _ids

__all__ = ["autodiff_links", "back_edges", "to_graph"]


def _function_graph(mod: IRModule) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Function-level nodes (funcs, derivative requests) and call/derivative/copy edges."""
    funcs = {f.id: f for f in mod.funcs}
    derivs = {g.id: g for g in mod.globals if g.id and (g.opcode in {*AUTODIFF_OPS, "FunctionCopy"})}
    allf, glob = {f.id: f for f in mod.functions}, {g.id: g for g in mod.globals if g.id}
    by_name = {f.name: f.id for f in sorted(mod.funcs, key=lambda f: (f.parent is None, bool(f.blocks)))}
    inner = {f.parent: f.id for f in reversed(mod.funcs) if f.parent}  # generic -> its (first) func
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}

    def resolve(ident: str | None, depth: int = 0) -> str | None:
        if ident in funcs or ident in derivs or ident is None or depth > 8:
            return ident if depth <= 8 else None
        if ident in allf and allf[ident].kind == "generic":
            return inner.get(ident)
        g = glob.get(ident)
        return resolve(g.operands[0], depth + 1) if g and g.opcode == "specialize" and g.operands else None

    def add(src: str | None, dst: str | None, kind: str, role: str | None = None) -> None:
        if src and dst and src != dst:
            edges.setdefault((src, dst, kind), {"source": src, "target": dst, "kind": kind, "role": role})

    for f in funcs.values():
        for i in f.insts:
            if i.opcode == "call":
                add(f.id, resolve(i.callee), "call")
        for name, args in f.decorations:  # derivative decorations, in Slang versions that have them
            if "Derivative" in name and "Member" not in name:
                for t in _ids(args):
                    add(resolve(t), f.id, "derivative", name)
        ad = classify_autodiff(f.name)
        if ad and ad[1] in by_name:
            add(f.id, by_name[ad[1]], "derivative", ad[0])
    for d in derivs.values():
        for t in d.operands:
            role = AUTODIFF_OPS.get(d.opcode)
            add(d.id, resolve(t), "derivative" if role else "copy", role)
    for w in mod.functions:  # witness tables of I{Forward,Backward}Differentiable<f> name f's derivatives
        m = re.search(r"\)\s*\(%([A-Za-z0-9_]+)\)\s*$", w.type) if w.kind == "witness_table" else None
        spec = re.match(r"witness_table_t\(specialize\(%([A-Za-z0-9_]+)", w.type) if m else None
        iface = allf.get(spec.group(1)) if spec else None
        if m and iface and "Differentiable" in (iface.mangled_name or ""):
            role = "forward" if "IForwardDifferentiable" in (iface.mangled_name or "") else "backward"
            for e in w.body:
                if len(e.operands) > 1:
                    add(resolve(e.operands[1]), resolve(m.group(1)), "derivative", role)
    nodes: dict[str, Any] = {}
    for f in funcs.values():
        role, primal = classify_autodiff(f.name) or (None, None)
        nodes[f.id] = {"id": f.id, "label": f.name, "kind": "function", "mangled": f.mangled_name,
                       "imported": f.imported, "entry_point": f.decoration("entryPoint") is not None,
                       "generic": f.parent, "blocks": len(f.blocks), "role": role, "primal_name": primal,
                       "decorations": [n for n, _ in f.decorations]}
    elist = list(edges.values())
    adj: dict[str, list[dict[str, Any]]] = {}
    for edge in elist:
        adj.setdefault(edge["source"], []).append(edge)
    for did, d in derivs.items():
        p = _primal(did, adj, funcs)
        nodes[did] = {"id": d.id, "label": f"{d.name or d.opcode}({funcs[p].name if p else '?'})",
                       "kind": "derivative", "opcode": d.opcode, "role": AUTODIFF_OPS.get(d.opcode, "user"),
                       "primal": p, "text": d.text}
    return nodes, elist


def autodiff_links(mod: IRModule) -> list[tuple[str, str, str]]:
    """(derivative node, primal node, role) for every derivative link the IR shows."""
    edges = _function_graph(mod)[1]
    return [(e["source"], e["target"], e["role"]) for e in edges if e["kind"] == "derivative"]


def _primal(node: str, adj: dict[str, list[dict[str, Any]]], funcs: dict[str, IRFunction]) -> str | None:
    """The function a derivative node differentiates, following derivative and copy edges."""
    seen, todo = {node}, [node]
    while todo:
        cur = todo.pop(0)
        for e in adj.get(cur, ()):
            if e["kind"] != "call" and e["target"] not in seen:
                if e["target"] in funcs and e["kind"] == "derivative":
                    return e["target"]
                seen.add(e["target"])
                todo.append(e["target"])
    return None


def back_edges(f: IRFunction) -> set[tuple[str, str]]:
    """CFG edges that go back to a block on the DFS stack (loop back edges)."""
    succ = {b.label: b.successors for b in f.blocks}
    back: set[tuple[str, str]] = set()
    state = {f.blocks[0].label: 1} if f.blocks else {}
    stack = [(b, iter(succ[b])) for b in state]
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            state[stack.pop()[0]] = 2
        elif state.get(nxt) == 1:
            back.add((node, nxt))
        elif nxt not in state and nxt in succ:
            state[nxt] = 1
            stack.append((nxt, iter(succ[nxt])))
    return back


def to_graph(module: IRModule, function: str | None = None, level: str = "function",
             include_debug: bool = False) -> dict[str, Any]:
    """``{"level", "function", "nodes", "edges"}`` for a graph widget (node ids are strings).

    level "function": functions and derivative requests with call/derivative/copy edges (with
    `function`: what it reaches plus its direct users); "block": basic blocks with "flow" edges
    (``back`` marks loop back edges) and merge/break/continue edges; "instruction": instructions with
    def-use ("use") edges. Debug* instructions are left out unless `include_debug`.
    """
    out: dict[str, Any] = {"level": level, "function": function, "nodes": [], "edges": []}
    if level == "function":
        nodes, edges = _function_graph(module)
        start = module.function(function) if function is not None else None
        if function is not None:
            keep = todo = {start.id} if start else set()
            while todo:
                todo = {e["target"] for e in edges if e["source"] in todo} - keep
                keep = keep | todo
            keep |= {e["source"] for e in edges if start and e["target"] == start.id}
            nodes = {k: v for k, v in nodes.items() if k in keep}
            edges = [e for e in edges if e["source"] in keep and e["target"] in keep]
        return {**out, "nodes": list(nodes.values()), "edges": edges}
    if level not in ("block", "instruction"):
        raise ValueError(f"level must be 'function', 'block' or 'instruction', not {level!r}")
    chosen = [module.function(function)] if function is not None else [f for f in module.funcs if f.blocks]
    show = (lambda i: True) if include_debug else (lambda i: not i.opcode.startswith("Debug"))
    for f in filter(None, chosen):
        if level == "block":
            back = back_edges(f)
            for b in f.blocks:
                text = "\n".join(i.text for i in b.insts if show(i))
                out["nodes"].append({"id": f"{f.id}:{b.label}", "label": b.label, "kind": "block",
                                     "function": f.id, "params": [p.name or p.id for p in b.params],
                                     "insts": len(b.insts), "text": text})
                out["edges"] += [{"source": f"{f.id}:{b.label}", "target": f"{f.id}:{t}", "kind": k,
                                  "back": (b.label, t) in back} for k, t in
                                 [("flow", t) for t in b.successors] + list(b.structure)]
            continue
        insts = [(b.label, i) for b in f.blocks for i in (*b.params, *b.insts) if show(i)]
        key = {id(i): f"{f.id}:{i.id or 'L%d' % i.line}" for _, i in insts}
        defs = {i.id: key[id(i)] for _, i in insts if i.id}
        for blk, i in insts:
            loc = [i.loc.path, i.loc.line, i.loc.column] if i.loc else None
            label = f"{i.name or i.id} = {i.opcode}" if i.id else i.opcode
            out["nodes"].append({"id": key[id(i)], "label": label,
                                 "kind": "param" if i.opcode == "param" else "inst", "opcode": i.opcode,
                                 "type": i.type, "block": blk, "function": f.id, "text": i.text, "loc": loc})
            out["edges"] += [{"source": defs[op], "target": key[id(i)], "kind": "use", "operand": k}
                             for k, op in enumerate(dict.fromkeys(i.operands)) if op in defs]
    return out
