"""Slang Playground compatibility: run a cell written for the Slang Playground as the Playground does.

A Playground shader does ``import playground;`` (and ``printing``, ``rendering``) and marks globals and
entry points with ``[playground::...]`` attributes. Our own modules with those names ship in
``slang_kernel/slang/`` (the session puts that folder on the compiler's search path). How the attributes
reach the host: Slang 2026.12 turns a scoped attribute name ``playground::ZEROS`` into the identifier
``playground_ZEROS`` (``playground::CALL::ONCE`` -> ``playground_CALL_ONCE``) and looks for a struct
``playground_ZEROSAttribute`` declared with ``[__AttributeUsage(...)]``; reflection then reports
``("playground_ZEROS", (args...))`` on the variable or entry point (``ParamInfo.attributes`` /
``EntryPointInfo.attributes``).

:class:`PlaygroundProgram` creates the resources from the attributes (ZEROS, RAND, BLACK, BLACK_3D,
BLACK_SCREEN, URL, DATA, SAMPLER), fills the uniforms (TIME, FRAME_ID, MOUSE_POSITION, KEY, SLIDER,
COLOR_PICK) and dispatches the ``CALL`` / ``CALL::SIZE_OF`` / ``CALL_INDIRECT`` entry points every frame
in declaration order (``CALL::ONCE`` ones on the first frame only). Resources live across frames (on
Vulkan they stay on the device; only what is shown is read back).

Hot reload: a program follows its cell by name. When the cell gets a new revision (or a cell it
imports does), the next frame runs the new code: the CALL entry points are compiled again and the
resources and inputs whose declarations did not change are kept (textures keep their contents,
sliders their values, TIME keeps running). While the current revision does not compile, the program
keeps running the last good one and `program.error` says why (None when all is well).

What a cell shows (the image with live controls, buffers, printed text, a link to the public
Playground) is built by ``slang_kernel.widgets`` from a program; this module imports no widget.
Backends: a cell that needs a texture (``outputTexture``, BLACK*, URL) runs where the backend has the
"textures" capability (Vulkan) and otherwise says so with a :class:`PlaygroundError` naming the
texture and the fix (``%slang_backend vulkan``); buffer-only cells (ZEROS, RAND, DATA), the CALL
dispatch loop, uniforms and printing work on every backend. KEY inputs are 1 while their key is held
with the image focused (click it first).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..backends import Backend
from ..compiled import CompiledKernel
from ..compiler.diagnostics import SlangCompileError
from ..compiler.reflection import ParamInfo
from ..errors import PlaygroundError
from ..engine.protocols import ProgramService
from .robust import webgpu_kernel
from .attributes import INPUTS, RESOURCES, call_groups, read_resource
from .values import Input, as_scalar, dispatch, to_rgba8, vector_scalar, zero_value
from .resources import Declaration, Resource, declared_formats
from .text import (PLAYGROUND_URL, decode_playground_link, decode_prints, is_playground, playground_link,
                              string_hash, string_table)

if TYPE_CHECKING:
    from ..engine.session import Session

__all__ = [
    "PLAYGROUND_URL", "Input", "PlaygroundError", "PlaygroundProgram", "Resource", "decode_playground_link",
    "decode_prints", "dispatch", "is_playground", "last_good_message", "playground_link", "program_for",
    "string_hash", "to_rgba8",
]

SCREEN_SIZE = (512, 512)   # (width, height) of the "screen" BLACK_SCREEN is a fraction of



def _declaration(p: ParamInfo, formats: Mapping[str, str] | None = None) -> Declaration:
    """What a global was declared as (its type, playground attributes with their arguments and its
    explicit [format]): a re-bind keeps a resource or an input exactly while this is unchanged."""
    attrs = sorted(_pg_attrs(p.attributes).items(), key=lambda kv: kv[0])
    fmt = (formats or {}).get(p.name)
    return p.type, tuple(attrs) + ((("format", (fmt,)),) if fmt else ())




def _pg_attrs(attrs: Sequence[tuple[str, tuple[Any, ...]]]) -> dict[str, tuple[Any, ...]]:
    return {n[len("playground_"):]: a for n, a in attrs if n.startswith("playground_")}


@dataclass(frozen=True)
class _Revision:
    """One revision of a program's cell compiled for one backend: what its frames run."""

    digest: str
    source: str
    backend: Backend
    kernels: tuple[tuple[str, Mapping[str, tuple[Any, ...]]], ...]   # CALL entry points, in order
    compiled: Mapping[str, CompiledKernel]
    globals: Mapping[str, ParamInfo]
    sources: tuple[str, ...]   # the module chain's texts (printing's string literals)
    formats: Mapping[str, str] = field(default_factory=dict)   # global -> its explicit [format("...")]
    # kernel -> its entry-point uniforms' zeros (what a frame passes where nothing was set), made once
    zeros: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _compile(session: ProgramService, name: str, webgpu_bounds: bool = True) -> _Revision:
    """The current revision of cell `name`, its CALL entry points compiled for the session's backend
    (through the session's one compile path: the same cache as `compile_entry`)."""
    c = session.store.cell(name)
    if not c.ok:
        raise SlangCompileError(f"{name} no longer compiles (a cell it uses changed)", list(c.diagnostics),
                                {name: c.source})
    kernels: list[tuple[str, Mapping[str, tuple[Any, ...]]]] = []
    compiled: dict[str, CompiledKernel] = {}
    for e in c.entry_points:
        try:
            ck = session.compile_service.compile(session.compile_service.request("compile", cell=name, entries=[e]))[e]
        except SlangCompileError as exc:   # the cell compiled; its kernel cannot be built for this backend
            raise PlaygroundError(f"{name} cannot run on the {session.backend.name} backend: {exc}") from None
        ck = webgpu_kernel(ck) if webgpu_bounds else ck
        attrs = _pg_attrs(ck.entry_point.attributes)
        if any(k.startswith("CALL") for k in attrs):
            kernels.append((e, attrs))
            compiled[e] = ck
    found: dict[str, ParamInfo] = {}
    for ck in compiled.values():
        for p in ck.reflection.globals:
            found.setdefault(p.name, p)
    sources = tuple(dict.fromkeys(m.source for ck in compiled.values() for m in ck.chain))
    zeros = {e: {p.name: _frozen(zero_value(p.type)) for p in ck.entry_point.uniforms}
             for e, ck in compiled.items()}
    return _Revision(c.digest, c.source, session.backend, tuple(kernels), compiled, found, sources,
                     declared_formats(*sources, c.source), zeros)


