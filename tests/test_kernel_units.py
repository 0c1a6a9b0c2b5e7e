"""The Slang kernel's pure parts, without starting a kernel: cell parsing, is_complete, completion,
inspection, %run arguments, the Pygments lexer and the kernelspec install."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slang_kernel.compiler.reflection import DeclInfo, FunctionInfo
from slang_kernel.frontend.kernel.completion import complete, inspect, is_complete, structs_in_text, type_of
from slang_kernel.frontend.kernel.display import SlangKernelError
from slang_kernel.frontend.kernel.source import classify, parse_cell

NAMES = {
    "Particle": DeclInfo("Particle", "struct", "Particle", (("pos", "float3"), ("mass", "float"))),
    "Cloud": DeclInfo("Cloud", "struct", "Cloud", (("center", "Particle"), ("count", "int"))),
    "sqr": DeclInfo("sqr", "function", "float", (), (FunctionInfo("sqr", "float", (("x", "float", "in"),), False),)),
    "scale": DeclInfo("scale", "function", "void", (), (FunctionInfo(
        "scale", "void", (("tid", "uint3", "in"), ("buf", "RWStructuredBuffer<float>", "in"), ("k", "float", "in")),
        False),)),
    "gCloud": DeclInfo("gCloud", "variable", "Cloud"),
}
KERNELS = {"scale"}


# -- is_complete ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [
    "", "float f(float x) { return x; }", "struct S { float a; };", "// {", "/* ( */ int a;",
    'float g() { printf("(}"); return 1; }', "%run k threads=(4, 1, 1) x=a", "%backend cpu\nint a;",
    "char c = '{';",
])
def test_complete(code: str) -> None:
    assert is_complete(code) == {"status": "complete"}


@pytest.mark.parametrize("code, indent", [
    ("float f(float x) {", "    "),
    ("float f(float x) {\n    if (x > 0) {", "        "),
    ("void g(float a,", "    "),
    ("int a[] = { 1, 2,", "    "),
    ("/* still a comment", ""),
    ("#define TWICE(x) \\", "    "),
])
def test_incomplete(code: str, indent: str) -> None:
    assert is_complete(code) == {"status": "incomplete", "indent": indent}


@pytest.mark.parametrize("code", ["}", "float f() { return (1]; }", "int a = 1);", "{ ) }"])
def test_invalid(code: str) -> None:
    assert is_complete(code)["status"] == "invalid"


# -- cells ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, kind", [
    ("float f();", "slang"),
    ("%%python\nx = 1", "python"),
    ("\n%%py\nx = 1", "python"),
    ("%%timeit\nx = 1", "ipython"),
    ("%matplotlib inline", "ipython"),
    ("%backend cpu\nfloat f();", "slang"),
    ("%run k threads=1", "slang"),
    ("%run helpers.py", "ipython"),
    ("%run -i setup.ipynb", "ipython"),
    ("%show hlsl f", "slang"),
    ("!ls", "ipython"),
    ("#include \"x.slang\"\nfloat f();", "slang"),
])
def test_classify(code: str, kind: str) -> None:
    assert classify(code) == kind


def test_magic_lines_are_blanked_so_line_numbers_stay() -> None:
    p = parse_cell("%backend cpu\nfloat f() { return 1; }\n%run k threads=4 a=b\n/*\n%run not_a_magic\n*/\n")
    assert [(m.name, m.args, m.line) for m in p.magics] == [("backend", "cpu", 1), ("run", "k threads=4 a=b", 3)]
    assert p.source.splitlines()[1] == "float f() { return 1; }"
    assert p.source.splitlines()[0] == "" and "%run not_a_magic" in p.source
    assert parse_cell("%run k threads=1\n// only a comment").has_slang is False


def test_python_cell_keeps_its_line_numbers() -> None:
    p = parse_cell("%%python\nx = 1\ny = 2")
    assert p.kind == "python" and p.source.splitlines() == ["# %%python", "x = 1", "y = 2"]


def test_parse_run_args() -> None:
    from slang_kernel.frontend.kernel.kernel import parse_run_args

    assert parse_run_args("threads=(n, 1, 1) out=a scale=2 * k") == [
        ("threads", "(n, 1, 1)"), ("out", "a"), ("scale", "2 * k")]
    assert parse_run_args("threads=8, x=f(a=1, b='x=y') y=d['k=v']") == [
        ("threads", "8"), ("x", "f(a=1, b='x=y')"), ("y", "d['k=v']")]
    assert parse_run_args("a=b == c") == [("a", "b == c")]
    assert parse_run_args("") == []
    with pytest.raises(SlangKernelError):
        parse_run_args("oops threads=1")
    with pytest.raises(SlangKernelError):
        parse_run_args("threads=")


# -- completion -----------------------------------------------------------------------------------------

def _matches(code: str, pos: int | None = None) -> list[str]:
    return complete(code, len(code) if pos is None else pos, NAMES, KERNELS).matches


def test_complete_names_keywords_types_intrinsics() -> None:
    assert _matches("sq") == ["sqr", "sqrt"]
    assert "RWStructuredBuffer" in _matches("RWStr")
    assert "return" in _matches("ret")
    assert "Particle" in _matches("Par")
    assert "Differentiable" in _matches("[Diff")
    assert "SV_DispatchThreadID" in _matches("SV_Disp")
    r = complete("float y = sq", 12, NAMES, KERNELS)
    assert (r.start, r.end) == (10, 12)
    types = {t["text"]: t for t in r.types}
    assert types["sqr"]["signature"] == "float sqr(float x)" and types["sqr"]["type"] == "function"


@pytest.mark.parametrize("code, expected", [
    ("Particle p; p.", {"pos", "mass"}),
    ("Particle p; p.m", {"mass"}),
    ("void f(in Particle q, float w) { q.", {"pos", "mass"}),
    ("void f(inout Cloud c) { c.center.", {"pos", "mass"}),
    ("void f(Cloud c) { c.center.pos.", {"x", "y", "z", "r", "g", "b"}),
    ("gCloud.", {"center", "count"}),
    ("void k(RWStructuredBuffer<Particle> ps) { ps[3].", {"pos", "mass"}),
    ("float4 c; c.", {"x", "y", "z", "w", "r", "g", "b", "a"}),
    ("vector<float, 2> v; v.", {"x", "y", "r", "g"}),
    ("struct Local { float a; int3 b[2]; float m() { return a; } };\nLocal l; l.", {"a", "b"}),
    ("unknown_thing.", set()),
])
def test_member_completion(code: str, expected: set[str]) -> None:
    assert set(_matches(code)) == expected


def test_magic_completion() -> None:
    assert _matches("%b") == ["%backend"]
    assert _matches("%backend ") == ["auto", "cpu", "cuda", "vulkan"]
    assert "hlsl" in _matches("%show ")
    assert set(_matches("%show hlsl ")) == {"sqr", "scale"}
    assert _matches("%run ") == ["scale"]
    assert set(_matches("%run scale ")) == {"threads=", "groups=", "buf=", "k="}
    assert complete("%run scale b", 12, NAMES, KERNELS, kernel_params=lambda k: ["buf", "gScale"]).matches == ["buf="]


def test_structs_in_text() -> None:
    s = structs_in_text("struct A { float x, y; [mutating] void f() { x = 1; } int3 n[4]; static const int K = 2; };")
    assert s == {"A": (("x", "float"), ("y", "float"), ("n", "int3"), ("K", "int"))}
    assert type_of("a.n[1]", "A a;", 3, {}, s) == "int"


# -- inspection -----------------------------------------------------------------------------------------

def test_inspect() -> None:
    text = inspect("float y = sqr(2);", 12, NAMES, KERNELS, owner=lambda n: "In[1]")
    assert text.splitlines()[:2] == ["function sqr  (defined in In[1])", "    float sqr(float x)"]
    text = inspect("scale", 3, NAMES, KERNELS)
    assert "compute kernel scale" in text and "%run scale threads=(N, 1, 1) buf=... k=..." in text
    assert inspect("Particle p; p.pos", 16, NAMES, KERNELS) == "float3 p.pos"
    assert inspect("Particle", 3, NAMES, KERNELS) == "struct Particle\n{\n    float3 pos;\n    float mass;\n}"
    assert inspect("float3 v = normalize(x);", 14, NAMES, KERNELS) == "normalize: Slang intrinsic function"
    assert inspect("float3 v;", 3, NAMES, KERNELS).startswith("float3: Slang built-in type (vector of 3 float)")
    assert inspect("sqr(", 4, NAMES, KERNELS).startswith("function sqr")
    assert inspect("Particle p; p", 13, NAMES, KERNELS).startswith("Particle p\n    float3 pos")
    assert inspect("nothing_here", 3, NAMES, KERNELS) is None


# -- lexer ----------------------------------------------------------------------------------------------

def test_lexer_has_no_error_tokens() -> None:
    from pygments.token import Error, Keyword, Name

    from slang_kernel.frontend.kernel.lexer import SlangLexer

    src = (Path(__file__).parent / "notebooks" / "slang_kernel_demo.ipynb").read_text()
    cells = [c for c in json.loads(src)["cells"] if c["cell_type"] == "code"]
    for cell in cells:
        tokens = list(SlangLexer().get_tokens("".join(cell["source"])))
        assert not [t for t in tokens if t[0] in Error], cell["source"]
    tokens = list(SlangLexer().get_tokens('[Differentiable] float f(float3 x) { return sqrt(dot(x, x)); }\n%run k threads=1\n'))
    kinds = {v: t for t, v in tokens}
    assert kinds["Differentiable"] is Name.Decorator and kinds["float3"] is Keyword.Type
    assert kinds["sqrt"] is Name.Builtin and kinds["%run"] is Keyword.Pseudo and kinds["return"] is Keyword


def test_lexer_is_found_by_pygments_once_registered() -> None:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name("slang")
    except ClassNotFound:
        pytest.skip("the pygments.lexers entry point is not installed (pyproject: slang = slang_kernel.frontend.kernel.lexer:SlangLexer)")
    assert lexer.name == "Slang"


# -- kernelspec -----------------------------------------------------------------------------------------

def test_language_info() -> None:
    from slang_kernel.frontend.kernel import LANGUAGE_INFO

    assert LANGUAGE_INFO["name"] == "slang" and LANGUAGE_INFO["mimetype"] == "text/x-slang"
    assert LANGUAGE_INFO["file_extension"] == ".slang" and LANGUAGE_INFO["pygments_lexer"] == "slang"


def test_logos_ship_with_the_package() -> None:
    from PIL import Image

    from slang_kernel.frontend.kernel.install import RESOURCES

    for size in (32, 64):
        with Image.open(RESOURCES / f"logo-{size}x{size}.png") as im:
            assert im.size == (size, size)


def test_install_into_a_prefix(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "slang_kernel", "install", "--prefix", str(tmp_path),
                          "--backend", "cpu"], capture_output=True, text=True, check=True)
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "slang"
    assert str(spec_dir) in out.stdout
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["argv"][1:] == ["-m", "slang_kernel.frontend.kernel", "-f", "{connection_file}"]
    assert spec["display_name"] == "Slang" and spec["language"] == "slang"
    assert spec["env"] == {"SLANG_KERNEL_BACKEND": "cpu"}
    assert (spec_dir / "logo-32x32.png").exists() and (spec_dir / "logo-64x64.png").exists()
    # the Slang highlighting for JupyterLab goes next to it, complete (its entry file is there)
    ext = tmp_path / "share" / "jupyter" / "labextensions" / "slang-kernel-syntax"
    meta = json.loads((ext / "package.json").read_text())
    assert (ext / meta["jupyterlab"]["_build"]["load"]).is_file()
    assert not [p for p in ext.parent.iterdir() if p.name.startswith(".tmp-")]  # staged copy moved in


def test_main_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    from slang_kernel.__main__ import main

    assert main(["install", "--prefix", str(tmp_path), "--name", "slang-test", "--display-name", "Slang (test)"]) == 0
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    spec = KernelSpecManager().get_kernel_spec("slang-test")
    assert spec.display_name == "Slang (test)" and spec.language == "slang"
    assert (tmp_path / "share" / "jupyter" / "labextensions" / "slang-kernel-syntax").is_dir()
    assert main(["uninstall", "--name", "slang-test"]) == 0
    assert "Removed" in capsys.readouterr().out
    assert not (tmp_path / "share" / "jupyter" / "labextensions" / "slang-kernel-syntax").exists()
    with pytest.raises(SystemExit):
        main([])


def test_install_scopes_are_exclusive() -> None:
    from slang_kernel.frontend.kernel.install import install

    with pytest.raises(ValueError):
        install(user=True, prefix="/tmp/x")


def test_module_has_no_ipykernel_import_cost() -> None:
    code = "import sys, slang_kernel.frontend.kernel; print('ipykernel' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"

