"""Loops with a per-thread trip count on the vector path: the row's threads iterate together, masked.

g++ vectorises only a lane loop whose body has no loop left in it, so a kernel like Mandelbrot (a
`while` that each thread leaves at its own iteration) stays scalar with the plain lane entry. Here
the thread's body is cut at its top-level loops into phases, and each phase becomes its own lane
loop over the row: the straight code before a loop runs for every lane; the loop then runs as
`for (;;) { one iteration for every live lane; stop when none is live }`, the lanes that left it (a
`break`) or returned masked; the code after it runs for the lanes that did not return. The locals
that live across phases are kept in per-lane arrays between the lane loops. Inside a phase,
`return`/`break`/`continue` become flags, and the statements after one are guarded by them: the
code stays branch-free in the lanes, which is what g++'s if-conversion needs. The lane entry is
built without tree-PRE (ENTRY_ATTRIBUTE): PRE moves the next lane's live-flag load into the lane
loop's latch, and g++ 12's if-conversion then refuses the loop ("non empty basic block after exit bb").

This is a rewrite of the C++ text Slang emits (braced blocks, `for(;;)` loops, declarations at the
top level of the body function); a body it does not recognise is refused with a reason and keeps
the scalar path. The semantics are the scalar path's: each live lane runs exactly its own
iterations, in the same order, with the same accessors (out-of-range counts stay exact).
"""

from __future__ import annotations

import dataclasses
import re

from .cpp_text import close, statement_end

GANG_FILE = "sk_simd_gang"   # the #line file name of the phase lane loops (for g++'s report)
ENTRY_ATTRIBUTE = 'optimize("no-tree-pre")'   # for the lane entry the row function is inlined into


class Unsupported(Exception):
    """The body is not in a form this rewrite handles (the kernel keeps the scalar path)."""


@dataclasses.dataclass(frozen=True)
class Gang:
    """A row function for the lane entry (or why there is none)."""

    code: str = ""                      # `sk_gang_<entry>(x, y, z, sk_y, sk_z, ep, gp)`, for the lane namespace
    name: str = ""
    loop_lines: tuple[int, ...] = ()    # GANG_FILE lines of its masked loops' lane loops (all must vectorise)
    blocked: str = ""

    @property
    def loops(self) -> int:
        """How many loops run masked (one lane loop each)."""
        return len(self.loop_lines)


@dataclasses.dataclass(frozen=True)
class _Var:
    """A local kept across phases: in one array per component (`Vector<float, 2>` as two float
    arrays: g++ does not vectorise loads of a member from an array of Vector structs)."""

    name: str
    type: str            # as declared (const dropped)
    store: str           # the arrays' element type (bool is kept as uint32_t: 32-bit lanes like the floats)
    components: int = 0  # a Vector's size, 0 for a scalar or another type

    def arrays(self, nx: int) -> list[str]:
        return [f"    {self.store} {a}[{nx}] = {{}};" for a in self._names()]

    def load(self) -> str:
        get = [f"{a}[sk_l] != 0" if self.store != self.element else f"{a}[sk_l]" for a in self._names()]
        value = get[0] if not self.components else f"{self.type}({', '.join(get)})"
        return f"        {self.type} {self.name} = {value};"

    def save(self) -> str:
        fields = [""] if not self.components else [f".{c}" for c in "xyzw"[:self.components]]
        return " ".join(f"{a}[sk_l] = {self.name}{f};" for a, f in zip(self._names(), fields))

    @property
    def element(self) -> str:
        m = _VECTOR.match(self.type)
        return m.group(1).strip() if m and self.components else self.type

    def _names(self) -> list[str]:
        if not self.components:
            return [f"sk_a_{self.name}"]
        return [f"sk_a_{self.name}_{c}" for c in "xyzw"[:self.components]]


_VECTOR = re.compile(r"^Vector<\s*([\w ]+?)\s*,\s*([1-4])\s*>$")


_KEYWORDS = {"return", "break", "continue", "else", "goto", "case", "default", "typedef", "using", "delete",
             "throw", "new", "if", "for", "while", "do", "switch"}
_DECL = re.compile(r"(?s)^(?:const\s+)?(?P<type>[A-Za-z_][\w:]*(?:\s*<[^;=]*?>)?(?:\s*\*)*)\s+(?P<name>[A-Za-z_]\w*)"
                   r"\s*(?P<rest>=.*|\{.*\}|)\s*;$")


def gang(user: str, entry: str, nx: int) -> Gang:
    """The row function for `entry`'s body in the (rewritten) C++ `user`, with `nx` lanes per row."""
    try:
        return _gang(user, entry, nx)
    except Unsupported as exc:
        return Gang(blocked=str(exc))


