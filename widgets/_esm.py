"""Each widget's front end as one ES module: anywidget loads a single module from a blob URL, so
relative imports cannot resolve. A widget's module may import named functions, constants and classes
from sibling modules (``import { a, b } from "./_name.js";``; exported one name per declaration,
``export function a``, ``export const b = ...``) and the vendored dagre
(``import dagre from "./vendor/dagre.esm.js";``): each import is replaced by that module's code, its
own imports inlined the same way, every module once per bundle."""

from __future__ import annotations

import pathlib
import re
from typing import Any

__all__ = ["bundle_css", "bundle_esm"]

HERE = pathlib.Path(__file__).parent
_DAGRE = "vendor/dagre.esm.js"
_RESET = "_reset.css"
_DAGRE_IMPORT = re.compile(r'^import dagre from "\./vendor/dagre\.esm\.js";[ \t]*\n?', re.M)
_LOCAL_IMPORT = re.compile(r'^import \{\s*([\w$]+(?:\s*,\s*[\w$]+)*)\s*,?\s*\} from "\./(_[\w-]+\.js)";[ \t]*\n?', re.M)
_ANY_IMPORT = re.compile(r"^import\b.*$", re.M)
_EXPORT_DECL = re.compile(r"^export (?=(?:async )?function\b|const\b|let\b|class\b)", re.M)
_EXPORT_NAME = re.compile(r"^export (?:async )?(?:function\*?|const|let|class) +([\w$]+)", re.M)
_ANY_EXPORT = re.compile(r"^export\b.*$", re.M)
_EXPORT = re.compile(r"export\s*\{([^}]*)\}\s*;?")


def _dagre() -> str:
    vendor = (HERE / _DAGRE).read_text(encoding="utf-8")
    m = _EXPORT.search(vendor)
    if m is None:  # pragma: no cover - a different dagre build
        raise RuntimeError("vendor/dagre.esm.js: no export statement found")
    default = next(p.split(" as ")[0].strip() for p in m.group(1).split(",") if p.strip().endswith(" as default"))
    body = vendor[: m.start()] + vendor[m.end():]
    return f"const dagre = (() => {{\n{body}\nreturn {default};\n}})();\n"


def _inline(name: str, js: str, folder: pathlib.Path, done: set[str]) -> str:
    """`js`, the text of `folder`/`name`, with its imports replaced by the code of the modules not in
    `done` yet (which this adds to `done`)."""
    left = _ANY_IMPORT.search(_DAGRE_IMPORT.sub("", _LOCAL_IMPORT.sub("", js)))
    if left:
        raise ValueError(f"{name}: cannot inline {left.group(0)!r} "
                         '(only `import { a, b } from "./_name.js";` and the vendored dagre)')

    def local(m: re.Match[str]) -> str:
        dep, path = m.group(2), folder / m.group(2)
        if not path.is_file():
            raise ValueError(f"{name}: cannot inline ./{dep}: no such module in {folder}")
        text = path.read_text(encoding="utf-8")
        missing = {n.strip() for n in m.group(1).split(",")} - set(_EXPORT_NAME.findall(text))
        if missing:
            raise ValueError(f"{name}: ./{dep} does not export {', '.join(sorted(missing))}")
        text = _EXPORT_DECL.sub("", text)
        left = _ANY_EXPORT.search(text)
        if left:
            raise ValueError(f"{dep}: cannot inline {left.group(0)!r} (only exported function/const/let/class)")
        if dep in done:
            return ""
        done.add(dep)
        return _inline(dep, text, folder, done)

    def dagre(_: re.Match[str]) -> str:
        if _DAGRE in done:
            return ""
        done.add(_DAGRE)
        return _dagre()

    return _DAGRE_IMPORT.sub(dagre, _LOCAL_IMPORT.sub(local, js))


def bundle_esm(js_file: str, folder: pathlib.Path = HERE) -> str:
    """The source of `folder`/`js_file` (a module of widgets/) with its imports inlined."""
    return _inline(js_file, (folder / js_file).read_text(encoding="utf-8"), folder, {js_file})


def bundle_css(css_file: str) -> str:
    """The text of widgets/_reset.css (the browser's defaults back under marimo's page reset: the
    widgets look as in JupyterLab) followed by that of widgets/`css_file`. Text, not a Path: anywidget
    watches a Path's file and connects a strong callback per widget instance to it, so no widget (its
    frames, its render function and whatever that holds: a program, a session) could ever be
    collected, even after close()."""
    return "".join((HERE / f).read_text(encoding="utf-8") for f in (_RESET, css_file))


class HtmlFallback:
    """Mixin for an AnyWidget: its bundle also carries ``to_html()``, what static viewers (GitHub,
    nbviewer) show; JupyterLab still renders the live view."""

    def to_html(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        bundle: tuple[dict[str, Any], dict[str, Any]] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is None:
            return None
        data, meta = bundle
        data["text/html"] = self.to_html()
        return data, meta
