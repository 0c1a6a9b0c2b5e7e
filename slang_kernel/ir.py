"""Slang IR text -> frozen dataclasses -> JSON-able graph data for the IRGraph widget.

Input is the text of ``IModule::disassemble`` or one section of a ``-dump-ir``/``-dump-ir-after``
dump (see `split_dump`). The format is line based::

    [export("_S6cell_13sqrp1pi_ff")]          decorations, one per line, attach to the next item
    [nameHint("sqr")]
    func %sqr	: Func(Float, Float)            a global value; `{...}` body or a trailing `;`
    {
    block %1(                                   block params follow, the last one ends with `):`
    		[nameHint("x")]
    		param %x	: Float):
    	let  %2	: Float	= mul(%x, %x)           value instruction: id, type, opcode(operands)
    	return_val(%2)                            instruction without a result
    }

Generics hold a nested ``func`` inside their block; struct and witness-table bodies hold
``field(...)``/``witness_table_entry(...)`` lines without blocks. With ``-g`` the IR carries
``DebugSource``/``DebugLine`` instructions and ``[DebugLocation(...)]`` decorations, which give source
locations. Unknown lines are kept as instructions with their raw text; `parse_ir` never raises.
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
_HEADER = re.compile(r"^([A-Za-z_]\w*)\s+%?([A-Za-z0-9_]+)\s*:\s*(.*?)\s*(;?)$")
_LET = re.compile(r"^(?:@(\w+)\s+)?let\s+%?([A-Za-z0-9_]+)\s*:\s*(.*)$")
_PARAM = re.compile(r"^param\s+%?([A-Za-z0-9_]+)\s*:\s*(.*)$")
_BLOCK = re.compile(r"^block\s+%([A-Za-z0-9_]+)\s*(.*)$")
_DECO = re.compile(r"^\[([A-Za-z_][\w.]*)\s*(.*?)\]?$")
_INT_LIT = re.compile(r"(-?\d+)\s*:\s*\w+")
_NOT_HEADERS = {"let", "param", "block", "call"}
# Operand positions of structured-control-flow terminators that are not real successors.
_STRUCTURE = {"ifElse": {3: "merge"}, "loop": {1: "break", 2: "continue"}, "switch": {1: "break"},
              "targetSwitch": {0: "break"}}
#: Opcodes of the (pre-linking) instructions that ask for a derivative, and the role they give.
AUTODIFF_OPS = {
    "ForwardDifferentiate": "forward", "BackwardDifferentiate": "backward",
    "LegacyBackwardDifferentiate": "backward", "BackwardDifferentiatePrimal": "backward_primal",
    "BackwardDifferentiatePropagate": "backward_propagate", "BackwardRemat": "rematerialize",
    "BackwardPrimalFromLegacyBwdDiffFunc": "backward_primal",
    "BackwardPropagateFromLegacyBwdDiffFunc": "backward_propagate",
    "BackwardRematFromLegacyBwdDiffFunc": "rematerialize",
}
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

    def decoration(self, name: str) -> str | None:
        """Argument text of the first decoration called `name`, or None."""
        return next((a for n, a in self.decorations if n == name), None)

    @property
    def insts(self) -> tuple[IRInst, ...]:
        return tuple(i for b in self.blocks for i in (*b.params, *b.insts)) + self.body

    @property
    def imported(self) -> bool:
        return self.decoration("import") is not None


@dataclass(frozen=True)
class IRModule:
    """A parsed IR module; `errors` lists lines that did not fit the grammar."""
    functions: tuple[IRFunction, ...]
    globals: tuple[IRInst, ...]
    errors: tuple[str, ...]

    def function(self, name: str) -> IRFunction | None:
        """Look a global value up by id, name hint or mangled name (funcs first)."""
        hits = [f for f in self.functions if name in (f.id, f.name, f.mangled_name)]
        hits.sort(key=lambda f: f.kind != "func")
        return hits[0] if hits else None

    @property
    def funcs(self) -> tuple[IRFunction, ...]:
        return tuple(f for f in self.functions if f.kind == "func")

    def autodiff_links(self) -> list[tuple[str, str, str]]:
        """(derivative node, primal node, role) for every derivative link the IR shows."""
        return [(e["source"], e["target"], e["role"]) for e in _function_edges(self) if e["kind"] == "derivative"]


def decode_name(ident: str) -> str:
    """Undo the IR's name escaping (``sx5Ffwdx5Ff`` -> ``s_fwd_f``); other text is unchanged."""
    def sub(m: re.Match[str]) -> str:
        c = chr(int(m.group(1), 16))
        return m.group(0) if c.isalnum() else c
    return re.sub(r"x([0-9A-F]{2})", sub, ident)


