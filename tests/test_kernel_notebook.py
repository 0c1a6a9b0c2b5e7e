"""tests/notebooks/slang_kernel_demo.ipynb, executed in the Slang kernel with nbclient.

nbclient does not send Jupyter cell ids; the client below does, as JupyterLab does (metadata.cellId),
so re-running an edited cell is tested the way a user does it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_core.utils import run_sync
from nbclient import NotebookClient

from slang_kernel.frontend.kernel.install import temporary_kernelspec

NOTEBOOK = Path(__file__).parent / "notebooks" / "slang_kernel_demo.ipynb"


class LabLikeClient(NotebookClient):
    """Sends each cell's id with its execute_request, like JupyterLab."""

    _cell_id: str | None = None

    async def async_execute_cell(self, cell: Any, cell_index: int, *args: Any, **kwargs: Any) -> Any:
        self._cell_id = cell.get("id")
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

    execute_cell = run_sync(async_execute_cell)

    def _patch_client(self) -> None:
        kc, client = self.kc, self
        if getattr(kc, "_sends_cell_ids", False):
            return

        def execute(code: str, silent: bool = False, store_history: bool = True, user_expressions: Any = None,
                    allow_stdin: Any = None, stop_on_error: bool = True) -> str:
            content = {"code": code, "silent": silent, "store_history": store_history,
                       "user_expressions": user_expressions or {}, "allow_stdin": False,
                       "stop_on_error": stop_on_error}
            msg = kc.session.msg("execute_request", content)
            if client._cell_id:
                msg["metadata"]["cellId"] = client._cell_id
            kc.shell_channel.send(msg)
            return msg["header"]["msg_id"]

        kc.execute = execute
        kc._sends_cell_ids = True


def _text(output: dict[str, Any]) -> str:
    if output["output_type"] == "stream":
        return output["text"]
    if output["output_type"] == "error":
        return "\n".join(output["traceback"])
    return output.get("data", {}).get("text/plain", "")


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    with temporary_kernelspec({"SLANG_KERNEL_BACKEND": "cpu"}):
        client = LabLikeClient(nb, kernel_name="slang", timeout=300, allow_errors=False,
                               resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        with client.setup_kernel():
            client._patch_client()
            for i, cell in enumerate(nb.cells):
                client.execute_cell(cell, i)
            yield client, nb


def _cell(nb: Any, needle: str) -> Any:
    return next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)


def test_slang_cell_shows_a_summary(executed: Any) -> None:
    _, nb = executed
    outs = _cell(nb, "void saxpy").outputs
    assert [o["output_type"] for o in outs] == ["display_data"]
    data = outs[0]["data"]
    assert "text/html" in data
    assert "saxpy(uint3 tid, RWStructuredBuffer<float> y, StructuredBuffer<float> x, float a)" in data["text/plain"]
    assert "float bump(float x)" in data["text/plain"]


def test_python_cells_call_slang(executed: Any) -> None:
    _, nb = executed
    outs = _cell(nb, "saxpy(threads=").outputs
    assert not [o for o in outs if o["output_type"] == "error"]
    assert "saxpy ok: [1. 3. 5. 7.]" in "".join(_text(o) for o in outs)
    assert "saxpy: ran in" in "".join(_text(o) for o in _cell(nb, "%run saxpy").outputs)


def test_matplotlib_plot_is_a_png(executed: Any) -> None:
    _, nb = executed
    outs = _cell(nb, "plt.show()").outputs
    assert not [o for o in outs if o["output_type"] == "error"], [_text(o) for o in outs]
    assert any("image/png" in o.get("data", {}) for o in outs)


def test_compile_error_shows_the_caret(executed: Any) -> None:
    _, nb = executed
    outs = _cell(nb, "undefined_scale").outputs
    assert len(outs) == 1 and outs[0]["output_type"] == "error"
    err = outs[0]
    assert err["ename"] == "SlangCompileError"
    tb = err["traceback"]
    assert any("undefined identifier 'undefined_scale'" in line for line in tb)
    src = next(i for i, line in enumerate(tb) if "return x * undefined_scale;" in line)
    assert tb[src + 1].index("^") == tb[src].index("undefined_scale")
    assert not any("Traceback" in line for line in tb)
    # the session carried on
    after = _cell(nb, "'broken' not in dir()").outputs
    assert "['saxpy']" in "".join(_text(o) for o in after)


def test_rerunning_an_edited_cell_replaces_it(executed: Any) -> None:
    client, nb = executed
    cells_before = _session_cells(client, nb)
    cell = _cell(nb, "float bump")
    index = nb.cells.index(cell)
    cell.source = cell.source.replace("exp(-x * x)", "2.0 * exp(-x * x)")
    client.execute_cell(cell, index)
    assert [o["output_type"] for o in cell.outputs] == ["display_data"]
    assert _session_cells(client, nb) == cells_before
    check = nbformat.v4.new_code_cell("%%python\nprint(float(bump(np.float32(0.0))))")
    nb.cells.append(check)
    client.execute_cell(check, len(nb.cells) - 1)
    assert _text(check.outputs[0]).strip() == "2.0"


def _session_cells(client: Any, nb: Any) -> str:
    probe = nbformat.v4.new_code_cell("%%python\nprint(slang_session.cells)")
    nb.cells.append(probe)
    client.execute_cell(probe, len(nb.cells) - 1)
    nb.cells.remove(probe)
    return _text(probe.outputs[0]).strip()   # the print's newline can arrive as its own stream message


def test_a_widget_displays(executed: Any) -> None:
    _, nb = executed
    outs = _cell(nb, "BufferView(y)").outputs
    assert not [o for o in outs if o["output_type"] == "error"], [_text(o) for o in outs]
    data = next(o["data"] for o in outs if o["output_type"] in ("execute_result", "display_data"))
    assert "application/vnd.jupyter.widget-view+json" in data and "text/html" in data
