"""Completion, inspection and is_complete for Slang cell text (pure functions, no kernel needed).

`names` is what the session knows (Session.store.names(): {name: DeclInfo}); the cell text being edited
is not compiled yet, so declarations in it (structs, variables, parameters) are read from the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ... import scanner
from ...compiler.reflection import DeclInfo
from .language import ATTRIBUTES, BUILTIN_TYPES, INTRINSICS, KEYWORDS, SEMANTICS, SWIZZLE, vector_length
from .source import SLANG_MAGICS
from ...backends.registry import choices

__all__ = ["Completion", "after_dot", "complete", "inspect", "is_complete", "mask_code", "receiver_type", "type_of",
           "word_at"]

BACKENDS = choices()
TARGETS = ("hlsl", "glsl", "spirv-asm", "metal", "wgsl", "cuda", "cpp")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_NOT_TYPES = set(KEYWORDS) - {"This"}
_BUFFER_METHODS = ("Load", "Store", "GetDimensions", "IncrementCounter", "DecrementCounter",
                   "Append", "Consume", "InterlockedAdd")
_TEXTURE_METHODS = ("Sample", "SampleLevel", "SampleGrad", "Load", "GetDimensions", "Gather")


# -- lexical helpers ------------------------------------------------------------------------------------

def mask_code(code: str) -> tuple[str, bool]:
    """Comments and string literals replaced by spaces (same length); True if it ends inside a /* */."""
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            if j < 0:
                out[i:n] = [ch if ch == "\n" else " " for ch in code[i:n]]
                return "".join(out), True
            out[i:j + 2] = [ch if ch == "\n" else " " for ch in code[i:j + 2]]
            i = j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            j = min(j + 1, n)
            out[i + 1:j - 1] = " " * max(0, j - 1 - (i + 1))
            i = j
        else:
            i += 1
    return "".join(out), False


_PAIRS = {")": "(", "]": "[", "}": "{"}


def is_complete(code: str) -> dict[str, str]:
    """Unbalanced (, [ or { or an open /* comment: "incomplete" with an indent; a stray closer: "invalid"."""
    from .source import parse_cell

    text = parse_cell(code).source if code.strip() else code
    masked, open_comment = mask_code(text)
    stack: list[str] = []
    for ch in masked:
        if ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            if not stack or stack[-1] != _PAIRS[ch]:
                return {"status": "invalid"}
            stack.pop()
    if open_comment:
        return {"status": "incomplete", "indent": ""}
    if stack or text.rstrip("\n").endswith("\\"):
        depth = stack.count("{") + (1 if stack and stack[-1] != "{" else 0)
        return {"status": "incomplete", "indent": "    " * max(1, depth)}
    return {"status": "complete"}


def word_at(code: str, pos: int) -> tuple[str, int, int]:
    """The identifier around `pos` (may be empty) and its span."""
    start = pos
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
        start -= 1
    end = pos
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    return code[start:end], start, end


# -- declarations in the cell text ----------------------------------------------------------------------

_TYPE = r"([A-Za-z_][\w:]*(?:\s*<[^<>;(){}]*(?:<[^<>;(){}]*>[^<>;(){}]*)*>)?)"
_STRUCT = re.compile(r"\bstruct\s+([A-Za-z_]\w*)[^{;]*\{")
_FIELD = re.compile(r"^(?:(?:static|const|no_diff|uniform|public|private|internal)\s+)*" + _TYPE
                    + r"\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:\[[^\]]*\])?\s*(?:=.*)?$", re.S)
# the expression before a ".": a, a.b, buf[i].c
_CHAIN = re.compile(r"([A-Za-z_]\w*(?:\s*\[[^\]]*\])*(?:\s*\.\s*[A-Za-z_]\w*(?:\s*\[[^\]]*\])*)*)\s*$")


def _decl_re(name: str) -> re.Pattern[str]:
    return re.compile(_TYPE + r"\s+" + re.escape(name) + r"\s*(?=[;=,)\[:]|$|\n)", re.M)


def _local_type(masked: str, name: str, before: int) -> str | None:
    best = None
    for m in _decl_re(name).finditer(masked):
        t = m.group(1).strip()
        if t.split("<")[0].strip() in _NOT_TYPES or m.start() > before:
            continue
        best = t
    return best


def structs_in_text(code: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """struct NAME { TYPE field; ... } declared in the text: {NAME: ((field, type), ...)}."""
    masked, _ = mask_code(code)
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for m in _STRUCT.finditer(masked):
        start = m.end()                            # just inside the `{`
        close = scanner.closing(masked, start - 1)  # (an unclosed body, mid-typing: to the end)
        end = close - 1 if masked[close - 1:close] == "}" else len(masked)
        fields = []
        for d in scanner.declarations(masked, start, end, _b=masked):
            if d.kind != "variable":               # methods, nested types: not fields
                continue
            stmt = masked[d.head:d.end].strip().rstrip(";").strip()
            dm = _FIELD.match(stmt)
            if dm:
                for fname in dm.group(2).split(","):
                    fields.append((fname.strip(), dm.group(1).strip()))
        out[m.group(1)] = tuple(fields)
    return out


def _fields_of(type_name: str, names: Mapping[str, DeclInfo],
               text_structs: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(name, type, kind) members of a type: struct fields, vector swizzles, buffer methods."""
    t = re.sub(r"\s+", "", type_name)
    base = t.split("<")[0].split("::")[-1]
    if base in text_structs:
        return [(f, ft, "field") for f, ft in text_structs[base]]
    d = names.get(base)
    if d is not None and d.fields:
        return [(f, ft, "field") for f, ft in d.fields]
    n = vector_length(t)
    if n:
        return [(c, t.rstrip("1234"), "field") for c in SWIZZLE[:n] + SWIZZLE[4:4 + n]]
    if "Buffer" in base:
        return [(m, "", "function") for m in _BUFFER_METHODS]
    if "Texture" in base:
        return [(m, "", "function") for m in _TEXTURE_METHODS]
    return []


def _element_type(type_name: str) -> str:
    m = re.match(r"^[\w:]+\s*<\s*(.+?)\s*(?:,\s*\d+\s*)?>$", type_name.strip())
    if m:
        return m.group(1)
    n = vector_length(type_name)
    return type_name.strip().rstrip("1234") if n else type_name


def type_of(expr: str, code: str, before: int, names: Mapping[str, DeclInfo],
            text_structs: Mapping[str, Any] | None = None) -> str | None:
    """The Slang type of `a`, `a.b`, `buf[i].c` from declarations in the cell text or the session."""
    text_structs = structs_in_text(code) if text_structs is None else text_structs
    masked, _ = mask_code(code)
    parts = re.findall(r"([A-Za-z_]\w*)((?:\s*\[[^\]]*\])*)", expr)
    if not parts:
        return None
    root, idx = parts[0]
    t = _local_type(masked, root, before)
    if t is None:
        d = names.get(root)
        if d is not None and d.kind == "variable" and d.type:
            t = d.type
    if t is None:
        return None
    for _ in range(idx.count("[")):
        t = _element_type(t)
    for field, idx in parts[1:]:
        members = {f: ft for f, ft, k in _fields_of(t, names, text_structs) if k == "field"}
        if field not in members:
            return None
        t = members[field]
        for _ in range(idx.count("[")):
            t = _element_type(t)
    return t


def after_dot(code: str, cursor_pos: int) -> int | None:
    """The offset of the `.` before the word at the cursor (`p.ma|`), or None."""
    _, start, _ = word_at(code, cursor_pos)
    j = start - 1
    while j >= 0 and code[j] in " \t":
        j -= 1
    return j if j >= 0 and code[j] == "." else None


def receiver_type(code: str, cursor_pos: int, names: Mapping[str, DeclInfo]) -> str | None:
    """The type of the expression before the `.` at the cursor (`p.pos.|` -> float3), if known."""
    j = after_dot(code, cursor_pos)
    m = _CHAIN.search(code[:j]) if j is not None else None
    return type_of(m.group(1), code, j, names) if m is not None and j is not None else None


# -- completion -----------------------------------------------------------------------------------------

@dataclass
class Completion:
    matches: list[str]
    start: int
    end: int
    types: list[dict[str, Any]]

    def reply(self) -> dict[str, Any]:
        return {"matches": self.matches, "cursor_start": self.start, "cursor_end": self.end,
                "metadata": {"_jupyter_types_experimental": self.types}, "status": "ok"}


def _kind_of(d: DeclInfo, kernels: Iterable[str]) -> str:
    if d.name in kernels:
        return "kernel"
    return {"function": "function", "struct": "class", "variable": "variable", "enum": "enum",
            "namespace": "module"}.get(d.kind, d.kind)


def _signature(d: DeclInfo) -> str:
    if d.functions:
        return d.functions[0].signature
    if d.kind == "variable":
        return f"{d.type} {d.name}"
    return f"{d.kind} {d.name}"


def complete(code: str, cursor_pos: int, names: Mapping[str, DeclInfo], kernels: Iterable[str] = (),
             kernel_params: Callable[[str], list[str]] | None = None) -> Completion:
    """Completions at the cursor; `kernel_params(name)` lists a kernel's parameters for `%run`."""
    kernels = set(kernels)
    word, start, _ = word_at(code, cursor_pos)
    end = cursor_pos
    word = code[start:cursor_pos]
    line_start = code.rfind("\n", 0, start) + 1
    line = code[line_start:cursor_pos]
    cands: list[tuple[str, str, str]] = []   # (text, type, signature)

    # line magics
    if line.lstrip().startswith("%"):
        head = line.lstrip()
        words = head.split()
        if len(words) <= 1 and not head.endswith(" "):
            mstart = line_start + len(line) - len(line.lstrip())
            opts = [f"%{m}" for m in SLANG_MAGICS if f"%{m}".startswith(head)]
            return Completion(opts, mstart, end, [{"start": mstart, "end": end, "text": o, "type": "magic"}
                                                  for o in opts])
        magic = words[0][1:]
        arg_no = len(words) - (0 if head.endswith(" ") else 1)
        if magic == "backend":
            cands = [(b, "keyword", "") for b in BACKENDS]
        elif magic == "show" and arg_no == 1:
            cands = [(t, "keyword", "") for t in TARGETS]
        elif magic == "show":
            cands = [(n, _kind_of(d, kernels), _signature(d)) for n, d in names.items()
                     if d.kind == "function"]
        elif magic == "run" and arg_no == 1:
            cands = [(k, "kernel", _signature(names[k]) if k in names else k) for k in sorted(kernels)]
        elif magic == "run":
            kname = words[1] if len(words) > 1 else ""
            params = kernel_params(kname) if kernel_params else []
            if not params:  # front-end signature: every parameter but the thread-id ones
                d = names.get(kname)
                params = [p[0] for f in (d.functions[:1] if d else ()) for p in f.params
                          if not p[1].startswith(("uint3", "int3"))]
            cands = [(f"{p}=", "param", "") for p in ("threads", "groups", *params)]
        return _finish(cands, word, start, end)

    # members after a dot
    j = start - 1
    while j >= 0 and code[j] in " \t":
        j -= 1
    if j >= 0 and code[j] == ".":
        m = _CHAIN.search(code[:j])
        if m is None:
            return Completion([], start, end, [])
        t = type_of(m.group(1), code, j, names)
        if t is None:
            return Completion([], start, end, [])
        cands = [(f, k, f"{ft} {f}".strip()) for f, ft, k in _fields_of(t, names, structs_in_text(code))]
        return _finish(cands, word, start, end)

    # attributes inside [ ... ]
    prefix_char = code[start - 1] if start > 0 else ""
    if prefix_char == "[":
        cands += [(a, "keyword", "attribute") for a in ATTRIBUTES]
    for n, d in names.items():
        cands.append((n, _kind_of(d, kernels), _signature(d)))
    for s in structs_in_text(code):
        cands.append((s, "class", f"struct {s}"))
    cands += [(k, "keyword", "") for k in KEYWORDS]
    cands += [(t, "type", "") for t in BUILTIN_TYPES]
    cands += [(f, "function", "intrinsic") for f in INTRINSICS]
    cands += [(s, "constant", "semantic") for s in SEMANTICS]
    masked, _ = mask_code(code)
    cands += [(w, "text", "") for w in set(_IDENT.findall(masked)) if len(w) > 2 and w != word]
    return _finish(cands, word, start, end)


def _finish(cands: list[tuple[str, str, str]], word: str, start: int, end: int) -> Completion:
    seen: dict[str, tuple[str, str]] = {}
    for text, typ, sig in cands:
        if text.startswith(word) and text not in seen:
            seen[text] = (typ, sig)
    matches = sorted(seen, key=lambda s: (s.lower() != word.lower(), s.lower()))
    types = [{"start": start, "end": end, "text": m, "type": seen[m][0], "signature": seen[m][1]}
             for m in matches]
    return Completion(matches, start, end, types)


# -- inspection -----------------------------------------------------------------------------------------

def describe(d: DeclInfo, kernel: bool = False, cell: str | None = None) -> str:
    where = f"  (defined in {cell})" if cell else ""
    if d.kind == "struct" or d.fields:
        body = "".join(f"    {t} {f};\n" for f, t in d.fields)
        return f"struct {d.name}{where}\n{{\n{body}}}"
    if d.functions:
        what = "compute kernel" if kernel else "function"
        lines = [f"{what} {d.name}{where}"]
        lines += [f"    {f.signature}" for f in d.functions]
        if kernel:
            params = [p for f in d.functions[:1] for p in f.params]
            args = " ".join(f"{n}=..." for n, t, _ in params if not t.startswith(("uint3", "int3")))
            lines.append(f"Run it: %run {d.name} threads=(N, 1, 1) {args}".rstrip())
            lines.append(f"or from Python: {d.name}(threads=(N, 1, 1), ...)")
        else:
            lines.append(f"From Python: {d.name}(numpy arrays...) broadcasts over the arguments")
        return "\n".join(lines)
    if d.kind == "variable":
        return f"{d.type} {d.name}{where}"
    return f"{d.kind} {d.name}{where}"


def inspect(code: str, cursor_pos: int, names: Mapping[str, DeclInfo], kernels: Iterable[str] = (),
            owner: Any = None) -> str | None:
    """Text describing the name under (or just before) the cursor, or None."""
    word, start, end = word_at(code, cursor_pos)
    if not word and cursor_pos > 0:
        # cursor after "name(" or "name ": inspect the name before it
        m = re.search(r"([A-Za-z_]\w*)\s*\(?\s*$", code[:cursor_pos])
        if m:
            word, start = m.group(1), m.start(1)
    if not word:
        return None
    kernels = set(kernels)
    # a member: a.b -> type of a.b
    j = start - 1
    while j >= 0 and code[j] in " \t":
        j -= 1
    text_structs = structs_in_text(code)
    if j >= 0 and code[j] == ".":
        m = _CHAIN.search(code[:j])
        if m:
            t = type_of(m.group(1) + "." + word, code, j, names, text_structs)
            if t:
                return f"{t} {m.group(1)}.{word}"
    if word in text_structs:
        body = "".join(f"    {t} {f};\n" for f, t in text_structs[word])
        return f"struct {word}  (in this cell)\n{{\n{body}}}"
    masked, _ = mask_code(code)
    local = _local_type(masked, word, start)
    d = names.get(word)
    if local and not (d is not None and d.kind == "function"):
        fields = _fields_of(local, names, text_structs)
        extra = "".join(f"\n    {ft} {f}" for f, ft, k in fields if k == "field")
        return f"{local} {word}{extra}"
    if d is not None:
        cell = owner(word) if owner else None
        return describe(d, kernel=word in kernels, cell=cell)
    if word in BUILTIN_TYPES:
        n = vector_length(word)
        return f"{word}: Slang built-in type" + (f" (vector of {n} {word.rstrip('1234')})" if n else "")
    if word in INTRINSICS:
        return f"{word}: Slang intrinsic function"
    if word in KEYWORDS:
        return f"{word}: Slang keyword"
    if word in SEMANTICS:
        return f"{word}: system-value semantic"
    if word in ATTRIBUTES:
        return f"[{word}]: Slang attribute"
    return None