def _gang(user: str, entry: str, nx: int) -> Gang:
    params, body = _body_function(user, entry)
    # the cell's #line directives would number these lines in GANG_FILE (a #line without a file
    # keeps the current one); g++'s messages for the vector build are not shown, so they go (the
    # statement walk below then meets no directive between an `if (...)` and its block)
    body = re.sub(r"(?m)^[ \t]*#line\b.*$", "", body)
    stmts = _flatten(_statements(body))
    carried = _carried(stmts)
    phases: list[tuple[str, list[str]]] = [("straight", [])]
    for st in stmts:
        if _loop_header(st) is not None:
            phases.append(("loop", [st]))
            phases.append(("straight", []))
        elif re.match(r"(?:for|while|do)\b", st):
            raise Unsupported(f"a loop Slang did not emit as for(;;) (`{st.splitlines()[0][:50]}`)")
        else:
            phases[-1][1].append(st)
    if not any(kind == "loop" for kind, _ in phases):
        raise Unsupported("no loop at the top level of the thread's body")
    name = f"sk_gang_{entry}"
    out = [f"static inline __attribute__((always_inline)) void {name}(uint32_t sk_gx, uint32_t sk_gy, "
           "uint32_t sk_gz, uint32_t sk_y, uint32_t sk_z, void* sk_ep, void* sk_gp)", "{",
           f"    ComputeThreadVaryingInput sk_ts[{nx}];",
           f"    uint32_t sk_ret_a[{nx}] = {{}}, sk_live_a[{nx}];"]
    out += [a for v in carried for a in v.arrays(nx)]
    lines: list[int] = []

    def lane_loop(inner: list[str], masked: bool = False) -> None:
        # ivdep: lanes are independent; unroll 1: a 16-lane loop must stay a loop for the vectoriser
        out.extend(["#pragma GCC ivdep", "#pragma GCC unroll 1"])
        if masked:  # the loops that must vectorise (the straight phases run once per thread)
            lines.append(len(out) + 2)  # after the #line below: the `for` is line len(out) + 2 of GANG_FILE
        out.append(f'#line {len(out) + 2} "{GANG_FILE}"')
        out.append(f"    for (uint32_t sk_l = 0; sk_l < {nx}u; ++sk_l) {{")
        out.extend(inner)
        out.append("    }")

    out.append(f'#line {len(out) + 2} "{GANG_FILE}"')
    out.append(f"    for (uint32_t sk_l = 0; sk_l < {nx}u; ++sk_l) {{")
    out.append("        sk_ts[sk_l].groupID = Vector<uint32_t, 3>(sk_gx, sk_gy, sk_gz);")
    out.append("        sk_ts[sk_l].groupThreadID = Vector<uint32_t, 3>(sk_l, sk_y, sk_z);")
    out.append("    }")
    bind = [f"        void* {p} = {v};" for p, v in zip(params, ("&sk_ts[sk_l]", "sk_ep", "sk_gp"))]
    for kind, code in phases:
        if not code:
            continue
        text = "\n".join(code)
        used = [v for v in carried if re.search(rf"\b{v.name}\b", text)]
        loads = [v.load() for v in used]
        stores = [f"        {v.save()}" for v in used]
        if kind == "straight":
            guarded, _ = _guard(_hoist(code, carried), loop=False)
            lane_loop([*bind, *loads,
                       "        uint32_t sk_ret = sk_ret_a[sk_l], sk_stop = sk_ret;",
                       "        if (!sk_stop) {", guarded, "        }",
                       *stores, "        sk_ret_a[sk_l] = sk_ret;"])
        else:
            loop_body = _loop_header(code[0]) or ""
            guarded, _ = _guard(_hoist(_statements(loop_body), carried), loop=True)
            out.append(f"    for (uint32_t sk_l = 0; sk_l < {nx}u; ++sk_l) sk_live_a[sk_l] = !sk_ret_a[sk_l];")
            out.append("    for (;;) {")
            out.append("    uint32_t sk_any = 0;")
            lane_loop([*bind, *loads,
                       "        uint32_t sk_ret = sk_ret_a[sk_l], sk_brk = 0, sk_live = sk_live_a[sk_l];",
                       "        uint32_t sk_stop = !sk_live;",
                       "        if (!sk_stop) {", guarded, "        }",
                       *stores,
                       "        sk_live = sk_live & !sk_ret & !sk_brk;",
                       "        sk_ret_a[sk_l] = sk_ret; sk_live_a[sk_l] = sk_live; sk_any |= sk_live;"],
                      masked=True)
            out.append("    if (!sk_any) break;")
            out.append("    }")
    out.append("}")
    return Gang("\n".join(out), name, tuple(lines))


