"""The oracle's printf: `parsePrintfBuffer` and the printf formatting of the public
shader-slang/slang-playground at 461eaa9 (`engine/playground-render-canvas/src/canvasUtils.ts`), ported.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np

__all__ = ["format_printf", "parse_printf_buffer"]


# -- canvasUtils.ts: printf -------------------------------------------------------------------------

_PRINTF = re.compile(r"%([-+ #0]*)(\d*)(\.\d+)?([diufFeEgGxXosc])")


def _js_fixed(x: float, digits: int) -> str:
    """Number.prototype.toFixed: the exact double, ties away from zero in magnitude (larger n)."""
    q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    s = f"{q:f}"
    return s if not (q == 0 and s.startswith("-")) else s[1:]


def _js_exponential(x: float, digits: int) -> str:
    """Number.prototype.toExponential(digits): d.ddde+X (no zero padding of the exponent)."""
    if x == 0:
        return "0" + ("." + "0" * digits if digits else "") + "e+0"
    d = Decimal(x)
    e = d.copy_abs().adjusted()
    m = (d.scaleb(-e)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if abs(m) >= 10:
        e += 1
        m = (d.scaleb(-e)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{m:f}e{'+' if e >= 0 else '-'}{abs(e)}"


def _js_precision(x: float, p: int) -> str:
    """Number.prototype.toPrecision(p)."""
    if x == 0:
        return "0" + ("." + "0" * (p - 1) if p > 1 else "")
    e = Decimal(x).copy_abs().adjusted()
    r = float(Decimal(x).scaleb(-e).quantize(Decimal(1).scaleb(-(p - 1)), rounding=ROUND_HALF_UP))
    if abs(r) >= 10:
        e += 1
    if e < -6 or e >= p:
        return _js_exponential(x, p - 1)
    return _js_fixed(x, p - 1 - e)


def format_printf(fmt: str, data: list[Any]) -> str:
    """formatPrintfString(parsePrintfFormat(fmt), data), as canvasUtils.ts formats."""
    out, last, i = [], 0, 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[last:m.start()])
        last = m.end()
        flags, width, prec, conv = m.groups()
        value = data[i] if i < len(data) else None
        i += 1
        p = int(prec[1:]) if prec else 6
        if conv in "di":
            v = int(value) & 0xFFFFFFFF
            s = str(v - (1 << 32) if v >= 1 << 31 else v)
        elif conv in "uoxX":
            v = abs(int(value))
            s = str(v) if conv == "u" else format(v, "o" if conv == "o" else "x")
            s = s.upper() if conv == "X" else s
        elif conv in "fF":
            s = _js_fixed(float(value), p)
        elif conv in "eE":
            s = _js_exponential(float(value), p)
            s = s.upper() if conv == "E" else s
        elif conv in "gG":
            s = _js_precision(float(value), p)
        elif conv == "c":
            s = chr(int(value))
        else:
            s = str(value)
            s = s[:p] if prec else s
        if width:
            w = int(width)
            num = float(value) if isinstance(value, (int, float)) else math.nan
            if "+" in flags and num >= 0:
                s = "+" + s
            elif " " in flags and num >= 0:
                s = " " + s
            if len(s) < w:
                pad = ("0" if "0" in flags and "-" not in flags else " ") * (w - len(s))
                s = s + pad if "-" in flags else pad + s
        out.append(s)
    out.append(fmt[last:])
    return "".join(out)


def parse_printf_buffer(hashed: dict[int, str], words: np.ndarray) -> list[str]:
    """parsePrintfBuffer: records of (type, low, high) uint32 triples."""
    w = words.view(np.uint32).reshape(-1, 3)
    out: list[str] = []
    fmt, data = "", []   # type: ignore[var-annotated]
    for k in range(w.shape[0]):
        t, low = int(w[k, 0]), int(w[k, 1])
        if t == 1:
            fmt = hashed[low]
        elif t == 2:
            data.append(hashed.get(low))
        elif t == 3:
            data.append(low)
        elif t == 4:
            data.append(float(np.uint32(low).view(np.float32)))
        elif t == 5:
            data.append(0)
        elif t == 0xFFFFFFFF:
            out.append(format_printf(fmt, data))
            fmt, data = "", []
            if k < w.shape[0] - 1 and int(w[k + 1, 0]) != 1:
                return out
    if fmt != "":
        out.append(format_printf(fmt, data))
        out.append("Print buffer is out of boundary, some data is missing!!!")
    return out
