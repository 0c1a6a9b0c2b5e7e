"""Cross-backend diff: one kernel, the same inputs, every backend that works here.

Each backend runs on its own copy of the inputs (the session's own backend, and for the others the
session's `replica(backend)`: the same cells on that backend); each output buffer (a read-write
resource given as a numpy array) is compared with the first backend that ran, as max absolute and
max ULP differences, the count of differing elements and the first differing indices. A backend that
does not work here, or on which the kernel cannot compile or run, is listed with the reason.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..compiler.diagnostics import SlangCompileError
from ..backends.registry import backend_names
from ..errors import BackendUnavailable
from ..engine.protocols import CompareService

__all__ = ["BufferDiff", "Comparison", "compare", "ulp_difference"]

_FIRST = 8  # differing indices kept per buffer


@dataclass(frozen=True)
class BufferDiff:
    """One output buffer of one backend against the reference backend."""

    buffer: str                 # parameter name, "name.field" for a struct field
    backend: str
    reference: str
    shape: tuple[int, ...]
    dtype: str
    max_abs: float              # inf where one side is NaN/inf and the other not
    max_ulp: int                # in units of the element type's last place (integers: the difference)
    count: int                  # elements that differ (NaN equals NaN)
    first: tuple[tuple[int, ...], ...]   # indices of the first differing elements

    @property
    def differs(self) -> bool:
        return self.count > 0


@dataclass(frozen=True)
class Comparison:
    """What `Session.compare` found: a row per output buffer x backend (against `reference`)."""

    kernel: str
    reference: str
    ran: tuple[str, ...]
    diffs: tuple[BufferDiff, ...]
    unavailable: Mapping[str, str] = field(default_factory=dict)       # backend -> why it did not run
    outputs: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict, repr=False)  # backend -> buffer -> result

    @property
    def differs(self) -> bool:
        return any(d.differs for d in self.diffs)

    def diff(self, buffer: str, backend: str | None = None) -> BufferDiff:
        """The row of `buffer` for `backend` (default: the first backend besides the reference)."""
        rows = [d for d in self.diffs if d.buffer == buffer and (backend is None or d.backend == backend)]
        if not rows:
            known = sorted({d.buffer for d in self.diffs})
            raise KeyError(f"no compared buffer {buffer!r}" + (f" on {backend}" if backend else "")
                           + f"; compared: {', '.join(known) or 'none'} on {', '.join(self.ran)}")
        return rows[0]

    def difference(self, buffer: str, backend: str | None = None) -> np.ndarray:
        """backend's result minus the reference's, elementwise (float64; a struct field as `name.field`)."""
        d = self.diff(buffer, backend)
        a, b = _field(self.outputs[d.reference], buffer), _field(self.outputs[d.backend], buffer)
        return np.asarray(b, np.float64) - np.asarray(a, np.float64)

    def pair(self, buffer: str, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(reference's result, backend's result) of `buffer` (a struct field as `name.field`): what
        `BufferView.of_comparison(c, buffer)` shows, the differing elements marked (the engine
        imports no widget)."""
        d = self.diff(buffer, backend)
        return _field(self.outputs[d.reference], buffer), _field(self.outputs[d.backend], buffer)

    def text(self) -> str:
        lines = [f"{self.kernel}: {', '.join(self.ran)} against {self.reference}"]
        for d in self.diffs:
            mark = "DIFFERS" if d.differs else "same"
            first = (" first at " + ", ".join(str(i) for i in d.first)) if d.first else ""
            lines.append(f"  {d.buffer} {d.backend} vs {d.reference}: {mark}, {d.count} of "
                         f"{int(np.prod(d.shape))} differ, max abs {d.max_abs:.3g}, max ulp {d.max_ulp}{first}")
        if not self.diffs:
            lines.append("  (no output buffers given as numpy arrays to compare)")
        lines += [f"  {b}: not run ({why})" for b, why in self.unavailable.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{h}</th>" for h in ("buffer", "backend", "vs", "differ", "max abs", "max ulp", "first at"))
        rows = []
        for d in self.diffs:
            style = " style='background:#fdd' class='sk-differs'" if d.differs else ""
            first = ", ".join(str(i) for i in d.first)
            rows.append(f"<tr{style}><td><code>{esc(d.buffer)}</code></td><td>{esc(d.backend)}</td>"
                        f"<td>{esc(d.reference)}</td><td>{d.count} / {int(np.prod(d.shape))}</td>"
                        f"<td>{d.max_abs:.3g}</td><td>{d.max_ulp}</td><td>{esc(first)}</td></tr>")
        missing = "".join(f"<div><b>{esc(b)}</b>: not run ({esc(why)})</div>" for b, why in self.unavailable.items())
        return (f"<div class='sk-compare'><b>{esc(self.kernel)}</b> on {esc(', '.join(self.ran))}"
                f"<table><tr>{head}</tr>{''.join(rows)}</table>{missing}</div>")


def _field(arrays: Mapping[str, np.ndarray], buffer: str) -> np.ndarray:
    name, _, rest = buffer.partition(".")
    a = arrays[name]
    for f in rest.split(".") if rest else ():
        a = a[f]
    return a


_INT_OF = {2: np.int16, 4: np.int32, 8: np.int64}


def ulp_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in units in the last place of their float type, per element (int64; NaN vs NaN is 0,
    NaN vs a number the largest int64); for integer types the plain difference."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return np.abs(a.astype(np.int64) - b.astype(np.int64)) if a.dtype.kind in "iub" else \
            (a != b).astype(np.int64)
    it = _INT_OF[a.dtype.itemsize]
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)

    def ordered(x: np.ndarray) -> np.ndarray:
        i = np.ascontiguousarray(x).view(it).astype(np.int64)
        return np.where(i < 0, -(i & (sign - 1)), i)

    with np.errstate(over="ignore"):
        u = np.abs(ordered(a) - ordered(b))
    na, nb = np.isnan(a), np.isnan(b)
    u = np.where(na & nb, 0, u)
    return np.where(na ^ nb, np.iinfo(np.int64).max, u)


