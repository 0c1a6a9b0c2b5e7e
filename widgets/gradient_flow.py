"""GradientFlow: autodiff gradients of a [Differentiable] function, checked, on its data-flow graph;
and gradient buffers of a training loop over iterations.

* ``GradientFlow.check(fn, *args)`` - per input: primal value, ``bwd_diff`` gradient, ``fwd_diff``
  directional derivatives and central finite differences (per component); inputs whose gradient
  disagrees are flagged (red) in a table and on the function's data-flow graph, where no_diff
  parameters and calls, [TreatAsDifferentiable] callees and calls of custom derivatives are marked.
* ``flow.record(step, {"weights": grad_array, ...})`` - training loops: per parameter buffer the
  gradient norm per step, a histogram of the latest gradient, and a heat map steps x element bins
  (|grad|, binary transport). Arrays may be numpy, CuPy (``.get()``) or anything with ``__array__``.
"""

from __future__ import annotations

import html
import math
from typing import Any, Mapping

import anywidget
import numpy as np
import traitlets as t

from ._wire import TrainMeta
from ._esm import HtmlFallback, bundle_css, bundle_esm

__all__ = ["GradientFlow", "to_numpy"]

HEAT_COLS = 128
HEAT_ROWS = 256


def to_numpy(a: Any) -> np.ndarray:
    """A host numpy copy of a numpy / CuPy / torch array or anything array-like."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # torch
        return a.detach().cpu().numpy()
    if hasattr(a, "get") and hasattr(a, "__cuda_array_interface__"):  # CuPy
        return a.get()
    return np.asarray(a)


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class _ParamHistory:
    def __init__(self, name: str) -> None:
        self.name = name
        self.norms: list[float | None] = []
        self.rows: list[np.ndarray] = []   # binned |grad| per step (float64, NaN where non-finite)
        self.hist: dict[str, Any] = {}
        self.shape: tuple[int, ...] = ()

    def add(self, g: np.ndarray) -> None:
        a = np.asarray(g, np.float64).ravel()
        self.shape = tuple(np.shape(g))
        finite = np.isfinite(a)
        self.norms.append(_finite_or_none(float(np.linalg.norm(a))) if finite.all() else None)
        cols = max(1, min(HEAT_COLS, a.size))
        edges = np.linspace(0, a.size, cols + 1).astype(int)
        absd = np.abs(a)
        row = np.empty(cols)
        for k in range(cols):
            seg = absd[edges[k]:edges[k + 1]]
            row[k] = np.nan if seg.size == 0 or not np.isfinite(seg).all() else seg.mean()
        self.rows.append(row)
        del self.rows[:-HEAT_ROWS]
        vals = a[finite]
        counts, bins = np.histogram(vals, bins=32) if vals.size else (np.zeros(0, int), np.zeros(1))
        self.hist = {"edges": [float(x) for x in bins], "counts": [int(c) for c in counts],
                     "nonfinite": int((~finite).sum())}

    def heat(self) -> tuple[bytes, int, int, float]:
        cols = max(len(r) for r in self.rows)
        m = np.full((len(self.rows), cols), np.nan)
        for k, r in enumerate(self.rows):
            m[k, : len(r)] = r
        fin = m[np.isfinite(m)]
        hmax = float(fin.max()) if fin.size and fin.max() > 0 else 1.0
        codes = np.where(np.isfinite(m), np.clip(m / hmax * 252, 0, 252), 254).astype(np.uint8)
        return codes.tobytes(), m.shape[0], m.shape[1], hmax


class GradientFlow(HtmlFallback, anywidget.AnyWidget):
    """Gradient check of a function (``GradientFlow.check``) and/or a training history (``record``)."""

    _esm = bundle_esm("gradient_flow.js")
    _css = bundle_css("gradient_flow.css")

    report = t.Dict().tag(sync=True)     # slang_kernel.views.gradients.GradientReport.to_json()
    graph = t.Dict().tag(sync=True)      # slang_kernel.views.gradients.flow_graph()
    _train = t.Dict().tag(sync=True)     # TrainMeta
    _heat = t.Bytes(b"").tag(sync=True)  # heat maps of every parameter buffer, back to back
    height = t.Int(360).tag(sync=True)

    def __init__(self, report: Any = None, graph: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._report_obj = report
        rep = report.to_json() if hasattr(report, "to_json") else dict(report or {})
        super().__init__(report=rep, graph=dict(graph or {}), **kwargs)
        self._history: dict[str, _ParamHistory] = {}
        self._steps: list[int] = []

    @classmethod
    def check(cls, fn: Any, *args: Any, grad_out: Any = None, eps: float = 1e-3, rtol: float = 1e-2,
              atol: float = 1e-3, graph: bool = True, **kwargs: Any) -> "GradientFlow":
        """Check `fn` (a SlangFunction) at `args`: bwd_diff, fwd_diff, finite differences per input."""
        from slang_kernel.views.gradients import flow_graph, flow_values, gradient_report, ir_views

        rep = gradient_report(fn, *args, grad_out=grad_out, eps=eps, rtol=rtol, atol=atol)
        g: dict[str, Any] = {}
        if graph:
            views = ir_views(fn.session, fn.name, autodiff=False)
            g = flow_graph(fn.session, fn.name, views)
            vals = flow_values(fn, *args, grad_out=grad_out, views=views, graph=g, rtol=rtol, atol=atol)
            g["values"], g["values_note"] = vals["nodes"], vals["note"]
            g["first_nonfinite"] = vals.get("first_nonfinite")
        return cls(rep, g, **kwargs)

    def node(self, node_id: str) -> dict[str, Any]:
        """What clicking node `node_id` shows: its graph entry with ``value``, ``grad`` (adjoint through
        the compiler's derivatives), ``numeric`` (finite differences) and ``bad`` (they disagree)."""
        nodes = {n["id"]: n for n in self.graph.get("nodes", [])}
        if node_id not in nodes:
            raise KeyError(f"no node {node_id!r} in the graph of {self.graph.get('function')}; "
                           f"nodes: {', '.join(nodes)}")
        return {**nodes[node_id], **self.graph.get("values", {}).get(node_id, {})}

    @property
    def first_nonfinite(self) -> dict[str, str] | None:
        """Where a NaN/Inf starts in the graph (marked there): {"node", "what": "value" or
        "derivative", "kind": "NaN" or "inf"}, or None when every value and derivative is finite."""
        got = self.graph.get("first_nonfinite")
        return dict(got) if got else None

    @property
    def bad_nodes(self) -> list[str]:
        """Graph nodes whose derivative disagrees with finite differences of the primal (where the
        broken derivative starts: the operands of its call, and the inputs upstream)."""
        return [k for k, v in self.graph.get("values", {}).items() if v.get("bad")]

    @property
    def result(self) -> Any:
        """The GradientReport (or None for a training-only widget)."""
        return self._report_obj

    @property
    def flagged(self) -> list[str]:
        """Inputs whose autodiff gradient disagrees with finite differences."""
        return list(self.report.get("flagged", []))

    # -- training loops -------------------------------------------------------------------------------

    def record(self, step: int, grads: Mapping[str, Any]) -> None:
        """Add one iteration's gradient buffers ({name: array}); the browser updates in place."""
        for name, g in grads.items():
            self._history.setdefault(name, _ParamHistory(name)).add(to_numpy(g))
        self._steps.append(int(step))
        del self._steps[:-max(HEAT_ROWS, 10_000)]
        self._publish()

    def history(self, name: str) -> dict[str, Any]:
        h = self._history[name]
        return {"norms": list(h.norms), "hist": dict(h.hist), "rows": np.array(h.rows)}

    def _publish(self) -> None:
        blobs, params, off = [], [], 0
        for name, h in self._history.items():
            data, rows, cols, hmax = h.heat()
            params.append({"name": name, "shape": list(h.shape), "norms": h.norms[-10_000:], "hist": h.hist,
                           "offset": off, "rows": rows, "cols": cols, "hmax": hmax,
                           "first_step": len(self._steps) - rows})
            blobs.append(data)
            off += len(data)
        meta: TrainMeta = {"steps": self._steps[-10_000:], "params": params}
        with self.hold_sync():
            self._heat = b"".join(blobs)
            self._train = dict(meta)

    # -- static fallback --------------------------------------------------------------------------

    def to_html(self) -> str:
        def fmt(v: Any) -> str:
            a = np.asarray(v if v is not None else np.nan, np.float64)
            return html.escape(np.array2string(a, precision=5, threshold=8) if a.ndim else f"{float(a):.6g}")
        rows = []
        for i in self.report.get("inputs", []):
            status = ("MISMATCH" if i["ok"] is False else "ok" if i["ok"] else i["kind"])
            rows.append(f"<tr><td>{html.escape(i['name'])}</td><td>{html.escape(i['type'])}</td>"
                        f"<td>{fmt(i['value'])}</td><td>{fmt(i['bwd'])}</td><td>{fmt(i['fwd'])}</td>"
                        f"<td>{fmt(i['numeric'])}</td><td>{status}</td></tr>")
        out = ""
        if rows:
            out += (f"<b>{html.escape(self.report.get('signature', ''))}</b><table><tr><th>input</th><th>type</th>"
                    "<th>value</th><th>bwd_diff</th><th>fwd_diff</th><th>finite diff</th><th></th></tr>"
                    + "".join(rows) + "</table>")
        for p in self._train.get("params", []):
            last = next((n for n in reversed(p["norms"]) if n is not None), None)
            out += f"<div>{html.escape(p['name'])}: {len(p['norms'])} steps, last |grad| = {last}</div>"
        return out or "<i>GradientFlow (empty)</i>"