def _frozen(v: Any) -> Any:
    """A zero shared by every frame of a revision: read-only, so no dispatch can change it."""
    if isinstance(v, np.ndarray):
        v.setflags(write=False)
    return v


def last_good_message(cell: str, exc: BaseException) -> str:
    """What a program or view says while it keeps running the last good revision of `cell`: one line
    naming the one cell the user edited (the failed run's prompt, `In[3]`, where the session keeps
    the cell's first name, `In[1]`), then the diagnostics (with the user's lines)."""
    head, _, rest = str(exc).partition("\n")
    m = re.match(r"(\S+) did not compile\b", head)
    if m:
        head = f"{m.group(1)} did not compile: still running the last good revision."
    else:
        head = f"{cell}: still running the last good revision. {head}"
    return head + (f"\n{rest}" if rest else "")


class PlaygroundProgram:
    """The Playground's run loop for one cell: resources, live inputs, per-frame dispatches.

    ``program.frame(**values)`` runs one frame (inputs by name, e.g. a slider's global name);
    ``program.image()`` is the shown texture as (H, W, 4) uint8; ``program.printed`` the text the
    last frame printed; ``program.error`` why it still runs an older revision of its cell (None when
    it runs the current one). The program follows its cell by name (see the module docstring).
    """

    def __init__(self, session: "Session", cell: str | None = None, *, screen: tuple[int, int] = SCREEN_SIZE,
                 base_dir: str | Path | None = None, seed: int = 0, webgpu_bounds: bool = True) -> None:
        self.session: ProgramService = session   # through its narrow service (protocols.py)
        self.webgpu_bounds = webgpu_bounds   # WebGPU's clamped indices (playground.robust); False to measure
        self.cell = cell if cell is not None else self.session.store.cells[-1]
        self.screen = screen
        self.base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
        self.rng = np.random.default_rng(seed)
        self.resources: dict[str, Resource] = {}
        self.inputs: dict[str, Input] = {}
        self.uniforms: dict[str, Any] = {}
        self.frame_index = 0
        self.start = time.perf_counter()
        self.printed = ""
        self.error: str | None = None
        self._stuck: str | None = None      # why it could not move to the current revision
        self._failed: tuple[BaseException | None, str] = (None, "")
        self.rebinds = 0            # how often it moved to a new revision of its cell (or backend)
        self._strings: dict[int, str] | None = None
        self._once: set[str] = set()   # CALL::ONCE entry points due on the next frame
        self._lock = threading.RLock()
        self._bound: _Revision | None = None
        self._seen = self.session.store.revision
        self._adopt(_compile(self.session, self.cell, webgpu_bounds), keep=False)

    # -- what it runs now

    @property
    def _rev(self) -> _Revision:
        assert self._bound is not None
        return self._bound

    @property
    def source(self) -> str:
        """The text of the revision it runs."""
        return self._rev.source

    @property
    def kernels(self) -> list[tuple[str, Mapping[str, tuple[Any, ...]]]]:
        """(entry point, its playground attributes) of the CALL entry points, in dispatch order."""
        return list(self._rev.kernels)

    @property
    def compiled(self) -> Mapping[str, CompiledKernel]:
        """The CompiledKernel of each CALL entry point of the revision it runs."""
        return dict(self._rev.compiled)

    @property
    def globals(self) -> Mapping[str, ParamInfo]:
        return dict(self._rev.globals)

    @property
    def backend(self) -> Backend:
        """The backend its resources live on."""
        return self._rev.backend

    @property
    def runnable(self) -> bool:
        return bool(self._rev.kernels)

    # -- following the cell

    def follow(self) -> bool:
        """Move to the current revision of the cell (and the session's backend) if either changed:
        True when it did. Cheap while nothing in the session changed; called by every frame.

        When the new revision does not compile (or its resources cannot be made), the program keeps
        the revision it runs and ``error`` says why; after a backend switch there is nothing older
        to run, so that raises PlaygroundError."""
        with self._lock:
            s = self.session
            moved = s.backend is not self._rev.backend
            changed = self._move(moved) if moved or s.store.revision != self._seen else False
            self.error = self._failure() or self._stuck
            return changed

    def _move(self, moved: bool) -> bool:
        s, rev = self.session, self._rev
        if not moved and s.store.digest(self.cell) == rev.digest and all(map(s.store.is_current, rev.compiled.values())):
            self._seen, self._stuck = s.store.revision, None
            return False
        try:
            new = _compile(s, self.cell, self.webgpu_bounds)
            if not new.kernels:
                raise PlaygroundError(f"{self.cell} has no [playground::CALL...] entry point any more")
            self._adopt(new, keep=not moved)
        except Exception as exc:  # noqa: BLE001 - whatever stops the move, the last good revision runs on
            if moved:
                self.error = f"{self.cell} cannot run on the {s.backend.name} backend: {exc}"
                raise PlaygroundError(self.error) from None
            self._seen = s.store.revision  # tried once per change of the session, not once per frame
            self._stuck = last_good_message(self.cell, exc)
            return False
        self._seen, self._stuck = s.store.revision, None
        self.rebinds += 1
        return True

    def _failure(self) -> str | None:
        """The error of the cell's last run, when it did not compile (its last good revision runs)."""
        exc = self.session.store.failure(self.cell)
        if exc is None:
            return None
        if exc is not self._failed[0]:
            self._failed = (exc, last_good_message(self.cell, exc))
        return self._failed[1]

    def _adopt(self, rev: _Revision, *, keep: bool) -> None:
        """Make `rev` the revision frames run. keep: resources whose declaration is unchanged stay as
        they are (same backend); inputs and plain uniforms keep their values in any case. Nothing
        changes when a new resource cannot be made (the error propagates)."""
        old = self._bound
        resources: dict[str, Resource] = {}
        inputs: dict[str, Input] = {}
        uniforms: dict[str, Any] = {}
        created = False
        for p in rev.globals.values():
            decl, attrs, t = _declaration(p, rev.formats), _pg_attrs(p.attributes), p.type
            res = next(((k, attrs[k]) for k in RESOURCES if k in attrs), None)
            inp = next(((k, attrs[k]) for k in INPUTS if k in attrs), None)
            if res is not None:
                was = self.resources.get(p.name)
                if keep and was is not None and was.declared == decl:
                    resources[p.name] = was
                else:
                    resources[p.name] = RESOURCES[res[0]](rev.backend, p.name, t, *res, decl, rng=self.rng,
                                                      screen=self.screen, base_dir=self.base_dir,
                                                      formats=rev.formats)
                    created = True
            elif inp is not None:
                was_in = self.inputs.get(p.name)
                if was_in is not None and was_in.declared == decl:
                    inputs[p.name] = was_in
                    uniforms[p.name] = self.uniforms.get(p.name, was_in.value)
                else:
                    kind, args = inp
                    value = INPUTS[kind](args, t)
                    inputs[p.name] = Input(p.name, kind, t, tuple(args), value, decl)
                    uniforms[p.name] = value
            elif t.kind in ("resource", "sampler"):
                what = "texture" if t.is_texture else "buffer" if t.is_buffer else t.kind
                raise PlaygroundError(
                    f"global `{p.name}` ({t.name}) has no [playground::...] attribute saying how to create this "
                    f"{what}: add e.g. [playground::ZEROS(n)], [playground::BLACK(w, h)] or [playground::SAMPLER]")
            else:
                before = old.globals.get(p.name) if old is not None else None
                same = before is not None and _declaration(before, old.formats if old else None) == decl \
                    and p.name in self.uniforms
                uniforms[p.name] = self.uniforms[p.name] if same else zero_value(t)
        once = {e for e, a in rev.kernels if "CALL_ONCE" in a and (
            created or old is None or e not in old.compiled or old.compiled[e].key != rev.compiled[e].key)}
        self._bound, self.resources, self.inputs, self.uniforms = rev, resources, inputs, uniforms
        self._once = {e for e in self._once if e in rev.compiled} | once
        self._strings = None

    # -- setup

    # -- running

    def set(self, **values: Any) -> None:
        """Set live inputs by global name (slider floats, colour triples, mouse float4, key 0/1)."""
        for k, v in values.items():
            if k not in self.inputs:
                raise KeyError(f"no live input {k!r}; inputs: {', '.join(self.inputs) or 'none'}")
            inp = self.inputs[k]
            if inp.kind in ("COLOR_PICK", "MOUSE_POSITION"):
                dt = vector_scalar(inp.type)
                v = np.asarray(v, np.float64).reshape(-1)
                v = (np.rint(v) if dt.kind in "iu" else v).astype(dt)  # int4 mousePosition: whole pixels
            elif (inp.type.scalar or "").startswith(("int", "uint")):
                v = int(v)
            else:
                v = float(v)
            inp.value = v
            self.uniforms[k] = v

    def frame(self, **values: Any) -> "PlaygroundProgram":
        """Run one frame: CALL entry points in declaration order (CALL::ONCE ones on frame 0 only, and
        again after a re-bind changed them or made a resource anew). Follows the cell first."""
        with self._lock:
            self.follow()
            rev = self._rev
            self.set(**values)
            for name, inp in self.inputs.items():   # in the uniform's own type: uint, int or float
                if inp.kind == "TIME" and "TIME" not in values and name not in values:
                    self.uniforms[name] = as_scalar(inp.type, time.perf_counter() - self.start)
                elif inp.kind == "FRAME_ID" and name not in values:
                    self.uniforms[name] = as_scalar(inp.type, self.frame_index)
            printing = self.resources.get("g_printedBuffer")
            if printing is not None:
                self._clear_prints(printing)
            vals = {**self.uniforms, **{n: r.value for n, r in self.resources.items()}}
            for name, attrs in rev.kernels:
                if "CALL_ONCE" in attrs and name not in self._once:
                    continue
                ck = rev.compiled[name]
                groups = call_groups(ck.entry_point, attrs, self.resources)
                kv = {k: vals[k] for k in ck.parameter_names if k in vals}
                for k, zero in rev.zeros[name].items():
                    kv.setdefault(k, zero)
                dispatch(rev.backend, ck, groups, kv)
            self._once.clear()
            self.frame_index += 1
            if printing is not None and "print" in rev.source:
                if self._strings is None:
                    self._strings = string_table(rev.source, *rev.sources)
                text = decode_prints(read_resource(printing), self._strings)
                if text:   # RenderCanvas.vue shows a frame's output only when it printed something
                    self.printed = text
        return self

    def _clear_prints(self, r: Resource) -> None:
        v = r.value
        if isinstance(v, np.ndarray):
            v.reshape(-1)[:1] = 0
        elif hasattr(v, "upload"):
            v.upload(np.zeros(v.shape, v.dtype))

    # -- outputs

    def output_name(self) -> str | None:
        """The texture the view shows (see the module docstring for the rule)."""
        source = self.source
        if "outputTexture" in self.resources and re.search(r"\b(outputTexture|drawPixel)\b", source):
            return "outputTexture"
        for n, r in self.resources.items():
            if r.type.is_texture and r.type.writable and r.type.shape == "texture_2d" and \
                    re.search(rf"\b{re.escape(n)}\b", source):
                return n
        return None

    def buffers(self) -> list[str]:
        """ZEROS / RAND buffers the cell itself mentions (shown when there is no image)."""
        return [n for n, r in self.resources.items() if r.kind in ("ZEROS", "RAND") and n != "g_printedBuffer"
                and re.search(rf"\b{re.escape(n)}\b", self.source)]

    def read(self, name: str) -> np.ndarray:
        """A resource's current contents as numpy."""
        return read_resource(self.resources[name])

    def image(self, name: str | None = None) -> np.ndarray:
        """The canvas as the Playground shows it: the output texture as (H, W, 4) uint8 RGBA (clamped
        and rounded, as an rgba8 texture stores it), flipped vertically (texture row 0 at the bottom:
        the Playground's pass-through quad samples v = 0 at the bottom of the canvas)."""
        return self.texture(name)[::-1]

    def texture(self, name: str | None = None) -> np.ndarray:
        """The output texture (or texture `name`) as stored: (H, W, 4) uint8 RGBA, row 0 first."""
        name = name or self.output_name()
        if name is None:
            raise PlaygroundError(f"{self.cell} has no image output")
        return to_rgba8(self.read(name))

    def __repr__(self) -> str:
        return (f"<PlaygroundProgram {self.cell}: kernels {[k for k, _ in self.kernels]}, "
                f"resources {list(self.resources)}, inputs {list(self.inputs)}>")


def program_for(session: "Session", cell: str) -> PlaygroundProgram | None:
    """A program for a Slang Playground cell with [playground::CALL...] entry points (None for any
    other cell: it only compiles). Raises PlaygroundError when the cell cannot run here."""
    if not is_playground(session.cell(cell).source):
        return None
    prog = PlaygroundProgram(session, cell)
    return prog if prog.runnable else None
