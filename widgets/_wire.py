"""TypedDicts for every message that crosses the widget comm (Python <-> browser).

Bulk data (table pages, frames, heat maps) always travels as binary buffers next to
these JSON headers, never as base64 inside them.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

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
    "PixelRequest",
    "PixelReply",
    "ControlSpec",
    "IRInstData",
    "IRBlockData",
    "IRFunctionData",
    "IRViewData",
    "IRGraphData",
    "IRSelection",
    "GradInputData",
    "TrainMeta",
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


class _FrameHeader(TypedDict):
    width: int
    height: int
    channels: int
    dtype: Literal["u1", "f4", "jpeg"]
    seq: int
    lo: float
    hi: float
    error: str | None


class FrameMeta(_FrameHeader, total=False):
    """Header of the frame in ``_frame`` (row-major H x W x C, dtype ``u1`` or ``f4``; ``jpeg``: a
    live loop's preview, decoded to RGBA; with ``toned`` it is a float frame already tone-mapped).

    error: what the view shows over the frame while it is not what the user last asked for (the
    cell's new revision did not compile, so the frame comes from the last good one); None when
    there is nothing to say. Every frame carries it, so the banner goes away with the next good frame.
    """

    toned: bool


class FrameRequest(TypedDict, total=False):
    """Browser -> Python: control values changed and/or the next frames of the loop are wanted.

    req: its id; the frames answering it carry ``part: req`` except the last, which carries
    ``reqs: [req, ...]`` (the requests it completes). count: how many frames (1..4; a playing loop
    asks for several per request, Time and Frame advanced for each), interval_ms: at least this long
    between frames. The browser asks again only when fewer than two frames are on their way, each
    request carrying the newest values, so frames never queue up. lossy: JPEG is acceptable. path:
    values a drag passed since the last request (at most 48), a frame run at each and not sent
    before the request's own frame (a painting demo draws the stroke between them).
    """

    type: Literal["frame"]
    values: dict[str, object]
    req: int
    count: int
    interval_ms: float
    lossy: bool
    path: list[dict[str, object]]


class PausedNotice(TypedDict):
    """Browser -> Python: the user paused the loop; the saved PNG fallback becomes this frame."""

    type: Literal["paused"]


class ExactRequest(TypedDict, total=False):
    """Browser -> Python: the loop rests on a JPEG preview; send that frame's exact pixels."""

    type: Literal["exact"]
    req: int


class _FrameErrorBase(TypedDict):
    type: Literal["error"]
    message: str


class FrameError(_FrameErrorBase, total=False):
    """Python -> browser: rendering failed (no frame); reqs: the requests it answers."""

    reqs: list[int]


class PixelRequest(TypedDict):
    """Browser -> Python: the user clicked pixel (x, y) of a view with ``pixel_debug`` on; Python runs
    the view's ``on_pixel`` (for a kernel's image: that pixel's thread through ``k.debug``)."""

    type: Literal["pixel"]
    req: int
    x: int
    y: int


class PixelReply(TypedDict):
    """Python -> browser: what ``on_pixel`` returned for request ``req``, as text (``ThreadDebug.text()``
    for a kernel thread), or ``error`` (a clear message; text is then empty). Shown beside the image."""

    type: Literal["pixel"]
    req: int
    x: int
    y: int
    text: str
    error: str | None


class ControlSpec(TypedDict, total=False):
    """How the browser draws one control; produced by ``Control.spec()``."""

    name: str
    kind: Literal["slider", "color", "time", "frame", "mouse", "key"]
    min: float
    max: float
    step: float
    value: object
    code: str       # key: KeyboardEvent.code
    playing: bool   # time: play from the start


# ---------------------------------------------------------------- IRGraph (data: slang_kernel.views.gradients)


class _IRInstNames(TypedDict, total=False):
    raw_text: str        # the IR text as printed, where `text` demangled a generated name
    callee_label: str    # the callee as the user wrote it: fwd_diff(f), bwd_diff(f) context ...


class IRInstData(_IRInstNames):
    """One instruction: ``loc`` is [line in the cell, column] (``-g`` IR), ``ops`` operand ids."""

    id: str
    name: str | None
    op: str
    type: str | None
    text: str
    loc: list[int] | None
    ops: list[str]
    callee: str | None
    nodiff: bool


class IRBlockData(TypedDict):
    label: str
    insts: list[IRInstData]
    succ: list[str]
    structure: list[list[str]]  # [kind, label]: merge / break / continue targets
    back: list[str]             # successors reached by a loop back edge


class IRFunctionData(TypedDict):
    id: str
    name: str
    label: str           # what the name means: fwd_diff(f), bwd_diff(f) propagate ... (slang_kernel.views.ir.demangle)
    role: str | None     # forward / backward_primal / backward_propagate / ... for s_fwd_* etc.
    primal: str | None   # name of the function it differentiates
    user: bool           # from the cell (has source locations) or autodiff-generated
    decorations: list[str]
    blocks: list[IRBlockData]
    n_insts: int


class IRViewData(TypedDict):
    id: str
    title: str           # "module (-g)", "AFTER finalizeAutoDiffPass", "BEFORE simplifyIR", ...
    functions: list[IRFunctionData]
    edges: list[dict[str, Any]]    # function level: call / derivative / copy (slang_kernel.views.ir_graph.to_graph)
    derivatives: list[dict[str, Any]]
    errors: list[str]


class IRGraphData(TypedDict):
    name: str
    cell: str
    source: str                   # the cell's text (for the source pane)
    views: list[IRViewData]
    related: list[list[str]]      # [view, function]: the primal, then its generated derivatives
    compare: list[str]            # [before view, after view] of the chosen pass, or []
    notes: list[str]


class IRSelection(TypedDict):
    """Browser -> Python (the ``selected`` trait): the instruction clicked."""

    view: str
    function: str
    inst: str
    text: str
    line: int | None


# ---------------------------------------------------------------- GradientFlow


class GradInputData(TypedDict):
    """One input of a gradient check (slang_kernel.views.gradients.InputGrad.to_json)."""

    name: str
    type: str
    kind: Literal["diff", "no_diff", "nondiff"]
    value: object
    bwd: object
    fwd: object
    numeric: object
    abs_error: object
    bad: object
    max_abs_error: float
    ok: bool | None
    fwd_ok: bool | None


class TrainMeta(TypedDict):
    """Header of the training history; heat maps travel in the binary ``_heat`` trait.

    Per parameter buffer: ``norms`` (L2 norm per recorded step), ``hist`` (histogram of the latest
    gradient), and a heat map of steps x element bins: uint8 codes (0..252 |grad| between 0 and
    ``hmax``, 254 NaN/Inf) at byte offset ``offset``, ``rows`` x ``cols``.
    """

    steps: list[int]
    params: list[dict[str, Any]]
