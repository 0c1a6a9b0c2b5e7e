"""Editor answers name cells as the user sees them and come before a cell has run: the jupyter-lsp
server (`python -m slang_kernel.frontend.lsp`) answers a hover just after a name (where a pointer over the
name's last letter lands) and says "Defined in In[3], line 2" from the saved notebook; the Slang
kernel's Shift-Tab finds a name defined in a saved cell above that has not run (jupyter_server's
JPY_SESSION_NAME says which notebook). Real server, real kernel."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from jupyter_client.manager import start_new_kernel

from slang_kernel.frontend.kernel.install import temporary_kernelspec
from slang_kernel.frontend.lsp import saved
from slang_kernel.frontend.lsp.client import LanguageClient

TIMEOUT = 120


def _notebook(path: Path, cells: list[tuple[str, int | None]], kernel: str = "slang") -> None:
    nb = {"cells": [{"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": [], "source": s}
                    if s is not None and not s.startswith("#md") else
                    {"cell_type": "markdown", "metadata": {}, "source": s or ""} for s, n in cells],
          "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": kernel}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def _open_virtual(client: LanguageClient, virtual: Path, text: str) -> Path:
    """Write `text` as jupyterlab-lsp's virtual document `virtual` and open it in the server, as the editor does."""
    virtual.parent.mkdir()
    virtual.write_text(text)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": virtual.as_uri(), "languageId": "slang",
                                                            "version": 1, "text": text}})
    return virtual


def _hover(client: LanguageClient, uri: str, text: str, needle: str, after: int) -> Any:
    i = text.index(needle) + after
    pos = {"line": text[:i].count("\n"), "character": i - (text.rfind("\n", 0, i) + 1)}
    return client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": pos}, timeout=60)


@pytest.fixture(scope="module")
def client() -> Iterator[LanguageClient]:
    c = LanguageClient([sys.executable, "-m", "slang_kernel.frontend.lsp"], timeout=60)
    try:
        yield c
    finally:
        c.close()


def test_hover_names_the_cell_and_answers_after_a_name(client: LanguageClient, tmp_path: Path) -> None:
    # a Slang-kernel notebook: a markdown cell, sq in the 2nd cell (ran as In[4]), a %%python cell
    # (empty in the document), energy in the 4th (not run); jupyter-lsp joins code cells with two blank lines
    cells = [("#md intro", None), ("float sq(float x)\n{\n    return x * x;\n}", 4),
             ("%%python\nx = 1", None), ("// energy\nfloat energy(float m) { return f(m) + sq(m); }", None),
             ("float f(float a) { return a; }\nfloat k = energy(2.0);", None)]
    _notebook(tmp_path / "lsp.ipynb", cells)
    code = [s for s, _ in cells if not s.startswith("#md")]
    text = "\n\n".join((s if not s.startswith("%%python") else "") + "\n" for s in code)
    virtual = _open_virtual(client, tmp_path / ".virtual_documents" / "lsp.ipynb", text)
    at_sq = _hover(client, virtual.as_uri(), text, "sq(m)", 1)["contents"]["value"]
    assert "func sq(float x) -> float" in at_sq and "Defined in In[4], line 1" in at_sq, at_sq
    # the call `energy(2.0)`, pointer on the right half of the `y`: the position after the name
    at_end = _hover(client, virtual.as_uri(), text, "energy(2.0)", len("energy"))["contents"]["value"]
    assert "func energy(float m)" in at_end and "Defined in cell 4, line 2" in at_end, at_end
    # `f(` : a one-letter name, the position after it
    at_f = _hover(client, virtual.as_uri(), text, "f(m)", 1)["contents"]["value"]
    assert "func f(float a)" in at_f and "Defined in cell 5, line 1" in at_f, at_f
    # on the `(` after a name and a space, or inside the argument list, still nothing
    assert not (_hover(client, virtual.as_uri(), text, "(2.0)", 2) or {}).get("contents")
    # an unsaved edit (the editor's text is not the file's): the notebook's name, no wrong cell
    edited = text.replace("float k", "\n\nfloat k")
    client.notify("textDocument/didChange", {"textDocument": {"uri": virtual.as_uri(), "version": 2},
                                             "contentChanges": [{"text": edited}]})
    again = _hover(client, virtual.as_uri(), edited, "energy(2.0)", 2)["contents"]["value"]
    assert "Defined in lsp.ipynb" in again and "cell" not in again.split("Defined in")[1], again


def test_python_notebook_slang_cells_are_named(client: LanguageClient, tmp_path: Path) -> None:
    cells = [("%load_ext slang_kernel", 1), ("%%slang\nfloat sq(float x) { return x * x; }", 2),
             ("x = [1, 2, 3]", 3), ("%%slang\nfloat g(float y) { return sq(y); }", None)]
    _notebook(tmp_path / "py.ipynb", cells, kernel="python3")
    text = "float sq(float x) { return x * x; }\n\n\nfloat g(float y) { return sq(y); }\n"
    virtual = _open_virtual(client, tmp_path / ".virtual_documents" / "py.ipynb.python-slang.slang", text)
    hover = _hover(client, virtual.as_uri(), text, "sq(y)", 0)["contents"]["value"]
    assert "Defined in In[2], line 2" in hover, hover   # line 1 of the cell is `%%slang`


def test_saved_cells_above_the_edited_one() -> None:
    cells = [saved.SavedCell(0, 1, "float a;", True), saved.SavedCell(1, None, "float b;", True),
             saved.SavedCell(2, None, "%%python\nx=1", False), saved.SavedCell(3, None, "float c = b;", True)]
    above = saved.unrun_above(cells, "float c = b;\n", ["float a;"])
    assert [saved.label(c) for c in above] == ["cell 2"]
    # a cell not saved yet (being typed): every unrun Slang cell of the file is above it
    assert [c.index for c in saved.unrun_above(cells, "float d;", [])] == [0, 1, 3]


class SlangKernel:
    def __init__(self, notebook: Path) -> None:
        env = dict(os.environ, JPY_SESSION_NAME=str(notebook))
        self.km, self.kc = start_new_kernel(kernel_name="slang", env=env)

    def inspect(self, code: str, cursor: int) -> dict[str, Any]:
        msg_id = self.kc.inspect(code, cursor)
        while True:
            reply = self.kc.get_shell_msg(timeout=TIMEOUT)
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])


def test_shift_tab_before_the_defining_cell_ran(tmp_path: Path) -> None:
    pytest.importorskip("ipykernel")
    nb = tmp_path / "nb7.ipynb"
    _notebook(nb, [("float sq(float x) { return x * x; }", None), ("float k = sq(", None)])
    # a loaded CI machine may start the server slowly: 10 s per answer, not the default 2
    with temporary_kernelspec({"SLANG_KERNEL_BACKEND": "cpu", "SLANG_KERNEL_LSP_TIMEOUT": "10"}):
        k = SlangKernel(nb)
    try:
        # the first Shift-Tab, nothing run: the server was started with the kernel, so it answers
        code = "float k = sq("
        reply = k.inspect(code, len(code))
        text = reply["data"].get("text/plain", "") if reply.get("found") else ""
        assert "func sq(float x) -> float" in text and "Defined in cell 1, line 1" in text, reply
    finally:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=True)