def classify_autodiff(name: str) -> tuple[str, str] | None:
    """(role, primal name) for an autodiff-generated function name such as ``s_fwd_f``."""
    m = _AUTODIFF_NAME.match(decode_name(name or ""))
    if not m:
        return None
    inner = classify_autodiff(m.group(2))  # s_minCtx_s_bwdCallableCtx_f -> f
    return _ROLES[m.group(1)], (inner[1] if inner else m.group(2))


def split_dump(text: str) -> list[tuple[str, str]]:
    """Split ``-dump-ir*`` output (``### AFTER pass:`` ... ``###``) into (title, IR text) pairs."""
    out: list[tuple[str, str]] = []
    title, buf = None, []  # type: ignore[var-annotated]
    for line in text.splitlines():
        if line.startswith("###"):
            if title is not None:
                out.append((title, "\n".join(buf)))
            head = line.strip("#: \t")
            title, buf = (head or None), []
        elif title is not None:
            buf.append(line)
    if title is not None:
        out.append((title, "\n".join(buf)))
    return out


# -- parsing -------------------------------------------------------------------------------------

def _blank_strings(s: str) -> str:
    """`s` with the inside of string literals blanked (same length, so indices still match)."""
    return _STR.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', s)


def _split_top(s: str) -> list[str]:
    """Split at commas outside parentheses and strings."""
    b, parts, depth, start = _blank_strings(s), [], 0, 0
    for i, c in enumerate(b):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[start:i].strip())
            start = i + 1
    tail = s[start:].strip()
    return parts + [tail] if tail or parts else parts


def _ids(s: str) -> tuple[str, ...]:
    return tuple(_ID.findall(_STR.sub('""', s)))


def _parse_rhs(rhs: str) -> tuple[str, str, tuple[str, ...], str | None]:
    """opcode, argument text, operand ids and (for calls) the callee id of an instruction body."""
    rhs = rhs.strip()
    b = _blank_strings(rhs)
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
    if op == "call":
        ids = _ids(rest)
        return op, rest, ids, (ids[0] if ids else None)
    if rest.startswith("(") and b.endswith(")"):
        rest = rest[1:-1]
    return op, rest, _ids(rest), None


