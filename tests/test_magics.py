"""The %%slang magic driven through a real IPython InteractiveShell."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture()
def shell(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    sh = InteractiveShell()
    sh.run_line_magic("load_ext", "slang_kernel")
    sh.run_line_magic("slang_backend", "cpu")
    yield sh
    sh.user_ns["slang_session"].close()
    InteractiveShell.clear_instance()


def test_cell_binds_kernels_and_functions(shell: InteractiveShell) -> None:
    r = shell.run_cell("%%slang\n[Differentiable] float sq(float x) { return x * x; }\n")
    assert r.success
    r = shell.run_cell("""%%slang
[shader("compute")][numthreads(32, 1, 1)]
void grad_sq(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> g, uniform StructuredBuffer<float> x)
{
    var p = diffPair(x[t.x]);
    bwd_diff(sq)(p, 1.0);
    g[t.x] = p.d;
}
""")
    assert r.success
    shell.run_cell("import numpy as np\nx = np.arange(32, dtype=np.float32)\ng = np.zeros(32, np.float32)\n"
                   "grad_sq(threads=32, g=g, x=x)\ny = sq(x)")
    np.testing.assert_allclose(shell.user_ns["g"], 2 * np.arange(32))
    np.testing.assert_allclose(shell.user_ns["y"], np.arange(32) ** 2)


def test_compile_error_shows_caret_without_traceback(shell: InteractiveShell,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    r = shell.run_cell("%%slang bad\nfloat f(float x)\n{\n    return x + undefinedThing;\n}\n")
    assert not r.success
    captured = capsys.readouterr()
    err = captured.out + captured.err
    assert "bad:4:16: error E30015" in err  # the editor's line: `%%slang` is line 1
    assert "    return x + undefinedThing;" in err and "^^^^^^^^^^^^^^" in err
    assert "Traceback" not in err and "session.py" not in err


def test_show_targets(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    r = shell.run_cell("""%%slang --show hlsl,cuda
[shader("compute")][numthreads(4, 1, 1)]
void shown(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x] = 1; }
""")
    assert r.success
    out = capsys.readouterr().out
    assert "numthreads" in out and "__global__" in out


def test_rerun_same_name_replaces(shell: InteractiveShell) -> None:
    shell.run_cell("%%slang lib\nfloat k(float x) { return x + 1; }\n")
    shell.run_cell("%%slang user\nfloat use_k(float x) { return k(x) * 10; }\n")
    assert shell.run_cell("import numpy as np; r1 = use_k(np.float32(1))").success
    shell.run_cell("%%slang lib\nfloat k(float x) { return x + 2; }\n")
    shell.run_cell("r2 = use_k(np.float32(1))")
    assert (shell.user_ns["r1"], shell.user_ns["r2"]) == (20.0, 30.0)


def test_compiler_crash_is_a_cell_error(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_session import SEED_CRASH

    shell.run_cell("%%slang\nfloat ok_fn(float x) { return x * 4; }\n")
    r = shell.run_cell("%%slang\n" + SEED_CRASH)
    assert not r.success
    captured = capsys.readouterr()
    assert "the Slang compiler crashed while compiling" in captured.out + captured.err
    assert shell.run_cell("%%slang\nfloat next_fn(float x) { return ok_fn(x) + 1; }\n").success
    shell.run_cell("import numpy as np; v = next_fn(np.float32(1))")
    assert shell.user_ns["v"] == 5.0


def test_time_and_ir_flags(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    r = shell.run_cell("""%%slang --time --ir
[shader("compute")][numthreads(4, 1, 1)]
void timed(uint3 t: SV_DispatchThreadID, uniform RWStructuredBuffer<float> o) { o[t.x] = 2; }
""")
    assert r.success
    out = capsys.readouterr().out
    assert "timed: cpp code in" in out and " ms" in out
    assert ": checked in " in out and ("in the compiler" in out or "from the compile cache" in out)
    assert "timed" in out.split("timed: cpp code in", 1)[1]  # the IR, after the timing line


def test_usage_errors_are_usage_errors(shell: InteractiveShell) -> None:
    from IPython.core.error import UsageError

    for line in ("%%slang --nope", "%%slang -D", "%%slang --show klingon"):
        r = shell.run_cell(line + "\nfloat never(float x) { return x; }\n")
        assert isinstance(r.error_in_exec, UsageError), line
    r = shell.run_line_magic("slang_session", "")
    assert "never" not in r.functions()


def test_ir_and_grad_magics_on_a_playground_cell(shell: InteractiveShell) -> None:
    """`import playground;` cells: the IR and gradient views build their requests through the session,
    with its module search path (they once failed with "cannot open file 'playground.slang'")."""
    r = shell.run_cell("""%%slang pg_ir
import playground;
[Differentiable] float soft(float x) { return x * x * 0.5; }
[playground::ZEROS(8)] RWStructuredBuffer<float> outputBuffer;
[shader("compute")][numthreads(8, 1, 1)][playground::CALL(8, 1, 1)]
void computeMain(uint3 t: SV_DispatchThreadID) { outputBuffer[t.x] = soft(t.x); }
""")
    assert r.success, r.error_in_exec
    from slang_kernel.widgets import GradientFlow, IRGraph

    graph = shell.run_line_magic("slang_ir", "soft")
    assert isinstance(graph, IRGraph) and "soft" in str(graph.data)
    assert isinstance(shell.run_line_magic("slang_ir", "pg_ir"), IRGraph)
    flow = shell.run_line_magic("slang_grad", "soft 2.0")
    assert isinstance(flow, GradientFlow)


def test_slang_profile_prints_the_last_edits_phases(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_line_magic("slang_profile", "")
    assert "no Slang cell has run in this session yet" in capsys.readouterr().out
    assert shell.run_cell("%%slang a\nfloat p0(float x) { return x; }\n").success
    assert shell.run_cell("%%slang b\nfloat p1(float x) { return p0(x) + 1; }\n").success
    assert shell.run_cell("%%slang c\nfloat p2(float x) { return p1(x) * 2; }\n").success
    assert shell.run_cell("%%slang a\nfloat p0(float x, float y = 0) { return x + y; }\n").success   # a signature edit
    capsys.readouterr()
    shell.run_line_magic("slang_profile", "")
    out = capsys.readouterr().out
    assert "rechecked after its interface changed: b\n" in out, out   # c: cut off (b's interface held)
    assert "parse/check" in out and "transport (ipc)" in out and "per checked cell" in out
