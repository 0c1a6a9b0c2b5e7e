"""The Slang Jupyter kernel over the real protocol: jupyter_kernel_test's suite plus kernel specifics.

The kernelspec is installed into a temporary prefix put on JUPYTER_PATH (and the kernel gets its own
IPYTHONDIR), so nothing under the user's home is touched. The kernel runs on the CPU backend.
"""

from __future__ import annotations

import re
import time
import unittest
from typing import Any, Callable

import jupyter_kernel_test
import pytest
from jupyter_client.manager import start_new_kernel

from slang_kernel.frontend.kernel.install import temporary_kernelspec
from tests.kernel_client import shell_request
from tests.waiting import cpu_seconds, wait_until

# Tab and Shift-Tab ask Slang's language server (slang_kernel.frontend.lsp); a busy CI machine may start it slowly
KERNEL_ENV = {"SLANG_KERNEL_BACKEND": "cpu", "SLANG_KERNEL_LSP_TIMEOUT": "60"}
TIMEOUT = 120


class SlangKernelTests(jupyter_kernel_test.KernelTests):
    kernel_name = "slang"
    language_name = "slang"
    file_extension = ".slang"

    @classmethod
    def setUpClass(cls) -> None:
        cls._spec = temporary_kernelspec(KERNEL_ENV)
        cls._spec.__enter__()
        try:
            super().setUpClass()
        except BaseException:
            cls._spec.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        try:
            super().tearDownClass()
        finally:
            cls._spec.__exit__(None, None, None)

    code_hello_world = '%%python\nprint("hello, world")'
    # compiler warnings go to stderr (the cell still compiles)
    code_stderr = "float warn_me(float x) { int u = 3.5; return x + u; }"

    completion_samples = [
        {"text": "struct Pt { float3 pos; float mass; };\nPt p; p.", "matches": {"pos", "mass"}},
        {"text": "struct Pt { float3 pos; };\nvoid f(Pt q) { q.pos.", "matches": {"x", "y", "z", "r", "g", "b"}},
        {"text": "float4 c; c.", "matches": {"x", "y", "z", "w", "r", "g", "b", "a"}},
        {"text": "RWStructuredB", "matches": {"RWStructuredBuffer"}},
        # methods come from the language server (the kernel's own completion knows fields only)
        {"text": "struct Acc { float v; float twice() { return 2 * v; } };\nAcc a; a.", "matches": {"v", "twice"}},
        {"text": "%backe", "matches": {"%backend"}},
        {"text": "%backend c", "matches": {"cpu", "cuda"}},
        {"text": "%%python\nimport o"},
    ]
    complete_code_samples = [
        "float f(float x) { return x; }",
        "struct S { float a; };",
        "%run k threads=(4, 1, 1) out=a",
        "// a comment with a { brace",
        'float g() { printf("}"); return 1; }',
    ]
    incomplete_code_samples = [
        "float f(float x) {",
        "void g(float a,",
        "struct S {\n  float a;",
        "/* a comment",
        "%%python\nfor i in range(3):",
    ]
    invalid_code_samples = ["}", "float f() { return (1]; }", "%%python\nx = )"]

    code_generate_error = "float broken(float x) { return undefined_name; }"

    code_execute_result = [
        {"code": "%%python\n6 * 7  # slang-kernel-history", "result": "42"},
        {"code": "%%py\nslang_session.backend.name", "result": "'cpu'"},
    ]
    code_history_pattern = "*slang-kernel-history*"
    # not "range": IPython answers a range request on the current session with session number 0
    supported_history_operations = ("tail", "search")

    code_display_data = [
        {"code": "float twice(float x) { return 2 * x; }", "mime": "text/html"},
        {"code": "%%python\nfrom IPython.display import HTML, display\ndisplay(HTML('<b>hi</b>'))",
         "mime": "text/html"},
    ]
    code_inspect_sample = "sqrt"
    code_page_something = "%%python\nprint?"
    code_clear_output = "%%python\nfrom IPython.display import clear_output\nclear_output()"


# -- kernel specifics, on one kernel for the module ------------------------------------------------------