class _Builder:
    """Mutable state while reading; `freeze` turns it into an IRModule."""

    def __init__(self) -> None:
        self.funcs: list[dict[str, Any]] = []
        self.globals: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.stack: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None  # header waiting for `{` or a declaration
        self.decos: list[Decoration] = []
        self.in_params = False
        self.sources: dict[str, str] = {}

    def _container(self, kind: str, ident: str, type_: str, n: int) -> dict[str, Any]:
        parent = self.stack[-1]["id"] if self.stack else None
        f = {"id": ident, "kind": kind, "type": type_, "decos": self.decos, "blocks": [], "body": [],
             "parent": parent, "line": n, "dbg": None}
        self.decos = []
        if parent is not None:
            self._add_inst({"id": ident, "type": type_, "opcode": kind, "args": "", "operands": (),
                            "text": "", "line": n, "decos": f["decos"], "rate": None, "callee": None})
        self.funcs.append(f)
        return f

    def _add_inst(self, inst: dict[str, Any], param: bool = False) -> None:
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
            self.in_params = False
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
            self.stack[-1]["blocks"].append({"label": m.group(1), "params": [], "insts": [], "decos": self.decos})
            self.decos = []
            self.in_params = m.group(2).endswith("(")
            return
        m = _PARAM.match(s)
        if m:
            type_ = m.group(2).strip()
            if type_.endswith("):"):
                type_, self.in_params = type_[:-2].rstrip(), False
            type_ = type_.rstrip(",").rstrip()
            self._inst(m.group(1), type_, "param", "", (), raw, n, param=True)
            return
        m = _LET.match(s)
        if m:
            rate, ident, rest = m.groups()
            b = _blank_strings(rest)
            depth, cut = 0, -1
            for i, c in enumerate(b):
                depth += {"(": 1, ")": -1}.get(c, 0)
                if c == "=" and depth == 0:
                    cut = i
                    break
            type_, rhs = (rest[:cut].strip(), rest[cut + 1:]) if cut >= 0 else (rest.strip(), "")
            op, args, ops, callee = _parse_rhs(rhs) if rhs.strip() else ("?", "", (), None)
            self._inst(ident, type_, op, args, ops, raw, n, rate=rate, callee=callee)
            if op == "DebugSource":
                strs = _STR.findall(args)
                self.sources[ident] = strs[0][1:-1] if strs else ""
            return
        m = _HEADER.match(s)
        if m and m.group(1) not in _NOT_HEADERS:
            f = self._container(m.group(1), m.group(2), m.group(3), n)
            if not m.group(4):
                self.pending = f
            return
        rate = None
        if s.startswith("@") and " " in s:
            rate, s = s[1:].split(None, 1)
        op, args, ops, callee = _parse_rhs(s)
        self._inst(None, None, op, args, ops, raw, n, rate=rate, callee=callee)

    def _inst(self, ident: str | None, type_: str | None, op: str, args: str, ops: tuple[str, ...],
              raw: str, n: int, param: bool = False, rate: str | None = None, callee: str | None = None) -> None:
        inst = {"id": None if ident in (None, "_") else ident, "type": type_, "opcode": op, "args": args,
                "operands": ops, "text": raw.strip(), "line": n, "decos": self.decos, "rate": rate,
                "callee": callee}
        self.decos = []
        self._add_inst(inst, param)

    # -- freezing --------------------------------------------------------------------------------

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
        if insts:
            term = insts[-1]
            special = _STRUCTURE.get(term.opcode, {})
            for pos, arg in enumerate(_split_top(term.args)):
                m = re.fullmatch(r"%([A-Za-z0-9_]+)", arg)
                if m and m.group(1) in labels:
                    if pos in special:
                        structure.append((special[pos], m.group(1)))
                    elif m.group(1) not in succ:
                        succ.append(m.group(1))
        return IRBlock(b["label"], tuple(self._freeze_inst(p) for p in b["params"]), insts, tuple(succ),
                       tuple(structure))

    def freeze(self) -> IRModule:
        byid = {f["id"]: f for f in self.funcs}
        out = []
        for f in self.funcs:
            labels = {b["label"] for b in f["blocks"]}
            decos = tuple(f["decos"])
            name = next((a.strip('"') for n, a in decos if n == "nameHint"), None) or decode_name(f["id"])
            mangled, p = None, f
            while p is not None and mangled is None:
                mangled = next((a.strip('"') for n, a in p["decos"] if n in ("export", "import")), None)
                p = byid.get(p["parent"]) if p["parent"] else None
            out.append(IRFunction(f["id"], name, f["kind"], f["type"], mangled, decos,
                                  tuple(self._freeze_block(b, labels) for b in f["blocks"]),
                                  tuple(self._freeze_inst(i) for i in f["body"]), f["parent"], f["line"]))
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

