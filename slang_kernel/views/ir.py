"""Slang IR text -> frozen dataclasses (the graphs drawn from them are in ir_graph).

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
    "classify_autodiff", "decode_name", "demangle", "demangle_text", "ids", "AUTODIFF_OPS",
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


def decode_name(ident: str) -> str:
    """Undo the IR's name escaping (``sx5Ffwdx5Ff`` -> ``s_fwd_f``); other text is unchanged."""
    return re.sub(r"x([0-9A-F]{2})", lambda m: m.group(0) if chr(int(m.group(1), 16)).isalnum()
                  else chr(int(m.group(1), 16)), ident)


def classify_autodiff(name: str) -> tuple[str, str] | None:
    """(role, primal name) for an autodiff-generated function name such as ``s_fwd_f``."""
    m = _AUTODIFF_NAME.match(decode_name(name or ""))
    inner = classify_autodiff(m.group(2)) if m else None  # s_minCtx_s_bwdCallableCtx_f -> f
    return (_ROLES[m.group(1)], inner[1] if inner else m.group(2)) if m else None


_SHOWN = {"fwd": "fwd_diff({})", "bwd": "bwd_diff({})", "bwdProp": "bwd_diff({}) propagate",
          "primal": "bwd_diff({}) primal", "apply": "bwd_diff({}) apply", "remat": "bwd_diff({}) rematerialize",
          "bwdCallableCtx": "bwd_diff({}) context", "minCtx": "{} (minimal)", "paramCtx": "{} (parameters)"}
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def demangle(name: str) -> str:
    """What a generated name means, as the user wrote it: ``sx5FbwdCallableCtxx5FsafeDivide`` ->
    ``bwd_diff(safeDivide) context``, ``s_fwd_f`` -> ``fwd_diff(f)``; other names are decoded only."""
    plain = decode_name(name or "")
    m = _AUTODIFF_NAME.match(plain)
    if not m:
        return plain
    return _SHOWN[m.group(1)].format(demangle(m.group(2)))


def demangle_text(text: str) -> str:
    """IR text with every identifier demangled (see demangle)."""
    return _IDENT.sub(lambda m: demangle(m.group(0)) if "x5F" in m.group(0) or m.group(0).startswith("s_")
                      else m.group(0), text)


def split_dump(text: str) -> list[tuple[str, str]]:
    """Split ``-dump-ir*`` output (``### AFTER pass:`` ... ``###``) into (title, IR text) pairs."""
    parts = re.split(r"^###[ \t]*(.*?)[ \t:]*$", text, flags=re.M)
    return [(t, body.strip("\n")) for t, body in zip(parts[1::2], parts[2::2]) if t]


# -- parsing -------------------------------------------------------------------------------------

def _blank_strings(s: str) -> str:
    """`s` with the inside of string literals blanked (same length, so indices still match)."""
    return _STR.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', s)


def ids(s: str) -> tuple[str, ...]:
    """The %ids of an instruction's text outside string literals."""
    return _ids(s)


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
