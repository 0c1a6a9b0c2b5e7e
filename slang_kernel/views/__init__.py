"""What the debugging views compute on top of the engine: IR graphs (ir, ir_graph, ir_views), gradient
flows (gradients, flow_eval), compare across backends, the thread debugger and dispatch profiles.

The engine reaches the four views it offers as methods through slang_kernel.hooks; they are
registered here, once, when slang_kernel imports this package.
"""

from __future__ import annotations

from typing import Any

from .. import hooks
from . import compare as _compare, ir as _ir, ir_graph as _ir_graph, profiling as _profiling
from . import slangtorch as _slangtorch, thread_debug as _thread_debug

__all__: list[str] = []


def _graph_of(text: str, **kwargs: Any) -> dict[str, Any]:
    return _ir_graph.to_graph(_ir.parse_ir(text), **kwargs)


# (modules imported as modules: `slang_kernel.views.compare` stays the module, not its function)
hooks.register(hooks.COMPARE, _compare.compare)
hooks.register(hooks.IR_GRAPH, _graph_of)
hooks.register(hooks.DEBUG_DISPATCH, _thread_debug.debug_dispatch)
hooks.register(hooks.PROFILE_DISPATCH, _profiling.profile_dispatch)
hooks.register(hooks.SLANGTORCH_IR_GRAPH, _slangtorch.module_graph_data)
