"""Slang's language server as `python -m slang_kernel.frontend.lsp` serves it (the real server from the pinned
compiler, through the notebook proxy), spoken to over LSP on stdin/stdout: hover, definition across
cells, signature help, completion after `.`, diagnostics (magic lines and redeclarations are not
errors, typos are), the session's search path and defines, a restart after the server dies, and a
client that never waits past its deadline."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from slang_kernel.frontend.lsp import _text
from slang_kernel.frontend.lsp.client import LanguageClient
from tests.waiting import wait_until

# a notebook's Slang cells as jupyterlab-lsp joins them: cell after cell, blank lines between
CELL1 = "float sq(float x)\n{\n    return x * x;\n}\n"
CELL2 = "%backend cpu\nstruct Particle { float3 pos; float mass; };\n"
CELL3 = "float energy(Particle p) { return sq(p.mass); }\nfloat k = sq(\n"
NOTEBOOK = CELL1 + "\n\n" + CELL2 + "\n\n" + CELL3
# the server publishes only files that have diagnostics: one known error ends a text checked for others
SENTINEL = "\nint sentinel = undefined_sentinel;\n"


def _pos(text: str, needle: str, after: int = 0) -> dict[str, int]:
    i = text.index(needle) + after
    return {"line": text[:i].count("\n"), "character": i - (text.rfind("\n", 0, i) + 1)}


class Doc:
    """One open document on one server; waits for the server's diagnostics of it."""

    def __init__(self, client: LanguageClient, path: Path, text: str) -> None:
        path.write_text(text)  # the server canonicalises paths: the file must exist
        self.client, self.uri, self.text, self.version = client, path.as_uri(), text, 1
        assert client.notify("textDocument/didOpen", {"textDocument": {
            "uri": self.uri, "languageId": "slang", "version": 1, "text": text}})

    def change(self, text: str) -> None:
        self.version += 1
        self.text = text
        self.client.diagnostics.pop(self.uri, None)
        self.client.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self.version}, "contentChanges": [{"text": text}]})

    def ask(self, method: str, needle: str, after: int = 0, **extra: Any) -> Any:
        return self.client.request(method, {"textDocument": {"uri": self.uri},
                                            "position": _pos(self.text, needle, after), **extra}, timeout=60)

    def diagnostics(self) -> list[dict[str, Any]]:
        """The server's diagnostics of the current text, but the sentinel's (which must be there; the
        server folds errors of one code into the first one's relatedInformation)."""
        def mentions(d: dict[str, Any]) -> bool:
            related = [d, *d.get("relatedInformation", ())]
            return any("undefined_sentinel" in m.get("message", "") for m in related)

        wait_until(lambda: any(mentions(d) for d in self.client.diagnostics.get(self.uri, ())), 60,
                   "the server's diagnostics of the text")
        return [d for d in self.client.diagnostics[self.uri] if "undefined_sentinel" not in d["message"]]


def _quiet(client: LanguageClient, path: Path, text: str) -> Doc:
    """`text` opened as `path`, a document the server reports no error in (but the sentinel's)."""
    doc = Doc(client, path, text)
    assert doc.diagnostics() == []
    return doc


def _labels(items: Any) -> set[str]:
    """The labels of a completion reply (a CompletionList or a bare list of items)."""
    return {i["label"] for i in (items["items"] if isinstance(items, dict) else items)}


@pytest.fixture(scope="module")
def client() -> Iterator[LanguageClient]:
    c = LanguageClient([sys.executable, "-m", "slang_kernel.frontend.lsp", "-D", "WIDTH=4"], timeout=60)
    try:
        yield c
    finally:
        c.close()


def test_hover_definition_signature_completion(client: LanguageClient, tmp_path: Path) -> None:
    doc = Doc(client, tmp_path / "nb.slang", NOTEBOOK)
    hover = doc.ask("textDocument/hover", "sq(p.mass)", 1)
    assert "sq(float x)" in hover["contents"]["value"]
    # definition across cells: `sq` in the third cell is the first cell's, line 0
    (loc,) = doc.ask("textDocument/definition", "sq(p.mass)", 1)
    assert loc["uri"] == doc.uri and loc["range"]["start"] == {"line": 0, "character": 6}
    # signature help inside a call, the parameter marked
    sig = doc.ask("textDocument/signatureHelp", "sq(\n", 3)
    (s,) = sig["signatures"]
    lo, hi = s["parameters"][sig["activeParameter"]]["label"]
    assert "sq(" in s["label"] and s["label"][lo:hi] == "float x"
    # members after `.` of a struct from an earlier cell
    doc.change(NOTEBOOK.replace("sq(p.mass)", "sq(p.)"))
    items = doc.ask("textDocument/completion", "p.)", 2, context={"triggerKind": 2, "triggerCharacter": "."})
    assert _labels(items) == {"pos", "mass"}


