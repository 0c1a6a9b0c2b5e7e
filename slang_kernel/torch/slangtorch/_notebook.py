"""What a notebook shows of a loaded slangtorch module, as it shows a `%%slang` cell's kernels: each
kernel's code per target (the CUDA `__global__` functions of its launch, forward and backward; the
host C++ Slang generates for torch), its reflection (Slang parameters, the C layout each is packed
into, the symbols launched) and the module's IR as the IRGraph widget, with the derivative IR of the
kernels' fwd/bwd when asked.

Nothing here needs a GPU: the code and layouts are what `loadModule` already built, and the IR is
compiled again from the module's origin (its source, defines, search path and options).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ...backends.common.generated import body
from ...compiler.diagnostics import SlangCompileError, parse_diagnostics
from ...views.ir import classify_autodiff, split_dump
from ...views.ir_views import AUTODIFF_PASS, IRViews, graph_data_from_views
from ._layout import CType, slang_name

if TYPE_CHECKING:
    from ...session import Session
    from ._module import SlangTorchModule

__all__ = ["CODE_TARGETS", "KernelReflection", "ModuleViews", "ParamReflection", "function_text", "module_views"]

#: The targets a slangtorch kernel has code for: its CUDA kernels, and Slang's torch host binding.
CODE_TARGETS = ("cuda", "torch-binding")
_LANGUAGE = {"cuda": "cuda", "torch-binding": "cpp"}


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


def _fields(ct: CType) -> Iterator[CType]:
    yield ct
    if ct.element is not None:
        yield from _fields(ct.element)
    for _, _, f in ct.fields:
        yield from _fields(f)


class ModuleViews:
    """The views of one loaded module (`module_views(m)`); in a notebook it shows as a summary with
    each kernel's code and reflection; `ir_graph()` is the IRGraph widget of its IR."""

    def __init__(self, module: "SlangTorchModule") -> None:
        self.module = module

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.module.kernels

    def kernel(self, name: str) -> KernelReflection:
        """Reflection of kernel `name` (KeyError naming the module's kernels if it has none such)."""
        m = self.module
        handles = m.__dict__["_handles"]
        if name not in handles:
            raise KeyError(f"module {m.name!r} has no kernel {name!r}; its kernels: {', '.join(m.kernels) or 'none'}")
        h = handles[name]
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
        structs = sorted({slang_name(c.name) for k in self.kernels for ct in m.param_types(self.kernel(k).symbols["launch"])
                          for c in _fields(ct) if c.kind == "struct" and slang_name(c.name) in m.__dict__["_structs"]})
        return {"module": m.name, "kernels": {k: self.kernel(k).to_json() for k in self.kernels},
                "structs": {s: list(m.__dict__["_structs"][s]._fields) for s in structs},
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

    def ir(self) -> str:
        """The module's Slang IR (IModule::disassemble)."""
        with self._session() as (session, cell):
            return str(session.ir(cell))

    def ir_views(self, derivatives: bool = True) -> IRViews:
        """The module's IR (-g: instructions carry source lines) and, with derivatives, the IR after
        autodiff of its CUDA compile (s_fwd_* / s_bwdProp_* of its [Differentiable] kernels and
        functions, the module's own functions only)."""
        return self._views(derivatives)[0]

    def _views(self, derivatives: bool) -> tuple[IRViews, set[str]]:
        with self._session() as (session, cell):
            own = {f.name for d in session.cell(cell).decls for f in d.functions}
            return _ir_views(session, cell, self.module, derivatives), own

    def ir_graph_data(self, kernel: str | None = None, derivatives: bool = True) -> dict[str, Any]:
        """JSON for the IRGraph widget, opened on `kernel` (default: the first kernel)."""
        v, own = self._views(derivatives)
        v.name = kernel or (self.kernels[0] if self.kernels else "")
        return _only_own(graph_data_from_views(v), own)

    def ir_graph(self, kernel: str | None = None, derivatives: bool = True, **kwargs: Any) -> Any:
        """The IRGraph widget of the module's IR (slang_kernel.widgets.IRGraph)."""
        from slang_kernel.widgets import IRGraph

        data = self.ir_graph_data(kernel, derivatives)
        if derivatives and len(data["related"]) > 1:
            kwargs.setdefault("columns", "derivatives")
        return IRGraph(data, **kwargs)

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


def module_views(module: "SlangTorchModule") -> ModuleViews:
    """The notebook views of a module loaded by `slangtorch.loadModule`."""
    return ModuleViews(module)


def _own(name: str, functions: set[str]) -> bool:
    """Whether an IR function is one of the module's functions or a derivative of one."""
    role = classify_autodiff(name)
    base = (role[1] if role else None) or name
    return base.split(".")[-1] in functions or name in functions


def _ir_views(session: "Session", cell_name: str, module: "SlangTorchModule", derivatives: bool) -> IRViews:
    cell = session.cell(cell_name)
    req = session.engine.request("disassemble", cell=cell.name, module=cell.module + "_irv", options=["-g"])
    reply = session.engine.call(req)
    if not reply["ok"]:
        raise SlangCompileError(f"could not disassemble {cell.shown}",
                                parse_diagnostics(reply["diagnostics"], {cell.shown: req.line_offset}),
                                {cell.shown: cell.source})
    out = IRViews(module.name, cell.shown, cell.source, req.line_offset)   # IR locations name the file
    out.views["module"] = reply["ir"]
    if not derivatives:
        return out
    req = session.engine.request("compile", cell=cell.name, append="", module=cell.module + "_ad", target="cuda",
                                 options=["-g", "-dump-ir-after", AUTODIFF_PASS], reflect=False)
    reply = session.engine.call(req)
    dump = next((b for t, b in split_dump(reply["diagnostics"]) if t == "AFTER " + AUTODIFF_PASS), None) \
        if reply["ok"] else None
    if dump is None:
        out.notes.append("no derivative IR: the module's CUDA compile did not dump " + AUTODIFF_PASS)
        return out
    out.views["AFTER " + AUTODIFF_PASS] = dump
    return out


def _only_own(data: dict[str, Any], own: set[str]) -> dict[str, Any]:
    """Graph data cut to the module's own functions and their derivatives: the dump after autodiff
    holds every library function the kernels reach (thousands), which the graph need not lay out."""
    for view in data["views"]:
        if view["id"] == "module":
            continue
        keep = [f for f in view["functions"] if _own(f["name"], own)]
        ids = {f["id"] for f in keep}
        view["functions"] = keep
        view["edges"] = [e for e in view["edges"] if e["source"] in ids and e["target"] in ids]
        view["derivatives"] = [d for d in view["derivatives"] if d.get("primal") in ids]
    return data


