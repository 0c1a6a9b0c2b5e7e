"""What a notebook shows of a loaded slangtorch module, as it shows a `%%slang` cell's kernels: each
kernel's code per target (the CUDA `__global__` functions of its launch, forward and backward; the
host C++ Slang generates for torch), its reflection (Slang parameters, the C layout each is packed
into, the symbols launched) and the module's IR, with the derivative IR of the kernels' fwd/bwd, as
data for the IRGraph widget (drawn by slang_kernel.views.slangtorch, reached through hooks: the torch
package imports no view or widget).

Nothing here needs a GPU: the code and layouts are what `loadModule` already built, and the IR is
compiled again from the module's origin (its source, defines, search path and options).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Protocol

from ... import hooks
from ...backends.common.generated import body
from ...compiler.diagnostics import SlangCompileError, parse_diagnostics
from ._layout import CType, slang_name

if TYPE_CHECKING:
    from ...engine.session import Session

__all__ = ["AUTODIFF_PASS", "CODE_TARGETS", "KernelReflection", "ModuleIR", "ModuleViews", "ParamReflection",
           "function_text", "module_views"]

#: The targets a slangtorch kernel has code for: its CUDA kernels, and Slang's torch host binding.
CODE_TARGETS = ("cuda", "torch-binding")
AUTODIFF_PASS = "finalizeAutoDiffPass"   # the pass after which the IR holds the generated derivatives


def function_text(code: str, symbol: str) -> str:
    """The definition of function `symbol` in generated C++/CUDA (declarations skipped), "" if none."""
    for m in re.finditer(rf"^[^\n;{{}}]*\b{re.escape(symbol)}\(", code, re.MULTILINE):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace and ")" in code[m.end():semi]
                         and code[m.end():semi].rstrip().endswith(")")):
            continue   # a declaration
        depth = 0
        for i in range(brace, len(code)):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                return code[m.start():i + 1]
    return ""


@dataclass(frozen=True)
class ParamReflection:
    """One kernel parameter: its Slang type, and the C type its argument is packed as (size in bytes)."""

    name: str
    slang_type: str
    direction: str
    c_type: str
    kind: str      # scalar, tensor, array, struct
    size: int
    align: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.slang_type, "direction": self.direction, "c_type": self.c_type,
                "kind": self.kind, "size": self.size, "align": self.align}


@dataclass(frozen=True)
class KernelReflection:
    """A kernel of the module: its Slang signature, parameters, and the `__global__` symbols launched
    by `m.k(...)`, `m.k.fwd(...)` and `m.k.bwd(...)`."""

    name: str
    signature: str
    differentiable: bool
    symbols: Mapping[str, str]     # "launch" / "fwd" / "bwd" -> CUDA symbol
    params: tuple[ParamReflection, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "signature": self.signature, "differentiable": self.differentiable,
                "symbols": dict(self.symbols), "params": [p.to_json() for p in self.params]}


@dataclass(frozen=True)
class ModuleIR:
    """A module's IR as the compiler gave it, for the IR graph view (slang_kernel.views.slangtorch)."""

    name: str                   # the module's name
    cell: str                   # the file the IR's source locations name
    source: str                 # that file's text
    line_offset: int            # IR line - line_offset = line in the file
    module_ir: str              # IModule::disassemble with -g
    dump: str                   # the compiler's output holding `-dump-ir-after AUTODIFF_PASS` ("" if not asked)
    functions: frozenset[str]   # the module's own functions (the derivative view is cut to these)
    notes: tuple[str, ...] = ()


class LoadedModule(Protocol):
    """What the views use of a SlangTorchModule (_module imports this module, not the reverse)."""

    name: str
    code: str
    host_code: str
    origin: Any          # _load.ModuleOrigin

    @property
    def kernels(self) -> tuple[str, ...]: ...
    @property
    def entry_points(self) -> tuple[str, ...]: ...
    def param_types(self, symbol: str) -> list[CType]: ...
    def has_symbol(self, symbol: str) -> bool: ...


