"""The thread debugger: one dispatch of a kernel, and what ONE thread printed and marked.

GPUs have no per-thread breakpoints a notebook could use; what Slang users ask for is printf
filtered to one thread. A debug run compiles an instrumented copy of the kernel's cell (its own
CompiledKernel key; ordinary compiles are unchanged):

- the entry point gains a `uint3 : SV_DispatchThreadID` parameter and, first thing in its body,
  sets a per-thread static `sk_debug_on_` = (that id == the global uniform `sk_debug_thread_`);
  the thread is a uniform, not a define, so debugging another thread (a pixel click) reuses the build;
- each `printf(...);` of the cell becomes `{ if (sk_debug_on_) printf(...); }`;
- each `debug_value("name", v)` (from `import debug;`, a no-op in ordinary compiles) becomes a
  call that prints `v`'s bits on a marked line, which is decoded here into `values["name"]`.

When a cell the kernel imports prints or marks values too, the debug build compiles the kernel's
cell and every cell it imports from their (rewritten) text as one module (Session.compile_inline),
so their printf is filtered as well; where one module cannot hold them, only the kernel's own cell
is instrumented and the other cells' printf prints for every thread (kept in `printed` as it comes).

What the thread printed reaches Python the way each backend prints (sys.stdout for the CPU worker
and Vulkan, the process's fd 1 for CUDA's device printf), and is captured around the dispatch.
"""

from __future__ import annotations

import contextlib
import ctypes
import html
import io
import os
import re
import sys
import tempfile
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from .. import scanner
from ..backends import Backend
from ..engine.cells import Cell
from ..compiled import CompiledKernel
from ..compiler.diagnostics import SlangCompileError
from ..errors import ParameterError
from ..engine.protocols import DebugService

__all__ = ["DEBUG_THREAD_PARAM", "ThreadDebug", "debug_dispatch", "instrument"]

DEBUG_THREAD_PARAM = "sk_debug_thread_"   # the global uniform that picks the thread
_MARK = "@sk_debug_value"                 # the marked lines debug_value prints
_MARKED = re.compile(r"\b(printf|debug_value)\s*\(")
_TAGS = {"int": 1, "uint": 2, "float": 3, "bool": 5}
_DTYPES = {1: np.int32, 2: np.uint32, 3: np.float32, 5: np.bool_}


