"""widgets/_esm.py: a widget's front end and the sibling modules it imports become one ES module
(anywidget loads it from a blob URL, where relative imports cannot resolve)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from slang_kernel.widgets._esm import bundle_esm

NODE = shutil.which("node")
WIDGETS = ["buffer_view.js", "gradient_flow.js", "image_view.js", "ir_graph.js"]


def _write(folder: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


def _run(tmp_path: pathlib.Path, js: str) -> str:
    if NODE is None:
        pytest.skip("no node on PATH")
    bundle = tmp_path / "bundle.mjs"
    bundle.write_text(js)
    return subprocess.run([NODE, str(bundle)], capture_output=True, text=True, check=True).stdout


def test_nested_imports_are_inlined_before_their_users(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, {
        "main.js": 'import { twice } from "./_mid.js";\nconsole.log(twice(21));\nexport default {};\n',
        "_mid.js": 'import { one } from "./_low.js";\nexport function twice(x) { return 2 * x * one; }\n',
        "_low.js": "export const one = 1;\n",
    })
    js = bundle_esm("main.js", tmp_path)
    assert "import" not in js and js.count("export") == 1
    assert js.index("const one") < js.index("function twice") < js.index("console.log")
    assert _run(tmp_path, js) == "42\n"


def test_a_module_imported_twice_is_inlined_once(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, {
        "main.js": 'import { a } from "./_a.js";\nimport { b, B } from "./_b.js";\nconsole.log(a() + b() + new B().v);\n',
        "_a.js": 'import { base } from "./_base.js";\nexport function a() { return base; }\n',
        "_b.js": 'import { base } from "./_base.js";\nexport function b() { return base; }\nexport class B { v = 1; }\n',
        "_base.js": "export let base = 10;\n",
    })
    js = bundle_esm("main.js", tmp_path)
    assert js.count("let base") == 1
    assert _run(tmp_path, js) == "21\n"


@pytest.mark.parametrize("main,module,error", [
    ('import { x } from "./_gone.js";\n', None, "cannot inline ./_gone.js: no such module"),
    ('import { x, y } from "./_m.js";\n', "export const x = 1;\n", "./_m.js does not export y"),
    ('import m from "./_m.js";\n', "export const x = 1;\n", "cannot inline 'import m from"),
    ('import { x as y } from "./_m.js";\n', "export const x = 1;\n", "cannot inline 'import { x as y }"),
    ('import { x } from "./m.js";\n', "export const x = 1;\n", "cannot inline 'import { x } from \"./m.js\""),
    ('import { x } from "./_m.js";\n', "const x = 1;\nexport { x };\n", "./_m.js does not export x"),
    ('import { x } from "./_m.js";\n', "export const x = 1;\nexport default x;\n", "_m.js: cannot inline 'export default"),
])
def test_an_import_it_cannot_inline_is_a_clear_error(tmp_path: pathlib.Path, main: str, module: str | None,
                                                     error: str) -> None:
    _write(tmp_path, {"main.js": main} if module is None else {"main.js": main, "_m.js": module, "m.js": module})
    with pytest.raises(ValueError, match=re.escape(error)):
        bundle_esm("main.js", tmp_path)


@pytest.mark.parametrize("widget", WIDGETS)
def test_every_widget_bundles_to_one_valid_module(tmp_path: pathlib.Path, widget: str) -> None:
    js = bundle_esm(widget)
    assert [line for line in js.splitlines() if line.startswith(("import ", "export "))] == ["export default { render };"]
    assert js.count("const dagre = ") == (widget in ("gradient_flow.js", "ir_graph.js"))
    if NODE is None:
        pytest.skip("no node on PATH")
    (tmp_path / "bundle.mjs").write_text(js)
    subprocess.run([NODE, "--check", str(tmp_path / "bundle.mjs")], check=True)


def test_every_widget_sheet_starts_with_the_shared_reset_scoped_to_its_root() -> None:
    """Each widget's `_css` is widgets/_reset.css (the browser's defaults back under marimo's page
    reset, tests/browser/test_marimo_browser.py) and then its own sheet; the reset's selector names the
    root class of every widget (the first rule of its sheet), so a new widget left out of it fails here."""
    from slang_kernel.widgets import BufferView, GradientFlow, ImageView, IRGraph

    folder = pathlib.Path(bundle_esm.__code__.co_filename).parent
    reset = (folder / "_reset.css").read_text()
    scopes = [{s.strip() for s in m.split(",")}
              for m in re.findall(r":where\((\.sk-[^)]*)\)", re.sub(r"/\*.*?\*/", "", reset, flags=re.S))]
    roots = scopes[0]
    assert len(scopes) >= 3 and all(s == roots for s in scopes), scopes   # each rule scoped alike
    for widget, sheet in [(BufferView, "buffer_view.css"), (GradientFlow, "gradient_flow.css"),
                          (ImageView, "image_view.css"), (IRGraph, "ir_graph.css")]:
        own = (folder / sheet).read_text()
        assert widget._css == reset + own, widget.__name__
        root = re.match(r"\s*(\.[\w-]+)\s*\{", own)
        assert root is not None and root.group(1) in roots, (sheet, roots)