def _fields(ct: CType) -> Iterator[CType]:
    yield ct
    if ct.element is not None:
        yield from _fields(ct.element)
    for _, _, f in ct.fields:
        yield from _fields(f)


class ModuleViews:
    """The views of one loaded module (`module_views(m)`); in a notebook it shows as a summary with
    each kernel's code and reflection; `IRGraph(views.ir_graph_data(kernel))` draws its IR."""

    def __init__(self, module: LoadedModule) -> None:
        self.module = module

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.module.kernels

    def kernel(self, name: str) -> KernelReflection:
        """Reflection of kernel `name` (KeyError naming the module's kernels if it has none such)."""
        m = self.module
        if name not in m.kernels:
            raise KeyError(f"module {m.name!r} has no kernel {name!r}; its kernels: {', '.join(m.kernels) or 'none'}")
        h = getattr(m, name)   # its KernelHandle
        symbols = {"launch": h.symbol}
        for mode in ("fwd", "bwd"):
            if m.has_symbol(f"{h.symbol}_{mode}_diff"):
                symbols[mode] = f"{h.symbol}_{mode}_diff"
        params = tuple(ParamReflection(n, t, d, slang_name(ct.name) if ct.kind == "struct" else ct.name, ct.kind,
                                       ct.size, ct.align)
                       for (n, t, d), ct in zip(h.info.params, m.param_types(h.symbol)))
        return KernelReflection(name, h.info.signature, h.info.differentiable, symbols, params)

    def reflection(self) -> dict[str, Any]:
        """JSON-able: every kernel's reflection, the struct types it takes, the [TorchEntryPoint] functions."""
        m = self.module
        names = {slang_name(c.name) for k in self.kernels for ct in m.param_types(self.kernel(k).symbols["launch"])
                 for c in _fields(ct) if c.kind == "struct"}
        structs = {n: getattr(m, n) for n in sorted(names - {"DiffTensorView"}) if n not in self.kernels and hasattr(m, n)}
        return {"module": m.name, "kernels": {k: self.kernel(k).to_json() for k in self.kernels},
                "structs": {n: list(t._fields) for n, t in structs.items() if hasattr(t, "_fields")},
                "torch_entry_points": list(m.entry_points)}

    def code(self, kernel: str | None = None, target: str = "cuda") -> str:
        """Generated code for one target: of kernel `kernel` (its launch, fwd and bwd functions), or the
        module's code after Slang's inlined prelude. target: "cuda" or "torch-binding" (host C++)."""
        if target not in CODE_TARGETS:
            raise ValueError(f"a slangtorch module has code for {', '.join(CODE_TARGETS)}; not {target!r}")
        code = body(self.module.code if target == "cuda" else self.module.host_code)
        if kernel is None:
            return code
        k = self.kernel(kernel)
        names = list(k.symbols.values()) if target == "cuda" else \
            [kernel] + [f"{kernel}_{m}_diff" for m in ("fwd", "bwd") if m in k.symbols]
        parts = [t for t in (function_text(code, n) for n in names) if t]
        return "\n\n".join(parts)

    # -- IR ------------------------------------------------------------------------------------------

    def _session(self) -> Any:
        origin = self.module.origin
        if origin is None:
            raise RuntimeError(f"module {self.module.name!r} was not made by loadModule: it has no source to show IR of")
        return origin.loader.cell(origin.source, origin.key, origin.deps, origin.options)

    def ir(self, derivatives: bool = False) -> ModuleIR:
        """The module's Slang IR (-g: instructions carry source lines) and, with derivatives, the IR
        after autodiff of its CUDA compile (the s_fwd_* / s_bwdProp_* of its [Differentiable] kernels)."""
        with self._session() as (session, cell):
            return _module_ir(session, cell, self.module.name, derivatives)

    def ir_graph_data(self, kernel: str | None = None, derivatives: bool = True) -> dict[str, Any]:
        """JSON for the IRGraph widget (`IRGraph(data)`), opened on `kernel` (default: the first kernel)
        beside its generated derivatives; drawn by slang_kernel.views.slangtorch."""
        data: dict[str, Any] = hooks.view(hooks.SLANGTORCH_IR_GRAPH)(
            self.ir(derivatives), kernel or (self.kernels[0] if self.kernels else ""))
        return data

    # -- display -------------------------------------------------------------------------------------

    def text(self) -> str:
        m = self.module
        lines = [f"slangtorch module {m.name}"
                 + (f" ({m.origin.source.label})" if m.origin is not None else "")
                 + f": {len(self.kernels)} kernels, {len(m.entry_points)} [TorchEntryPoint] functions"]
        for k in self.kernels:
            r = self.kernel(k)
            lines.append(f"  kernel   {r.signature}   launches {', '.join(f'{a}: {s}' for a, s in r.symbols.items())}")
            lines += [f"    {p.name}: {p.slang_type} -> {p.c_type} ({p.size} bytes)" for p in r.params]
        lines += [f"  function {e} (host code)" for e in m.entry_points]
        return "\n".join(lines)

    def html(self) -> str:
        m = self.module
        head = html.escape(self.text().splitlines()[0])
        rows = []
        for k in self.kernels:
            r = self.kernel(k)
            params = "".join(f"<tr><td><code>{html.escape(p.name)}</code></td><td><code>{html.escape(p.slang_type)}"
                             f"</code></td><td><code>{html.escape(p.c_type)}</code></td><td>{p.size}</td></tr>"
                             for p in r.params)
            code = "".join(
                f"<details><summary>{t}</summary><pre style='max-height:400px;overflow:auto;font-size:11px'>"
                f"{html.escape(self.code(k, t))}</pre></details>" for t in CODE_TARGETS)
            rows.append(f"<details open><summary><b>kernel</b> <code>{html.escape(r.signature)}</code> "
                        f"<span style='color:#666'>({html.escape(', '.join(f'{a}: {s}' for a, s in r.symbols.items()))})"
                        f"</span></summary><table style='margin:0 0 0 1em'><tr><th>parameter</th><th>Slang type</th>"
                        f"<th>packed as</th><th>bytes</th></tr>{params}</table><div style='margin-left:1em'>{code}"
                        f"</div></details>")
        rows += [f"<div><b>function</b> <code>{html.escape(e)}</code> (host code, [TorchEntryPoint])</div>"
                 for e in m.entry_points]
        return f"<div class='slangtorch-module'><div style='color:#555'>{head}</div>{''.join(rows)}</div>"

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


