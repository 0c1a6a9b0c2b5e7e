"""What a Slang Playground cell shows: its program's image with live controls, buffers, a Playground link.

The engine side is :class:`slang_kernel.playground.PlaygroundProgram`; this module turns a program
into widgets (the program knows nothing of them). The display rule (what :func:`show_cell` shows
after a cell compiled):

* a cell with no entry point carrying a ``[playground::CALL...]`` attribute only compiles;
* a cell with such entry points is run for one frame, then shown:
  - the image: ``outputTexture`` (rendering module) when the cell mentions ``outputTexture`` or
    ``drawPixel``, else the first ``RWTexture2D`` global the cell itself declares; a
    :class:`PlaygroundImage` with the cell's SLIDER / COLOR_PICK / TIME / FRAME_ID / MOUSE_POSITION /
    KEY inputs as live controls (each change re-runs the whole frame), or a plain ImageView when the
    cell has none;
  - else, the ZEROS / RAND buffers the cell declares, in BufferViews;
  - text printed with the printing module below it, and a button that opens the cell in the public
    Slang Playground.

Hot reload: a PlaygroundImage runs its program's frames, and the program follows its cell, so the
view shows a re-run cell's new code on its next frame; inputs a new revision adds or drops appear or
disappear as controls, and while the new revision does not compile the last good one keeps playing
with the error over the image. Re-running a playground cell continues its program (time, slider
values, texture contents) in the new output rather than starting a new one.
"""

from __future__ import annotations

import html
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from slang_kernel.playground import PlaygroundProgram, is_playground, playground_link
from .buffer_view import BufferView
from .controls import Color, Control, Frame, Key, Mouse, Slider, Time
from .image_view import ImageView, LiveImage

if TYPE_CHECKING:
    from slang_kernel.engine.session import Session

__all__ = ["PLAY", "PlaygroundImage", "PlaygroundView", "animates", "controls_for", "keep_cell_view", "playground_view", "show_cell"]


PLAY = "play"   # the play/pause control of a program that animates without a TIME or FRAME_ID input


def controls_for(program: PlaygroundProgram) -> dict[str, Control]:
    """Live controls for a program's inputs, starting at the values the program holds now (a new view
    of a running program continues it: its sliders, its clock); a program whose frames change it but
    that has no clock gets a paused `PLAY` control, so that every demo that animates or trains plays."""
    out: dict[str, Control] = {}
    for n, inp in program.inputs.items():
        if inp.kind == "SLIDER":
            a = [float(x) for x in inp.args] + [0.0, 0.0, 1.0][len(inp.args):]
            lo, hi = min(a[1], a[2]), max(a[1], a[2])
            hi = hi if hi > lo else lo + 1.0
            out[n] = Slider(lo, hi, min(max(float(inp.value), lo), hi))
        elif inp.kind == "COLOR_PICK":
            rgb = [float(min(max(x, 0.0), 1.0)) for x in np.asarray(inp.value, np.float64).reshape(-1)[:3]]
            out[n] = Color((rgb[0], rgb[1], rgb[2]))
        elif inp.kind == "TIME":
            # the control counts milliseconds; the Playground's TIME uniform is seconds
            out[n] = Time(playing=True, value=max(0.0, 1000.0 * float(program.uniforms.get(n, 0.0))))
        elif inp.kind == "FRAME_ID":
            out[n] = Frame(value=program.frame_index)
        elif inp.kind == "MOUSE_POSITION":
            out[n] = Mouse()
        elif inp.kind == "KEY":
            out[n] = Key(str(inp.args[0]) if inp.args else "KeyA")
    if PLAY not in out and not any(isinstance(c, (Time, Frame)) for c in out.values()) and animates(program):
        out[PLAY] = Time(playing=False)   # no clock of its own, but its frames change it (a training demo)
    return out


def animates(program: PlaygroundProgram) -> bool:
    """Whether its frames differ: an entry point runs on every frame (not CALL::ONCE), as the
    Playground runs them continuously, e.g. gsplat2d-diff's training step."""
    return any("CALL_ONCE" not in attrs for _, attrs in program.kernels)


def _inputs(program: PlaygroundProgram) -> tuple[tuple[str, str, tuple[Any, ...]], ...]:
    return tuple((n, i.kind, i.args) for n, i in program.inputs.items())


class PlaygroundImage(LiveImage):
    """The live image of a playground program: each frame is a frame of the program (which follows
    its cell); the image is its output texture, the controls its inputs, ``error`` its error."""

    def __init__(self, program: PlaygroundProgram, name: str, controls: dict[str, Control], *,
                 size: tuple[int, int], **kwargs: Any) -> None:
        self.program = program
        self.output = name
        self._inputs = _inputs(program)
        self._first = True   # the first frame is the one the cell already ran
        super().__init__(self._render_frame, controls, size=size, status=lambda: program.error, **kwargs)

    def _render_frame(self, values: dict[str, Any]) -> np.ndarray:
        prog = self.program
        if self._first:
            self._first = False
            return prog.image(self.output)
        prog.follow()
        if _inputs(prog) != self._inputs:   # the new revision has other inputs: other controls
            self._inputs = _inputs(prog)
            self.set_controls(controls_for(prog))
        prog.frame(**{k: (v / 1000.0 if prog.inputs[k].kind == "TIME" else v)
                      for k, v in values.items() if k in prog.inputs})
        self.output = prog.output_name() or self.output
        return prog.image(self.output)


