"""What crosses from the Session to everything downstream: compile requests and compiled kernels.

Both are frozen. A `CompileRequest` is the one shape every compiler call takes (built only by
`Session.request`): the search path, options and defines, the module chain as blobs, the target.
A `CompiledKernel` is target code plus reflection for one entry point of one revision, and it
carries what a backend needs without asking the Session: the module chain as Slang sources (for
backends that compile source themselves, i.e. sgl on Vulkan) and the digests of the cells it was
built from (a view is valid exactly while they are current).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .cache import digest
from .compiler.diagnostics import Diagnostic
from .compiler.reflection import EntryPointInfo, ProgramReflection

__all__ = ["CompileRequest", "CompiledKernel", "ModuleSource", "Specialization", "define_lines"]

_USER_CODE = re.compile(r'#line \d+ "')           # generated code after Slang's inlined prelude
_GLOBALS_STRUCT = re.compile(r"struct GlobalParams_\d+\s*\{[^}]*\};")


def define_lines(defines: tuple[tuple[str, str], ...]) -> str:
    """Preprocessor lines for a module's own defines, for compilers that take source (one per line)."""
    return "".join(f"#define {k} {v}\n" for k, v in defines)


@dataclass(frozen=True)
class ModuleSource:
    """One Slang module as source, named by content (`<module>_<digest>`), imports renamed to match.

    sgl refuses to reload a module name with new source (slangpy #966), so every revision gets a
    name of its own; the text starts with the module's own `#define`s, so defines reach the backend."""

    name: str
    source: str
    path: str          # what diagnostics call it, e.g. "In[3]@1a2b3c4d"
    cell: str          # the cell it comes from ("" for generated wrappers)


@dataclass(frozen=True)
class Specialization:
    """What a kernel is specialized with from Python (see slang_kernel/engine/specialize.py): the values of
    its generic parameters and `extern` declarations as Slang text, and the type conformances linked
    for dynamic dispatch. Part of the compile request (its generated module and options), hashable."""

    args: tuple[tuple[str, str], ...] = ()                  # (name, Slang text) in declaration order
    conformances: tuple[tuple[str, str, int], ...] = ()     # (interface, type, id; -1: Slang picks)

    def __bool__(self) -> bool:
        return bool(self.args or self.conformances)

    def __str__(self) -> str:
        parts = [", ".join(f"{k}={v}" for k, v in self.args)] if self.args else []
        if self.conformances:
            parts.append("conformances " + ", ".join(
                f"{t}:{i}" + (f"={n}" if n >= 0 else "") for i, t, n in self.conformances))
        return "; ".join(parts)


@dataclass(frozen=True)
class CompileRequest:
    """One compiler call. Built by `Session.request`; `key` is its content address (cache key)."""

    op: str                                    # "check" | "compile" | "disassemble"
    what: str                                  # the name diagnostics use (a cell, or "f.bwd wrapper")
    module: str
    source: str                                # full text, import prefix included
    line_offset: int                           # lines before the user's line 1
    deps: tuple[tuple[str, str, str], ...]     # (module, cell, digest) in load order
    options: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]
    fingerprint: str
    target: str = ""
    target_options: tuple[str, ...] = ()       # what the backend adds for this target (layouts)
    entries: tuple[str, ...] = ()
    reflect: bool = True
    blobs: Mapping[str, bytes] = field(default_factory=dict, compare=False, hash=False, repr=False)
    digests: tuple[tuple[str, str], ...] = ()  # (cell, digest) of every cell this depends on
    chain: tuple[ModuleSource, ...] = field(default=(), compare=False, repr=False)
    dep_keys: tuple[str, ...] = ()             # what of the deps the result depends on (key); digests if empty

    @functools.cached_property
    def key(self) -> str:
        return digest(self.op, self.fingerprint, self.target, self.what, self.module, self.source,
                      *self.entries, str(self.reflect), *self.options, "|", *self.target_options,
                      *(f"{k}={v}" for k, v in self.defines), *(self.dep_keys or (d for _, _, d in self.deps)))

    def retarget(self, target: str, target_options: tuple[str, ...] = ()) -> "CompileRequest":
        """The same request for another target (e.g. C++, to see which globals a kernel uses)."""
        return dataclasses.replace(self, target=target, target_options=target_options)

    def message(self) -> dict[str, Any]:
        """The compiler worker's keyword arguments for this request."""
        msg: dict[str, Any] = dict(
            what=self.what, module=self.module, path=self.what, source=self.source,
            deps=[list(d) for d in self.deps], blobs=dict(self.blobs), options=[*self.options, *self.target_options],
            defines=dict(self.defines))
        if self.op == "compile":
            msg.update(entry_points=list(self.entries), target=self.target, reflect=self.reflect)
        return msg


@dataclass(frozen=True)
class CompiledKernel:
    """Target code and reflection of one entry point, for one revision of its cells."""

    key: str
    entry: str
    target: str
    code: str
    reflection: ProgramReflection
    cell: str
    diagnostics: tuple[Diagnostic, ...] = ()
    module: str = ""               # the Slang module compiled
    source: str = ""               # its full source, import prefix included
    deps: tuple[str, ...] = ()     # names of the cells it loads, in load order
    globals_from_cpp: frozenset[str] | None = None  # used globals, read off a C++ build (binary targets)
    chain: tuple[ModuleSource, ...] = ()            # the module chain as sources; the entry is in the last
    digests: tuple[tuple[str, str], ...] = ()       # (cell, digest) it was built from
    specialization: Specialization | None = None    # set when built by Session.kernel(specialize=...)

    @functools.cached_property
    def entry_point(self) -> EntryPointInfo:
        return self.reflection.entry_point(self.entry)

    @functools.cached_property
    def parameter_names(self) -> frozenset[str]:
        """What a dispatch must be given: entry-point uniforms and the globals this kernel uses."""
        used = self.used_globals
        return frozenset([p.name for p in self.entry_point.uniforms]
                         + [p.name for p in self.reflection.globals if used is None or p.name in used])

    @functools.cached_property
    def used_globals(self) -> frozenset[str] | None:
        """Globals the generated code reads or writes (None where the target's code cannot tell).

        Reflection lists every global of every imported cell; a kernel that touches none of another
        cell's globals should not have to be given them. In C++ and CUDA output a global `g` is the
        field `g_N` of the GlobalParams struct, so after removing that struct's declaration, a
        mention of `g_N` is a use (erring towards "used": a false positive only asks for a value).
        """
        if self.target not in ("cpp", "cuda"):
            return self.globals_from_cpp
        m = _USER_CODE.search(self.code)
        body = _GLOBALS_STRUCT.sub("", self.code[m.start():] if m else self.code)
        return frozenset(p.name for p in self.reflection.globals
                         if re.search(rf"\b{re.escape(p.name)}_\d+\b", body))