def module_views(module: LoadedModule) -> ModuleViews:
    """The notebook views of a module loaded by `slangtorch.loadModule`."""
    return ModuleViews(module)


def _module_ir(session: "Session", cell_name: str, name: str, derivatives: bool) -> ModuleIR:
    cell = session.cell(cell_name)
    req = session.compile_service.request("disassemble", cell=cell.name, module=cell.module + "_irv", options=["-g"])
    reply = session.compile_service.call(req)
    if not reply["ok"]:
        raise SlangCompileError(f"could not disassemble {cell.shown}",
                                parse_diagnostics(reply["diagnostics"], {cell.shown: req.line_offset}),
                                {cell.shown: cell.source})
    own = frozenset(f.name for d in cell.decls for f in d.functions)
    dump, notes = "", ()   # type: tuple[str, tuple[str, ...]]
    if derivatives:
        ad = session.compile_service.call(session.compile_service.request(
            "compile", cell=cell.name, append="", module=cell.module + "_ad", target="cuda",
            options=["-g", "-dump-ir-after", AUTODIFF_PASS], reflect=False))
        if ad["ok"]:
            dump = str(ad["diagnostics"])
        else:
            notes = ("no derivative IR: the module's CUDA compile failed",)
    # the IR's source locations name the file (the cell's label)
    return ModuleIR(name, cell.shown, cell.source, req.line_offset, str(reply["ir"]), dump, own, notes)
