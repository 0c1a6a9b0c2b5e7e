"""Hover, signatures and completion for a cell being edited, from Slang's language server.

The document the server sees is what a cell sees in the session: the session's cells in order (each
as the user wrote it), then the text being edited. A session cell whose top-level names are all
declared again by the edited text is left out: it is most likely the same notebook cell, run
before and being edited now (the edit replaces it when it runs). Answers name cells as the user
sees them (`Defined in In[3], line 2`), not the server's scratch file.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...scanner import declared_names
from . import _text
from .client import LanguageClient

__all__ = ["Assistant", "CellText", "Completions", "Layout"]

# LSP CompletionItemKind -> the type names JupyterLab shows beside a completion
_KINDS = {1: "text", 2: "method", 3: "function", 4: "constructor", 5: "field", 6: "variable", 7: "class",
          8: "interface", 9: "module", 10: "property", 12: "value", 13: "enum", 14: "keyword", 15: "snippet",
          20: "enum member", 21: "constant", 22: "struct", 25: "type parameter"}
_DEFINED_IN = re.compile(r"Defined in (.+?)\((\d+)\)")


@dataclass(frozen=True)
class CellText:
    """A session cell: its label as the user sees it (`In[3]`) and its Slang text."""

    label: str
    text: str


@dataclass(frozen=True)
class Layout:
    """Where each cell starts in the document (0-based lines), the edited text last."""

    text: str
    starts: tuple[tuple[str, int], ...]   # (label, first line)
    offset: int                           # character offset of the edited text

    def where(self, line: int) -> tuple[str, int]:
        """(cell label, 1-based line in that cell) of a 1-based document line."""
        label, first = self.starts[0] if self.starts else ("this cell", 0)
        for lab, start in self.starts:
            if start <= line - 1:
                label, first = lab, start
        return label, line - first


@dataclass(frozen=True)
class Completions:
    """Completion matches for the word before the cursor, which starts at `start` (cell offset)."""

    matches: tuple[str, ...]
    types: tuple[str, ...]
    start: int


class _Client(LanguageClient):
    def __init__(self, owner: Assistant, **kw: Any) -> None:
        super().__init__(**kw)
        self._owner = owner

    def on_start(self) -> None:
        self._owner._reopen()


class Assistant:
    """Answers for one notebook; one server process (started on the first question)."""

    def __init__(self, *, timeout: float = 2.0, argv: Sequence[str] | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="slang-kernel-lsp-"))
        self._path = self._dir / "notebook.slang"
        self._path.write_text("")  # the server canonicalises paths: the file must exist
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        self.uri = self._path.as_uri()
        self._text: str | None = None
        self._version = 0
        self._defines: tuple[str, ...] = ()
        self._deadline = 0.0
        self.client = _Client(self, timeout=timeout, argv=argv)

    def close(self) -> None:
        self.client.close()
        self._cleanup()

    # -- the document ---------------------------------------------------------------------------------

    def _reopen(self) -> None:
        """A (re)started server: settings and the document again."""
        self.client.notify("workspace/didChangeConfiguration",
                           {"settings": {"slang.predefinedMacros": list(self._defines)}})
        if self._text is not None:
            self._version += 1
            self.client.notify("textDocument/didOpen", {"textDocument": {
                "uri": self.uri, "languageId": "slang", "version": self._version, "text": self._text}})

    def layout(self, cells: Sequence[CellText], code: str) -> Layout:
        mine = declared_names(code)
        parts: list[str] = []
        starts: list[tuple[str, int]] = []
        line = 0
        for c in cells:
            theirs = declared_names(c.text)
            if theirs and theirs <= mine:
                continue
            body = c.text if c.text.endswith("\n") else c.text + "\n"
            starts.append((c.label, line))
            parts.append(body + "\n")
            line += body.count("\n") + 1
        head = "".join(parts)
        starts.append(("this cell", line))
        return Layout(head + code, tuple(starts), len(head))

    def _sync(self, layout: Layout, defines: Mapping[str, str], timeout: float) -> bool:
        want = tuple(f"{k}={v}" for k, v in sorted(defines.items()))
        if not self.client.ensure(timeout):
            return False
        if want != self._defines:
            self._defines = want
            self.client.notify("workspace/didChangeConfiguration",
                               {"settings": {"slang.predefinedMacros": list(want)}})
        if layout.text == self._text:
            return True
        first = self._text is None
        self._text = layout.text
        self._version += 1
        if first:
            return self.client.notify("textDocument/didOpen", {"textDocument": {
                "uri": self.uri, "languageId": "slang", "version": self._version, "text": layout.text}})
        return self.client.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self._version},
            "contentChanges": [{"text": layout.text}]})

    def _ask(self, method: str, cells: Sequence[CellText], code: str, cursor: int,
             defines: Mapping[str, str], **extra: Any) -> tuple[Layout, Any]:
        """The document synced to `cells` and `code`, then the server's reply to `method` at `cursor`
        (with the params `extra`): the layout asked about and the reply, None (as when the server does
        not answer in time) when the document could not be synced."""
        layout = self.layout(cells, code)
        self._deadline = time.monotonic() + self.client.timeout
        if not self._sync(layout, defines, self.client.timeout):
            return layout, None
        pos = _text.position_at(layout.text, layout.offset + cursor)
        params = {"textDocument": {"uri": self.uri}, "position": pos, **extra}
        return layout, self.client.request(method, params, self._left())

    def _left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _relabel(self, text: str, layout: Layout) -> str:
        def sub(m: re.Match[str]) -> str:
            if Path(m.group(1)).name != self._path.name:
                return m.group(0)
            label, line = layout.where(int(m.group(2)))
            return f"Defined in {label}, line {line}"
        return _DEFINED_IN.sub(sub, text).strip()

    # -- questions -----------------------------------------------------------------------------------

    def hover(self, cells: Sequence[CellText], code: str, cursor: int,
              defines: Mapping[str, str] = {}) -> str | None:
        """The server's hover text at `cursor` in `code` (markdown), or None."""
        layout, result = self._ask("textDocument/hover", cells, code, cursor, defines)
        contents = (result or {}).get("contents") if isinstance(result, dict) else None
        if isinstance(contents, dict):
            text = contents.get("value", "")
        elif isinstance(contents, list):
            text = "\n\n".join(c.get("value", "") if isinstance(c, dict) else str(c) for c in contents)
        else:
            text = str(contents or "")
        return self._relabel(text, layout) or None

    def signature(self, cells: Sequence[CellText], code: str, cursor: int,
                  defines: Mapping[str, str] = {}) -> str | None:
        """The signature of the call around `cursor` (active parameter marked), or None."""
        layout, result = self._ask("textDocument/signatureHelp", cells, code, cursor, defines)
        sigs = (result or {}).get("signatures") if isinstance(result, dict) else None
        if not sigs:
            return None
        active = result.get("activeSignature") or 0
        sig = sigs[min(active, len(sigs) - 1)]
        doc = sig.get("documentation")
        doc_text = doc.get("value", "") if isinstance(doc, dict) else str(doc or "")
        text = f"```\n{sig.get('label', '')}\n```\n\n{doc_text}"
        return self._relabel(text, layout)

    def complete(self, cells: Sequence[CellText], code: str, cursor: int,
                 defines: Mapping[str, str] = {}) -> Completions | None:
        """Completions of the word before `cursor` (members after `.`), or None."""
        start = cursor
        while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
            start -= 1
        prefix = code[start:cursor]
        if start > 0 and code[start - 1] in ".:>":
            context: dict[str, Any] = {"triggerKind": 2, "triggerCharacter": code[start - 1]}
        else:
            context = {"triggerKind": 1}
        _, result = self._ask("textDocument/completion", cells, code, cursor, defines, context=context)
        items = result.get("items") if isinstance(result, dict) else result
        if not isinstance(items, list):
            return None
        seen: dict[str, str] = {}
        for item in items:
            label = str(item.get("insertText") or item.get("label") or "")
            if label and label.startswith(prefix) and label not in seen:
                seen[label] = _KINDS.get(int(item.get("kind") or 0), "")
        ordered = sorted(seen, key=lambda s: (s.lower() != prefix.lower(), s.lower()))
        return Completions(tuple(ordered), tuple(seen[m] for m in ordered), start)

    def inspect(self, cells: Sequence[CellText], code: str, cursor: int,
                defines: Mapping[str, str] = {}) -> str | None:
        """What Shift-Tab shows: the hover of the name at the cursor, and the signature of the call
        the cursor is in (`sq(|`), whichever the server has."""
        parts = []
        def ident(i: int) -> bool:
            return 0 <= i < len(code) and (code[i].isalnum() or code[i] == "_")
        if ident(cursor) or ident(cursor - 1):  # on a name, or just after one (`sq|(`)
            h = self.hover(cells, code, cursor if ident(cursor) else cursor - 1, defines)
            if h:
                parts.append(h)
        s = self.signature(cells, code, cursor, defines)
        if s and s not in parts and not (parts and s.split("```")[1:2] == parts[0].split("```")[1:2]):
            parts.append(s)
        return "\n\n".join(parts) or None
