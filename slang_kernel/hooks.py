"""Where the engine hands a request to a view without importing it.

`Session.compare`, `Session.ir_graph`, `ComputeKernel.debug` and `ComputeKernel.profile` are views
(slang_kernel/views/) on top of the engine; the engine only names the hook here and calls whatever
`slang_kernel.views` registered when the package was imported (slang_kernel/__init__.py imports it),
so a view's change never reaches the core and the engine has no arrow into views/.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["COMPARE", "DEBUG_DISPATCH", "IR_GRAPH", "PROFILE_DISPATCH", "SLANGTORCH_IR_GRAPH", "register", "view"]

COMPARE = "compare"                     # (CompareService, kernel, backends, *, threads, groups, **params) -> Comparison
IR_GRAPH = "ir_graph"                   # (ir_text, **kwargs) -> graph data for the IRGraph widget
DEBUG_DISPATCH = "debug_dispatch"       # (DebugService, name, thread, groups, params, threads) -> ThreadDebug
PROFILE_DISPATCH = "profile_dispatch"   # (Backend, CompiledKernel, groups, values) -> Profile
SLANGTORCH_IR_GRAPH = "slangtorch_ir_graph"   # (torch.slangtorch ModuleIR, kernel) -> IRGraph data of a module

_VIEWS: dict[str, Callable[..., Any]] = {}


def register(name: str, fn: Callable[..., Any]) -> None:
    """Serve hook `name` with `fn` (slang_kernel.views does this for every hook above)."""
    _VIEWS[name] = fn


def view(name: str) -> Callable[..., Any]:
    """The function serving hook `name`; a clear error when nothing registered it."""
    fn = _VIEWS.get(name)
    if fn is None:
        raise RuntimeError(f"no view serves {name!r}: `import slang_kernel` (its views package registers "
                           f"{', '.join((COMPARE, IR_GRAPH, DEBUG_DISPATCH, PROFILE_DISPATCH, SLANGTORCH_IR_GRAPH))}) before asking for it")
    return fn
