"""widgets.Progress: the training notebooks' bar is a display output updated in place, whose last
state (text/plain and HTML) is what a saved or headless-executed notebook shows: where the run ended."""

from __future__ import annotations

from typing import Any

import nbformat
from nbclient import NotebookClient

from slang_kernel.widgets import Progress


class Handle:
    """What IPython's display(obj, display_id=True) returns: the updates, as bundles."""

    def __init__(self, first: Any) -> None:
        self.shown = [first._repr_mimebundle_()]

    def update(self, obj: Any) -> None:
        self.shown.append(obj._repr_mimebundle_())


def test_the_bar_says_where_the_run_ended() -> None:
    handles: list[Handle] = []
    bar = Progress(120, "fit on cpu", every=3600, display=lambda o, display_id: handles.append(Handle(o)) or handles[-1])
    (h,) = handles
    assert h.shown[0]["text/plain"].startswith("fit on cpu: 0/120 [")
    for _ in range(5):
        bar.update(10)
        bar.set_postfix(loss="0.5")
    assert len(h.shown) == 1            # throttled: nothing redrawn within `every`
    bar.close()                         # stopped at 50: drawn, and said so
    text = h.shown[-1]["text/plain"]
    assert text.startswith("fit on cpu: 50/120 [") and "loss=0.5" in text and text.endswith(", stopped]"), text
    assert "value='50' max='120'" in h.shown[-1]["text/html"]
    with Progress(3, display=lambda o, display_id: handles.append(Handle(o)) or handles[-1]) as done:
        done.update(3)                  # the end is always drawn
    assert handles[-1].shown[-1]["text/plain"].startswith("3/3 [") and "stopped" not in handles[-1].shown[-1]["text/plain"]


def test_a_headless_run_saves_the_last_state() -> None:
    # as `jupyter execute` saves it: the output holds the final bar, no widget needed to read it
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from slang_kernel.widgets import Progress\n"
        "bar = Progress(40, 'fit')\n"
        "for _ in range(4):\n    bar.update(10)\n    bar.set_postfix(loss='0.1')\n"
        "bar.close()")])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    (out,) = nb.cells[0].outputs
    assert out.output_type == "display_data", out
    assert out.data["text/plain"].startswith("fit: 40/40 [") and "loss=0.1" in out.data["text/plain"], out.data
    assert "<progress value='40' max='40'" in out.data["text/html"]
