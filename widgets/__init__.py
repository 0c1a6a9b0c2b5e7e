"""Notebook widgets for buffers and images (anywidget; binary transport; PNG/HTML fallbacks).

The views themselves depend only on numpy arrays and callbacks, not on the Slang engine:

* :class:`BufferView` - paged table / heat map / histogram / diff of any numpy array.
* :class:`ImageView` - float or uint8 image with exposure, colormap, zoom/pan, pixel inspection.
* :class:`LiveImage` - an ImageView re-rendered by ``render(values)`` from live controls
  (:class:`Slider`, :class:`Color`, :class:`Time`, :class:`Frame`, :class:`Mouse`).
* :class:`IRGraph` - Slang IR graph (module / blocks / data flow, derivatives beside the primal,
  before/after a pass), laid out in the browser by the vendored dagre (``vendor/``).
* :class:`GradientFlow` - autodiff gradients vs finite differences on a data-flow graph; gradient
  buffers of a training loop over iterations (``record``).
* :class:`Progress` - a training loop's progress bar (a display output, not a widget: the saved
  notebook shows where the run ended).

Two modules bind them to the engine (one way: the engine imports no widget), following their cells
as they are re-run (hot reload):

* :func:`live` - a LiveImage driving a compute kernel's uniforms (``live_kernel``);
* :func:`playground_view` / :func:`show_cell` - what a Slang Playground cell shows (``playground_view``).
"""

from __future__ import annotations

from .buffer_view import BufferView
from .controls import Color, Control, Frame, InvalidControlValue, Key, Mouse, Slider, Time, validate_values
from .gradient_flow import GradientFlow
from .image_view import ImageView, LiveImage
from .ir_graph import IRGraph
from .live_kernel import LiveKernelImage, live
from .progress import Progress
from .playground_view import PlaygroundImage, PlaygroundView, controls_for, keep_cell_view, playground_view, show_cell

__all__ = [
    "BufferView",
    "ImageView",
    "LiveImage",
    "IRGraph",
    "GradientFlow",
    "Progress",
    "Control",
    "Slider",
    "Color",
    "Time",
    "Frame",
    "Mouse",
    "Key",
    "InvalidControlValue",
    "validate_values",
    "LiveKernelImage",
    "PlaygroundImage",
    "PlaygroundView",
    "controls_for",
    "live",
    "playground_view",
    "keep_cell_view",
    "show_cell",
]
