"""Notebook text as Slang sees it, and the positions and diagnostics that cross between them.

A notebook's Slang cells are one document in cell order (a cell sees the cells above it, as in the
session). Two things in that text are not Slang: the kernel's line magics (`%backend`, `%show`,
`%run`) and a `%%slang ...` header; their lines are blanked (same length), so every line and column
still matches the editor. A later cell may declare a name again and wins for the cells after it (as
in the session): the earlier declaration is blanked, so Slang sees no conflict or ambiguity.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlparse

from ...scanner import Decl, blank, closing, declarations, split_commas

__all__ = ["REDECLARATION_CODES", "end_position", "filtered", "keep_diagnostic", "offset_at", "position_at",
           "relabel", "shadowed", "slang_view", "uri_path"]

_MAGIC_LINE = re.compile(r"^[ \t]*%[%A-Za-z_].*$", re.M)
#: Slang's diagnostics for a second declaration of a name (slang-diagnostics.lua): 30200 conflicts
#: with an existing declaration, 30201 a function already has a body, 30202 it returns another type.
REDECLARATION_CODES = frozenset({30200, 30201, 30202})


def slang_view(text: str) -> str:
    """`text` with every line that starts with `%` (a magic) blanked to spaces of the same length,
    and every top-level declaration that a later one replaces (see `shadowed`) blanked too."""
    text = _MAGIC_LINE.sub(lambda m: " " * len(m.group(0)), text)
    spans = shadowed(text)
    if not spans:
        return text
    out, last = [], 0
    for a, b in spans:
        out += [text[last:a], re.sub(r"[^\n]", " ", text[a:b])]
        last = b
    return "".join(out) + text[last:]


_REPLACEABLE = ("function", "variable", "struct", "class", "interface", "enum", "typealias", "typedef")
_PARAM_NAME = re.compile(r"\s*(?::[^,]*)?(?:=.*)?$", re.S)


def _signature(blanked: str, d: Decl, name: str) -> tuple[str, ...] | None:
    """A function's parameter types (names, semantics and defaults dropped), to tell an overload
    from a redefinition; None for anything else."""
    if d.kind != "function":
        return None
    m = re.compile(rf"\b{re.escape(name)}\s*(?:<[^(]*>)?\s*\(").search(blanked, d.head, d.end)
    if m is None:
        return None
    close = closing(blanked, m.end() - 1)
    params = []
    for p in split_commas(blanked[m.end():close - 1]):
        p = _PARAM_NAME.sub("", p.split(":")[0].split("=")[0]).strip()
        words = p.split()
        params.append(" ".join(words[:-1] if len(words) > 1 else words))
    return tuple(params)


def _complete(decl: str, kind: str) -> bool:
    """A finished declaration, not text being typed (`a.` is no variable `a`): it ends in `;` or
    `}`, and a variable has a type before its name."""
    decl = decl.strip()
    if not decl.endswith((";", "}")):
        return False
    if kind == "variable":
        head = re.sub(r"^(?:\[[^\]]*\]\s*)*", "", decl.split("=")[0])
        return len(re.findall(r"[A-Za-z_]\w*", head)) >= 2 and "." not in head
    return True


def shadowed(text: str) -> list[tuple[int, int]]:
    """Spans of top-level declarations that a later declaration of the same name replaces: in the
    session the latest declaration wins for the cells after it (a function with other parameter
    types is an overload and stays). Slang would call the pair a conflict, or a call ambiguous."""
    blanked = blank(text)
    decls = [d for d in declarations(text, _b=blanked) if d.kind in _REPLACEABLE and d.names
             and _complete(blanked[d.start:d.end], d.kind)]
    latest: dict[tuple[str, tuple[str, ...] | None], int] = {}
    keys = []
    for i, d in enumerate(decls):
        k = [(n, _signature(blanked, d, n)) for n in d.names]
        keys.append(k)
        for key in k:
            latest[key] = i
    return [(d.start, d.end) for i, d in enumerate(decls) if all(latest[key] > i for key in keys[i])]


def keep_diagnostic(diagnostic: dict[str, Any]) -> bool:
    """False for a redeclaration conflict (a later cell redefining a name is allowed here)."""
    code = diagnostic.get("code")
    try:
        return int(str(code).lstrip("E")) not in REDECLARATION_CODES
    except ValueError:
        return True


def position_at(text: str, offset: int) -> dict[str, int]:
    """LSP position (0-based line, UTF-16 column) of a character offset in `text`."""
    before = text[:offset]
    line = before.count("\n")
    col_text = before[before.rfind("\n") + 1:]
    return {"line": line, "character": len(col_text.encode("utf-16-le")) // 2}


def offset_at(text: str, position: dict[str, int]) -> int:
    """Character offset of an LSP position in `text` (clamped to the text)."""
    lines = text.split("\n")
    line = min(max(int(position.get("line", 0)), 0), len(lines) - 1)
    start = sum(len(s) + 1 for s in lines[:line])
    units, col = int(position.get("character", 0)), 0
    for ch in lines[line]:
        if units <= 0:
            break
        units -= 2 if ord(ch) > 0xFFFF else 1
        col += 1
    return start + col


def end_position(text: str) -> dict[str, int]:
    return position_at(text, len(text))


# "Defined in <root>/.virtual_documents/sub/nb.ipynb.python-slang.slang(12)": group 2 is "nb.ipynb",
# group 1 the scratch file's path, group 3 its line
_VIRTUAL_DEFINED_IN = re.compile(r"Defined in ((?:[^\n()]*/)?\.virtual_documents/(?:[^\n()]*/)?"
                                 r"([^/\n()]+?\.ipynb|[^/\n()]+?)(?:\.[\w.-]*)?)\((\d+)\)")


def relabel(value: Any, where: Callable[[str, int], str | None] | None = None) -> Any:
    """Strings inside a server answer with "Defined in <jupyter-lsp scratch file>(line)" as
    "Defined in In[3], line 2" (`where(scratch path, line)` names the cell), or as "Defined in
    <notebook>" where it cannot (the scratch file's lines are not the notebook's)."""
    def sub(m: re.Match[str]) -> str:
        cell = where(m.group(1), int(m.group(3))) if where is not None else None
        return f"Defined in {cell or m.group(2)}"

    if isinstance(value, str):
        if "Defined in" not in value:
            return value
        return _VIRTUAL_DEFINED_IN.sub(sub, value)
    if isinstance(value, list):
        return [relabel(v, where) for v in value]
    if isinstance(value, dict):
        return {k: relabel(v, where) for k, v in value.items()}
    return value


def uri_path(uri: str) -> str:
    """The local path of a file:// URI."""
    return unquote(urlparse(uri).path)


def filtered(diagnostics: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in diagnostics if keep_diagnostic(d)]