_THREAD_CALL = r"void {thread}\([^)]*\)\s*\{{\s*(\w+)\(\s*\w+\s*,\s*\w+\s*,\s*\w+\s*\)\s*;\s*\}}"


def _body_function(user: str, entry: str) -> tuple[tuple[str, ...], str]:
    """(the three parameter names, the body text) of the function holding one thread's code."""
    thread = f"{entry}_Thread"
    call = re.search(_THREAD_CALL.format(thread=re.escape(thread)), user)
    name = call.group(1) if call else thread
    m = re.search(rf"\bvoid {re.escape(name)}\(([^)]*)\)\s*\{{", user)
    if m is None:
        raise Unsupported(f"the thread's body function {name} was not found")
    params = tuple(p.strip().split()[-1].lstrip("*") for p in m.group(1).split(","))
    if len(params) != 3:
        raise Unsupported(f"{name} takes {len(params)} parameters, not 3")
    end = _matching(user, m.end() - 1)
    return params, user[m.end():end]


def _matching(text: str, start: int) -> int:
    """The index of the bracket that closes the one at `start`."""
    end = close(text, start)
    if end < 0:
        raise Unsupported("unbalanced brackets")
    return end


def _statement_end(text: str, start: int) -> int:
    end = statement_end(text, start)
    if end < 0:
        raise Unsupported("a statement without its ;")
    return end


_SPACE = re.compile(r"\s*")


def _statements(text: str) -> list[str]:
    """The statements of a block's text, each whole (an `if` with its else chain, a loop with its
    body, `SLANG_UNROLL` with its loop)."""
    out: list[str] = []
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    while i < len(text):
        start = i
        unroll = re.match(r"SLANG_UNROLL\s*", text[i:])   # an [unroll] loop: g++ peels it, not a phase
        if unroll:
            i += unroll.end()
        if text[i] == "#":
            raise Unsupported("a preprocessor directive in the thread's body")
        if text[i] == "{":
            j = _matching(text, i) + 1
        else:
            kw = re.match(r"(if|for|while|switch|do)\b\s*", text[i:])
            if kw is None:
                j = _statement_end(text, i) + 1
            elif kw.group(1) == "do":
                raise Unsupported("a do-while loop")
            else:
                j = _after_block(text, _matching(text, i + kw.end()) + 1)
                while kw.group(1) == "if":
                    e = re.match(r"\s*else\b\s*", text[j:])
                    if e is None:
                        break
                    k = j + e.end()
                    if text.startswith("if", k) and re.match(r"if\b", text[k:]):
                        k2 = _SPACE.match(text, k + 2).end()  # type: ignore[union-attr]
                        j = _after_block(text, _matching(text, k2) + 1)
                    else:
                        j = _after_block(text, k)
        out.append(text[start:j].strip())
        i = _SPACE.match(text, j).end()  # type: ignore[union-attr]
    return out


def _after_block(text: str, i: int) -> int:
    """The end of the braced block starting at `i` (after blanks)."""
    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
    if not text.startswith("{", i):
        raise Unsupported("a branch or loop body without braces")
    return _matching(text, i) + 1


def _loop_header(st: str) -> str | None:
    """The body of a top-level `for(;;) {...}` / `while(true) {...}`, else None."""
    m = re.match(r"(?:for\s*\(\s*;\s*;\s*\)|while\s*\(\s*(?:true|1)\s*\))\s*", st)
    if m is None:
        return None
    return st[m.end():].strip()[1:-1]


def _flatten(stmts: list[str]) -> list[str]:
    """`if (c) { ...a loop... }` as the last statement (only `return;` after it): `if (!(c)) return;`
    and its block at the top level, so that its loop becomes a phase."""
    for k in range(len(stmts) - 1, -1, -1):
        st = stmts[k]
        if st == "return;":
            continue
        m = re.match(r"if\s*(\()", st)
        if m is None:
            return stmts
        paren = _matching(st, m.start(1))
        block = st[paren + 1:].strip()
        if not block.startswith("{") or _matching(block, 0) != len(block) - 1:  # an else follows
            return stmts
        if not re.search(r"\bfor\s*\(\s*;\s*;\s*\)", block):
            return stmts
        cond = st[m.start(1) + 1:paren]
        inner = _statements(block[1:-1])
        return _flatten([*stmts[:k], f"if (!({cond})) {{ return; }}", *inner, *stmts[k + 1:]])
    return stmts


