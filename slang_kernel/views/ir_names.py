"""The IRGraph widget's data with every generated name as the user wrote it.

The IR names what autodiff generates by mangled hints (`DiffPairx5Ffloat`, `s_bwdProp_f`,
`skx5Fres`); ir_views already shows instruction text and function labels demangled, but ids, types,
names and derivative labels went to the page as the IR spells them, so node details and tooltips
read `%DiffPairx5Ffloat`. `readable` adds the demangled form of each (the IR's own stays in a `raw_*`
field, for search and for the "IR as printed" line of the details).
"""

from __future__ import annotations

from typing import Any

from .ir import demangle, demangle_text

__all__ = ["readable"]


def _inst(i: dict[str, Any]) -> None:
    iid = str(i.get("id") or "")
    if iid and demangle(iid) != iid:
        i["id_label"] = demangle(iid)
    for key in ("name", "type"):
        v = i.get(key)
        if isinstance(v, str) and v and demangle_text(v) != v:
            i["raw_" + key], i[key] = v, demangle_text(v)


def readable(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (ir_views.graph_data_from_views) with demangled ids, names, types and labels, in place."""
    for view in data.get("views", ()):
        for f in view.get("functions", ()):
            for b in f.get("blocks", ()):
                for i in b.get("insts", ()):
                    _inst(i)
        for d in view.get("derivatives", ()):
            for key in ("label", "text"):
                v = d.get(key)
                if isinstance(v, str) and v:
                    shown = demangle_text(v)
                    if shown != v:
                        d["raw_" + key], d[key] = v, shown
    return data