class Kernel:
    """A started kernel and a few helpers around its client."""

    def __init__(self) -> None:
        self.km, self.kc = start_new_kernel(kernel_name="slang")

    def execute(self, code: str, cell_id: str | None = None, timeout: float = TIMEOUT,
                interrupt_when: Callable[[], bool] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": False}
        msg = self.kc.session.msg("execute_request", content)
        if cell_id is not None:
            msg["metadata"]["cellId"] = cell_id
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        if interrupt_when is not None:
            wait_until(interrupt_when, timeout, "the cell to reach what the interrupt should meet")
            self.km.interrupt_kernel()
        while True:
            reply = self.kc.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        outputs = []
        while True:
            m = self.kc.get_iopub_msg(timeout=timeout)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
            if m["msg_type"] not in ("status", "execute_input"):
                outputs.append(m)
        return reply["content"], outputs

    def ok(self, code: str, cell_id: str | None = None) -> list[dict[str, Any]]:
        reply, outputs = self.execute(code, cell_id)
        assert reply["status"] == "ok", "\n".join(reply.get("traceback", []))
        return outputs

    def python(self, expr: str) -> str:
        """The text/plain repr of a Python expression evaluated in the kernel."""
        for m in self.ok(f"%%python\n{expr}"):
            if m["msg_type"] == "execute_result":
                return m["content"]["data"]["text/plain"]
        raise AssertionError(f"no result for {expr!r}")

    def request(self, method: str, *args: Any) -> dict[str, Any]:
        return shell_request(self.kc, method, *args, timeout=TIMEOUT)


def _busy(kernel: Kernel) -> Callable[[], bool]:
    """A condition: the session's CPU worker has been running a dispatch for a while (what an interrupt
    that should stop a dispatch, not a build, waits for)."""
    worker = int(kernel.python("slang_session.backend.worker_pid"))
    idle = cpu_seconds(worker)
    return lambda: cpu_seconds(worker) > idle + 0.3


def stream(outputs: list[dict[str, Any]], name: str) -> str:
    return "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream" and m["content"]["name"] == name)


@pytest.fixture(scope="module")
def kernel():
    with temporary_kernelspec(KERNEL_ENV):
        k = Kernel()
        try:
            yield k
        finally:
            k.kc.stop_channels()
            k.km.shutdown_kernel(now=True)


def test_kernel_info_and_banner(kernel: Kernel) -> None:
    info = kernel.request("kernel_info")
    li = info["language_info"]
    assert li["name"] == "slang" and li["mimetype"] == "text/x-slang" and li["file_extension"] == ".slang"
    assert li["pygments_lexer"] == "slang"
    assert "%%python" in info["banner"]
    assert info["implementation"] == "slang_kernel"


def test_slang_cell_binds_kernels_and_functions(kernel: Kernel) -> None:
    out = kernel.ok(
        "struct Particle { float3 pos; float mass; };\n"
        "float sqr(float x) { return x * x; }\n"
        '[shader("compute")][numthreads(64, 1, 1)]\n'
        "void scale(uint3 tid: SV_DispatchThreadID, RWStructuredBuffer<float> buf, uniform float k)\n"
        "{ buf[tid.x] = sqr(buf[tid.x]) * k; }\n")
    shown = [m for m in out if m["msg_type"] == "display_data"]
    assert len(shown) == 1
    text, html = shown[0]["content"]["data"]["text/plain"], shown[0]["content"]["data"]["text/html"]
    assert "void scale(uint3 tid, RWStructuredBuffer<float> buf, float k)" in text
    assert "float sqr(float x)" in text and "struct Particle" in text and "backend cpu" in text
    assert "<table" in html and "scale" in html
    assert "ComputeKernel" in kernel.python("type(scale).__name__")
    assert "SlangFunction" in kernel.python("type(sqr).__name__")
    assert kernel.python("isinstance(slang_session, __import__('slang_kernel').Session)") == "True"
    out = kernel.ok("%%python\nimport numpy as np\na = np.arange(8, dtype=np.float32)\n"
                    "scale(threads=(8, 1, 1), buf=a, k=2.0)\nprint(a.tolist(), sqr(np.float32(3)))")
    assert "[0.0, 2.0, 8.0, 18.0, 32.0, 50.0, 72.0, 98.0] 9.0" in stream(out, "stdout")


