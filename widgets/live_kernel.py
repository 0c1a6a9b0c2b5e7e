"""Live kernels: a LiveImage whose controls drive a compute kernel's uniforms.

``live(kernel, image="outputTexture", controls={"amp": Slider(0, 1, 0.5), "t": Time()})`` dispatches
``kernel`` with the control values as the uniforms of the same names, shows the texture (or (H, W, C)
array) parameter ``image`` and re-dispatches on every control change or time step, streaming the new
frame. Flow control: the browser asks for frames only while fewer than two are on their way, each
request carrying the newest values (LiveImage), so the view never queues stale frames.

``playground_view(program)`` is the same for a Slang Playground cell
(:class:`slang_kernel.playground.PlaygroundProgram`): its SLIDER / COLOR_PICK / TIME / FRAME_ID /
MOUSE_POSITION inputs become the controls, and a button opens the cell in the public Playground.
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import numpy as np

from ..playground import to_rgba8
from .controls import Control
from .image_view import ImageView, LiveImage

__all__ = ["LiveKernelImage", "PlaygroundView", "live", "playground_view", "to_rgba8"]


class LiveKernelImage(LiveImage):
    """The LiveImage of :func:`live` and :func:`playground_view`: each frame re-dispatches a kernel
    (``kernel``: the ComputeKernel, for ``live``). Requests are answered one at a time, in order (the
    kernel handles comm messages sequentially), and the browser asks only while fewer than two
    frames are on their way, so nothing piles up here."""

    kernel: Any = None


def _bind_value(t: Any, v: Any) -> Any:
    """A control's value as the uniform's type wants it (ints for int uniforms, float arrays for vectors)."""
    if isinstance(v, (tuple, list)):
        return np.asarray(v, np.float32)
    if t is not None and t.kind == "scalar" and (t.scalar or "").startswith(("int", "uint")):
        return int(v)
    if t is not None and t.kind == "scalar" and isinstance(v, (int, float)):
        return float(v)
    return v


def live(kernel: Any, image: str = "outputTexture", controls: Mapping[str, Control] | None = None, *,
         values: Mapping[str, Any] | None = None, threads: Any = None, groups: Any = None,
         size: tuple[int, int] | None = None, rgba8: bool = True, **kwargs: Any) -> LiveKernelImage:
    """A LiveImage of ``kernel``'s ``image`` parameter, re-dispatched whenever a control changes.

    kernel: a ComputeKernel. image: the name of a texture parameter (RWTexture2D) or of an (H, W, C)
    array in ``values``. controls: name -> Slider/Color/Time/Frame/Mouse; each drives the kernel
    uniform of the same name. values: the other parameters (fixed). The texture is created when not
    given: ``size`` (width, height), default 512x512, float4; on Vulkan it stays on the device.
    threads/groups: the dispatch size (default: one thread per pixel). rgba8: stream floats clamped
    to 8 bits (4x less data per frame); False keeps floats (HDR, exposure in the view).
    """
    from ..playground import dispatch

    session = kernel.session
    ck = kernel.compiled()
    params = {p.name: p for p in (*ck.entry_point.uniforms, *ck.reflection.globals)}
    controls = dict(controls or {})
    for n in controls:
        if n not in params:
            raise KeyError(f"control {n!r} is not a parameter of {kernel.name}; its parameters: {', '.join(params)}")
    fixed = dict(values or {})
    if image not in params:
        raise KeyError(f"{kernel.name} has no parameter {image!r}; its parameters: {', '.join(params)}")
    pt = params[image].type
    if image not in fixed:
        if not pt.is_texture:
            raise TypeError(f"{image} is {pt.name}: pass its array in values= (or name a texture parameter)")
        w, h = size or (512, 512)
        el = pt.element
        ch = (el.count if el is not None and el.kind == "vector" else 1) or 1
        arr = np.zeros((h, w, ch), np.float32)
        fixed[image] = session.backend.texture(arr) if session.backend.name == "vulkan" else arr
    img = fixed[image]
    shape = img.shape
    if threads is None and groups is None:
        threads = (shape[1], shape[0], 1)
    from ..kernels import groups_for

    state = {"ck": ck, "rev": session.revision}

    def render(vals: dict[str, Any]) -> np.ndarray:
        cur = state["ck"]
        if session.revision != state["rev"]:
            cur = state["ck"] = kernel.compiled()
            state["rev"] = session.revision
        g = groups_for(cur.entry_point, threads, groups)
        args = dict(fixed)
        for n, v in vals.items():
            args[n] = _bind_value(params[n].type if n in params else None, v)
        dispatch(session, cur, g, args)
        out = img.numpy() if hasattr(img, "numpy") else img
        return to_rgba8(out) if rgba8 and np.asarray(out).dtype.kind == "f" else np.array(out, copy=True)

    view = LiveKernelImage(render, controls, size=tuple(kwargs.pop("display_size", (512, 512))), **kwargs)
    view.kernel = kernel
    return view


class PlaygroundView:
    """What a playground cell shows: the image (live when it has inputs) and an 'open in Playground'
    button; both have static fallbacks (PNG, a link)."""

    def __init__(self, program: Any, image: ImageView | None, buffers: dict[str, Any], link: str) -> None:
        self.program, self.image, self.buffers, self.link = program, image, buffers, link

    def button_html(self) -> str:
        return (f"<a class='sk-playground-link' href='{html.escape(self.link)}' target='_blank' rel='noopener' "
                "style='display:inline-block;padding:3px 10px;margin:4px 0;border:1px solid #888;"
                "border-radius:4px;text-decoration:none;font:12px sans-serif;color:inherit'>"
                "Open in Slang Playground \u2197</a>")

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.image is not None:
            display(self.image)
        for name, bv in self.buffers.items():
            display(HTML(f"<div style='font:12px monospace'>{html.escape(name)}</div>"))
            display(bv)
        display(HTML(self.button_html()))

    def __repr__(self) -> str:
        return f"<PlaygroundView of {self.program.cell}: {self.link[:60]}...>"


def playground_view(program: Any, *, size: tuple[int, int] | None = None) -> PlaygroundView:
    """The view of a playground program (see slang_kernel.playground for the display rule)."""
    from ..playground import playground_link

    name = program.output_name()
    image: ImageView | None = None
    buffers: dict[str, Any] = {}
    if name is not None:
        h, w = program.resources[name].shape[:2]
        disp = size or (w, h)
        controls = program.controls()
        if controls:
            first = [True]

            def render(vals: dict[str, Any]) -> np.ndarray:
                if first[0]:  # the frame the cell already ran
                    first[0] = False
                    return program.image(name)
                return program.frame(**vals).image(name)

            image = LiveKernelImage(render, controls, size=disp)
        else:
            image = ImageView(program.image(name), size=disp)
    else:
        from .buffer_view import BufferView

        for b in program.buffers():
            buffers[b] = BufferView(program.read(b))
    return PlaygroundView(program, image, buffers, playground_link(program.source))