def _carried(stmts: list[str]) -> list[_Var]:
    """The body's top-level locals: they live across phases, in per-lane arrays."""
    out: list[_Var] = []
    for st in stmts:
        m = _DECL.match(st)
        if m is None or m.group("type") in _KEYWORDS or m.group("name") in _KEYWORDS:
            continue
        t = re.sub(r"\s+", " ", m.group("type")).strip()
        if "&" in t:
            raise Unsupported(f"a reference local `{m.group('name')}`")
        vec = _VECTOR.match(t)
        element = vec.group(1).strip() if vec else t
        out.append(_Var(m.group("name"), t, "uint32_t" if element == "bool" else element,
                        int(vec.group(2)) if vec else 0))
    names = {v.name for v in out}
    for st in stmts:
        m = _DECL.match(st)
        if m and "*" in m.group("type"):
            taken = re.findall(r"&\s*\(*\s*([A-Za-z_]\w*)", m.group("rest"))
            if any(t in names for t in taken):
                raise Unsupported(f"a pointer to a local kept across the loop (`{m.group('name')}`)")
    return out


def _hoist(stmts: list[str], carried: list[_Var]) -> list[str]:
    """Top-level declarations of carried locals as assignments (they are declared by the lane loop)."""
    names = {v.name for v in carried}
    out = []
    for st in stmts:
        m = _DECL.match(st)
        if m and m.group("name") in names and m.group("type") not in _KEYWORDS:
            rest = m.group("rest").strip()
            if rest.startswith("="):
                out.append(f"{m.group('name')} {rest};")
            elif rest.startswith("{"):
                out.append(f"{m.group('name')} = {m.group('type')}{rest};")
            continue
        out.append(st)
    return out


def _guard(stmts: list[str], loop: bool) -> tuple[str, bool]:
    """The statements with `return;` (and, in the loop's body, its `break;`/`continue;`) as flags; the
    statements after one that may have jumped run under `if (!sk_stop)`. (text, may have jumped)."""
    out: list[str] = []
    for k, st in enumerate(stmts):
        text, jumps = _jump(st, loop)
        out.append(text)
        if jumps:
            rest = stmts[k + 1:]
            if rest:
                inner, _ = _guard(rest, loop)
                out.append(f"if (!sk_stop) {{\n{inner}\n}}")
            return "\n".join(out), True
    return "\n".join(out), False


def _jump(st: str, loop: bool) -> tuple[str, bool]:
    if st == "return;":
        return "{ sk_ret = 1; sk_stop = 1; }", True
    if loop and st == "break;":
        return "{ sk_brk = 1; sk_stop = 1; }", True
    if loop and st == "continue;":
        return "{ sk_stop = 1; }", True
    if st.startswith("{"):
        inner, jumps = _guard(_statements(st[1:-1]), loop)
        return f"{{\n{inner}\n}}", jumps
    m = re.match(r"if\s*(\()", st)
    if m is not None:
        return _jump_if(st, m.start(1), loop)
    if re.match(r"(?:for|while|switch)\b", st):
        # a nested loop's (or switch's) own break/continue stay; a return from inside is not handled
        if re.search(r"\breturn\b", st) or (loop and st.startswith("switch") and re.search(r"\bcontinue\b", st)):
            raise Unsupported("a return (or continue) inside a nested loop or switch")
        return st, False
    if re.search(r"\b(?:return|goto)\b", st):
        raise Unsupported(f"a jump in `{st[:40]}`")
    return st, False


def _jump_if(st: str, open_paren: int, loop: bool) -> tuple[str, bool]:
    """An if/else chain with each branch's block guarded."""
    paren = _matching(st, open_paren)
    head = st[:paren + 1]
    i = _SPACE.match(st, paren + 1).end()  # type: ignore[union-attr]
    end = _matching(st, i)
    inner, jumps = _guard(_statements(st[i + 1:end]), loop)
    out = f"{head}\n{{\n{inner}\n}}"
    rest = st[end + 1:].strip()
    if rest:
        e = re.match(r"else\b\s*", rest)
        if e is None:
            raise Unsupported(f"unexpected text after an if block (`{rest[:30]}`)")
        body = _statements(rest[e.end():])
        if len(body) != 1 or not body[0].startswith(("{", "if")):
            raise Unsupported(f"an else branch without braces (`{rest[:30]}`)")
        tail_text, tail_jumps = _jump(body[0], loop)
        out += "\nelse\n" + tail_text
        jumps = jumps or tail_jumps
    return out, jumps
