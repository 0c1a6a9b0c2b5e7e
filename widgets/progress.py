"""A progress bar for training loops whose saved notebook shows where the run ended.

tqdm's notebook bar is an ipywidget: a notebook executed headless (`jupyter execute`, nbclient,
`scripts/lab --execute`) or opened without its kernel shows `0/2000` or a "widget not found" box,
never the step the run reached. This bar is an ordinary display output updated in place (a display
id): an HTML `<progress>` for the browser and the same line as text/plain, so every front end and the
saved notebook show its last state (`fit on cpu: 120/120 [11.2 s, loss=0.0123]`).
"""

from __future__ import annotations

import html
import time
from typing import Any, Callable

__all__ = ["Progress"]

_STYLE = ("display:flex;align-items:center;gap:8px;font:12px monospace;margin:2px 0")
# the browser's own bar, as JupyterLab shows it: marimo's page styles restyle a bare <progress>
# (flat, stretched); `all: revert` in the element's own style undoes them, the width comes after it
_BAR_STYLE = "all:revert;width:240px"


class Progress:
    """`Progress(total, desc)`: `update(n)`, `set_postfix(**values)`, `close()` (or a `with` block),
    as tqdm's; the output is redrawn at most every `every` seconds, and always on close.

    display: IPython's `display` (its handle's `update` redraws); given for tests and other hosts."""

    def __init__(self, total: int, desc: str = "", *, every: float = 0.2,
                 display: Callable[..., Any] | None = None) -> None:
        if display is None:
            from IPython.display import display as _display

            display = _display
        self.total, self.desc, self.every = int(total), desc, every
        self.n = 0
        self.postfix: dict[str, Any] = {}
        self.closed = False
        self._t0 = time.perf_counter()
        self._drawn = self._t0   # the display below is the first drawing
        self._handle = display(self, display_id=True)

    # -- what it shows ----------------------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def text(self) -> str:
        """`fit on cpu: 60/120 [5.3 s, loss=0.0123]` (and `, stopped` when closed before the end)."""
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        stopped = ", stopped" if self.closed and self.n < self.total else ""
        head = f"{self.desc}: " if self.desc else ""
        return f"{head}{self.n}/{self.total} [{self.elapsed:.1f} s{extra}{stopped}]"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        text = self.text()
        bar = (f"<div class='sk-progress' style='{_STYLE}'><progress value='{self.n}' max='{max(self.total, 1)}' "
               f"style='{_BAR_STYLE}'></progress><span class='sk-progress-text'>{html.escape(text)}</span></div>")
        return {"text/plain": text, "text/html": bar}

    def __repr__(self) -> str:
        return self.text()

    # -- tqdm's calls -----------------------------------------------------------------------------

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if (force or now - self._drawn >= self.every) and self._handle is not None:
            self._drawn = now
            self._handle.update(self)

    def update(self, n: int = 1) -> None:
        self.n = min(self.total, self.n + int(n))
        self._draw(force=self.n >= self.total)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = dict(values)
        self._draw()

    def close(self) -> None:
        """The last state, drawn: the saved notebook shows where the run ended."""
        if not self.closed:
            self.closed = True
            self._draw(force=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
