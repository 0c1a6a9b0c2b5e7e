"""Notebook widgets for buffers and images (anywidget; binary transport; PNG/HTML fallbacks).

They depend only on numpy arrays and callbacks, not on the Slang engine:

* :class:`BufferView` - paged table / heat map / histogram / diff of any numpy array.
* :class:`ImageView` - float or uint8 image with exposure, colormap, zoom/pan, pixel inspection.
* :class:`LiveImage` - an ImageView re-rendered by ``render(values)`` from live controls
  (:class:`Slider`, :class:`Color`, :class:`Time`, :class:`Frame`, :class:`Mouse`).
* :class:`IRGraph` - Slang IR graph (module / blocks / data flow, derivatives beside the primal,
  before/after a pass), laid out in the browser by the vendored dagre (``vendor/``).
* :class:`GradientFlow` - autodiff gradients vs finite differences on a data-flow graph; gradient
  buffers of a training loop over iterations (``record``).
"""

from __future__ import annotations

from .buffer_view import BufferView
from .controls import Color, Control, Frame, InvalidControlValue, Key, Mouse, Slider, Time, validate_values
from .gradient_flow import GradientFlow
from .image_view import ImageView, LiveImage
from .ir_graph import IRGraph

__all__ = [
    "BufferView",
    "ImageView",
    "LiveImage",
    "IRGraph",
    "GradientFlow",
    "Control",
    "Slider",
    "Color",
    "Time",
    "Frame",
    "Mouse",
    "Key",
    "InvalidControlValue",
    "validate_values",
]
