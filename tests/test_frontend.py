"""slang_kernel.frontend, the controller under `%%slang` and the Slang kernel: cell names follow the
prompt, names are bound and unbound, errors show the user's own lines.

Driven through a real IPython shell with the real compiler (cells run with store_history=True, as a
notebook runs them, so prompts count up), and at the end as a user journey: a Python-kernel notebook
executed by nbclient.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

from slang_kernel.frontend import FrontEnd

KERNEL = """[shader("compute")][numthreads(4, 1, 1)]
void fill(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> out, uniform float value)
{
    out[t.x] = value;
}
"""


@pytest.fixture()
def shell(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    monkeypatch.setenv("SLANG_KERNEL_BACKEND", "cpu")
    sh = InteractiveShell()
    sh.run_line_magic("load_ext", "slang_kernel")
    yield sh
    s = sh.user_ns.get("slang_session")
    if s is not None:
        s.close()
    InteractiveShell.clear_instance()


def run(sh: InteractiveShell, code: str, cell_id: str | None = None) -> ExecutionResult:
    """One notebook cell: stored in history, so the prompt counts up as in Jupyter."""
    return sh.run_cell(code, store_history=True, cell_id=cell_id)


def output(capsys: pytest.CaptureFixture[str]) -> str:
    got = capsys.readouterr()
    return got.out + got.err


# -- naming ---------------------------------------------------------------------------------------------

def test_a_cell_is_named_by_its_prompt(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "x = 1")
    r = run(shell, "%%slang\nfloat twice(float x) { return 2 * x; }\n", cell_id="c-a")
    assert r.success and r.execution_count == 2
    assert shell.user_ns["slang_session"].cells == ("In[2]",)
    assert "In[2]: compiled in" in output(capsys)
    r = run(shell, "%%slang\nfloat f(float x)\n{\n    return x + undefined_thing;\n}\n", cell_id="c-b")
    assert not r.success and r.execution_count == 3
    err = output(capsys)
    assert "In[3]:4:16: error E30015" in err and "return x + undefined_thing;" in err
    assert "Traceback" not in err and "session.py" not in err


def test_an_overload_is_announced_and_both_forms_are_callable(shell: InteractiveShell,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "x = 1")
    run(shell, "%%slang\nfloat f(float a, float b) { return a * 10 + b; }\n", cell_id="two")   # In[2]
    capsys.readouterr()
    r = run(shell, "%%slang\nfloat f(float a) { return a + 100; }\n", cell_id="one")            # In[3]
    assert r.success
    assert "adds an overload of f (In[2] has f(float, float))" in output(capsys)
    f = shell.user_ns["f"]
    assert float(f(1.0, 2.0)) == 12.0 and float(f(1.0)) == 101.0


def test_cells_without_a_cell_id_are_named_too(shell: InteractiveShell) -> None:
    run(shell, "%%slang\nfloat a_fn(float x) { return x; }\n")
    run(shell, "%%slang\nfloat b_fn(float x) { return x; }\n")
    assert shell.user_ns["slang_session"].cells == ("In[1]", "In[2]")


def test_an_explicit_name_is_kept(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%%slang lib\nfloat k(float x)\n{\n    return x + nope;\n}\n", cell_id="c-a")
    assert "lib:4:16: error" in output(capsys)
    run(shell, "%%slang lib\nfloat k(float x) { return x + 1; }\n", cell_id="c-a")
    assert shell.user_ns["slang_session"].cells == ("lib",)


def test_a_rerun_is_named_by_its_new_prompt(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%%slang\nfloat base(float x) { return x + 1; }\n", cell_id="lib")              # [1]
    run(shell, "%%slang\nfloat user(float x) { return base(x) * 10; }\n", cell_id="user")     # [2]
    for _ in range(4):
        run(shell, "pass")                                                                      # [3]..[6]
    capsys.readouterr()
    r = run(shell, "%%slang\nfloat base(float x)\n{\n    return x + oops;\n}\n", cell_id="lib")
    assert r.execution_count == 7 and not r.success
    err = output(capsys)
    assert "In[7]:4:16: error E30015: undefined identifier 'oops'" in err
    assert "In[7] did not compile" in err and "In[1]" not in err
    # the last good revision still works, under the same session cell (position and users kept)
    session = shell.user_ns["slang_session"]
    assert session.cells == ("In[1]", "In[2]")
    assert float(shell.user_ns["user"](np.float32(1))) == 20.0
    r = run(shell, "%%slang\nfloat base(float x) { return x + 2; }\n", cell_id="lib")
    assert r.success and r.execution_count == 8
    out = output(capsys)
    assert "In[8]: compiled in" in out and "recompiled after this change: In[2]" in out
    assert session.cells == ("In[1]", "In[2]")
    assert float(shell.user_ns["user"](np.float32(1))) == 30.0
    # a later error that names the re-run cell names its newest prompt
    run(shell, "%%slang\nfloat base(float x) { return x + broken; }\n", cell_id="lib")          # [9]
    assert "In[9]:2:" in output(capsys)
    fe = FrontEnd.of(shell)
    assert fe.label("In[1]") == "In[9]" and fe.resolve("In[9]") == "In[1]"


def test_the_prompt_inside_a_magic_is_the_one_shown(shell: InteractiveShell) -> None:
    """IPython counts up before the cell runs: during the magic execution_count is one ahead."""
    run(shell, "seen = []")
    r = run(shell, "seen.append(get_ipython().execution_count)\n"
                   "get_ipython().run_cell_magic('slang', '', 'float probe(float x) { return x; }')")
    assert r.success
    assert shell.user_ns["seen"] == [r.execution_count + 1]
    assert shell.user_ns["slang_session"].cells == (f"In[{r.execution_count}]",)


def test_gaining_an_explicit_name_moves_the_cell_and_a_failure_restores_it(shell: InteractiveShell) -> None:
    run(shell, "%%slang\nfloat moved(float x) { return x * 2; }\n", cell_id="c")
    session = shell.user_ns["slang_session"]
    assert not run(shell, "%%slang named\nfloat moved(float x) { return x * nope; }\n", cell_id="c").success
    assert session.cells == ("In[1]",) and float(shell.user_ns["moved"](np.float32(2))) == 4.0
    assert run(shell, "%%slang named\nfloat moved(float x) { return x * 3; }\n", cell_id="c").success
    assert session.cells == ("named",) and float(shell.user_ns["moved"](np.float32(2))) == 6.0


# -- binding --------------------------------------------------------------------------------------------

def test_binding_follows_the_cell(shell: InteractiveShell) -> None:
    run(shell, "%%slang\n" + KERNEL + "float helper(float x) { return x; }\nfloat gone(float x) { return x; }\n",
        cell_id="c")
    ns = shell.user_ns
    assert type(ns["fill"]).__name__ == "ComputeKernel" and type(ns["helper"]).__name__ == "SlangFunction"
    run(shell, "helper = 'mine'")
    run(shell, "%%slang\n" + KERNEL, cell_id="c")
    assert "gone" not in ns                    # the re-run cell no longer defines it
    assert ns["helper"] == "mine"              # the user's own value is left alone
    run(shell, "%%slang --no-export\nfloat hidden(float x) { return x; }\n")
    assert "hidden" not in ns and "hidden" in ns["slang_session"].functions()


def test_a_name_another_cell_still_defines_stays_bound(shell: InteractiveShell) -> None:
    run(shell, "%%slang\nfloat shared_fn(float x) { return x + 1; }\n", cell_id="a")
    run(shell, "%%slang\nfloat shared_fn(float2 x) { return x.x; }\n", cell_id="b")
    run(shell, "%%slang\nfloat other_fn(float x) { return x; }\n", cell_id="b")
    assert float(shell.user_ns["shared_fn"](np.float32(1))) == 2.0


def test_defines_reach_the_cell(shell: InteractiveShell) -> None:
    r = run(shell, "%%slang -D SCALE=3 -D TWICE\nfloat scaled(float x) {\n#ifdef TWICE\n"
                   "    return x * SCALE * 2;\n#else\n    return x;\n#endif\n}\n")
    assert r.success, r.error_in_exec
    assert float(shell.user_ns["scaled"](np.float32(1))) == 6.0


# -- errors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["--bogus", "--backend warp", "--show klingon", "-D =3", "-D 2X=1", "'unclosed"])
def test_usage_errors_are_ipython_usage_errors(shell: InteractiveShell, line: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    r = run(shell, f"%%slang {line}\nfloat u(float x) {{ return x; }}\n")
    assert isinstance(r.error_in_exec, UsageError)
    err = output(capsys)
    assert "UsageError" in err and "Traceback" not in err
    assert "slang_session" not in shell.user_ns or not shell.user_ns["slang_session"].cells


def test_a_bad_argument_shows_the_users_line_not_library_frames(shell: InteractiveShell,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%%slang\n" + KERNEL)
    run(shell, "import numpy as np\nbuf = np.zeros(4, np.float32)")
    capsys.readouterr()
    r = run(shell, "def go(b):\n    fill(threads=4, out=b, value='bright')\n\ngo(buf)\n")
    assert type(r.error_in_exec).__name__ == "ParameterError"
    err = output(capsys)
    assert f"Cell In[{r.execution_count}], line 4" in err and "    go(buf)" in err
    assert f"Cell In[{r.execution_count}], line 2, in go" in err and "fill(threads=4, out=b, value='bright')" in err
    assert "ParameterError: " in err and "value" in err
    assert "slang_kernel/" not in err and "Traceback" not in err and "interactiveshell" not in err


def test_a_kernel_that_does_not_compile_for_the_target_shows_diagnostics(shell: InteractiveShell,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, '%%slang\n[shader("compute")][numthreads(4, 1, 1)]\n'
               "void barrier_k(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> o)\n"
               "{\n    GroupMemoryBarrierWithGroupSync();\n    o[t.x] = 1;\n}\n")
    capsys.readouterr()
    r = run(shell, "import numpy as np\nbarrier_k(threads=4, o=np.zeros(4, np.float32))")
    if r.success:
        pytest.skip("this compiler builds group barriers for the CPU target")
    err = output(capsys)
    assert "SlangCompileError" in type(r.error_in_exec).__name__ or "did not compile" in err
    assert "Traceback" not in err and "slang_kernel/" not in err


def test_one_controller_per_shell(shell: InteractiveShell) -> None:
    fe = FrontEnd.of(shell)
    assert FrontEnd.of(shell) is fe
    shell.run_line_magic("load_ext", "slang_kernel")
    assert FrontEnd.of(shell) is fe


# -- the journey: a Python notebook, executed the way JupyterLab does it --------------------------------

def _error(cell: Any) -> dict[str, Any]:
    errors = [o for o in cell.outputs if o["output_type"] == "error"]
    assert len(errors) == 1, cell.outputs
    return errors[0]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_journey_in_a_python_notebook(cache_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_kernel_notebook import LabLikeClient

    monkeypatch.setenv("SLANG_KERNEL_CACHE_DIR", cache_dir)
    monkeypatch.setenv("SLANG_KERNEL_BACKEND", "cpu")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    cells = [
        "%load_ext slang_kernel\nimport numpy as np",
        "%%slang\n" + KERNEL,
        "%%slang\nfloat scale(float x)\n{\n    return x * factor;\n}\n",
        "buf = np.zeros(4, np.float32)\nfill(threads=4, out=buf, value=2.5)\nprint(buf.tolist())",
        "fill(threads=4, out=buf, value='two')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = LabLikeClient(nb, kernel_name="python3", timeout=300, allow_errors=True,
                           resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel():
        client._patch_client()
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        good, bad, use, wrong = nb.cells[1], nb.cells[2], nb.cells[3], nb.cells[4]
        assert f"In[{good.execution_count}]: compiled in" in good.outputs[0]["data"]["text/plain"]
        err = _error(bad)
        assert err["ename"] == "SlangCompileError"
        text = ANSI.sub("", "\n".join(err["traceback"]))
        assert f"In[{bad.execution_count}]:4:16: error E30015" in text and "return x * factor;" in text
        assert "Traceback" not in text
        assert "[2.5, 2.5, 2.5, 2.5]" in use.outputs[0]["text"]
        err = _error(wrong)
        text = ANSI.sub("", "\n".join(err["traceback"]))
        assert err["ename"] == "ParameterError" and "value" in err["evalue"]
        assert f"Cell In[{wrong.execution_count}], line 1" in text and "fill(threads=4, out=buf, value='two')" in text
        assert "slang_kernel/" not in text and "Traceback" not in text
        # edit the broken cell: still broken, now at a new prompt ...
        bad.source = "%%slang\nfloat scale(float x)\n{\n    return x * still_missing;\n}\n"
        client.execute_cell(bad, 2)
        text = ANSI.sub("", "\n".join(_error(bad)["traceback"]))
        assert f"In[{bad.execution_count}]:4:16: error E30015" in text
        # ... then fixed; re-running the good cell replaces it in place
        bad.source = "%%slang\nfloat scale(float x)\n{\n    return x * 4;\n}\n"
        client.execute_cell(bad, 2)
        assert f"In[{bad.execution_count}]: compiled in" in bad.outputs[0]["data"]["text/plain"]
        client.execute_cell(good, 1)
        assert f"In[{good.execution_count}]: compiled in" in good.outputs[0]["data"]["text/plain"]
        probe = nbformat.v4.new_code_cell("print(len(slang_session.cells), float(scale(np.float32(2))))")
        nb.cells.append(probe)
        client.execute_cell(probe, len(nb.cells) - 1)
        assert probe.outputs[0]["text"].split() == ["2", "8.0"]
