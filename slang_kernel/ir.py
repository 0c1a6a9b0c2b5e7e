"""Slang IR text -> frozen dataclasses -> JSON-able graph data for the IRGraph widget.

Input: ``IModule::disassemble`` text or one section of ``-dump-ir*`` output (`split_dump`). Lines::

    [nameHint("sqr")]                        decoration, attaches to the next item
    func %sqr	: Func(Float, Float)          global value: ``{ ... }`` body or a trailing ``;``
    {
    block %1(                                 params follow; the last one ends with ``):``
    		param %x	: Float):
    	let  %2	: Float	= mul(%x, %x)         id, type, opcode(operands); ``@Rate let`` also occurs
    	return_val(%2)                          instruction without a result
    }

Generics nest a ``func`` in their block; struct/witness-table bodies have no blocks. With ``-g``,
``DebugLine``/``[DebugLocation]`` give source locations. Unknown lines are kept as raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IRSourceLoc", "IRInst", "IRBlock", "IRFunction", "IRModule", "parse_ir", "split_dump",
    "to_graph", "classify_autodiff", "decode_name", "AUTODIFF_OPS",
]

Decoration = tuple[str, str]

_ID = re.compile(r"%([A-Za-z0-9_]+)")
_STR = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_HEADER = re.compile(r"^([A-Za-z_]\w*)\s+(?:%([A-Za-z0-9_]+)|(_))\s*:\s*(.*?)\s*(;?)$")
_LET = re.compile(r"^(?:@(\w+)\s+)?let\s+%?([A-Za-z0-9_]+)\s*:\s*(.*)$")
_PARAM = re.compile(r"^param\s+%?([A-Za-z0-9_]+)\s*:\s*(.*)$")
_BLOCK = re.compile(r"^block\s+%([A-Za-z0-9_]+)\s*(.*)$")
_DECO = re.compile(r"^\[([A-Za-z_][\w.]*)\s*(.*?)\]?$")
_INT_LIT = re.compile(r"(-?\d+)\s*:\s*\w+")
# Operand positions of structured-control-flow terminators that are not real successors.
_STRUCTURE = {"ifElse": {3: "merge"}, "loop": {1: "break", 2: "continue"}, "switch": {1: "break"},
              "targetSwitch": {0: "break"}}
#: Opcodes of the (pre-linking) instructions that ask for a derivative, and the role they give.
AUTODIFF_OPS = {op: role for role, ops in {
    "forward": "ForwardDifferentiate", "backward": "BackwardDifferentiate LegacyBackwardDifferentiate",
    "backward_primal": "BackwardDifferentiatePrimal BackwardPrimalFromLegacyBwdDiffFunc",
    "backward_propagate": "BackwardDifferentiatePropagate BackwardPropagateFromLegacyBwdDiffFunc",
    "rematerialize": "BackwardRemat BackwardRematFromLegacyBwdDiffFunc"}.items() for op in ops.split()}
_AUTODIFF_NAME = re.compile(r"^s_(fwd|bwdProp|bwd|primal|apply|remat|bwdCallableCtx|minCtx|paramCtx)_(.+)$")
_ROLES = {"fwd": "forward", "bwd": "backward", "bwdProp": "backward_propagate", "primal": "backward_primal",
          "apply": "backward_primal", "remat": "rematerialize", "bwdCallableCtx": "context",
          "minCtx": "context", "paramCtx": "context"}


@dataclass(frozen=True)
class IRSourceLoc:
    """A source position from ``-g`` debug info (1-based line and column)."""
    path: str | None
    line: int
    column: int


@dataclass(frozen=True)
class IRInst:
    """One IR instruction (block params and nested-global placeholders included)."""
    id: str | None
    name: str | None
    type: str | None
    opcode: str
    operands: tuple[str, ...]
    args: str
    decorations: tuple[Decoration, ...]
    text: str
    line: int
    loc: IRSourceLoc | None = None
    rate: str | None = None
    callee: str | None = None


@dataclass(frozen=True)
class IRBlock:
    """A basic block: params, instructions, CFG successors and structured-flow hints."""
    label: str
    params: tuple[IRInst, ...]
    insts: tuple[IRInst, ...]
    successors: tuple[str, ...]
    structure: tuple[tuple[str, str], ...]  # (kind, label): merge / break / continue targets


@dataclass(frozen=True)
class IRFunction:
    """A global value with a header line: func, generic, struct, witness_table, ..."""
    id: str
    name: str
    kind: str
    type: str
    mangled_name: str | None
    decorations: tuple[Decoration, ...]
    blocks: tuple[IRBlock, ...]
    body: tuple[IRInst, ...]  # lines of a body without blocks (fields, witness-table entries)
    parent: str | None
    line: int
    imported: bool = False

    def decoration(self, name: str) -> str | None:
        """Argument text of the first decoration called `name`, or None."""
        return next((a for n, a in self.decorations if n == name), None)

    @property
    def insts(self) -> tuple[IRInst, ...]:
        return tuple(i for b in self.blocks for i in (*b.params, *b.insts)) + self.body


@dataclass(frozen=True)
class IRModule:
    """A parsed IR module; `errors` lists lines that did not fit the grammar."""
    functions: tuple[IRFunction, ...]
    globals: tuple[IRInst, ...]
    errors: tuple[str, ...]

    def function(self, name: str) -> IRFunction | None:
        """Look a global value up by id, name hint or mangled name (funcs first)."""
        hits = sorted((f for f in self.functions if name in (f.id, f.name, f.mangled_name)),
                      key=lambda f: f.kind != "func")
        return hits[0] if hits else None

    @property
    def funcs(self) -> tuple[IRFunction, ...]:
        return tuple(f for f in self.functions if f.kind == "func")

    def autodiff_links(self) -> list[tuple[str, str, str]]:
        """(derivative node, primal node, role) for every derivative link the IR shows."""
        edges = _function_graph(self)[1]
        return [(e["source"], e["target"], e["role"]) for e in edges if e["kind"] == "derivative"]


def decode_name(ident: str) -> str:
    """Undo the IR's name escaping (``sx5Ffwdx5Ff`` -> ``s_fwd_f``); other text is unchanged."""
    return re.sub(r"x([0-9A-F]{2})", lambda m: m.group(0) if chr(int(m.group(1), 16)).isalnum()
                  else chr(int(m.group(1), 16)), ident)


