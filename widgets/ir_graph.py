"""IRGraph: Slang IR as an interactive graph, laid out in the browser by the vendored dagre.

Levels: module (functions, call and derivative edges) -> function (basic blocks as boxes listing their
instructions, CFG edges, loop back edges dashed) -> instructions (def-use data flow, tinted by
block). Pan (drag), zoom (wheel), search by name (Enter jumps to the next hit), collapse blocks
(click a block's header), click an instruction to see its source line in the cell. "derivatives"
shows the primal function beside its generated s_fwd_* / s_apply_* / s_bwdProp_* functions;
"before/after" shows a chosen pass's input and output side by side.

The graph data is plain JSON (see :mod:`slang_kernel.views.gradients`), so the widget itself needs no engine.
"""

from __future__ import annotations

import html
from typing import Any

import anywidget
import traitlets as t

from ._esm import HtmlFallback, bundle_css, bundle_esm
from ._wire import IRGraphData, IRSelection

__all__ = ["IRGraph"]

class IRGraph(HtmlFallback, anywidget.AnyWidget):
    """Show IR graph data (``slang_kernel.views.gradients.ir_graph_data``); ``IRGraph.of(session, name)``.

    ``selected`` (synced) is the instruction clicked in the browser: view, function, id, source line.
    ``layout_ms`` is filled in by the browser: dagre time of the last layout, and node count.
    """

    _esm = bundle_esm("ir_graph.js")
    _css = bundle_css("ir_graph.css")

    data = t.Dict().tag(sync=True)
    view = t.Unicode("").tag(sync=True)          # view id ("module", "v1", ...)
    function = t.Unicode("").tag(sync=True)      # function id in that view
    mode = t.Enum(["module", "blocks", "dataflow"], default_value="blocks").tag(sync=True)
    columns = t.Enum(["single", "derivatives", "compare"], default_value="single").tag(sync=True)
    height = t.Int(560).tag(sync=True)
    selected = t.Dict().tag(sync=True)
    layout_ms = t.Dict().tag(sync=True)

    def __init__(self, data: IRGraphData | dict[str, Any], *, mode: str = "blocks", columns: str | None = None,
                 height: int = 560, **kwargs: Any) -> None:
        data = dict(data)
        view, fn = "", ""
        related = data.get("related") or []
        if related:
            view, fn = related[0]
        elif data.get("views"):
            v0 = data["views"][0]
            view = v0["id"]
            fns = [f for f in v0["functions"] if f["name"] == data.get("name")] or v0["functions"]
            fn = fns[0]["id"] if fns else ""
        if columns is None:  # opens on the asked-for function, readable; the related ones are a click away
            columns = "single"
        super().__init__(data=data, view=view, function=fn, mode=mode, columns=columns, height=height, **kwargs)

    @classmethod
    def of(cls, session: Any, name: str, pass_: str | None = None, **kwargs: Any) -> "IRGraph":
        """The IR of `name` (a function, kernel or cell) in `session`, with derivatives and a pass."""
        from slang_kernel.views.gradients import ir_graph_data

        data = ir_graph_data(session, name, pass_)
        if pass_ and data.get("compare") and "columns" not in kwargs:
            kwargs["columns"] = "compare"
        return cls(data, **kwargs)

    # -- Python-side helpers -------------------------------------------------------------------------

    def find(self, text: str) -> list[tuple[str, str, str]]:
        """(view, function, instruction id) of instructions whose name, callee or opcode contains
        `text`, or whose id is `text` (``5`` or ``%5``)."""
        return [(v, f, i) for v, f, i in self.search(text) if i is not None]

    def search(self, text: str) -> list[tuple[str, str, str | None]]:
        """What the browser's search box finds, in its order (which stepping with Enter / the arrows
        follows, each hit once, wrapping): per view and function, the function itself when its name or
        its demangled label contains `text` (instruction None), then its instructions as `find` (the
        callee's label counts too)."""
        text = text.strip().lower()
        out: list[tuple[str, str, str | None]] = []
        if not text:
            return out
        for v in self.data.get("views", []):
            for f in v["functions"]:
                if text in f["name"].lower() or text in (f.get("label") or "").lower():
                    out.append((v["id"], f["id"], None))
                for b in f["blocks"]:
                    for i in b["insts"]:
                        ident = str(i["id"]).lower()
                        if text in (i.get("name") or "").lower() or text in (ident, "%" + ident) \
                                or text in (i.get("callee") or "").lower() or text in (i.get("callee_label") or "").lower() \
                                or text in i["op"].lower():
                            out.append((v["id"], f["id"], i["id"]))
        return out

    def select(self, view: str, function: str, inst: str) -> IRSelection:
        """Select an instruction as a click would (shows its source line in the browser)."""
        v = next(v for v in self.data["views"] if v["id"] == view)
        f = next(f for f in v["functions"] if f["id"] == function)
        i = next(i for b in f["blocks"] for i in b["insts"] if i["id"] == inst)
        sel: IRSelection = {"view": view, "function": function, "inst": inst, "text": i["text"],
                            "line": i["loc"][0] if i.get("loc") else None}
        self.view, self.function = view, function
        self.selected = dict(sel)
        return sel

    def to_html(self) -> str:
        """Static fallback: the shown functions' IR text, one column each."""
        views = {v["id"]: v for v in self.data.get("views", [])}
        cols = self.data.get("related") if self.columns == "derivatives" else [[self.view, self.function]]
        parts = []
        for vid, fid in cols or []:
            f = next((f for f in views.get(vid, {}).get("functions", []) if f["id"] == fid), None)
            if f is None:
                continue
            text = "\n".join(f"block %{b['label']}:\n" + "\n".join("  " + i["text"] for i in b["insts"])
                             for b in f["blocks"])
            parts.append(f"<div style='flex:1;min-width:300px'><b>{html.escape(f['name'])}</b> "
                         f"<small>({html.escape(views[vid]['title'])})</small>"
                         f"<pre style='font-size:11px;max-height:400px;overflow:auto'>{html.escape(text)}</pre></div>")
        return f"<div style='display:flex;gap:8px'>{''.join(parts)}</div>"