def test_kernel_printf_appears_in_the_cell(kernel: Kernel) -> None:
    out = kernel.ok('[shader("compute")][numthreads(1, 1, 1)]\n'
                    'void hello(uint3 tid: SV_DispatchThreadID) { printf("hello from %d\\n", int(tid.x)); }\n'
                    "%run hello threads=2\n")
    text = stream(out, "stdout")
    assert "hello from 0" in text and "hello from 1" in text, text


def test_run_magic_evaluates_python_arguments(kernel: Kernel) -> None:
    kernel.ok('[shader("compute")][numthreads(4, 1, 1)]\n'
              "void axpy(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> y, StructuredBuffer<float> x,"
              " uniform float alpha) { y[t.x] += alpha * x[t.x]; }")
    kernel.ok("%%python\nimport numpy as np\nys = np.ones(6, np.float32)\nxs = np.arange(6, dtype=np.float32)")
    out = kernel.ok("%run axpy threads=(len(ys), 1, 1) y=ys x=xs * 2, alpha=0.5")
    assert "axpy: ran in" in stream(out, "stdout")
    assert kernel.python("ys.tolist()") == "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]"
    reply, out = kernel.execute("%run axpy threads=6 y=ys x=xs alpha=no_such_name")
    assert reply["status"] == "error" and "no_such_name" in reply["evalue"]
    reply, out = kernel.execute("%run axpy threads=6 y=ys")
    assert reply["status"] == "error" and "alpha" in reply["evalue"] and "Traceback" not in "".join(reply["traceback"])
    reply, out = kernel.execute("%run nope threads=1")
    assert reply["status"] == "error" and "no compute kernel named 'nope'" in reply["evalue"]


def test_show_and_backend_magics(kernel: Kernel) -> None:
    out = kernel.ok("float cube(float x) { return x * x * x; }\n%show hlsl cube\n%backend cpu")
    assert "backend: cpu" in stream(out, "stdout")
    codes = [m["content"]["data"]["text/plain"] for m in out if m["msg_type"] == "display_data"]
    assert any("cube" in c and "return" in c for c in codes[1:]), codes
    reply, _ = kernel.execute("%show klingon cube")
    assert reply["status"] == "error" and "unknown target" in reply["evalue"]
    reply, _ = kernel.execute("%backend warp-drive")
    assert reply["status"] == "error" and "unknown backend" in reply["evalue"]


