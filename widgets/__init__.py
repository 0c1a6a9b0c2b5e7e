"""Notebook widgets for buffers and images (anywidget; binary transport; PNG/HTML fallbacks).

They depend only on numpy arrays and callbacks, not on the Slang engine:

* :class:`BufferView` - paged table / heat map / histogram / diff of any numpy array.
* :class:`ImageView` - float or uint8 image with exposure, colormap, zoom/pan, pixel inspection.
* :class:`LiveImage` - an ImageView re-rendered by ``render(values)`` from live controls
  (:class:`Slider`, :class:`Color`, :class:`Time`, :class:`Frame`, :class:`Mouse`).
"""

from __future__ import annotations

from .buffer_view import BufferView
from .controls import Color, Control, Frame, InvalidControlValue, Mouse, Slider, Time, validate_values
from .image_view import ImageView, LiveImage

__all__ = [
    "BufferView",
    "ImageView",
    "LiveImage",
    "Control",
    "Slider",
    "Color",
    "Time",
    "Frame",
    "Mouse",
    "InvalidControlValue",
    "validate_values",
]