@dataclass(frozen=True)
class ThreadDebug:
    """What one thread of one dispatch printed (`printed`, in order) and the values it marked with
    `debug_value("name", v)` (`values`: numpy scalars/arrays; a name marked more than once, e.g. in
    a loop, maps to the tuple of its values in order)."""

    kernel: str
    thread: tuple[int, int, int]
    printed: tuple[str, ...]
    values: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}))
    backend: str = ""
    groups: tuple[int, int, int] = (1, 1, 1)

    def text(self) -> str:
        """Plain text: a header, the printed lines, then name = value per marked value."""
        x, y, z = self.thread
        head = f"{self.kernel} thread ({x}, {y}, {z})" + (f" on {self.backend}" if self.backend else "")
        lines = [head]
        lines += [f"  {line}" for line in self.printed] or ["  (printed nothing)"]
        lines += [f"  {name} = {_value_text(v)}" for name, v in self.values.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        x, y, z = self.thread
        esc = html.escape
        printed = "".join(f"<div>{esc(line)}</div>" for line in self.printed) or "<div><i>printed nothing</i></div>"
        rows = "".join(f"<tr><td><code>{esc(n)}</code></td><td><code>{esc(_value_text(v))}</code></td></tr>"
                       for n, v in self.values.items())
        table = f"<table class='sk-debug-values'>{rows}</table>" if rows else ""
        on = f" on {esc(self.backend)}" if self.backend else ""
        return (f"<div class='sk-thread-debug'><b>{esc(self.kernel)}</b> thread ({x}, {y}, {z}){on}"
                f"<pre style='margin:4px 0'>{printed}</pre>{table}</div>")


def _value_text(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_value_text(e) for e in v) + "]"
    if isinstance(v, np.ndarray):
        return " ".join(np.array2string(v, separator=", ", max_line_width=1 << 20).split())
    return str(v.item() if isinstance(v, np.generic) else v)


# -- instrumenting the cell's text ------------------------------------------------------------------

def _value_overloads() -> str:
    """`sk_debug_value_(id, v)` for scalars, vectors and matrices of float/int/uint/bool: one marked
    line per row, the components as their 32 bits (exact, whatever the backend's float printing)."""
    out = []
    for t, tag in _TAGS.items():
        bits = {"float": "asuint({})", "int": "asuint({})", "uint": "{}", "bool": "({} ? 1u : 0u)"}[t]
        shapes: list[tuple[str, int, int]] = [(t, 0, 0)] + [(f"{t}{n}", 0, n) for n in (2, 3, 4)]
        if t == "float":
            shapes += [(f"float{r}x{c}", r, c) for r in (2, 3, 4) for c in (2, 3, 4)]
        for ty, rows, cols in shapes:
            body = []
            for r in range(max(1, rows)):
                if cols == 0:
                    comps = ["v"]
                elif rows == 0:
                    comps = [f"v[{i}]" for i in range(cols)]
                else:
                    comps = [f"v[{r}][{i}]" for i in range(cols)]
                args = [bits.format(c) for c in comps] + ["0u"] * (4 - len(comps))
                body.append(f'printf("{_MARK} %u {tag} {rows} {cols} {r} %u %u %u %u\\n", id, {", ".join(args)});')
            out.append(f"void sk_debug_value_(uint id, {ty} v) {{ if (sk_debug_on_) {{ {' '.join(body)} }} }}")
    return "\n".join(out)


_PRELUDE = (
    "\n// slang-kernel thread debugger (ComputeKernel.debug)\n"
    f"uniform uint3 {DEBUG_THREAD_PARAM};\n"
    "static bool sk_debug_on_ = false;\n"
    f"void sk_debug_enter_(uint3 t) {{ sk_debug_on_ = all(t == {DEBUG_THREAD_PARAM}); }}\n"
    + _value_overloads() + "\n")


def _close(src: str, i: int) -> int:
    """src[i] is "(": the index of its matching ")" (strings and comments skipped)."""
    end = scanner.closing(scanner.blank(src), i)
    if end > len(src) or src[end - 1] != ")":
        raise ValueError("unbalanced parentheses")
    return end - 1


def _code_positions(src: str, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of pattern outside comments and string literals (matched on the text itself, so a
    group may capture a string)."""
    blanked = scanner.blank(src)
    i = 0
    while i < len(src):
        if blanked[i] != src[i]:
            i += 1    # inside a comment or literal
            continue
        m = pattern.match(src, i)
        if m:
            yield m
            i = m.end()
        else:
            i += 1


def instrument(source: str, entry: str | None, names: list[str] | None = None) -> tuple[str, tuple[str, ...]]:
    """The debug text of a cell for kernel `entry` (None: a cell it imports, whose printf and
    debug_value calls are rewritten, no more), and the names debug_value calls mark (by index;
    `names` is extended in place when given, for several cells of one build). Lines keep their
    numbers, so diagnostics still point at the user's lines."""
    names = [] if names is None else names
    edits: list[tuple[int, int, str]] = []
    if entry is not None:
        entry_at = scanner.entry_definition(source, entry)
        if entry_at is None:
            raise ValueError(f"could not find the definition of `{entry}` in its cell")
        open_, close, body, _ = entry_at
        params = source[open_ + 1:close]
        sep = ", " if params.strip() else ""
        edits.append((close, close, f"{sep}uint3 sk_debug_tid_ : SV_DispatchThreadID"))
        edits.append((body, body, " sk_debug_enter_(sk_debug_tid_);"))
    for m in _code_positions(source, re.compile(r"\bprintf\s*\(")):
        end = _close(source, m.end() - 1)
        semi = re.compile(r"\s*;").match(source, end + 1)
        if semi is None:
            continue
        edits.append((m.start(), m.start(), "{ if (sk_debug_on_) "))
        edits.append((semi.end(), semi.end(), " }"))
    for m in _code_positions(source, re.compile(r'\bdebug_value\s*\(\s*"((?:\\.|[^"\\])*)"\s*,')):
        name = m.group(1)
        if name not in names:
            names.append(name)
        edits.append((m.start(), m.end(), f"sk_debug_value_({names.index(name)}u,"))
    return scanner.apply_edits(source, edits) + (_PRELUDE if entry is not None else ""), tuple(names)


# -- running it ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def _captured() -> Iterator[list[str]]:
    """What is printed inside: through sys.stdout (CPU worker, Vulkan) and on fd 1 (CUDA's device
    printf, C code in this process). On an error the text is passed on to the real stdout."""
    got: list[str] = []
    buf = io.StringIO()
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    libc.fflush(None)
    tmp = tempfile.TemporaryFile()
    saved = os.dup(1)
    os.dup2(tmp.fileno(), 1)
    ok = False
    try:
        with contextlib.redirect_stdout(buf):
            yield got
        ok = True
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        tmp.seek(0)
        text = buf.getvalue() + tmp.read().decode("utf-8", "replace")
        tmp.close()
        got.append(text)
        if not ok and text:
            sys.stdout.write(text)


def check_thread(entry: str, thread: Sequence[int], groups: tuple[int, int, int],
                 numthreads: tuple[int, int, int], threads: Any = None) -> tuple[int, int, int]:
    """The thread as (x, y, z), or a clear error when the dispatch does not run it."""
    t = tuple(int(v) for v in (thread if not isinstance(thread, int) else (thread,)))
    if not 1 <= len(t) <= 3:
        raise ParameterError(f"{entry}.debug(): thread must be (x, y, z); got {thread!r}")
    t3 = (t + (0, 0))[:3]
    if isinstance(threads, int):
        threads = (threads,)
    extent = (tuple(int(v) for v in threads) + (1, 1))[:3] if threads is not None else \
        tuple(g * n for g, n in zip(groups, numthreads))
    if any(v < 0 or v >= e for v, e in zip(t3, extent)):
        how = f"threads={tuple(extent)}" if threads is not None else \
            f"groups={groups} x numthreads={numthreads} = {tuple(extent)} threads"
        raise ParameterError(f"{entry}.debug(): thread {t3} is outside the dispatch ({how}); "
                             f"pick x < {extent[0]}, y < {extent[1]}, z < {extent[2]}")
    return t3  # type: ignore[return-value]


def _decode(lines: Sequence[str], names: Sequence[str]) -> tuple[tuple[str, ...], dict[str, Any]]:
    printed: list[str] = []
    rows: dict[str, list[Any]] = {}
    pending: dict[int, list[list[int]]] = {}
    for line in lines:
        if not line.startswith(_MARK):
            printed.append(line)
            continue
        try:
            ident, tag, nrows, ncols, r, *bits = (int(w) for w in line[len(_MARK):].split())
        except ValueError:
            printed.append(line)
            continue
        dt = np.dtype(_DTYPES.get(tag, np.uint32))
        raw = np.array(bits[:max(1, ncols)], np.uint32)
        comps = raw.view(np.int32) if tag == 1 else raw.view(np.float32) if tag == 3 else raw.astype(dt)
        name = names[ident] if ident < len(names) else f"#{ident}"
        if nrows == 0:
            value: Any = comps[0].astype(dt)[()] if ncols == 0 else comps.astype(dt)
            rows.setdefault(name, []).append(value)
            continue
        part = pending.setdefault(ident, [])
        part.append(list(comps))
        if r == nrows - 1:
            rows.setdefault(name, []).append(np.array(part, dt))
            pending.pop(ident)
    values = {n: v[0] if len(v) == 1 else tuple(v) for n, v in rows.items()}
    return tuple(printed), values


def debug_dispatch(host: DebugService, name: str, thread: Sequence[int], groups: tuple[int, int, int],
                   params: Mapping[str, Any], threads: Any = None) -> ThreadDebug:
    """Run kernel `name` over `groups` with the instrumented build; what `thread` printed and marked."""
    plain = host.compile_entry(name)
    t = check_thread(name, thread, groups, plain.entry_point.numthreads, threads)
    names: list[str] = []
    owner = host.owner(name, kernel=True)

    def rewrite(source: str) -> str:
        names.clear()
        return instrument(source, name, names)[0]

    def rewrite_cell(cell: str, source: str) -> str:
        return instrument(source, name if cell == owner.name else None, names)[0]

    ck = None
    if any(_MARKED.search(c.source) for c in host.closure([owner]) if c.name != owner.name):
        try:  # an imported cell prints or marks: instrument it too, all cells in one module
            ck = host.compile_inline(name, rewrite_cell)
        except SlangCompileError:
            names.clear()  # one module cannot hold them: the other cells' printf prints for every thread
    if ck is None:
        ck = host.compile_variant(name, rewrite)
    values = {k: v for k, v in params.items() if k in ck.parameter_names}
    values[DEBUG_THREAD_PARAM] = np.array(t, np.uint32)
    with _captured() as out:
        host.backend.dispatch(ck, groups, values)
    lines = out[0].splitlines()
    printed, marked = _decode(lines, names)
    return ThreadDebug(name, t, printed, types.MappingProxyType(marked), host.backend.name, groups)