class PlaygroundView:
    """What a playground cell shows: the image (live when it has inputs) and an 'open in Playground'
    button; both have static fallbacks (PNG, a link)."""

    def __init__(self, program: PlaygroundProgram, image: ImageView | None, buffers: dict[str, BufferView],
                 link: str) -> None:
        self.program, self.image, self.buffers, self.link = program, image, buffers, link

    def button_html(self) -> str:
        return (f"<a class='sk-playground-link' href='{html.escape(self.link)}' target='_blank' rel='noopener' "
                "style='display:inline-block;padding:3px 10px;margin:4px 0;border:1px solid #888;"
                "border-radius:4px;text-decoration:none;font:12px sans-serif;color:inherit'>"
                "Open in Slang Playground \u2197</a>")

    def close(self) -> None:
        """Close its widgets (the kernel forgets their frames and pages)."""
        for w in (self.image, *self.buffers.values()):
            if w is not None:
                w.close()

    def _ipython_display_(self) -> None:
        from IPython import display as ipd

        display: Callable[..., Any] = ipd.display   # IPython is untyped
        HTML: Callable[[str], Any] = ipd.HTML
        if self.image is not None:
            display(self.image)
        for name, bv in self.buffers.items():
            display(HTML(f"<div style='font:12px monospace'>{html.escape(name)}</div>"))
            display(bv)
        display(HTML(self.button_html()))

    def __repr__(self) -> str:
        return f"<PlaygroundView of {self.program.cell}: {self.link[:60]}...>"


def playground_view(program: PlaygroundProgram, *, size: tuple[int, int] | None = None) -> PlaygroundView:
    """The view of a playground program (see the module docstring for the display rule)."""
    name = program.output_name()
    image: ImageView | None = None
    buffers: dict[str, BufferView] = {}
    if name is not None:
        h, w = program.resources[name].shape[:2]
        disp = size or (w, h)
        controls = controls_for(program)
        image = PlaygroundImage(program, name, controls, size=disp) if controls else \
            ImageView(program.image(name), size=disp)
    else:
        for b in program.buffers():
            buffers[b] = BufferView(program.read(b))
    return PlaygroundView(program, image, buffers, playground_link(program.source))


# Per session and cell, the program show_cell ran and the widgets of the view it showed last (which
# the cell's re-run replaces in the notebook: they are closed then). Held weakly: a program holds its
# session (a strong value would keep the key alive), and lives on in its open views and the namespace.
_Shown = tuple["weakref.ref[PlaygroundProgram]", list["weakref.ref[Any]"]]
_shown: "weakref.WeakKeyDictionary[Session, dict[str, _Shown]]" = weakref.WeakKeyDictionary()


def show_cell(session: "Session", cell: str, *, display: Callable[[Any], Any] | None = None) -> PlaygroundProgram | None:
    """After a cell compiled (the front ends' hook): run it for a frame and display its view if it is
    a runnable playground cell; returns the program (None for other cells). A re-run of a cell shown
    before continues that program on the new revision; PlaygroundError when the cell cannot run here."""
    if not is_playground(session.cell(cell).source):
        return None
    if display is None:
        from IPython.display import display as _display

        display = _display
    known = _shown.setdefault(session, {})
    ref, old = known.get(cell, (None, []))
    prog = ref() if ref is not None else None
    if prog is not None:
        prog.follow()
        if prog.error is not None or not prog.runnable:
            prog = None   # it cannot move to this revision: a new program says why, as on a first run
    clock: dict[str, Any] = {}
    if prog is None:
        prog = PlaygroundProgram(session, cell)
    else:   # the re-run cell's new view continues the clock the old one showed (it restarted at 0)
        clock = {n: prog.uniforms[n] for n, i in prog.inputs.items() if i.kind == "TIME" and n in prog.uniforms}
    if not prog.runnable:
        known.pop(cell, None)
        return None
    prog.frame(**clock)
    if prog.printed:
        print(prog.printed, end="" if prog.printed.endswith("\n") else "\n")
    view = playground_view(prog)
    display(view)
    for w in old:
        widget = w()
        if widget is not None:
            widget.close()
    widgets = [w for w in (view.image, *view.buffers.values()) if w is not None]
    known[cell] = (weakref.ref(prog), [weakref.ref(w) for w in widgets])
    return prog


def keep_cell_view(session: "Session", cell: str, *, display: Callable[[Any], Any] | None = None) -> bool:
    """After an edit of `cell` failed to compile (the front ends' hook, before they show the error):
    display the view the cell showed last again, so that it stays in the cell (a re-run clears the
    cell's output) and keeps playing the last good revision with the error over the image. False
    when the cell shows no live view."""
    ref, old = _shown.get(session, {}).get(cell, (None, []))
    prog = ref() if ref is not None else None
    widgets = [w() for w in old]
    if prog is None or not widgets or any(w is None for w in widgets):
        return False
    prog.follow()   # picks up the failure: `error` is what the banner shows
    if display is None:
        from IPython.display import display as _display

        display = _display
    for w in widgets:
        if isinstance(w, LiveImage):
            w.carry_on()   # shown again: its clock goes on from where it is
        display(w)
    return True