def test_compile_error_is_diagnostics_only(kernel: Kernel) -> None:
    reply, out = kernel.execute("float ok_fn(float x) { return x; }\nfloat bad_fn(float x) { return x + nope; }")
    assert reply["status"] == "error"
    assert reply["ename"] == "SlangCompileError"
    tb = "\n".join(reply["traceback"])
    assert "undefined identifier 'nope'" in tb
    assert "   2 | float bad_fn(float x) { return x + nope; }" in tb
    caret_line = next(line for line in reply["traceback"] if line.strip().endswith("^") or "^^" in line)
    assert caret_line.index("^") == tb.splitlines()[tb.splitlines().index(caret_line) - 1].index("nope")
    assert "Traceback" not in tb and 'File "' not in tb
    errors = [m for m in out if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["content"]["traceback"] == reply["traceback"]
    # nothing was bound and the session is unchanged
    assert kernel.python("'ok_fn' in dir()") == "False"


def test_rerunning_a_cell_id_replaces_its_cell(kernel: Kernel) -> None:
    before = eval(kernel.python("len(slang_session.cells)"))
    kernel.ok("float version_fn() { return 1.0; }\nfloat only_in_v1(float x) { return x; }", cell_id="cell-A")
    name = eval(kernel.python("slang_session.cells[-1]"))
    assert re.fullmatch(r"In\[\d+\]", name)
    reply, out = kernel.execute("float version_fn() { return 2.0; }", cell_id="cell-A")
    assert reply["status"] == "ok"
    shown = next(m for m in out if m["msg_type"] == "display_data")["content"]["data"]["text/plain"]
    assert shown.startswith(f"In[{reply['execution_count']}]: compiled in")
    assert eval(kernel.python("len(slang_session.cells)")) == before + 1
    assert eval(kernel.python("slang_session.cells[-1]")) == name   # replaced in place ...
    assert kernel.python("float(version_fn())") == "2.0"
    # a name the cell no longer defines is unbound from the namespace
    assert kernel.python("'only_in_v1' in dir()") == "False"
    # a failed re-run keeps the old version; its error names the prompt the user sees now
    reply, _ = kernel.execute("float version_fn()\n{\n    return oops;\n}", cell_id="cell-A")
    assert reply["status"] == "error"
    assert f"In[{reply['execution_count']}]:3:12: error" in reply["evalue"] and name not in reply["evalue"]
    assert kernel.python("float(version_fn())") == "2.0"
    # another cell id is another cell
    kernel.ok("float other_fn() { return 3.0; }", cell_id="cell-B")
    assert eval(kernel.python("len(slang_session.cells)")) == before + 2
    # a cell turned into Python gives its Slang cell up
    out = kernel.ok("%%python\nx_from_b = 1", cell_id="cell-B")
    assert "removed from the Slang session" in stream(out, "stderr")
    assert kernel.python("'other_fn' in dir()") == "False"


def test_a_bad_argument_from_python_shows_the_users_line(kernel: Kernel) -> None:
    kernel.ok('[shader("compute")][numthreads(4, 1, 1)]\n'
              "void paint(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> o, uniform float v) { o[t.x] = v; }")
    reply, out = kernel.execute("%%python\nimport numpy as np\npaint(threads=4, o=np.zeros(4, np.float32), v='red')")
    assert reply["status"] == "error" and reply["ename"] == "ParameterError"
    tb = "\n".join(reply["traceback"])
    assert f"Cell In[{reply['execution_count']}], line 3" in tb and "v='red'" in tb and "ParameterError: " in tb
    assert "slang_kernel/" not in tb and "Traceback" not in tb


def test_completion_uses_the_session(kernel: Kernel) -> None:
    kernel.ok("struct Light { float3 dir; float power; };\nfloat lum(float3 c) { return c.x; }")
    r = kernel.request("complete", "Light l; l.", 11)
    assert set(r["matches"]) == {"dir", "power"}
    r = kernel.request("complete", "float y = lu", 12)
    assert "lum" in r["matches"] and r["cursor_start"] == 10
    types = {t["text"]: t for t in r["metadata"]["_jupyter_types_experimental"]}
    assert types["lum"]["signature"] == "float lum(float3 c)"
    r = kernel.request("complete", "%run ", 5)
    assert "scale" in r["matches"]
    r = kernel.request("complete", "%run scale ", 11)
    assert {"threads=", "groups=", "buf=", "k="} <= set(r["matches"])
    r = kernel.request("complete", "%%python\nimport nump", 20)
    assert "numpy" in r["matches"]


def test_inspect_gives_signatures_and_types(kernel: Kernel) -> None:
    r = kernel.request("inspect", "float y = lum(c);", 11)
    assert r["found"] and "float lum(float3 c)" in r["data"]["text/plain"]
    r = kernel.request("inspect", "Light l; float p = l.power;", 23)
    assert r["found"] and "float l.power" in r["data"]["text/plain"]
    r = kernel.request("inspect", "Light", 2)
    assert r["found"] and "float3 dir;" in r["data"]["text/plain"]
    r = kernel.request("inspect", "zzz_unknown", 3)
    assert not r["found"]
    r = kernel.request("inspect", "%%python\nlen", 11)
    assert r["found"]


def test_language_server_answers_tab_and_shift_tab(kernel: Kernel) -> None:
    kernel.ok("float cube(float x) { return x * x * x; }")
    kernel.ok("struct Counter { uint n; uint next() { return n + 1; } };")
    # Shift-Tab in a call, in a cell that has not run: the server's signature, naming the cell
    r = kernel.request("inspect", "float e = cube(", 15)
    md = r["data"]["text/markdown"]
    assert r["found"] and "func cube(float x) -> float" in md, md
    assert re.search(r"Defined in In\[\d+\], line 1", md) and "slang-kernel-lsp" not in md, md
    assert "func cube(float x) -> float" in r["data"]["text/plain"] and "```" not in r["data"]["text/plain"]
    # Tab after `.` on a type from an earlier cell: its field and its method
    r = kernel.request("complete", "Counter c; c.", 13)
    assert {"n", "next"} <= set(r["matches"]) and r["cursor_start"] == 13
    # a %%slang cell of the Slang kernel is Slang too
    code = "%%slang\nfloat f = cube("
    r = kernel.request("inspect", code, len(code))
    assert r["found"] and "func cube(float x) -> float" in r["data"]["text/markdown"]


@pytest.mark.slow
def test_interrupting_a_long_cpu_dispatch(kernel: Kernel) -> None:
    kernel.ok('[shader("compute")][numthreads(1, 1, 1)]\n'
              "void spin(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> o, uniform uint n)\n"
              "{ float acc = 0; for (uint i = 0; i < n; i++) { acc += sin(float(i)); } o[t.x] = acc; }")
    kernel.ok("%%python\nimport numpy as np\nspun = np.zeros(2, np.float32)")
    kernel.ok("%run spin threads=(2, 1, 1) o=spun n=1")   # built now: the interrupt meets the dispatch
    worker = _busy(kernel)
    t0 = time.perf_counter()
    reply, out = kernel.execute("%run spin threads=(2, 1, 1) o=spun n=300000000", interrupt_when=worker)
    assert reply["status"] == "error"
    assert reply["ename"] == "KernelInterrupted"
    assert "spin was interrupted after" in reply["evalue"]
    assert "Traceback" not in "".join(reply["traceback"])
    assert time.perf_counter() - t0 < 60
    # the kernel and the session still work
    kernel.ok("float after_interrupt(float x) { return x + 1; }")
    assert kernel.python("float(after_interrupt(1.0))") == "2.0"


def test_restart_gives_a_fresh_session(kernel: Kernel) -> None:
    kernel.ok("float before_restart(float x) { return x; }")
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=TIMEOUT)
    assert kernel.python("'before_restart' in dir()") == "False"
    kernel.ok("float after_restart(float x) { return x * 3; }")
    assert kernel.python("float(after_restart(2.0))") == "6.0"
    assert kernel.python("len(slang_session.cells)") == "1"


