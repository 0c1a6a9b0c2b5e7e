"""`python -m slang_kernel.frontend.lsp`: Slang's language server, set up for notebooks, on stdin/stdout.

The server itself (`_native`, Slang::runLanguageServer) runs in a child process; this process sits
between it and the editor and does what the server cannot be told on its command line:

- settings: the session's search path (this package's `playground`, `rendering`, `printing`,
  `debug` modules), its defines, and the folder of each notebook (for `import mymodule;` of files
  beside it) are the server's `slang.additionalSearchPaths` / `slang.predefinedMacros`. The server
  asks for them with `workspace/configuration` (answered here) and takes them from
  `workspace/didChangeConfiguration` (sent here after `initialized`; a client's own settings are
  merged in);
- no workspace walk: the server would scan the whole workspace root for .slang files at
  `initialize` (a Jupyter root may be a home folder), so the root is not passed on;
- text: documents reach the server as `_text.slang_view` (magic lines blanked); the editor syncs
  whole documents, the server gets one ranged edit replacing the old text (it mishandles unranged
  edits);
- diagnostics: redeclaration conflicts are dropped (a later cell may redefine a name);
- answers: "Defined in <root>/.virtual_documents/nb.ipynb(12)" (a scratch file, a line of it)
  reads "Defined in In[3], line 2" (the cell, by its execution count or its place, from the saved
  notebook: `saved`), or "Defined in nb.ipynb" while the saved notebook differs from the editor;
- hover just after a name (a pointer over the right half of its last letter lands there: `f` in
  `f(x)` half the time) answers for the name, where the server answers nothing;
- crashes: if the server dies (Slang can crash on some inputs), a new one is started and given the
  settings and the open documents; requests in flight are answered with null. After 5 crashes
  within a minute it stops restarting and answers every request with null.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from . import _text, saved
from ._wire import Writer, messages

__all__ = ["MODULE_DIR", "Proxy", "flatten_settings"]

# the folder the Session searches too (session.MODULE_DIR, not imported: this process stays light)
MODULE_DIR = Path(__file__).resolve().parents[2] / "slang"
NATIVE = Path(__file__).resolve().with_name("_native.py")
_VIRTUAL = ".virtual_documents"
_MAX_CRASHES = 5
_OWN_ID = 2_000_000_000  # id of the requests the proxy sends itself (the server wants integer ids)


def flatten_settings(settings: Any, prefix: str = "") -> dict[str, Any]:
    """{"slang": {"predefinedMacros": [..]}} -> {"slang.predefinedMacros": [..]} (the server wants
    dotted keys; editors send either form)."""
    if not isinstance(settings, dict):
        return {}
    if not prefix and set(settings) in ({"settings"}, {"RootElement"}):
        return flatten_settings(next(iter(settings.values())))
    out: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not name.startswith("slang.format."):
            out.update(flatten_settings(value, name + "."))
        else:
            out[name] = value
    return out


def notebook_dir(path: str) -> str | None:
    """The real folder of a jupyter-lsp virtual document (<root>/.virtual_documents/sub/nb.ipynb.slang
    is a notebook in <root>/sub), or the folder of a plain file."""
    p = Path(path)
    parts = p.parts
    if _VIRTUAL in parts:
        i = parts.index(_VIRTUAL)
        return str(Path(*parts[:i], *parts[i + 1:-1]))
    return str(p.parent) if p.name else None


class Proxy:
    """Relays one editor connection to a (restartable) native Slang language server."""

    def __init__(self, client_in: IO[bytes], client_out: IO[bytes], *, search_paths: tuple[str, ...] = (),
                 defines: tuple[str, ...] = (), native: tuple[str, ...] | None = None) -> None:
        self._in = client_in
        self._out = Writer(client_out)
        self._paths = [str(MODULE_DIR), *search_paths]
        self._defines = list(defines)
        self._user: dict[str, Any] = {}
        self._native = native or (sys.executable, str(NATIVE), "--periodic")
        self._lock = threading.RLock()
        self._raw: dict[str, str] = {}     # uri -> the editor's text
        self._sent: dict[str, str] = {}    # uri -> what the server has (slang_view of it)
        self._versions: dict[str, int] = {}
        self._pending: set[Any] = set()    # ids of editor requests the server has not answered
        self._init_params: dict[str, Any] | None = None
        self._init_id: Any = None
        self._initialized = False
        self._closing = False
        self._crashes: list[float] = []
        self._child: subprocess.Popen[bytes] | None = None
        self._to_server: Writer | None = None
        self._held: list[dict[str, Any]] | None = None  # messages for a server still initializing
        self._hovers: dict[Any, dict[str, Any]] = {}   # editor hover id -> its params
        self._retries: dict[Any, Any] = {}             # id of a hover asked again -> the editor's id
        self._ids = itertools.count(_OWN_ID + 1)

    # -- settings -------------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        out = dict(self._user)
        theirs = self._user.get("slang.additionalSearchPaths") or []
        out["slang.additionalSearchPaths"] = [*self._paths, *theirs]
        out["slang.predefinedMacros"] = [*self._defines, *(self._user.get("slang.predefinedMacros") or [])]
        out.setdefault("slang.searchInAllWorkspaceDirectories", False)
        return out

    def _push_settings(self) -> None:
        if self._initialized:
            self._send({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration",
                        "params": {"settings": self.settings()}})

    # -- the child -------------------------------------------------------------------------------------

    def _start(self) -> None:
        self._child = subprocess.Popen(self._native, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._child.stdin is not None and self._child.stdout is not None
        self._to_server = Writer(self._child.stdin)
        threading.Thread(target=self._pump_server, args=(self._child,), daemon=True,
                         name="slang-lsp-server").start()

    def _send(self, msg: dict[str, Any]) -> None:
        if self._held is not None and msg.get("id") != _OWN_ID:
            self._held.append(msg)  # a restarted server has not answered `initialize` yet
            return
        if self._to_server is None:
            return
        try:
            self._to_server.send(msg)
        except (BrokenPipeError, OSError, ValueError):
            pass  # the reader sees it die and restarts it

    def _replay(self) -> None:
        """A new server gets what the old one knew: initialize, then (once it answered: a server
        that reads messages sent before it answered `initialize` can lose its place in the stream)
        settings, the open documents, and what the editor sent meanwhile."""
        if self._init_params is None:
            return
        self._held = []
        self._send({"jsonrpc": "2.0", "id": _OWN_ID, "method": "initialize", "params": self._init_params})

    def _replayed(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
            if self._initialized:
                self._send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                self._push_settings()
                for uri, text in self._sent.items():
                    doc = {"uri": uri, "languageId": "slang", "version": self._versions.get(uri, 0),
                           "text": text}
                    self._send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                                "params": {"textDocument": doc}})
            for msg in held:  # the documents were sent as they are now: not their edits again
                if not str(msg.get("method", "")).startswith(("textDocument/did", "workspace/didChange")):
                    self._send(msg)

    def _died(self, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if self._closing or child is not self._child:
                return
            child.wait()
            now = time.monotonic()
            self._crashes = [t for t in self._crashes if now - t < 60] + [now]
            for rid in sorted(self._pending, key=str):
                self._out.send({"jsonrpc": "2.0", "id": rid, "result": None})
            self._pending.clear()
            print(f"slang-kernel lsp: the Slang language server exited ({child.returncode}); "
                  + ("restarting it" if len(self._crashes) <= _MAX_CRASHES else "not restarting it again"),
                  file=sys.stderr, flush=True)
            if len(self._crashes) > _MAX_CRASHES:
                self._child, self._to_server, self._held = None, None, None
                return
            self._start()
            self._replay()

    # -- server -> editor --------------------------------------------------------------------------------

    def _pump_server(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        for msg in messages(child.stdout):
            try:
                self._from_server(msg)
            except (BrokenPipeError, OSError):
                return
        self._died(child)

    def _from_server(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:  # a response
            rid = msg.get("id")
            if rid == _OWN_ID:
                self._replayed()
                return
            with self._lock:
                if self._hover_again(rid, msg.get("result")):
                    return
                rid = self._retries.pop(rid, rid)
                msg = dict(msg, id=rid)
                self._pending.discard(rid)
            if isinstance(msg.get("result"), (dict, list)):
                msg["result"] = _text.relabel(msg["result"], self.where)
            if rid == self._init_id and isinstance(msg.get("result"), dict):
                caps = msg["result"].setdefault("capabilities", {})
                caps["textDocumentSync"] = {"openClose": True, "change": 1}  # whole documents
            self._out.send(msg)
            return
        if method == "workspace/configuration" and "id" in msg:
            items = (msg.get("params") or {}).get("items") or []
            settings = self.settings()
            self._send({"jsonrpc": "2.0", "id": msg["id"],
                        "result": [settings.get(i.get("section", "")) for i in items]})
            return
        if method == "textDocument/publishDiagnostics":
            params = msg.get("params") or {}
            params["diagnostics"] = _text.filtered(params.get("diagnostics") or [])
        self._out.send(msg)

    def _hover_again(self, rid: Any, result: Any) -> bool:
        """An empty hover just after a name is asked again one character left (True: sent)."""
        params = self._hovers.pop(rid, None)
        if params is None or (isinstance(result, dict) and result.get("contents")):
            return False
        pos = params.get("position") or {}
        text = self._raw.get(str((params.get("textDocument") or {}).get("uri")), "")
        at = _text.offset_at(text, pos)
        if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
            return False
        again = next(self._ids)
        self._retries[again] = rid
        left = dict(pos, character=max(0, int(pos.get("character", 0)) - 1))
        self._send({"jsonrpc": "2.0", "id": again, "method": "textDocument/hover",
                    "params": dict(params, position=left)})
        return True

    def where(self, path: str, line: int) -> str | None:
        """"In[3], line 2" for a line of a jupyter-lsp scratch document, from the saved notebook
        (None when it is not saved as the editor has it)."""
        real = os.path.realpath(path)
        text = next((t for u, t in self._raw.items() if os.path.realpath(_text.uri_path(u)) == real), None)
        folder, name = notebook_dir(path), Path(path).name
        if text is None or folder is None or ".ipynb" not in name:
            return None
        cells = saved.saved_cells(Path(folder) / (name.split(".ipynb")[0] + ".ipynb"), slang_kernel=True)
        for slang_kernel in (True, False):  # a Slang-kernel notebook's document, or a Python one's
            found = saved.cell_of_line(text, line, cells, slang_kernel)
            if found is not None:
                return f"{saved.label(found[0])}, line {found[1]}"
        return None

    # -- editor -> server --------------------------------------------------------------------------------

    def _from_client(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        with self._lock:
            if method is not None and "id" in msg:
                if self._to_server is None:  # gave up restarting
                    self._out.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                    return
                self._pending.add(msg["id"])
            if method == "initialize":
                params = dict(params, rootUri=None, rootPath=None, workspaceFolders=None)
                msg = dict(msg, params=params)
                self._init_params, self._init_id = params, msg.get("id")
            elif method == "initialized":
                self._send(msg)
                self._initialized = True
                self._push_settings()
                return
            elif method == "workspace/didChangeConfiguration":
                self._user = flatten_settings(params.get("settings"))
                self._push_settings()
                return
            elif method == "textDocument/hover" and "id" in msg:
                self._hovers[msg["id"]] = params
            elif method == "textDocument/didOpen":
                doc = params["textDocument"]
                uri, text = doc["uri"], doc.get("text", "")
                folder = notebook_dir(_text.uri_path(uri))
                if folder and folder not in self._paths:
                    self._paths.append(folder)
                    self._push_settings()
                self._raw[uri], self._versions[uri] = text, doc.get("version", 0)
                self._sent[uri] = _text.slang_view(text)
                msg = dict(msg, params=dict(params, textDocument=dict(doc, text=self._sent[uri])))
            elif method == "textDocument/didChange":
                msg = self._change(msg, params)
            elif method == "textDocument/didClose":
                uri = str((params.get("textDocument") or {}).get("uri"))
                for d in (self._raw, self._sent, self._versions):
                    d.pop(uri, None)
            elif method == "exit":
                self._closing = True
            self._send(msg)

    def _change(self, msg: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        doc = params["textDocument"]
        uri = doc["uri"]
        text = self._raw.get(uri, "")
        for change in params.get("contentChanges") or []:
            if change.get("range"):
                r = change["range"]
                a, b = _text.offset_at(text, r["start"]), _text.offset_at(text, r["end"])
                text = text[:a] + change.get("text", "") + text[b:]
            else:
                text = change.get("text", "")
        old = self._sent.get(uri, "")
        self._raw[uri], self._sent[uri] = text, _text.slang_view(text)
        self._versions[uri] = doc.get("version", 0)
        whole = {"start": {"line": 0, "character": 0}, "end": _text.end_position(old)}
        return dict(msg, params=dict(params, contentChanges=[{"range": whole, "text": self._sent[uri]}]))

    # -- running -----------------------------------------------------------------------------------------

    def serve(self) -> int:
        """Relay until the editor sends `exit` or closes its end; the server goes with it."""
        self._start()
        try:
            for msg in messages(self._in):
                self._from_client(msg)
                if self._closing:
                    break
        finally:
            self._closing = True
            child = self._child
            if child is not None:
                try:
                    if child.stdin:
                        child.stdin.close()
                    child.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    child.kill()
                    child.wait()
        return 0
