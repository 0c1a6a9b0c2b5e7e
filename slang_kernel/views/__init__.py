"""What the debugging views compute on top of the engine: IR graphs (ir, ir_graph, ir_views), gradient
flows (gradients, flow_eval), compare across backends, the thread debugger and dispatch profiles.

The engine reaches the four views it offers as methods through slang_kernel.hooks; they are
registered here, once, when slang_kernel imports this package.
"""

from __future__ import annotations

from typing import Any

from .. import hooks
from .compare import compare
from .ir import parse_ir
from .ir_graph import to_graph
from .profiling import profile_dispatch
from .slangtorch import module_graph_data
from .thread_debug import debug_dispatch

__all__: list[str] = []


def _ir_graph(text: str, **kwargs: Any) -> dict[str, Any]:
    return to_graph(parse_ir(text), **kwargs)


hooks.register(hooks.COMPARE, compare)
hooks.register(hooks.IR_GRAPH, _ir_graph)
hooks.register(hooks.DEBUG_DISPATCH, debug_dispatch)
hooks.register(hooks.PROFILE_DISPATCH, profile_dispatch)
hooks.register(hooks.SLANGTORCH_IR_GRAPH, module_graph_data)
