"""printf -> sgl's print: the Vulkan device prints through sgl, whose `print` formats like Python's
`str.format`; the playground's printing decoder reads format strings the same way."""

from __future__ import annotations

import re

__all__ = ["printf_format", "rewrite_printf", "uses_printf"]

_PRINTF = re.compile(r'\bprintf\s*\(\s*"((?:\\.|[^"\\])*)"')
_SPEC = re.compile(r"%([-+ #0]*)(\d+)?(?:\.(\d+))?(?:hh|h|ll|l|z|j|t|L)?([diuxXfFeEgGcsp%])")


def printf_format(fmt: str) -> str:
    """printf's format -> fmt's (what sgl's print formats with): %d -> {}, %.3f -> {:.3f}."""
    out, pos = [], 0
    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        pos = m.end()
        flags, width, prec, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        spec = ""
        if "-" in flags:
            spec += "<"
        if "+" in flags:
            spec += "+"
        if "0" in flags and "-" not in flags:
            spec += "0"
        spec += width or ""
        if prec is not None and conv in "fFeEgGs":
            spec += "." + prec
        if conv in "xXeEfFgG":
            spec += conv
        elif conv == "p":
            spec += "x"
        out.append("{" + (":" + spec if spec else "") + "}")
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    text = "".join(out)
    return text[:-2] if text.endswith("\\n") else text  # sgl ends every message with a newline


def rewrite_printf(source: str) -> str:
    """`printf("...", args)` calls -> sgl `print("{}...", args)` calls."""
    return _PRINTF.sub(lambda m: f'print("{printf_format(m.group(1))}"', source)


def uses_printf(source: str) -> bool:
    return _PRINTF.search(source) is not None