def _function_nodes(mod: IRModule) -> tuple[dict[str, IRFunction], dict[str, IRInst]]:
    funcs = {f.id: f for f in mod.funcs}
    derivs = {g.id: g for g in mod.globals if g.id and (g.opcode in AUTODIFF_OPS or g.opcode == "FunctionCopy")}
    return funcs, derivs


def _function_edges(mod: IRModule) -> list[dict[str, Any]]:
    funcs, derivs = _function_nodes(mod)
    allf = {f.id: f for f in mod.functions}
    glob = {g.id: g for g in mod.globals if g.id}
    by_name = {f.name: f.id for f in mod.funcs}

    def resolve(ident: str | None, depth: int = 0) -> str | None:
        if ident is None or depth > 8:
            return None
        if ident in funcs or ident in derivs:
            return ident
        if ident in allf and allf[ident].kind == "generic":
            inner = [g.id for g in mod.funcs if g.parent == ident]
            return inner[0] if inner else None
        g = glob.get(ident)
        if g is not None and g.opcode == "specialize" and g.operands:
            return resolve(g.operands[0], depth + 1)
        return None

    edges: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(src: str | None, dst: str | None, kind: str, role: str | None = None) -> None:
        if src and dst and src != dst:
            edges.setdefault((src, dst, kind), {"source": src, "target": dst, "kind": kind, "role": role})

    for f in funcs.values():
        for i in f.insts:
            if i.opcode == "call":
                add(f.id, resolve(i.callee), "call")
        for name, args in f.decorations:
            if "Derivative" in name and "Member" not in name:
                for t in _ids(args):
                    add(resolve(t), f.id, "derivative", name)
        ad = classify_autodiff(f.name)
        if ad and ad[1] in by_name:
            add(f.id, by_name[ad[1]], "derivative", ad[0])
    for d in derivs.values():
        role = AUTODIFF_OPS.get(d.opcode)
        for t in d.operands:
            add(d.id, resolve(t), "derivative" if role else "copy", role)
    for w in mod.functions:  # witness tables for I{Forward,Backward}Differentiable<f>
        if w.kind != "witness_table":
            continue
        m = re.search(r"\)\s*\(%([A-Za-z0-9_]+)\)\s*$", w.type)
        spec = re.match(r"witness_table_t\(specialize\(%([A-Za-z0-9_]+)", w.type)
        iface = allf.get(spec.group(1)) if spec else None
        if not (m and iface and iface.mangled_name and "Differentiable" in iface.mangled_name):
            continue
        role = "forward" if "IForwardDifferentiable" in iface.mangled_name else "backward"
        for e in w.body:
            for t in e.operands[1:2]:
                add(resolve(t), resolve(m.group(1)), "derivative", role)
    return list(edges.values())


def _inst_node(fid: str, blk: str | None, i: IRInst) -> dict[str, Any]:
    loc = i.loc
    return {"id": f"{fid}:{i.id or 'L%d' % i.line}", "label": f"{i.name or i.id or ''} = {i.opcode}" if i.id
            else i.opcode, "kind": "param" if i.opcode == "param" else "inst", "opcode": i.opcode,
            "type": i.type, "block": blk, "function": fid, "text": i.text,
            "loc": [loc.path, loc.line, loc.column] if loc else None}


def _back_edges(f: IRFunction) -> set[tuple[str, str]]:
    succ = {b.label: b.successors for b in f.blocks}
    back: set[tuple[str, str]] = set()
    if not f.blocks:
        return back
    state: dict[str, int] = {}
    stack = [(f.blocks[0].label, iter(succ[f.blocks[0].label]))]
    state[f.blocks[0].label] = 1
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            state[node] = 2
            stack.pop()
        elif state.get(nxt) == 1:
            back.add((node, nxt))
        elif nxt not in state and nxt in succ:
            state[nxt] = 1
            stack.append((nxt, iter(succ[nxt])))
    return back