def classify_autodiff(name: str) -> tuple[str, str] | None:
    """(role, primal name) for an autodiff-generated function name such as ``s_fwd_f``."""
    m = _AUTODIFF_NAME.match(decode_name(name or ""))
    inner = classify_autodiff(m.group(2)) if m else None  # s_minCtx_s_bwdCallableCtx_f -> f
    return (_ROLES[m.group(1)], inner[1] if inner else m.group(2)) if m else None


def split_dump(text: str) -> list[tuple[str, str]]:
    """Split ``-dump-ir*`` output (``### AFTER pass:`` ... ``###``) into (title, IR text) pairs."""
    parts = re.split(r"^###[ \t]*(.*?)[ \t:]*$", text, flags=re.M)
    return [(t, body.strip("\n")) for t, body in zip(parts[1::2], parts[2::2]) if t]


# -- parsing -------------------------------------------------------------------------------------

def _blank_strings(s: str) -> str:
    """`s` with the inside of string literals blanked (same length, so indices still match)."""
    return _STR.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', s)


def _ids(s: str) -> tuple[str, ...]:  # %ids outside string literals
    return tuple(_ID.findall(_STR.sub('""', s)))


def _parse_rhs(rhs: str) -> tuple[str, str, tuple[str, ...], str | None]:
    """opcode, argument text, operand ids and (for calls) the callee id of an instruction body."""
    rhs, b = rhs.strip(), _blank_strings(rhs.strip())
    if rhs.startswith("call ") and b.endswith(")"):
        depth = 0
        for i in range(len(b) - 1, 4, -1):
            depth += {")": 1, "(": -1}.get(b[i], 0)
            if depth == 0:
                callee_text, args = rhs[5:i].strip(), rhs[i + 1:-1]
                cids = _ids(callee_text)
                return "call", args, cids + _ids(args), (cids[0] if cids else None)
    m = re.match(r"[A-Za-z_$][\w.$]*", rhs)
    if not m:
        return (rhs.split()[0] if rhs.split() else "?"), rhs, _ids(rhs), None
    op, rest = m.group(0), rhs[m.end():].strip()
    if op != "call" and rest.startswith("(") and b.endswith(")"):
        rest = rest[1:-1]
    ids = _ids(rest)
    return op, rest, ids, (ids[0] if ids and op == "call" else None)


