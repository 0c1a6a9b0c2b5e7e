"""TypedDicts for every message that crosses the widget comm (Python <-> browser).

Bulk data (table pages, frames, heat maps) always travels as binary buffers next to
these JSON headers, never as base64 inside them.
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "ColumnSpec",
    "PageRequest",
    "PageReply",
    "SeekRequest",
    "SeekReply",
    "HeatMeta",
    "HistogramData",
    "FrameMeta",
    "FrameRequest",
    "FrameError",
    "ControlSpec",
]


# ---------------------------------------------------------------- BufferView


class ColumnSpec(TypedDict):
    """One table column; ``wire`` is the numpy dtype string of its binary buffer (``"text"``: JSON)."""

    name: str
    wire: str


class PageRequest(TypedDict):
    """Browser -> Python: send rows ``[start, start+count)``; ``view`` tells views of one model apart."""

    type: Literal["page"]
    view: str
    req: int
    start: int
    count: int


class PageReply(TypedDict):
    """Python -> browser; buffers: one per numeric column, then (diff mode) one per compare column.

    ``labels``: row labels for N-D leading shapes (empty: the row number). ``text``: non-numeric
    columns as strings (rare: complex, datetime, strings, objects).
    """

    type: Literal["page"]
    view: str
    req: int
    start: int
    count: int
    labels: list[str]
    text: dict[str, list[str]]
    diff: bool


class SeekRequest(TypedDict):
    """Browser -> Python: first row after ``after`` that is non-finite / differs."""

    type: Literal["seek"]
    view: str
    what: Literal["nonfinite", "diff"]
    after: int


class SeekReply(TypedDict):
    type: Literal["seek"]
    view: str
    what: str
    row: int  # -1: none


class HeatMeta(TypedDict):
    """Header of the heat map in ``_heat``: uint8 codes per cell, 0..252 value between lo and hi,
    253 empty (padding), 254 a NaN in the cell, 255 an Inf in the cell.

    The column's rows are laid out on a ``grid_h`` x ``grid_w`` grid (the array's own 2-D leading
    shape, or wrapped row-major), reduced by ``block_h`` x ``block_w`` (mean of finite values).
    """

    width: int
    height: int
    block_w: int
    block_h: int
    grid_w: int
    grid_h: int
    lo: float
    hi: float
    column: int


class HistogramData(TypedDict):
    """Histogram of one column (finite values only); small, so plain JSON."""

    column: int
    edges: list[float]
    counts: list[int]
    nan: int
    posinf: int
    neginf: int


# ---------------------------------------------------------------- ImageView / LiveImage


class FrameMeta(TypedDict):
    """Header of the frame in ``_frame`` (row-major H x W x C, dtype ``u1`` or ``f4``)."""

    width: int
    height: int
    channels: int
    dtype: Literal["u1", "f4"]
    seq: int
    lo: float
    hi: float


class FrameRequest(TypedDict, total=False):
    """Browser -> Python: control values changed and/or the next frame of the loop is wanted.

    The browser sends the next request only after it drew the previous frame (or got an error),
    so at most one frame is ever in flight.
    """

    type: Literal["frame"]
    values: dict[str, object]


class FrameError(TypedDict):
    type: Literal["error"]
    message: str


class ControlSpec(TypedDict, total=False):
    """How the browser draws one control; produced by ``Control.spec()``."""

    name: str
    kind: Literal["slider", "color", "time", "frame", "mouse"]
    min: float
    max: float
    step: float
    value: object
