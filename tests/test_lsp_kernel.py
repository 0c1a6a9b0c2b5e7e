"""`%%slang` cells of a Python (ipykernel) notebook over the kernel protocol, no JupyterLab extension:
after `%load_ext slang_kernel`, Tab and Shift-Tab in a `%%slang` cell are answered by Slang's
language server from the notebook's earlier Slang cells; Python cells keep IPython's answers."""

from __future__ import annotations

import os
import re
from typing import Any, Iterator

import pytest
from jupyter_client.manager import start_new_kernel

from tests.kernel_client import shell_request

TIMEOUT = 120


class PythonKernel:
    def __init__(self) -> None:
        env = dict(os.environ, SLANG_KERNEL_BACKEND="cpu", SLANG_KERNEL_LSP_TIMEOUT="60")
        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env)

    def run(self, code: str) -> None:
        reply = self.kc.execute_interactive(code, timeout=TIMEOUT)
        assert reply["content"]["status"] == "ok", reply["content"]

    def request(self, method: str, *args: Any) -> dict[str, Any]:
        return shell_request(self.kc, method, *args, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def kernel() -> Iterator[PythonKernel]:
    k = PythonKernel()
    try:
        k.run("%load_ext slang_kernel")
        k.run("%%slang\nfloat cube(float x) { return x * x * x; }")
        k.run("%%slang\nstruct Counter { uint n; uint next() { return n + 1; } };")
        yield k
    finally:
        k.kc.stop_channels()
        k.km.shutdown_kernel(now=True)


def test_shift_tab_in_a_slang_cell(kernel: PythonKernel) -> None:
    code = "%%slang\nfloat e = cube("
    r = kernel.request("inspect", code, len(code))
    md = r["data"]["text/markdown"]
    assert r["found"] and "func cube(float x) -> float" in md, md
    assert re.search(r"Defined in In\[\d+\], line 2", md), md  # line 1 is the %%slang line
    # hover on a name: the struct from an earlier cell
    code = "%%slang\nCounter c;"
    r = kernel.request("inspect", code, code.index("Counter") + 2)
    assert r["found"] and "struct Counter" in r["data"]["text/plain"]


def test_tab_in_a_slang_cell(kernel: PythonKernel) -> None:
    code = "%%slang\nvoid f() { Counter c; c."
    r = kernel.request("complete", code, len(code))
    assert {"n", "next"} <= set(r["matches"]) and r["cursor_start"] == len(code)
    code = "%%slang\nfloat g(float y) { return cu"
    r = kernel.request("complete", code, len(code))
    assert "cube" in r["matches"] and r["cursor_start"] == len(code) - 2


def test_python_cells_keep_ipython(kernel: PythonKernel) -> None:
    r = kernel.request("complete", "import o", 8)
    assert "os" in r["matches"]
    r = kernel.request("inspect", "len", 3)
    assert r["found"] and "Return the number of items" in r["data"]["text/plain"]
