"""The IRGraph's data names generated things as the user wrote them: instruction ids, names, types
and derivative labels demangled (`DiffPair_float`, `bwd_diff(sq)`), the IR's spelling kept beside
them (`raw_*`) for search and the details' "IR as printed". Real compiler, CPU session."""

from __future__ import annotations

import re

import slang_kernel as sk
from slang_kernel.views.ir_views import ir_graph_data

MANGLED = re.compile(r"x5F|\bs_(?:fwd|bwd|apply|primal|bwdProp|remat|minCtx|paramCtx|bwdCallableCtx)_")
CELL = """[Differentiable]
float sq(float x) { return x * x; }
float dsq(float x) { var p = diffPair(x, 1.0); bwd_diff(sq)(p, 1.0); return p.d; }
"""


def test_shown_names_are_demangled() -> None:
    s = sk.Session(backend="cpu")
    try:
        s.run_cell(CELL, name="c")
        raw = 0
        for fn in ("sq", "dsq"):
            d = ir_graph_data(s, fn)
            shown = []
            for view in d["views"]:
                for f in view["functions"]:
                    shown.append(f["label"])
                    for b in f["blocks"]:
                        for i in b["insts"]:
                            shown += [i["text"], i.get("type") or "", i.get("name") or "",
                                      i.get("id_label") or i["id"], i.get("callee_label") or ""]
                            raw += sum(1 for k in ("raw_type", "raw_name", "id_label") if k in i)
                for der in view["derivatives"]:
                    shown += [der.get("label") or "", der.get("text") or ""]
            bad = [t for t in shown if MANGLED.search(t)]
            assert not bad, (fn, bad[:5])
        assert raw > 0, "nothing was mangled: the check would prove nothing"
        # the DiffPair type of the derivative's parameter reads as written
        types = [i.get("type") for v in ir_graph_data(s, "sq")["views"] for f in v["functions"]
                 for b in f["blocks"] for i in b["insts"] if "DiffPair" in (i.get("raw_type") or "")]
        assert types and all("x5F" not in t for t in types), types
    finally:
        s.close()
