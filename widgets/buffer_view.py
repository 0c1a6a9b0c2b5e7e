"""BufferView: a typed, paged view of any numpy array (millions of rows), with heat map,
histogram, NaN/Inf highlighting and a diff mode between two arrays.

Only the rows the browser shows (plus a small prefetch margin) cross the comm, as one binary buffer
per column; heat maps go as uint8 codes, histograms as a few numbers.
"""

from __future__ import annotations

import html
import logging
import math
from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets as t

from ._esm import HtmlFallback, bundle_css, bundle_esm
from ._encode import colormap_lut
from ._wire import ColumnSpec, HeatMeta, HistogramData, PageReply, SeekReply

__all__ = ["BufferView"]

log = logging.getLogger("slang_kernel.widgets")
_MAX_PAGE = 2000
_MAX_COLUMNS = 64
_HEAT_MAX = 512
_HIST_BINS = 64
_VEC_NAMES = "xyzw"
_Key = str | tuple[int, ...]


# ---------------------------------------------------------------- columns


def _suffix(idx: tuple[int, ...], shape: tuple[int, ...]) -> str:
    if len(shape) == 1 and shape[0] <= 4:
        return _VEC_NAMES[idx[0]]
    return "[" + ",".join(map(str, idx)) + "]"


def _column_paths(dtype: np.dtype, comp: tuple[int, ...]) -> list[tuple[str, tuple[_Key, ...], np.dtype]]:
    """Leaf columns as (name, key path, leaf dtype): struct fields, then vector/matrix components."""
    out: list[tuple[str, tuple[_Key, ...], np.dtype]] = []

    def walk(name: str, keys: tuple[_Key, ...], dt: np.dtype, shape: tuple[int, ...]) -> None:
        if shape:
            for idx in np.ndindex(*shape):
                suf = _suffix(idx, shape)
                walk(f"{name}.{suf}" if name and suf[0] != "[" else name + suf, keys + (idx,), dt, ())
        elif dt.names:
            for f in dt.names:
                fdt = dt[f]
                base, sub = fdt.subdtype or (fdt, ())
                walk(f"{name}.{f}" if name else f, keys + (f,), base, tuple(sub))
        else:
            out.append((name or "value", keys, dt))

    base, sub = dtype.subdtype or (dtype, ())
    walk("", (), base, tuple(comp) + tuple(sub))
    return out


def _extract(x: np.ndarray, keys: tuple[_Key, ...]) -> np.ndarray:
    for k in keys:
        x = x[k] if isinstance(k, str) else x[(slice(None),) + k]
    return x


def _wire_dtype(dt: np.dtype) -> str:
    """Dtype string of a leaf column on the wire; ``"text"`` for what JS typed arrays cannot hold."""
    if dt.kind == "f":
        return "<f8" if dt.itemsize > 4 else "<f4"
    if dt.kind in "iu":
        return f"<{dt.kind}{dt.itemsize}" if dt.itemsize > 1 else f"|{dt.kind}1"
    if dt.kind == "b":
        return "|b1"
    return "text"


def _to_wire(col: np.ndarray, wire: str) -> bytes:
    return np.ascontiguousarray(col, dtype=np.uint8 if wire == "|b1" else wire).tobytes()


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v.item() if isinstance(v, np.generic) else v)


# ---------------------------------------------------------------- heat map / histogram


def _heat_codes(v: np.ndarray, grid: tuple[int, int]) -> tuple[bytes, HeatMeta]:
    gh, gw = grid
    v = v.astype(np.float64, copy=False)
    n = v.size
    bh, bw = max(1, math.ceil(gh / _HEAT_MAX)), max(1, math.ceil(gw / _HEAT_MAX))
    H, W = math.ceil(gh / bh), math.ceil(gw / bw)
    pad = np.full(H * bh * W * bw, np.nan)
    present = np.zeros(pad.shape, bool)
    pad2, pres2 = pad.reshape(H * bh, W * bw), present.reshape(H * bh, W * bw)
    flat = np.full(gh * gw, np.nan)  # a wrapped 1-D column ends in a partial last grid row
    flat[:n] = v
    pad2[:gh, :gw] = flat.reshape(gh, gw)
    pres = np.zeros(gh * gw, bool)
    pres[:n] = True
    pres2[:gh, :gw] = pres.reshape(gh, gw)
    blocks = pad2.reshape(H, bh, W, bw)
    pres_b = pres2.reshape(H, bh, W, bw).any(axis=(1, 3))
    finite = np.isfinite(blocks)
    cnt = finite.sum(axis=(1, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, blocks, 0.0).sum(axis=(1, 3)) / cnt
    isnan = (np.isnan(blocks) & pres2.reshape(H, bh, W, bw)).any(axis=(1, 3))
    isinf = np.isinf(blocks).any(axis=(1, 3))
    fin = v[np.isfinite(v)]
    lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 1.0)
    span = (hi - lo) or 1.0
    codes = np.clip(np.nan_to_num((mean - lo) / span * 252.0 + 0.5, nan=0.0), 0, 252).astype(np.uint8)
    codes[cnt == 0] = 253
    codes[isinf] = 255
    codes[isnan] = 254
    codes[~pres_b] = 253
    meta: HeatMeta = {"width": W, "height": H, "block_w": bw, "block_h": bh, "grid_w": gw, "grid_h": gh,
                      "lo": lo, "hi": hi, "column": 0}
    return codes.tobytes(), meta


