"""Jupyter `complete_reply` / `inspect_reply` contents from the language server and the kernel's own
completion (slang_kernel.frontend.kernel.completion), for the Slang kernel and `%%slang` cells alike.

The server knows what the compiler knows (methods, imported modules, types of any expression, doc
comments); the kernel's own completion knows the kernel's line magics and curates vector swizzles
and buffer methods. Completion merges both (the kernel's first); after a `.` on a built-in type
(vector, matrix, buffer, texture) the kernel's own list stands alone, where the server would add
the members of Slang's arithmetic interfaces (`add`, `dadd`, `Differential`, ...). Inspection shows
the server's answer first and the kernel's description (how to run a kernel, ...) after it. Without
an answer from the server in time, both are the kernel's own, as before.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ...compiler.reflection import DeclInfo
from ..controller import FrontEnd
from ..kernel.completion import after_dot, complete, receiver_type
from ..kernel.language import BUILTIN_TYPES, vector_length
from . import saved
from .assist import Assistant, CellText

__all__ = ["assistant_from_env", "complete_reply", "inspect_reply", "notebook", "plain"]

T = TypeVar("T")
_BUILTIN_BASES = {t.split("<")[0] for t in BUILTIN_TYPES}


def assistant_from_env() -> Assistant | None:
    """An Assistant, unless SLANG_KERNEL_LSP=0; SLANG_KERNEL_LSP_TIMEOUT: seconds per answer (2)."""
    if os.environ.get("SLANG_KERNEL_LSP", "1").strip().lower() in ("0", "no", "off", "false"):
        return None
    return Assistant(timeout=float(os.environ.get("SLANG_KERNEL_LSP_TIMEOUT", "2")))


def notebook(frontend: FrontEnd, code: str = "", *, slang_kernel: bool = True
             ) -> tuple[list[CellText], dict[str, str]]:
    """The session's cells as the user sees them (label, text), in order, then the saved
    notebook's Slang cells above `code` that have not run (`cell 2`: Shift-Tab on a name defined
    there answers before that cell runs), and the session's defines."""
    s = frontend.existing_session
    try:
        cells = [CellText(frontend.label(n), s.cell(n).source) for n in s.cells] if s is not None else []
        defines = s.defines if s is not None else {}
    except Exception:  # a session being rebuilt: answer without the earlier cells
        cells, defines = [], {}
    path = saved.session_notebook()
    if path is not None:
        file = saved.saved_cells(path, slang_kernel=slang_kernel)
        cells += [CellText(saved.label(c), c.source)
                  for c in saved.unrun_above(file, code, [c.text for c in cells])]
    return cells, dict(defines)


def _ask(question: Callable[..., T], *args: Any) -> T | None:
    """The server's answer, or None when asking failed in any way: Tab never raises because of it."""
    try:
        return question(*args)
    except Exception:
        return None


def plain(markdown: str) -> str:
    """Markdown hover text as plain text (code fences dropped)."""
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"^```\w*\n?", "", markdown, flags=re.M)).strip()


def _builtin_receiver(code: str, cursor: int, names: Mapping[str, DeclInfo]) -> bool:
    t = receiver_type(code, cursor, names)
    if t is None:
        return False
    base = re.sub(r"\s+", "", t).split("<")[0].split("::")[-1]
    return base in _BUILTIN_BASES or bool(vector_length(base)) or base.rstrip("1234x") in _BUILTIN_BASES


def complete_reply(assistant: Assistant | None, cells: Sequence[CellText], code: str, cursor: int,
                   defines: Mapping[str, str], names: Mapping[str, DeclInfo], kernels: Sequence[str],
                   kernel_params: Any = None) -> dict[str, Any]:
    own = complete(code, cursor, names, kernels, kernel_params=kernel_params)
    line = code[code.rfind("\n", 0, cursor) + 1:cursor]
    if assistant is None or line.lstrip().startswith("%"):
        return own.reply()
    dotted = after_dot(code, cursor) is not None
    if dotted and own.matches and _builtin_receiver(code, cursor, names):
        return own.reply()
    found = _ask(assistant.complete, cells, code, cursor, defines)
    if found is None or not found.matches:
        return own.reply()
    word = code[found.start:cursor]
    matches, types = list(own.matches), list(own.types)
    if own.start != found.start:  # both complete the word before the cursor; trust the server's span
        matches, types = [], []
    for m, kind in zip(found.matches, found.types):
        if m not in matches and m != word:
            matches.append(m)
            types.append({"start": found.start, "end": cursor, "text": m, "type": kind or "text",
                          "signature": ""})
    return {"matches": matches, "cursor_start": found.start, "cursor_end": cursor,
            "metadata": {"_jupyter_types_experimental": types}, "status": "ok"}


def inspect_reply(assistant: Assistant | None, cells: Sequence[CellText], code: str, cursor: int,
                  defines: Mapping[str, str], own: str | None) -> dict[str, Any]:
    server = _ask(assistant.inspect, cells, code, cursor, defines) if assistant is not None else None
    if server is None and own is None:
        return {"status": "ok", "found": False, "data": {}, "metadata": {}}
    md = [server] if server else []
    text = [plain(server)] if server else []
    if own:
        md.append(f"```slang\n{own}\n```")
        text.append(own)
    return {"status": "ok", "found": True, "metadata": {},
            "data": {"text/plain": "\n\n".join(text), "text/markdown": "\n\n---\n\n".join(md)}}