def _diff(buffer: str, backend: str, reference: str, a: np.ndarray, b: np.ndarray) -> list[BufferDiff]:
    if a.dtype.names:
        out: list[BufferDiff] = []
        for f in a.dtype.names:
            out += _diff(f"{buffer}.{f}", backend, reference, a[f], b[f])
        return out
    if a.dtype.kind == "f":
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        with np.errstate(invalid="ignore", over="ignore"):
            absd = np.abs(a.astype(np.float64) - b.astype(np.float64))
        absd = np.where(same, 0.0, np.where(np.isnan(absd), np.inf, absd))
    else:
        same = a == b
        absd = np.abs(a.astype(np.float64) - b.astype(np.float64))
    bad = np.flatnonzero(~same)
    ulp = ulp_difference(a, b)
    first = tuple(tuple(int(i) for i in np.unravel_index(k, a.shape)) for k in bad[:_FIRST])
    return [BufferDiff(buffer, backend, reference, tuple(a.shape), str(a.dtype),
                       float(absd.max()) if absd.size else 0.0, int(ulp.max()) if ulp.size else 0,
                       int(bad.size), first)]


def _outputs(session: CompareService, kernel: str, params: Mapping[str, Any]) -> list[str]:
    """The parameters that are read-write resources given as numpy arrays (what a dispatch writes)."""
    names = []
    for p in session.kernel(kernel).params:
        t = p.type
        if t.kind == "resource" and t.access == "read_write" and isinstance(params.get(p.name), np.ndarray):
            names.append(p.name)
    return names


def _to_layout(s: CompareService, kernel: str, values: dict[str, Any], outputs: Sequence[str]) -> None:
    """RW struct buffers in `s`'s target layout (offsets differ between targets), copied field by
    field: a backend writes its outputs into arrays of its own element dtype."""
    from numpy.lib import recfunctions

    k = s.kernel(kernel)
    for n in outputs:
        v = values[n]
        if v.dtype.names is None:
            continue
        want = k.dtype(n)
        if want != v.dtype:
            out = np.zeros(v.shape, want)
            recfunctions.assign_fields_by_name(out, v)
            values[n] = out


def compare(session: CompareService, kernel: str, backends: Sequence[str] = backend_names(), *,
            threads: Any = None, groups: Any = None, **params: Any) -> Comparison:
    """Run `kernel` on each backend (each on its own copy of the numpy inputs) and compare outputs."""
    outputs = _outputs(session, kernel, params)
    results: dict[str, dict[str, np.ndarray]] = {}
    unavailable: dict[str, str] = {}
    for b in dict.fromkeys(backends):
        try:
            s = session.replica(b)
        except BackendUnavailable as exc:
            unavailable[b] = str(exc).splitlines()[0]
            continue
        try:
            values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in params.items()}
            if s is not session:
                _to_layout(s, kernel, values, outputs)
            s.kernel(kernel)(threads=threads, groups=groups, **values)
        except KeyError as exc:
            unavailable[b] = f"{kernel} is not defined there: {exc}"
            continue
        except SlangCompileError as exc:
            unavailable[b] = f"does not compile for {b}: {str(exc).splitlines()[0]}"
            continue
        except (RuntimeError, OSError, NotImplementedError, TimeoutError) as exc:  # that backend only
            unavailable[b] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            continue
        results[b] = {n: values[n] for n in outputs}
    ran = tuple(results)
    ref = ran[0] if ran else ""
    diffs: list[BufferDiff] = []
    for b in ran[1:]:
        for n in outputs:
            diffs += _diff(n, b, ref, results[ref][n], results[b][n])
    return Comparison(kernel, ref, ran, tuple(diffs), unavailable, results)