def _histogram(v: np.ndarray, column: int) -> HistogramData:
    vf = v.astype(np.float64, copy=False) if v.dtype.kind != "b" else v.astype(np.float64)
    nan = int(np.isnan(vf).sum()) if vf.dtype.kind == "f" else 0
    posinf = int(np.isposinf(vf).sum())
    neginf = int(np.isneginf(vf).sum())
    fin = vf[np.isfinite(vf)] if nan + posinf + neginf else vf
    if fin.size:
        lo, hi = float(fin.min()), float(fin.max())
        if v.dtype.kind in "iub" and hi - lo + 1 <= _HIST_BINS:
            edges = np.arange(lo - 0.5, hi + 1.0, 1.0)
        else:
            edges = np.linspace(lo, hi if hi > lo else lo + 1.0, _HIST_BINS + 1)
        counts, edges = np.histogram(fin, bins=edges)
    else:
        counts, edges = np.zeros(0, np.int64), np.zeros(1)
    return {"column": column, "edges": [float(e) for e in edges], "counts": [int(c) for c in counts],
            "nan": nan, "posinf": posinf, "neginf": neginf}


# ---------------------------------------------------------------- widget


class BufferView(HtmlFallback, anywidget.AnyWidget):
    """Paged table of a numpy array; ``mode`` switches to a heat map or a histogram of ``column``.

    Rows are the leading dimensions; the trailing ``components`` dimensions (default: the last one
    when it has at most 16 entries and the dtype is not a struct) and struct fields become columns;
    ``columns`` renames them. ``compare=b`` (or
    :meth:`diff`) highlights elements that differ from ``b`` beyond ``rtol``/``atol``.
    """

    _esm = bundle_esm("buffer_view.js")
    _css = bundle_css("buffer_view.css")

    rows = t.Int(0).tag(sync=True)
    shape = t.List(t.Int()).tag(sync=True)
    dtype = t.Unicode("").tag(sync=True)
    mode = t.Enum(("table", "heatmap", "histogram"), default_value="table").tag(sync=True)
    column = t.Int(0).tag(sync=True)
    page_size = t.Int(20).tag(sync=True)
    _columns = t.List(t.Dict()).tag(sync=True)
    _version = t.Int(0).tag(sync=True)
    _summary = t.Dict().tag(sync=True)
    _heat = t.Bytes(b"").tag(sync=True)
    _heat_meta = t.Dict().tag(sync=True)
    _hist = t.Dict().tag(sync=True)
    _lut = t.Bytes(b"").tag(sync=True)

    def __init__(self, array: np.ndarray, *, compare: np.ndarray | None = None,
                 columns: Sequence[str] | None = None, components: int | None = None,
                 rtol: float = 1e-5, atol: float = 1e-8, page_size: int = 20, mode: str = "table",
                 **kwargs: Any) -> None:
        super().__init__(page_size=page_size, mode=mode, _lut=colormap_lut("viridis"), **kwargs)
        self._names = list(columns) if columns is not None else None
        self._components = components
        self.rtol, self.atol = rtol, atol
        self._nonfinite_rows = np.zeros(0, np.int64)
        self._diff_rows = np.zeros(0, np.int64)
        self.update(array, compare=compare)
        self.observe(self._on_view_change, names=["mode", "column"])
        self.on_msg(self._on_msg)

    @classmethod
    def of_comparison(cls, comparison: Any, buffer: str, backend: str | None = None) -> "BufferView":
        """backend's result of `buffer` in a `Session.compare` Comparison, the elements that differ
        from the reference's marked (exact comparison); its table pages to them."""
        reference, result = comparison.pair(buffer, backend)
        return cls(result, compare=reference, rtol=0.0, atol=0.0)

    # ---- data

    @property
    def array(self) -> np.ndarray:
        return self._array

    def update(self, array: np.ndarray, compare: np.ndarray | None = None) -> None:
        """Show a new array (e.g. the next dispatch result); views re-fetch their current page.

        A C-contiguous array is referenced, not copied (others are copied once); after changing it
        in place, call ``update`` again so the NaN/diff summaries and plots follow.
        """
        a = np.asarray(array)
        if a.ndim == 0:
            a = a.reshape(1)
        k = self._components
        if k is None:
            k = 1 if a.ndim >= 2 and a.shape[-1] <= 16 and a.dtype.names is None else 0
        if not 0 <= k < max(a.ndim, 1):
            raise ValueError(f"components={k} leaves no row dimension for shape {a.shape}")
        lead, comp = a.shape[: a.ndim - k], a.shape[a.ndim - k:]
        self._array, self._lead, self._comp = a, tuple(lead), tuple(comp)
        self._flat: np.ndarray = np.ascontiguousarray(a).reshape((int(np.prod(lead)),) + tuple(comp))
        paths = _column_paths(a.dtype, self._comp)[:_MAX_COLUMNS]
        if self._names is not None:
            if len(self._names) != len(paths):
                raise ValueError(f"{len(self._names)} column names for {len(paths)} columns")
            paths = [(n, keys, dt) for n, (_, keys, dt) in zip(self._names, paths)]
        self._paths = paths
        self._cmp: np.ndarray | None = None
        with self.hold_sync():
            self.rows = len(self._flat)
            self.shape = list(a.shape)
            self.dtype = str(a.dtype)
            self._columns = [dict(ColumnSpec(name=n, wire=_wire_dtype(dt))) for n, _, dt in paths]
            if self.column >= len(paths):
                self.column = 0
            if compare is not None:
                self._set_compare(compare)
            else:
                self._summary = self._compute_summary()
            self._refresh_view()
            self._version += 1

    def diff(self, other: np.ndarray) -> "BufferView":
        """Compare with ``other`` (same shape and dtype); returns self for chaining."""
        with self.hold_sync():
            self._set_compare(other)
            self._version += 1
        return self

    def _set_compare(self, other: np.ndarray) -> None:
        b = np.asarray(other)
        if b.shape != self._array.shape or b.dtype != self._array.dtype:
            raise ValueError(f"compare array {b.shape} {b.dtype} does not match "
                             f"{self._array.shape} {self._array.dtype}")
        self._cmp = np.ascontiguousarray(b).reshape(self._flat.shape)
        self._summary = self._compute_summary()

    def _leaf(self, i: int, src: np.ndarray | None = None) -> np.ndarray:
        return _extract(self._flat if src is None else src, self._paths[i][1])

    def _compute_summary(self) -> dict[str, Any]:
        rows = self._flat.shape[0]
        bad = np.zeros(rows, bool)
        nan = inf = 0
        for i, (_, _, dt) in enumerate(self._paths):
            if dt.kind == "f":
                col = self._leaf(i)
                isnan, isinf = np.isnan(col), np.isinf(col)
                nan += int(isnan.sum())
                inf += int(isinf.sum())
                bad |= isnan | isinf
        self._nonfinite_rows = np.flatnonzero(bad) if nan + inf else np.zeros(0, np.int64)
        summary: dict[str, Any] = {"nan": nan, "inf": inf, "rtol": self.rtol, "atol": self.atol}
        if self._cmp is not None:
            differ = np.zeros(rows, bool)
            count = 0
            max_abs = 0.0
            for i, (_, _, dt) in enumerate(self._paths):
                a, b = self._leaf(i), self._leaf(i, self._cmp)
                if dt.kind in "fc":
                    d = ~(np.isclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=True))
                    both = np.isfinite(a) & np.isfinite(b)
                    if both.any():
                        max_abs = max(max_abs, float(np.max(np.abs(a[both].astype(np.float64) - b[both]))))
                else:
                    d = a != b
                    if dt.kind in "iu" and d.any():
                        max_abs = max(max_abs, float(np.max(np.abs(a[d].astype(np.float64) - b[d]))))
                count += int(d.sum())
                differ |= d
            self._diff_rows = np.flatnonzero(differ)
            summary.update(diff=True, diff_count=count, diff_rows=int(self._diff_rows.size), max_abs=max_abs)
        else:
            self._diff_rows = np.zeros(0, np.int64)
            summary["diff"] = False
        return summary

    # ---- heat map / histogram (computed when shown)

    def _grid(self) -> tuple[int, int]:
        if len(self._lead) == 2:
            return self._lead[0], self._lead[1]
        n = self._flat.shape[0]
        w = max(1, math.ceil(math.sqrt(n)))
        return math.ceil(n / w), w

    def _refresh_view(self) -> None:
        col = min(self.column, len(self._paths) - 1)
        if self.mode == "heatmap":
            leaf = self._leaf(col)
            if self._paths[col][2].kind not in "fiub":
                self._heat_meta = {"error": "column is not numeric"}
                return
            codes, meta = _heat_codes(leaf, self._grid())
            meta["column"] = col
            with self.hold_sync():
                self._heat = codes
                self._heat_meta = dict(meta)
        elif self.mode == "histogram":
            if self._paths[col][2].kind not in "fiub":
                self._hist = {"error": "column is not numeric", "column": col}
                return
            self._hist = dict(_histogram(self._leaf(col), col))

    def _on_view_change(self, _change: Any) -> None:
        self._refresh_view()

    def histogram(self, column: int = 0) -> HistogramData:
        """Histogram of one column (finite values), as sent to the browser."""
        return _histogram(self._leaf(column), column)

    # ---- paging protocol

    def page(self, start: int, count: int, view: str = "", req: int = 0) -> tuple[PageReply, list[bytes]]:
        """The reply (header, binary buffers) for rows ``[start, start+count)``, clipped."""
        rows = self._flat.shape[0]
        start = max(0, min(int(start), max(rows - 1, 0)))
        stop = min(rows, start + max(0, min(int(count), _MAX_PAGE)))
        block = self._flat[start:stop]
        cblock = self._cmp[start:stop] if self._cmp is not None else None
        buffers: list[bytes] = []
        text: dict[str, list[str]] = {}
        for src in ([block] if cblock is None else [block, cblock]):
            for i, spec in enumerate(self._columns):
                leaf = _extract(src, self._paths[i][1])
                if spec["wire"] == "text":
                    text.setdefault(spec["name"], []).extend(_fmt(v) for v in leaf)
                else:
                    buffers.append(_to_wire(leaf, spec["wire"]))
        labels: list[str] = []
        if len(self._lead) > 1:
            idx = np.unravel_index(np.arange(start, stop), self._lead)
            labels = [",".join(map(str, tup)) for tup in zip(*(i.tolist() for i in idx))]
        reply: PageReply = {"type": "page", "view": view, "req": req, "start": start, "count": stop - start,
                            "labels": labels, "text": text, "diff": cblock is not None}
        return reply, buffers

    def seek(self, what: str, after: int) -> int:
        """First row > ``after`` with a NaN/Inf (``"nonfinite"``) or a difference (``"diff"``), else -1."""
        rows = self._nonfinite_rows if what == "nonfinite" else self._diff_rows
        if rows.size == 0:
            return -1
        i = int(np.searchsorted(rows, after, side="right"))
        return int(rows[i % rows.size])  # wraps around

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        try:
            kind, view, req = content.get("type"), str(content.get("view", "")), int(content.get("req", 0))
            if kind == "page":
                reply, buffers = self.page(int(content["start"]), int(content["count"]), view, req)
                self.send(reply, buffers)
            elif kind == "seek" and content.get("what") in ("nonfinite", "diff"):
                row = self.seek(content["what"], int(content.get("after", -1)))
                msg: SeekReply = {"type": "seek", "view": view, "what": content["what"], "row": row}
                self.send(msg)
            else:
                log.warning("BufferView: ignored message %r", kind)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("BufferView: ignored malformed message: %s", exc)

    # ---- static fallback

    def to_html(self, max_rows: int = 10) -> str:
        """The first rows as an HTML table (what GitHub/nbviewer show)."""
        n = min(max_rows, self._flat.shape[0])
        block = self._flat[:n]
        cols = [_extract(block, keys) for _, keys, _ in self._paths]
        head = "".join(f"<th>{html.escape(name)}</th>" for name, _, _ in self._paths)
        lead = len(self._lead) > 1
        body = []
        for r in range(n):
            label = ",".join(map(str, np.unravel_index(r, self._lead))) if lead else str(r)
            cells = "".join(f"<td>{html.escape(_fmt(c[r]))}</td>" for c in cols)
            body.append(f"<tr><th>{label}</th>{cells}</tr>")
        s = self._summary
        note = f"BufferView {tuple(self._array.shape)} {self._array.dtype}, {self._flat.shape[0]} rows"
        if s.get("nan") or s.get("inf"):
            note += f"; {s['nan']} NaN, {s['inf']} Inf"
        if s.get("diff"):
            note += f"; {s['diff_count']} elements differ from the comparison array"
        rest = self._flat.shape[0] - n
        more = f"<tr><td colspan='{len(cols) + 1}'>… {rest} more rows</td></tr>" if rest else ""
        return (f"<div><p>{html.escape(note)}</p><table><thead><tr><th>#</th>{head}</tr></thead>"
                f"<tbody>{''.join(body)}{more}</tbody></table></div>")
