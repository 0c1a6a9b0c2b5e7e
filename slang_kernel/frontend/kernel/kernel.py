"""SlangKernel: a Jupyter kernel whose cells are Slang, on top of IPython.

A cell is Slang unless it starts with `%%python` / `%%py` (the rest is Python), another IPython
cell magic (`%%timeit`, `%%html`, ...) or an IPython line magic that is not one of the kernel's own.
Everything runs through the IPython shell, so comms, widgets, display, history, `In`/`Out` and the
Python namespace behave exactly as in the Python kernel: a Slang cell is turned (by an input
transformer) into one Python call to `SlangKernel.run_slang_cell`, which drives the same
`slang_kernel.Session` as the `%%slang` magic. Nothing is compiled or dispatched here.

Line magics inside a Slang cell (on a line of their own):

    %backend cpu|vulkan|cuda|auto      switch the session's backend (no argument: show it)
    %show TARGET [NAME ...]            generated code (hlsl, glsl, spirv-asm, metal, wgsl, cuda, cpp) of
                                       the named kernels/functions (default: those of this cell)
    %run KERNEL threads=(N,1,1) name=expr ...
                                       dispatch a compute kernel; every `name=expr` is a Python
                                       expression evaluated in the notebook's namespace (numpy arrays
                                       are written back in place); `groups=` instead of `threads=`

`%backend` runs before the cell's Slang is compiled; `%show` and `%run` after, in order.

Cell naming, name binding and error display are slang_kernel.frontend's, shared with `%%slang`: a
cell is named by its prompt (`In[5]`); running the same notebook cell (Jupyter cell id) again
replaces its earlier revision in the session, and later cells that use it are recompiled.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any, cast

from ipykernel.ipkernel import IPythonKernel
from traitlets import List

from ... import KernelInterrupted, __version__
from ...backends.registry import choices
from ...compiler.diagnostics import SlangCompileError
from ..display import code_display, show, warnings_text
from ..controller import FrontEnd
from ..lsp import replies
from ..lsp.assist import Assistant
from ...engine.session import CODE_TARGETS, Session
from . import completion
from .display import SlangKernelError
from .language import LANGUAGE_INFO
from .source import Magic, is_slang_cell, parse_cell

__all__ = ["SlangKernel", "parse_run_args"]

_KW = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)")


def parse_run_args(text: str) -> list[tuple[str, str]]:
    """`threads=(n, 1, 1) out=a scale=2 * k` -> [("threads", "(n, 1, 1)"), ("out", "a"), ("scale", "2 * k")].

    A new argument starts at `name=` outside brackets and strings; commas between arguments are allowed.
    """
    starts: list[tuple[int, int, str]] = []   # (start of name, start of value, name)
    depth, quote, i = 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and (i == 0 or text[i - 1] in " \t,"):
            m = _KW.match(text, i)
            if m:
                starts.append((i, m.end(), m.group(1)))
                i = m.end()
                continue
        i += 1
    if not starts:
        if text.strip():
            raise SlangKernelError(f"%run: expected name=value arguments, got {text.strip()!r}")
        return []
    if text[: starts[0][0]].strip(" \t,"):
        raise SlangKernelError(f"%run: expected name=value arguments, got {text[: starts[0][0]].strip()!r}")
    out = []
    for n, (s, v, name) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(text)
        value = text[v:end].strip().rstrip(",").strip()
        if not value:
            raise SlangKernelError(f"%run: argument {name}= has no value")
        out.append((name, value))
    return out


class SlangKernel(IPythonKernel):
    implementation = "slang_kernel"
    implementation_version = __version__
    language_info: dict[str, object] = dict(LANGUAGE_INFO)
    help_links = List([
        {"text": "Slang user guide", "url": "https://shader-slang.org/slang/user-guide/"},
        {"text": "Slang standard library", "url": "https://shader-slang.org/stdlib-reference/"},
        {"text": "slang-kernel", "url": "https://github.com/shader-slang/slang"},
        {"text": "Python Reference", "url": "https://docs.python.org/3/"},
        {"text": "IPython Reference", "url": "https://ipython.org/documentation.html"},
        {"text": "NumPy Reference", "url": "https://docs.scipy.org/doc/numpy/reference/"},
    ]).tag(config=True)

    @property  # ipykernel declares a plain attribute; a property says it is derived
    def banner(self) -> str:  # type: ignore[override]
        return (f"Slang kernel {__version__}: cells are Slang; start a cell with %%python for Python.\n"
                "Line magics: %backend cpu|vulkan|cuda, %show TARGET NAME, %run KERNEL threads=... name=expr")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pending: tuple[str, str] | None = None  # (raw code, kind) of the cell being executed
        self._lsp: Assistant | None = None  # Slang's language server for Tab and Shift-Tab, on first use
        self._lsp_made = False
        assert self.shell is not None
        self.frontend = FrontEnd.of(self.shell, quiet=(SlangKernelError,))
        self.shell.input_transformers_cleanup.insert(0, self._transform)
        try:  # start the compiler now, in the background; a failure is reported on the first Slang cell
            self.slang_session
        except Exception as exc:
            self.log.warning("the Slang session could not start: %s", exc)
        lsp = self._assistant()
        if lsp is not None:  # start the language server now: the first Shift-Tab finds it ready
            lsp.client.ensure(0)

    @property
    def slang_session(self) -> Session:
        """The notebook's one Session, `slang_session` in the namespace (shared with %%slang)."""
        return self.frontend.session()

    # -- execution ---------------------------------------------------------------------------------------

    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: dict[str, Any] | None = None, allow_stdin: bool = False, *,
                         cell_meta: dict[str, Any] | None = None, cell_id: str | None = None) -> dict[str, Any]:
        kind = parse_cell(code).kind
        if kind != "slang" and cell_id and not code.lstrip().startswith("%%slang"):
            self.frontend.forget(cell_id, reason="this notebook cell is not Slang any more")
        self._pending = (code, kind)
        try:
            reply = await super().do_execute(code, silent, store_history, user_expressions, allow_stdin,
                                             cell_meta=cell_meta, cell_id=cell_id)
            return cast(dict[str, Any], reply)
        finally:
            self._pending = None

    def _transform(self, lines: list[str]) -> list[str]:
        """IPython input transformer: the pending Slang cell becomes one call; %%python loses its header."""
        if self._pending is None:
            return lines
        code, kind = self._pending
        if "".join(lines).rstrip("\n") != code.rstrip("\n"):
            return lines
        if kind == "python":
            return parse_cell(code).source.splitlines(keepends=True)
        if kind == "slang":
            return [f"get_ipython().kernel.run_slang_cell({code!r})\n"]
        return lines

    def run_slang_cell(self, code: str, name: str | None = None) -> None:
        """Compile one Slang cell into the session (named by its prompt unless `name`), bind its
        names, run its line magics."""
        parsed = parse_cell(code)
        fe = self.frontend
        with fe.own_errors():
            try:
                session = fe.session()
            except Exception as exc:
                raise SlangKernelError(f"the Slang session could not start: {exc}") from None
            for m in parsed.magics:
                if m.name == "backend":
                    self._magic_backend(session, m)
            result = None
            if parsed.has_slang:
                result = fe.run(parsed.source, name=name)
                if result.warnings:
                    print(warnings_text(session, result, fe.labels), file=sys.stderr)
                fe.present(result)
            else:
                fe.forget(reason="the cell holds no Slang code any more")
            for m in parsed.magics:
                if m.name == "show":
                    self._magic_show(session, m, result)
                elif m.name == "run":
                    self._magic_run(session, m)

    # -- line magics -------------------------------------------------------------------------------------

    def _magic_backend(self, session: Session, m: Magic) -> None:
        want = m.args.split()[0] if m.args.split() else ""
        if want:
            if want not in choices():
                raise SlangKernelError(f"%backend: unknown backend {want!r}; "
                                       f"choose {', '.join(choices()[:-1])} or {choices()[-1]}")
            try:
                session.set_backend(want)
            except Exception as exc:
                raise SlangKernelError(f"%backend {want}: {exc}") from None
        print(f"backend: {session.backend.name} ({session.backend.describe()})")

    def _magic_show(self, session: Session, m: Magic, result: Any) -> None:
        words = m.args.replace(",", " ").split()
        if not words:
            raise SlangKernelError(f"%show TARGET [NAME ...]: TARGET is one of {', '.join(CODE_TARGETS)}")
        target, names = words[0], words[1:]
        if target not in CODE_TARGETS and target != "spirv":
            raise SlangKernelError(f"%show: unknown target {target!r}; "
                                   f"choose one of {', '.join(CODE_TARGETS)}")
        if not names:
            names = list((result.kernels + result.functions) if result is not None else ())
            if not names:
                raise SlangKernelError("%show TARGET NAME: name a kernel or function "
                                       "(this cell defines none)")
        for n in names:
            try:
                text = session.code(n, target)
            except (KeyError, TypeError) as exc:
                raise SlangKernelError(f"%show {target} {n}: {exc.args[0] if exc.args else exc}") from None
            show(code_display(text, target, f"{n} as {target}"))

    def _magic_run(self, session: Session, m: Magic) -> None:
        words = m.args.split(None, 1)
        if not words:
            raise SlangKernelError("%run KERNEL threads=(N, 1, 1) name=expr ...: name a compute kernel; "
                                   f"defined: {', '.join(session.kernels()) or 'none'}")
        kname, rest = words[0], (words[1] if len(words) > 1 else "")
        if kname not in session.kernels():
            raise SlangKernelError(f"%run: no compute kernel named {kname!r}; defined: "
                                   f"{', '.join(session.kernels()) or 'none'}")
        args = {}
        for pname, expr in parse_run_args(rest):
            try:
                args[pname] = eval(expr, self.frontend.shell.user_ns)  # noqa: S307 - the user's own notebook
            except Exception as exc:
                raise SlangKernelError(f"%run {kname}: evaluating {pname}={expr} failed: "
                                       f"{type(exc).__name__}: {exc}") from None
        kernel = session.kernel(kname)
        t0 = time.perf_counter()
        try:
            kernel(**args)
        except KeyboardInterrupt:
            raise KernelInterrupted(
                f"{kname} was interrupted after {time.perf_counter() - t0:.1f} s on {session.backend.name}; "
                "arrays it writes may be partly updated. The session and its cells are unchanged.") from None
        except SlangCompileError:
            raise
        except Exception as exc:
            raise SlangKernelError(f"%run {kname}: {exc}") from None
        print(f"{kname}: ran in {(time.perf_counter() - t0) * 1000:.1f} ms on {session.backend.name}")

    # -- completion, inspection, is_complete ------------------------------------------------------------

    def _assistant(self) -> Assistant | None:
        if not self._lsp_made:
            self._lsp, self._lsp_made = replies.assistant_from_env(), True
        return self._lsp

    def _names(self) -> tuple[dict[str, Any], list[str]]:
        s = self.frontend.existing_session
        if s is None:
            return {}, []
        try:
            return s.store.names(), s.kernels()
        except Exception:
            return {}, []

    def _kernel_params(self, name: str) -> list[str]:
        try:
            s = self.frontend.existing_session
            return [p.name for p in s.kernel(name).params] if s is not None else []
        except Exception:
            return []

    def do_complete(self, code: str, cursor_pos: int | None) -> Any:
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        if parse_cell(code).kind != "slang" and not is_slang_cell(code):
            reply = super().do_complete(code, cursor_pos)
            head = code[:cursor_pos]
            if re.fullmatch(r"\s*%\w*", head):  # a line magic being typed: ours or IPython's
                ours = completion.complete(head, cursor_pos, {}, ()).reply()
                if ours["matches"] and not reply.get("matches"):
                    reply = ours
                elif ours["matches"] and ours["cursor_start"] == reply.get("cursor_start"):
                    theirs = [m for m in reply["matches"] if m not in ours["matches"]]
                    reply["matches"] = ours["matches"] + theirs
            return reply
        names, kernels = self._names()
        cells, defines = replies.notebook(self.frontend, code)
        return replies.complete_reply(self._assistant(), cells, code, cursor_pos, defines, names, kernels,
                                      kernel_params=self._kernel_params)

    def _owner(self, name: str) -> str | None:
        s = self.frontend.existing_session
        if s is None:
            return None
        for cell in reversed(s.cells):
            if any(d.name == name for d in s.cell(cell).decls):
                return self.frontend.label(cell)
        return None

    def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> Any:
        if parse_cell(code).kind != "slang" and not is_slang_cell(code):
            return super().do_inspect(code, cursor_pos, detail_level, omit_sections)
        names, kernels = self._names()
        own = completion.inspect(code, cursor_pos, names, kernels, owner=self._owner)
        cells, defines = replies.notebook(self.frontend, code)
        return replies.inspect_reply(self._assistant(), cells, code, cursor_pos, defines, own)

    def do_is_complete(self, code: str) -> Any:
        parsed = parse_cell(code)
        if parsed.kind == "ipython":
            return super().do_is_complete(code)
        if parsed.kind == "python":
            # like an IPython cell magic: the body must parse, and a blank line ends the cell
            if len(code.strip().splitlines()) < 2:
                return {"status": "incomplete", "indent": ""}
            reply = super().do_is_complete(code.lstrip().split("\n", 1)[1])
            if reply["status"] in ("invalid", "incomplete") or code.endswith("\n\n"):
                return reply
            return {"status": "incomplete", "indent": ""}
        return completion.is_complete(code)

    def do_shutdown(self, restart: bool) -> Any:
        if self._lsp is not None:
            self._lsp.close()
        s = self.frontend.existing_session
        if s is not None:
            try:
                s.close()
            except Exception:
                pass
        return super().do_shutdown(restart)
