"""The one Slang text scanner: comments and strings blanked, top-level declarations found, names read.

Everything that splits Slang text (which names a cell declares and mentions, where a declaration's
modifiers go, where a body starts and ends) goes through here, so there is one notion of "a
top-level declaration". It is a scanner, not a parser: it never decides what a name *refers to*
(the compiler does that: compiler/_worker reports the modules a checked cell references); it gives
candidates and positions. Offsets are into the original text (blanking keeps every offset).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

__all__ = ["IDENT", "Decl", "apply_edits", "blank", "closing", "conformances", "declarations", "declared_names",
           "entry_definition", "index_sites", "mentions", "split_commas", "uncommented", "visibility_variant"]

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'", re.S)
IDENT = _IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VISIBILITY = ("public", "internal", "private")
_TYPE_KEYWORDS = ("struct", "class", "interface", "enum", "namespace", "cbuffer", "tbuffer")
_DIRECTIVES = ("import", "__exported", "module", "__include", "implementing", "using")
_OPEN = {"(": ")", "[": "]", "{": "}"}


def uncommented(text: str) -> str:
    """The text with comments replaced by spaces (strings kept; every offset the same)."""
    return _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)) if m.group(0)[0] == "/" else m.group(0),
                                  text)


@functools.lru_cache(maxsize=256)
def blank(text: str) -> str:
    """The text with comments and string/char literals replaced by spaces (newlines kept), so
    brackets and identifiers inside them do not count and every offset stays the same. (Cached:
    a cell's text is read by several parts in one run.)"""
    return _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def mentions(text: str) -> frozenset[str]:
    """Identifiers the text mentions outside comments and strings, except member names after `.`
    or `->` (`tid.x` mentions `tid`, not `x`): candidates for what it references, never a verdict."""
    b = blank(text)
    out = set()
    for m in _IDENT.finditer(b):
        j = m.start() - 1
        while j >= 0 and b[j] in " \t\r\n":
            j -= 1
        if j >= 0 and (b[j] == "." or (b[j] == ">" and j > 0 and b[j - 1] == "-")):
            continue
        out.add(m.group(0))
    return frozenset(out)


@dataclass(frozen=True)
class Decl:
    """One top-level declaration (or directive) of a text."""

    start: int                 # first character (its attributes included)
    head: int                  # after its leading `[attributes]`: where a modifier goes
    end: int                   # one past its last character
    kind: str                  # function | variable | struct | class | interface | enum | namespace |
                               # cbuffer | tbuffer | typealias | typedef | extension | directive | other
    names: tuple[str, ...]     # what it declares at top level (a cbuffer: its members too)
    body: tuple[int, int] | None = None   # the `{ ... }` interior (a function's body, a type's members)


def _skip_ws(b: str, i: int) -> int:
    n = len(b)
    while i < n:
        if b[i] in " \t\r\n":
            i += 1
        elif b[i] == "#" and (i == 0 or b.rfind("\n", 0, i) == i - 1 or not b[b.rfind("\n", 0, i) + 1:i].strip()):
            while i < n and b[i] != "\n":   # a preprocessor line (with continuations)
                i += 2 if b[i] == "\\" else 1
        else:
            break
    return i


def _match(b: str, i: int) -> int:
    """Index just past the bracket that closes the one at i (or the end of the text)."""
    stack = [_OPEN[b[i]]]
    i += 1
    while i < len(b) and stack:
        c = b[i]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in ")]}":
            if c == stack[-1]:
                stack.pop()
            elif c in stack:
                while stack and stack[-1] != c:
                    stack.pop()
                stack.pop()
        i += 1
    return i


def declarations(text: str, start: int = 0, end: int | None = None, *, _b: str | None = None) -> Iterator[Decl]:
    """The declarations at the top level of text[start:end] (a body, when given its interior)."""
    if start == 0 and end is None and _b is None:
        return iter(_top_level(text))
    return _declarations(text, start, end, blank(text) if _b is None else _b)


@functools.lru_cache(maxsize=256)
def _top_level(text: str) -> tuple[Decl, ...]:
    """A whole text's top-level declarations (cached: a cell's text is scanned once per run)."""
    return tuple(_declarations(text, 0, None, blank(text)))


def _declarations(text: str, start: int, end: int | None, b: str) -> Iterator[Decl]:
    end = len(b) if end is None else end
    i = _skip_ws(b, start)
    while i < end:
        s = i
        while i < end and b[i] == "[":           # attributes
            i = _skip_ws(b, _match(b, i))
        head = i
        body: tuple[int, int] | None = None
        initializer = False
        while i < end:
            c = b[i]
            if c == ";":
                i += 1
                break
            if c == "=":
                initializer = True
            if c == "{" and not initializer:
                j = _match(b, i)
                body = (i + 1, j - 1)
                i = j
                k = _skip_ws(b, i)
                if k < end and b[k] == ";":
                    i = k + 1
                break
            if c in _OPEN:
                i = _match(b, i)
                continue
            if c == "}":   # a stray closing brace: skip it
                i += 1
                break
            i += 1
        i = min(i, end)
        if i > s:
            kind, names = _classify(b, head, body[0] - 1 if body else i, body)
            yield Decl(s, head, i, kind, names, body)
        i = _skip_ws(b, i)


def _classify(b: str, head: int, stop: int, body: tuple[int, int] | None) -> tuple[str, tuple[str, ...]]:
    words = [(m.group(0), m.start(), m.end()) for m in _IDENT.finditer(b, head, stop)]
    if not words:
        return "other", ()
    ws = [w for w, _, _ in words]
    first = next((w for w in ws if w not in _VISIBILITY and w not in ("static", "const", "export", "extern")), "")
    if first in _DIRECTIVES:
        return "directive", ()
    if first == "extension":
        return "extension", ()
    for kw in (*_TYPE_KEYWORDS, "typealias"):
        if kw in ws[:4]:
            k = ws.index(kw)
            rest = [w for w in ws[k + 1:] if w != "class"] if kw == "enum" else ws[k + 1:]
            name = rest[0] if rest else ""
            if kw in ("cbuffer", "tbuffer") and body is not None:
                members = tuple(n for d in declarations("", body[0], body[1], _b=b) for n in d.names)
                return kw, (name, *members) if name else members
            return kw, (name,) if name else ()
    if "typedef" in ws[:2]:
        return "typedef", (ws[-1],)
    # a function (a parenthesis before any `=` or `:`) or variables
    seg = b[head:stop]
    flat = seg
    while True:  # type arguments blanked: `T f<T : I>(...)`, `vector<float, 3> v`
        nxt = re.sub(r"<[^<>(){};=]*>", lambda m: " " * len(m.group(0)), flat)
        if nxt == flat:
            break
        flat = nxt
    paren = _depth0(flat, "(")
    cut = min(x for x in (_depth0(flat, "="), _depth0(flat, ":"), len(seg)) if x >= 0)
    if 0 <= paren < cut:
        j = paren - 1
        while j >= 0 and seg[j] in " \t\r\n":
            j -= 1
        if j >= 0 and seg[j] == ">":   # `T f<T>(...)`: the name is before the generic parameters
            depth = 0
            while j >= 0:
                depth += {">": 1, "<": -1}.get(seg[j], 0)
                if depth == 0:
                    break
                j -= 1
            j -= 1
        m = re.search(r"[A-Za-z_]\w*\s*$", seg[:j + 1])
        return ("function", (m.group(0).strip(),)) if m else ("other", ())
    names = []
    for part in _split_commas(seg[:len(seg) if _depth0(seg, ";") < 0 else _depth0(seg, ";")]):
        part = re.split(r"[=\[:]", part, maxsplit=1)[0]
        ids = _IDENT.findall(part)
        if ids:
            names.append(ids[-1])
    return ("variable", tuple(names)) if names else ("other", ())


def _depth0(seg: str, ch: str) -> int:
    depth = 0
    for i, c in enumerate(seg):
        if c in "([{":
            if c == ch and depth == 0:
                return i
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ch and depth == 0:
            return i
    return -1


def _split_commas(seg: str) -> list[str]:
    """Split at commas outside brackets and `<...>` type arguments."""
    out, depth, angle, start = [], 0, 0, 0
    for i, c in enumerate(seg):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<":
            angle += 1
        elif c == ">" and angle:
            angle -= 1
        elif c == "," and depth == 0 and angle == 0:
            out.append(seg[start:i])
            start = i + 1
    out.append(seg[start:])
    return out


def closing(text: str, i: int) -> int:
    """Index just past the bracket that closes the one at `text[i]` (text already blanked): (), [],
    {} nested in each other, or a `<...>` type argument list (only angle brackets counted); -1 when
    a `<` is never closed."""
    if text[i] == "<":
        depth = 0
        for j in range(i, len(text)):
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            if depth == 0:
                return j + 1
        return -1
    return _match(text, i)


def split_commas(seg: str) -> list[str]:
    """Split a parameter or declarator list at commas outside brackets and type arguments; the parts
    stripped, empty ones dropped."""
    return [p.strip() for p in _split_commas(seg) if p.strip()]


def conformances(text: str, type_name: str) -> frozenset[str]:
    """The names after `:` in the declarations of struct/class `type_name` (its interfaces)."""
    b = blank(text)
    out: set[str] = set()
    for d in declarations(text, _b=b):
        if d.kind in ("struct", "class") and type_name in d.names:
            head = b[d.head:d.body[0] - 1 if d.body else d.end]
            if ":" in head:
                out.update(_IDENT.findall(head.split(":", 1)[1]))
    return frozenset(out)


def declared_names(text: str) -> frozenset[str]:
    """The names a text declares at top level (functions, variables, types, aliases, cbuffer members)."""
    return frozenset(n for d in declarations(text) for n in d.names)


def visibility_variant(text: str, hidden: Iterable[str]) -> str:
    """The text with its top-level declarations named in `hidden` marked `internal` (visible inside
    their module, not to importers) and everything else `public`, members of its types included
    (a visibility modifier anywhere makes Slang's default `internal`, for members too).

    This is how a later cell's redeclaration wins: importers of the earlier cell load this variant,
    whose code is the cell's own (same module name, same IR), only its shadowed names hidden."""
    hide = frozenset(hidden)
    b = blank(text)
    inserts: list[tuple[int, str]] = []

    def visit(start: int, end: int | None, top: bool) -> None:
        for d in declarations(text, start, end, _b=b):
            if d.kind in ("directive", "other"):
                continue
            head_words = _IDENT.findall(b[d.head:d.body[0] if d.body else d.end])
            hidden_here = top and bool(set(d.names) & hide) and d.kind not in ("cbuffer", "tbuffer")
            vis = next((w for w in head_words[:4] if w in _VISIBILITY), None)
            if hidden_here and d.kind == "function" and re.search(r"\b(shader|numthreads)\b", b[d.start:d.head]):
                # a hidden kernel is renamed too: Slang finds entry points by name, visibility aside
                hit = re.compile(rf"\b{re.escape(d.names[0])}(?=\s*[(<])").search(b, d.head)
                if hit is not None and hit.start() < (d.body[0] if d.body else d.end):
                    inserts.append((hit.end(), "_sk_shadowed"))
            if vis is None:
                inserts.append((d.head, "internal " if hidden_here else "public "))
            elif hidden_here and vis == "public":
                k = b.index("public", d.head)
                inserts.append((k, "internal "))   # `internal public` would be two; replace below
                inserts.append((-(k + 1), ""))
            if d.body is not None and d.kind in ("struct", "class", "extension", "namespace"):
                visit(d.body[0], d.body[1], d.kind == "namespace" and False)
            elif d.body is not None and d.kind in ("cbuffer", "tbuffer"):
                for m in declarations(text, d.body[0], d.body[1], _b=b):
                    if m.kind == "variable" and not any(w in _VISIBILITY for w in _IDENT.findall(b[m.head:m.end])[:4]):
                        inserts.append((m.head, "internal " if top and set(m.names) & hide else "public "))

    visit(0, None, True)
    drop = {-(k + 1) for k, s in inserts if k < 0}
    out, last = [], 0
    for pos, s in sorted((p, s) for p, s in inserts if p >= 0):
        out.append(text[last:pos])
        out.append(s)
        last = pos + len("public") + 1 if pos in drop else pos
    out.append(text[last:])
    return "".join(out)


def apply_edits(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    """The text with each edit (start, end, replacement) applied, all at offsets of the original text:
    edits must not overlap (insertions have start == end; those at one offset go in the given order)."""
    out, pos = [], 0
    for start, end, repl in sorted(edits, key=lambda e: (e[0], e[1])):
        out.append(text[pos:start])
        out.append(repl)
        pos = end
    out.append(text[pos:])
    return "".join(out)


_AFTER_PARAMS = re.compile(r"\s*(:\s*\w+\s*)?\{")


def entry_definition(text: str, name: str, *, _b: str | None = None) -> tuple[int, int, int, int] | None:
    """(open paren, close paren, body start, body end) of the last definition of function `name` in the
    text (a call or a declaration without a body does not count; a `: SV_Target`-style semantic may sit
    between the parameters and the body), or None. Body start is just past `{`, body end is its `}`."""
    b = blank(text) if _b is None else _b
    found = None
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", b):
        close = closing(b, m.end() - 1) - 1
        if close >= len(b) or b[close] != ")":
            continue
        after = _AFTER_PARAMS.match(b, close + 1)
        if after is not None:
            found = (m.end() - 1, close, after.end(), closing(b, after.end() - 1) - 1)
    return found


def index_sites(text: str, name: str, start: int = 0, end: int | None = None, *,
                _b: str | None = None) -> Iterator[tuple[int, int, int]]:
    """(name start, `[`, its `]`) of each `name[...]` outside comments and strings whose `[` lies in
    [start, end). `name` may be a dotted path (`p.inner`, spaces allowed around the dots); a name right
    after a `.` or inside a longer identifier does not count. Unclosed brackets are skipped."""
    b = blank(text) if _b is None else _b
    hi = len(b) if end is None else end
    dotted = r"\s*\.\s*".join(re.escape(part) for part in name.split("."))
    for m in re.finditer(rf"(?<![\w.]){dotted}\s*\[", b):
        open_ = m.end() - 1
        if not start <= open_ < hi:
            continue
        close = closing(b, open_) - 1
        if close > open_ and close < len(b) and b[close] == "]":
            yield m.start(), open_, close