def test_magic_extension_keeps_the_kernel_error_display(kernel: Kernel) -> None:
    kernel.ok("%load_ext slang_kernel")
    reply, out = kernel.execute("float still_clean(float x) { return nope; }")
    assert reply["status"] == "error" and reply["ename"] == "SlangCompileError"
    assert [m["msg_type"] for m in out] == ["error"] and "^" in "".join(reply["traceback"])


if __name__ == "__main__":
    unittest.main()


@pytest.mark.slow
def test_a_kernel_bug_never_takes_the_notebook_down(kernel: Kernel) -> None:
    """The isolation issue's scenario, through the Jupyter protocol: an out-of-bounds kernel, an
    endless one stopped by an interrupt, a syntax error; then earlier kernels and buffers still work."""
    kernel.ok('[shader("compute")][numthreads(16, 1, 1)]\n'
              "void triple(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> v) { v[t.x] *= 3; }")
    kernel.ok("%%python\nimport numpy as np\nkept = np.arange(16, dtype=np.float32)")
    kernel.ok('[shader("compute")][numthreads(64, 1, 1)]\n'
              "void scribble(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> o) { o[t.x * 100000000] = 1; }")
    _, out = kernel.execute("%%python\nsmall = np.zeros(4, np.float32)\nscribble(threads=4096, o=small)")
    assert "OutOfRangeWarning" in stream(out, "stderr") and "`o`" in stream(out, "stderr")
    kernel.ok('[shader("compute")][numthreads(1, 1, 1)]\n'
              "void forever(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> o)\n"
              "{ float a = 0; while (o[0] >= 0) { a += 1; if (a > 1e30) o[1] = a; } }")
    # built first (o[0] < 0 ends it at once), so that the interrupt below meets the endless dispatch
    # and not g++ (a loop kernel is built up to three times; an interrupt there is KernelInterrupted
    # too: test_cpu_simd_loops.py)
    kernel.ok("%%python\nforever(threads=1, o=np.array([-1, 0], np.float32))")
    reply, _ = kernel.execute("%%python\nforever(threads=1, o=np.zeros(2, np.float32))", interrupt_when=_busy(kernel))
    assert reply["status"] == "error" and reply["ename"] == "KernelInterrupted"
    reply, _ = kernel.execute("float oops(float x) { return x +; }")
    assert reply["status"] == "error" and any("^" in line for line in reply["traceback"])
    assert kernel.python("triple(threads=16, v=kept); float(kept.sum()), float(kept[5])") == "(360.0, 15.0)"
