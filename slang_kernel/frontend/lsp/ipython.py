"""`%%slang` cells of a Python kernel: Tab and Shift-Tab answered from Slang's language server.

`%load_ext slang_kernel` calls `register(shell)`. Completion goes through IPython's own extension
point (a context matcher in `Completer.custom_matchers`, which sees the whole cell and suppresses
the Python matchers for a `%%slang` cell). Inspection has no such hook in IPython (ipykernel asks
the shell about the token at the cursor, without the cell), so the kernel's `inspect_request`
handler is wrapped: a `%%slang` cell is answered here, every other cell by the handler as it was.
The Slang kernel answers its cells itself and gets neither.
"""

from __future__ import annotations

from typing import Any, Callable

from IPython.core.completer import SimpleCompletion, context_matcher
from IPython.core.interactiveshell import InteractiveShell

from ..controller import FrontEnd
from ..kernel.completion import inspect as own_inspect
from ..kernel.source import is_slang_cell
from . import replies
from .assist import Assistant

__all__ = ["register"]


class _Hook:
    """One Python kernel's Slang assistance; lives in the matcher and handler it registers."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self._assistant: Assistant | None = None
        self._made = False

    def assistant(self) -> Assistant | None:
        if not self._made:
            self._assistant, self._made = replies.assistant_from_env(), True
        return self._assistant

    def _state(self, code: str = "") -> tuple[Any, Any, Any, Any]:
        fe = FrontEnd.of(self.shell)
        cells, defines = replies.notebook(fe, code, slang_kernel=False)
        s = fe.existing_session
        try:
            names, kernels = (s.store.names(), s.kernels()) if s is not None else ({}, [])
        except Exception:
            names, kernels = {}, []
        return cells, defines, names, kernels

    def complete(self, code: str, cursor: int) -> dict[str, Any]:
        cells, defines, names, kernels = self._state(code)
        return replies.complete_reply(self.assistant(), cells, code, cursor, defines, names, kernels)

    def inspect(self, code: str, cursor: int) -> dict[str, Any]:
        cells, defines, names, kernels = self._state(code)
        own = own_inspect(code, cursor, names, kernels)
        return replies.inspect_reply(self.assistant(), cells, code, cursor, defines, own)

    def matcher(self) -> Callable[..., Any]:
        @context_matcher()
        def slang_cell_matcher(context: Any) -> dict[str, Any]:
            text = context.full_text
            if not is_slang_cell(text):
                return {"completions": []}
            lines = text.split("\n")
            cursor = sum(len(s) + 1 for s in lines[:context.cursor_line]) + context.cursor_position
            reply = self.complete(text, cursor)
            kinds = {t["text"]: t.get("type") for t in reply["metadata"]["_jupyter_types_experimental"]}
            found = [SimpleCompletion(m, type=kinds.get(m) or "text") for m in reply["matches"]]
            return {"completions": found,
                    "matched_fragment": text[reply["cursor_start"]:cursor], "suppress": True}
        return slang_cell_matcher

    def inspect_handler(self, kernel: Any, original: Callable[..., Any]) -> Callable[..., Any]:
        async def inspect_request(stream: Any, ident: Any, parent: dict[str, Any]) -> None:
            content = parent.get("content") or {}
            code, cursor = content.get("code", ""), content.get("cursor_pos")
            if not is_slang_cell(code) or kernel.session is None:
                result = original(stream, ident, parent)
                if hasattr(result, "__await__"):
                    await result
                return
            from ipykernel.jsonutil import json_clean

            reply = self.inspect(code, len(code) if cursor is None else int(cursor))
            kernel.session.send(stream, "inspect_reply", json_clean(reply), parent, ident)
        inspect_request.slang_kernel_hook = True  # type: ignore[attr-defined]
        return inspect_request


def register(shell: InteractiveShell) -> None:
    """Install the `%%slang` completion matcher and inspection handler once per shell."""
    kernel = getattr(shell, "kernel", None)
    if getattr(kernel, "implementation", "") == "slang_kernel":  # the Slang kernel answers its cells itself
        return
    completer = getattr(shell, "Completer", None)
    if completer is None or any(getattr(m, "__name__", "") == "slang_cell_matcher"
                                for m in completer.custom_matchers):
        return
    hook = _Hook(shell)
    completer.custom_matchers.append(hook.matcher())
    handlers = getattr(kernel, "shell_handlers", None)
    if isinstance(handlers, dict) and "inspect_request" in handlers and \
            not getattr(handlers["inspect_request"], "slang_kernel_hook", False):
        handlers["inspect_request"] = hook.inspect_handler(kernel, handlers["inspect_request"])
