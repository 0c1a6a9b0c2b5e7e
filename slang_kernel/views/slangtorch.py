"""The IR graph of a slangtorch module (slang_kernel.torch.slangtorch's `module_views(m).ir_graph_data`),
as the IRGraph widget shows a cell's: the module's IR, and the IR after autodiff cut to the module's
own functions and the derivatives Slang generated for them (the full dump holds every library function
the kernels reach: thousands, which the graph need not lay out). Reached through hooks.SLANGTORCH_IR_GRAPH.
"""

from __future__ import annotations

from typing import Any, Protocol

from .ir import classify_autodiff, split_dump
from .ir_views import AUTODIFF_PASS, IRViews, graph_data_from_views

__all__ = ["ModuleIRLike", "module_graph_data"]


class ModuleIRLike(Protocol):
    """What torch.slangtorch's ModuleIR holds (views do not import the torch package)."""

    name: str
    cell: str
    source: str
    line_offset: int
    module_ir: str
    dump: str
    functions: frozenset[str]
    notes: tuple[str, ...]


def _own(name: str, functions: frozenset[str]) -> bool:
    """Whether an IR function is one of the module's functions or a derivative of one."""
    role = classify_autodiff(name)
    return (role[1] if role else name) in functions


def module_graph_data(ir: ModuleIRLike, kernel: str) -> dict[str, Any]:
    """JSON for the IRGraph widget, opened on `kernel` beside its derivatives."""
    v = IRViews(kernel, ir.cell, ir.source, ir.line_offset)
    v.views["module"] = ir.module_ir
    v.notes.extend(ir.notes)
    if ir.dump:
        after = next((text for title, text in split_dump(ir.dump) if title == "AFTER " + AUTODIFF_PASS), None)
        if after is None:
            v.notes.append(f"no derivative IR: the compiler did not dump {AUTODIFF_PASS}")
        else:
            v.views["AFTER " + AUTODIFF_PASS] = after
    data = graph_data_from_views(v)
    for view in data["views"]:
        if view["id"] == "module":
            continue
        keep = [f for f in view["functions"] if _own(f["name"], ir.functions)]
        ids = {f["id"] for f in keep}
        view["functions"] = keep
        view["edges"] = [e for e in view["edges"] if e["source"] in ids and e["target"] in ids]
        view["derivatives"] = [d for d in view["derivatives"] if d.get("primal") in ids]
    return data