def test_diagnostics_as_a_notebook_reads(client: LanguageClient, tmp_path: Path) -> None:
    # %backend is a kernel line magic; a later cell may declare sq again (the latest wins): no errors
    again = "float sq(float x) { return 2 * x; }\n"
    doc = _quiet(client, tmp_path / "ok.slang",
                 CELL1 + "\n\n" + CELL2 + "\n\n" + again + "\n\nfloat e = sq(1.0);\n" + SENTINEL)
    # a typo is an error, at its place
    doc.change("float bad = sq(undefined_thing);\n" + doc.text)
    (d,) = doc.diagnostics()
    assert d["severity"] == 1 and "undefined_thing" in d["message"]
    assert d["range"]["start"] == _pos(doc.text, "undefined_thing")


def test_the_latest_declaration_wins(client: LanguageClient, tmp_path: Path) -> None:
    # as in the session: a later cell's struct and same-signature function replace the earlier ones;
    # a function with other parameter types is an overload and stays
    text = ("struct S { float a; };\nfloat f(float x) { return 1; }\nfloat f(int i) { return 3; }\n\n"
            "struct S { float b; };\nfloat f(float y) { return 2; }\n\n"
            "void use(S s) { s.b; f(1.0); f(2); }\n" + SENTINEL)
    doc = _quiet(client, tmp_path / "shadow.slang", text)
    doc.change(text + "void members(S s) { s.; }\n")
    items = doc.ask("textDocument/completion", "s.;", 2, context={"triggerKind": 2, "triggerCharacter": "."})
    assert _labels(items) == {"b"}
    (loc,) = doc.ask("textDocument/definition", "f(1.0)")
    assert loc["range"]["start"]["line"] == 5   # float f(float y), not line 1
    (loc,) = doc.ask("textDocument/definition", "f(2)")
    assert loc["range"]["start"]["line"] == 2   # the int overload


def test_slang_view_keeps_positions() -> None:
    text = ("float f(float x) { return 1; }\n%backend cpu\nfloat f(float y)\n{ return 2; }\n"
            "float f(int z) { return 3; }\nS s; s.")
    view = _text.slang_view(text)
    assert len(view) == len(text) and view.count("\n") == text.count("\n")
    lines = view.split("\n")
    assert lines[0].strip() == "" and lines[1].strip() == ""   # replaced, and the magic line
    assert lines[2:6] == text.split("\n")[2:6]   # `s.` being typed is no declaration of `s`


def test_search_path_and_defines(client: LanguageClient, tmp_path: Path) -> None:
    text = ("import playground;\nimport rendering;\nimport printing;\nimport debug;\n"
            "[playground::TIME]\nuniform float time;\nfloat row[WIDTH];\n"
            "void f() { debug_value(\"t\", time); }\n" + SENTINEL)
    doc = _quiet(client, tmp_path / "modules.slang", text)
    hover = doc.ask("textDocument/hover", "debug_value(")
    assert "slang_kernel/slang/debug.slang" in hover["contents"]["value"]
    # the check can fail: a module that is not on the path
    doc.change(text + "import no_such_module_here;\n")
    assert any("no_such_module_here" in d["message"] for d in doc.diagnostics())


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_server_restarts_after_it_dies(tmp_path: Path) -> None:
    c = LanguageClient([sys.executable, "-m", "slang_kernel.frontend.lsp"], timeout=60)
    try:
        doc = Doc(c, tmp_path / "nb.slang", NOTEBOOK)
        assert "sq(float x)" in doc.ask("textDocument/hover", "sq(p.mass)", 1)["contents"]["value"]
        assert c.pid is not None
        (native,) = _children(c.pid)
        os.kill(native, signal.SIGKILL)  # as a compiler crash would end it
        # the proxy starts a new server and gives it the open document again
        deadline = time.monotonic() + 60
        while True:
            hover = doc.ask("textDocument/hover", "sq(p.mass)", 1)
            if hover:
                break
            assert time.monotonic() < deadline, "no answer after the restart"
        assert "sq(float x)" in hover["contents"]["value"]
        assert _children(c.pid) not in ([], [native])
    finally:
        c.close()


def test_client_gives_up_at_its_deadline_and_restarts_a_dead_server(tmp_path: Path) -> None:
    silent = LanguageClient([sys.executable, "-c", "import signal; signal.pause()"], timeout=0.5)
    try:
        assert silent.request("textDocument/hover", {}) is None  # no answer: None, not a wait
        assert silent.starts == 1 and silent.pid is not None  # still starting: left to finish
    finally:
        silent.close()
    c = LanguageClient([sys.executable, "-m", "slang_kernel.frontend.lsp"], timeout=60)
    try:
        Doc(c, tmp_path / "a.slang", CELL1)
        assert c.request("textDocument/hover", {"textDocument": {"uri": (tmp_path / "a.slang").as_uri()},
                                                "position": {"line": 0, "character": 7}}) is not None
        assert c.pid is not None
        os.kill(c.pid, signal.SIGKILL)
        wait_until(lambda: c.pid is None, 30, "the killed server gone")   # the kill has landed
        Doc(c, tmp_path / "b.slang", CELL1)  # the next question starts a new server
        assert c.starts == 2
        hover = c.request("textDocument/hover", {"textDocument": {"uri": (tmp_path / "b.slang").as_uri()},
                                                 "position": {"line": 0, "character": 7}})
        assert "sq(float x)" in hover["contents"]["value"]
    finally:
        c.close()