class _Builder:
    """Mutable state while reading; `freeze` turns it into an IRModule."""

    def __init__(self) -> None:
        self.funcs: list[dict[str, Any]] = []
        self.globals: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.stack: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None  # header waiting for `{` or a declaration
        self.decos: list[Decoration] = []
        self.sources: dict[str, str] = {}

    def _container(self, kind: str, ident: str, type_: str, n: int) -> dict[str, Any]:
        parent = self.stack[-1]["id"] if self.stack else None
        f = {"id": ident, "kind": kind, "type": type_, "decos": self.decos, "blocks": [], "body": [],
             "parent": parent, "line": n, "dbg": None}
        if parent is not None:  # a placeholder, so that uses inside the parent resolve
            self._inst(ident, type_, kind, "", (), "", n)
        self.decos = []
        self.funcs.append(f)
        return f

    def _inst(self, ident: str | None, type_: str | None, op: str, args: str, ops: tuple[str, ...], raw: str,
              n: int, param: bool = False, rate: str | None = None, callee: str | None = None) -> None:
        inst: dict[str, Any] = {"id": None if ident in (None, "_") else ident, "type": type_, "opcode": op,
                                "args": args, "operands": ops, "text": raw.strip(), "line": n,
                                "decos": self.decos, "rate": rate, "callee": callee}
        self.decos = []
        if not self.stack:
            self.globals.append(inst)
            return
        top = self.stack[-1]
        if top["blocks"]:
            blk = top["blocks"][-1]
            if inst["opcode"] == "DebugLine":
                nums = [int(x) for x in _INT_LIT.findall(inst["args"])]
                if inst["operands"] and len(nums) >= 3:
                    top["dbg"] = (inst["operands"][0], nums[0], nums[2])
            inst.setdefault("dbg", top["dbg"])
            (blk["params"] if param else blk["insts"]).append(inst)
        else:
            top["body"].append(inst)

    def feed(self, raw: str, n: int) -> None:
        s = raw.strip()
        if not s or s.startswith("###"):
            return
        if self.pending is not None:
            f, self.pending = self.pending, None
            if s == "{":
                self.stack.append(f)
                return
        if s == "{":
            self.errors.append(f"line {n}: '{{' without a header")
            self.stack.append({"id": None, "blocks": [], "body": [], "dbg": None})
            return
        if s == "}":
            if self.stack:
                self.stack.pop()
            else:
                self.errors.append(f"line {n}: unbalanced '}}'")
            return
        if s.startswith("["):
            m = _DECO.match(s)
            name, args = (m.group(1), m.group(2).strip()) if m else (s.strip("[]"), "")
            if args.startswith("(") and args.endswith(")"):
                args = args[1:-1]
            self.decos.append((name, args))
            return
        m = _BLOCK.match(s)
        if m:
            if not self.stack:
                self.errors.append(f"line {n}: block outside a function")
                self.stack.append(self._container("func", f"anon{n}", "", n))
            self.stack[-1]["blocks"].append({"label": m.group(1), "params": [], "insts": []})
            self.decos = []
            return
        m = _PARAM.match(s)
        if m:
            type_ = m.group(2).strip()
            type_ = type_[:-2] if type_.endswith("):") else type_.rstrip(",")
            self._inst(m.group(1), type_, "param", "", (), raw, n, param=True)
            return
        m = _LET.match(s)
        if m:
            rate, ident, rest = m.groups()
            cut = _blank_strings(rest).find("=")
            type_, rhs = (rest[:cut].strip(), rest[cut + 1:]) if cut >= 0 else (rest.strip(), "")
            op, args, ops, callee = _parse_rhs(rhs) if rhs.strip() else ("?", "", (), None)
            self._inst(ident, type_, op, args, ops, raw, n, rate=rate, callee=callee)
            if op == "DebugSource":
                strs = _STR.findall(args)
                self.sources[ident] = strs[0][1:-1] if strs else ""
            return
        m = _HEADER.match(s)
        if m and m.group(1) not in ("let", "param", "block", "call"):
            f = self._container(m.group(1), m.group(2) or f"_{n}", m.group(4), n)
            if not m.group(5):
                self.pending = f
            return
        m = re.match(r"@(\w+)\s+(.+)", s)
        rate, s = m.groups() if m else (None, s)
        op, args, ops, callee = _parse_rhs(s)
        self._inst(None, None, op, args, ops, raw, n, rate=rate, callee=callee)

    def _loc(self, d: dict[str, Any]) -> IRSourceLoc | None:
        for name, args in d["decos"]:
            if name == "DebugLocation":
                ids, nums = _ids(args), [int(x) for x in _INT_LIT.findall(args)]
                if len(nums) >= 2:
                    return IRSourceLoc(self.sources.get(ids[0]) if ids else None, nums[0], nums[1])
        dbg = d.get("dbg")
        return IRSourceLoc(self.sources.get(dbg[0]), dbg[1], dbg[2]) if dbg else None

    def _freeze_inst(self, d: dict[str, Any]) -> IRInst:
        name = next((a.strip('"') for n, a in d["decos"] if n == "nameHint"), None)
        return IRInst(d["id"], name, d["type"], d["opcode"], tuple(d["operands"]), d["args"],
                      tuple(d["decos"]), d["text"], d["line"], self._loc(d), d["rate"], d["callee"])

    def _freeze_block(self, b: dict[str, Any], labels: set[str]) -> IRBlock:
        insts = tuple(self._freeze_inst(i) for i in b["insts"])
        succ: list[str] = []
        structure: list[tuple[str, str]] = []
        special = _STRUCTURE.get(insts[-1].opcode, {}) if insts else {}
        for pos, arg in enumerate(re.split(r"\s*,\s*", insts[-1].args.strip()) if insts else []):
            if arg[:1] == "%" and arg[1:] in labels:  # labels come first, before any nested argument
                if pos in special:
                    structure.append((special[pos], arg[1:]))
                elif arg[1:] not in succ:
                    succ.append(arg[1:])
        return IRBlock(b["label"], tuple(self._freeze_inst(p) for p in b["params"]), insts, tuple(succ),
                       tuple(structure))

    def freeze(self) -> IRModule:
        byid = {f["id"]: f for f in self.funcs}
        out = []
        for f in self.funcs:
            labels = {b["label"] for b in f["blocks"]}
            decos = tuple(f["decos"])
            name = next((a.strip('"') for n, a in decos if n == "nameHint"), None) or decode_name(f["id"])
            mangled, imported, seen = None, False, set()
            p: dict[str, Any] | None = f
            while p is not None and mangled is None and p["id"] not in seen:  # ids may repeat in bad input
                seen.add(p["id"])
                hit = next(((n, a.strip('"')) for n, a in p["decos"] if n in ("export", "import")), None)
                if hit:
                    imported, mangled = hit[0] == "import", hit[1]
                p = byid.get(p["parent"]) if p["parent"] else None
            out.append(IRFunction(f["id"], name, f["kind"], f["type"], mangled, decos,
                                  tuple(self._freeze_block(b, labels) for b in f["blocks"]),
                                  tuple(self._freeze_inst(i) for i in f["body"]), f["parent"], f["line"],
                                  imported))
        return IRModule(tuple(out), tuple(self._freeze_inst(g) for g in self.globals), tuple(self.errors))


def parse_ir(text: str) -> IRModule:
    """Parse Slang IR text; never raises (problems are listed in ``IRModule.errors``)."""
    b = _Builder()
    try:
        for n, line in enumerate(str(text).splitlines(), 1):
            try:
                b.feed(line, n)
            except Exception as exc:  # pragma: no cover - a grammar gap, kept as text
                b.errors.append(f"line {n}: internal error {type(exc).__name__}: {exc}")
        return b.freeze()
    except Exception as exc:  # pragma: no cover - last resort: keep what parsed
        return IRModule((), (), (*b.errors, f"internal error {type(exc).__name__}: {exc}"))


# -- graphs --------------------------------------------------------------------------------------

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


def _back_edges(f: IRFunction) -> set[tuple[str, str]]:
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
            back = _back_edges(f)
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
