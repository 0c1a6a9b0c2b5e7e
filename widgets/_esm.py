"""Each widget's front end as one ES module: anywidget loads a single module from a blob URL, so
relative imports cannot resolve. Imports of the shared DOM helpers (``./_dom.js``) and of the
vendored dagre (``./vendor/dagre.esm.js``) are replaced by the code itself."""

from __future__ import annotations

import pathlib
from typing import Any
import re

__all__ = ["bundle_css", "bundle_esm"]

HERE = pathlib.Path(__file__).parent
_DAGRE_IMPORT = re.compile(r'^import dagre from "\./vendor/dagre\.esm\.js";\s*$', re.M)
_DOM_IMPORT = re.compile(r'^import \{[^}]*\} from "\./_dom\.js";\s*$', re.M)
_EXPORT = re.compile(r"export\s*\{([^}]*)\}\s*;?")


def _dagre() -> str:
    vendor = (HERE / "vendor" / "dagre.esm.js").read_text(encoding="utf-8")
    m = _EXPORT.search(vendor)
    if m is None:  # pragma: no cover - a different dagre build
        raise RuntimeError("vendor/dagre.esm.js: no export statement found")
    default = next(p.split(" as ")[0].strip() for p in m.group(1).split(",") if p.strip().endswith(" as default"))
    body = vendor[: m.start()] + vendor[m.end():]
    return f"const dagre = (() => {{\n{body}\nreturn {default};\n}})();\n"


def bundle_esm(js_file: str) -> str:
    """The source of widgets/`js_file` with its local imports inlined."""
    js = (HERE / js_file).read_text(encoding="utf-8")
    if _DOM_IMPORT.search(js):
        dom = (HERE / "_dom.js").read_text(encoding="utf-8").replace("export function", "function")
        js = _DOM_IMPORT.sub(lambda _: dom, js, count=1)
    if _DAGRE_IMPORT.search(js):
        js = _DAGRE_IMPORT.sub(lambda _: _dagre(), js, count=1)
    return js


def bundle_css(css_file: str) -> str:
    """The text of widgets/`css_file`. Text, not a Path: anywidget watches a Path's file and connects
    a strong callback per widget instance to it, so no widget (its frames, its render function and
    whatever that holds: a program, a session) could ever be collected, even after close()."""
    return (HERE / css_file).read_text(encoding="utf-8")


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