def to_graph(module: IRModule, function: str | None = None, level: str = "function",
             include_debug: bool = False) -> dict[str, Any]:
    """Nodes and edges for a graph widget.

    level "function": functions and derivative requests, with call and derivative edges (restricted
    to what `function` reaches, plus its direct users, when given); "block": basic blocks with
    control-flow edges (``back`` marks loop back edges); "instruction": instructions with def-use
    edges. Debug* instructions are left out unless `include_debug`.
    """
    if level == "function":
        funcs, derivs = _function_nodes(module)
        edges = _function_edges(module)
        keep: set[str] | None = None
        if function is not None:
            start = module.function(function)
            keep = {start.id} if start else set()
            frontier = list(keep)
            while frontier:
                cur = frontier.pop()
                for e in edges:
                    if e["source"] == cur and e["target"] not in keep:
                        keep.add(e["target"])
                        frontier.append(e["target"])
            keep |= {e["source"] for e in edges if start and e["target"] == start.id}
        nodes = [{"id": f.id, "label": f.name, "kind": "function", "mangled": f.mangled_name,
                  "imported": f.imported, "entry_point": f.decoration("entryPoint") is not None,
                  "generic": f.parent, "blocks": len(f.blocks), "role": (classify_autodiff(f.name) or (None,))[0],
                  "decorations": [n for n, _ in f.decorations]} for f in funcs.values()]
        nodes += [{"id": d.id, "label": f"{d.name or d.opcode}", "kind": "derivative", "opcode": d.opcode,
                   "role": AUTODIFF_OPS.get(d.opcode, "user"), "text": d.text} for d in derivs.values()]
        if keep is not None:
            nodes = [n for n in nodes if n["id"] in keep]
            edges = [e for e in edges if e["source"] in keep and e["target"] in keep]
        return {"level": level, "function": function, "nodes": nodes, "edges": edges}
    if level not in ("block", "instruction"):
        raise ValueError(f"level must be 'function', 'block' or 'instruction', not {level!r}")
    if function is not None:
        f0 = module.function(function)
        chosen = [f0] if f0 else []
    else:
        chosen = [f for f in module.funcs if f.blocks]
    nodes: list[dict[str, Any]] = []
    edges2: list[dict[str, Any]] = []
    for f in chosen:
        back = _back_edges(f)
        if level == "block":
            for b in f.blocks:
                nodes.append({"id": f"{f.id}:{b.label}", "label": b.label, "kind": "block", "function": f.id,
                              "params": [p.name or p.id for p in b.params], "insts": len(b.insts),
                              "text": "\n".join(i.text for i in b.insts
                                                if include_debug or not i.opcode.startswith("Debug"))})
                edges2 += [{"source": f"{f.id}:{b.label}", "target": f"{f.id}:{s}", "kind": "flow",
                            "back": (b.label, s) in back} for s in b.successors]
                edges2 += [{"source": f"{f.id}:{b.label}", "target": f"{f.id}:{s}", "kind": k, "back": False}
                           for k, s in b.structure]
            continue
        defs: dict[str, str] = {}
        for b in f.blocks:
            for i in (*b.params, *b.insts):
                if not include_debug and i.opcode.startswith("Debug"):
                    continue
                node = _inst_node(f.id, b.label, i)
                nodes.append(node)
                if i.id:
                    defs[i.id] = node["id"]
        for b in f.blocks:
            for i in b.insts:
                if not include_debug and i.opcode.startswith("Debug"):
                    continue
                tgt = f"{f.id}:{i.id or 'L%d' % i.line}"
                for k, op in enumerate(dict.fromkeys(i.operands)):
                    if op in defs:
                        edges2.append({"source": defs[op], "target": tgt, "kind": "use", "operand": k})
    return {"level": level, "function": function, "nodes": nodes, "edges": edges2}
