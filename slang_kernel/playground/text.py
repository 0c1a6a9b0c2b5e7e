"""The text side of Slang Playground cells: share links, what marks a cell as a Playground cell, and
the decoding of what kernels print with the `printing` module (slang/printing.slang), formatted as
the Playground's own page formats it (its canvasUtils.ts, in JavaScript: docs/playground.md)."""

from __future__ import annotations

import base64
import math
import re
import zlib
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Mapping

import numpy as np

__all__ = ["PLAYGROUND_URL", "decode_playground_link", "decode_prints", "is_playground", "playground_link",
           "string_hash", "string_table"]

PLAYGROUND_URL = "https://shader-slang.org/slang-playground/"

_ATTR = re.compile(r"\[\s*playground\s*::")
_IMPORT = re.compile(r"^\s*import\s+(playground|printing|rendering)\s*;", re.M)


# -- share links ----------------------------------------------------------------------------------


def playground_link(source: str, target: str = "WGSL") -> str:
    """The Slang Playground share link of ``source``: zlib-compressed, base64url without padding."""
    code = base64.urlsafe_b64encode(zlib.compress(source.encode("utf-8"), 9)).decode("ascii").rstrip("=")
    return f"{PLAYGROUND_URL}?target={target}&code={code}"


def decode_playground_link(link: str) -> str:
    """The source in a Playground share link (inverse of :func:`playground_link`)."""
    from urllib.parse import parse_qs, urlparse

    code = parse_qs(urlparse(link).query).get("code", [""])[0]
    return zlib.decompress(base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))).decode("utf-8")


def is_playground(source: str) -> bool:
    """Does this source use the Playground's modules or attributes?"""
    return bool(_ATTR.search(source) or _IMPORT.search(source))


# -- printing -------------------------------------------------------------------------------------


def string_hash(text: str) -> int:
    """Slang's getStringHash (getStableHashCode32 over the UTF-8 bytes)."""
    h = 0
    for b in text.encode("utf-8"):
        c = b - 256 if b >= 128 else b  # the bytes are (signed) chars
        h = (c + (h << 6) + (h << 16) - h) & 0xFFFFFFFF
    return h


_LITERAL = re.compile(r'"((?:\\.|[^"\\])*)"')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), s)


def string_table(*sources: str) -> dict[int, str]:
    """Hash -> text of every string literal in the sources (and their printf->print rewrites)."""
    out: dict[int, str] = {}
    texts = list(sources)
    try:  # the Vulkan backend rewrites printf("%d") into sgl's print("{}"): know those literals too
        from ..backends.common.printing import rewrite_printf

        texts += [rewrite_printf(s) for s in sources]
    except Exception:  # pragma: no cover - slangpy missing
        pass
    for src in texts:
        for m in _LITERAL.finditer(src):
            s = _unescape(m.group(1))
            out[string_hash(s)] = s
    return out


_PRINTF_SPEC = re.compile(r"%([-+ #0]*)(\d*)(\.\d+)?([diufFeEgGxXosc])")   # canvasUtils.ts's
_BRACE_SPEC = re.compile(r"\{([^{}]*)\}")


def _fixed(x: float, digits: int) -> str:
    """JavaScript's x.toFixed(digits): the exact binary value rounded, ties away from zero."""
    q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    s = f"{q:f}"
    # (-0).toFixed(2) is "0.00"; (-0.004).toFixed(2) is "-0.00"
    return s[1:] if x == 0 and s.startswith("-") else s


def _exponential(x: float, digits: int) -> str:
    """JavaScript's x.toExponential(digits): `1.254700e+1` (the exponent unpadded)."""
    if x == 0:
        return "0" + ("." + "0" * digits if digits else "") + "e+0"
    d = Decimal(x)
    e = d.copy_abs().adjusted()
    m = d.scaleb(-e).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if abs(m) >= 10:   # 9.99.. rounded up to 10
        e += 1
        m = d.scaleb(-e).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{m:f}e{'+' if e >= 0 else '-'}{abs(e)}"


def _precision(x: float, p: int) -> str:
    """JavaScript's x.toPrecision(p) (what the Playground prints for %g)."""
    if x == 0:
        return "0" + ("." + "0" * (p - 1) if p > 1 else "")
    e = Decimal(x).copy_abs().adjusted()
    if abs(Decimal(x).scaleb(-e).quantize(Decimal(1).scaleb(1 - p), rounding=ROUND_HALF_UP)) >= 10:
        e += 1
    return _exponential(x, p - 1) if e < -6 or e >= p else _fixed(x, p - 1 - e)


def _js_number(x: float) -> str | None:
    """How JavaScript writes a non-finite number (toFixed/toExponential/toPrecision alike); None if finite."""
    return None if math.isfinite(x) else "NaN" if math.isnan(x) else "-Infinity" if x < 0 else "Infinity"


def _int32(v: Any) -> int:
    """JavaScript's `v | 0` (ToInt32) of an integer or a float."""
    if isinstance(v, float):
        v = int(v) if math.isfinite(v) else 0
    n = int(v) & 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def _magnitude(v: Any) -> int | None:
    """`Math.abs(parseInt(v))` of what the Playground's buffer holds: an integer argument arrives as its
    32-bit pattern (a negative int's %u / %x is 2^32 - |v|), a float truncated; None for NaN."""
    if isinstance(v, float):
        return abs(int(v)) if math.isfinite(v) else None
    return int(v) & 0xFFFFFFFF if isinstance(v, int) else abs(int(v))


def _printf(fmt: str, args: list[Any]) -> str:
    """printf-style formatting as the Playground's canvasUtils.ts does it in JavaScript: %d of the
    32-bit value, %u/%x/%o of the 32-bit pattern, %f/%e/%g as toFixed/toExponential/toPrecision (default
    precision 6; Infinity and NaN as JavaScript writes them), width with the 0 - + and space flags; a
    missing argument prints as JavaScript's `undefined` does: "undefined" for %s and %d (where the
    Playground stops with an error), NaN for numbers, NUL for %c (tests/test_playground_printf.py)."""
    out, pos, i = [], 0, 0
    for m in _PRINTF_SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, conv = m.groups()
        v = args[i] if i < len(args) else None
        i += 1
        p = int(prec[1:]) if prec else 6
        try:
            if v is None:
                s = "\0" if conv == "c" else "undefined" if conv in "sdi" else "NaN"
            elif conv in "di":
                s = str(_int32(v))
            elif conv in "uoxX":
                n = _magnitude(v)
                s = "NaN" if n is None else str(n) if conv == "u" else format(n, "o" if conv == "o" else "x")
                s = s.upper() if conv == "X" else s
            elif conv in "fFeEgG" and _js_number(float(v)) is not None:
                s = str(_js_number(float(v)))
                s = s.upper() if conv == "E" else s
            elif conv in "fF":
                s = _fixed(float(v), p)
            elif conv in "eE":
                s = _exponential(float(v), p)
                s = s.upper() if conv == "E" else s
            elif conv in "gG":
                s = _precision(float(v), p)
            elif conv == "c":
                s = chr(_int32(v) & 0xFFFF)     # String.fromCharCode(parseInt(v)): ToUint16
            else:
                s = str(v)[:p] if prec else str(v)
        except (TypeError, ValueError, OverflowError):
            s = str(v)
        if width:
            num = float(v) if isinstance(v, (int, float)) else float("nan")
            if "+" in flags and num >= 0:
                s = "+" + s
            elif " " in flags and num >= 0:
                s = " " + s
            if len(s) < int(width):
                pad = ("0" if "0" in flags and "-" not in flags else " ") * (int(width) - len(s))
                s = s + pad if "-" in flags else pad + s
        out.append(s)
    out.append(fmt[pos:])
    return "".join(out)


def _format(fmt: str, args: list[Any]) -> str:
    """printf-style (%d), or format-style ({}) after the Vulkan backend's printf rewrite."""
    if "%" not in fmt and _BRACE_SPEC.search(fmt):
        it = iter(args)

        def brace(m: re.Match[str]) -> str:
            spec = m.group(1).lstrip(":")
            v = next(it, "")
            try:
                return format(v, spec)
            except (ValueError, TypeError):
                return str(v)
        return _BRACE_SPEC.sub(brace, fmt.replace("{{", "\x00").replace("}}", "\x01")).replace(
            "\x00", "{").replace("\x01", "}") + ("\n" if not fmt.endswith("\n") else "")
    return _printf(fmt, args)


def decode_prints(words: np.ndarray, strings: Mapping[int, str]) -> str:
    """Text of the records in a printing module buffer (see slang/printing.slang)."""
    w = np.asarray(words).reshape(-1).view(np.uint32)
    if w.size == 0:
        return ""
    used = int(w[0])
    end = min(1 + used, w.size)
    out, pos = [], 1
    while pos + 2 <= end:
        n = int(w[pos])
        if n > 64 or pos + 2 + 2 * n > end:
            break
        fmt = strings.get(int(w[pos + 1]), f"<format #{int(w[pos + 1]):08x}>")
        args: list[Any] = []
        for k in range(n):
            tag, bits = int(w[pos + 2 + 2 * k]), np.uint32(w[pos + 3 + 2 * k])
            if tag == 1:
                args.append(int(bits.view(np.int32)))
            elif tag == 2:
                args.append(int(bits))
            elif tag == 3:
                args.append(float(bits.view(np.float32)))
            elif tag == 4:
                args.append(strings.get(int(bits), f"<string #{int(bits):08x}>"))
            elif tag == 5:
                args.append(bool(bits))
            else:
                args.append(int(bits))
        out.append(_format(fmt, args))
        pos += 2 + 2 * n
    text = "".join(out)
    if used + 1 > w.size:
        text += f"\n[printing: output truncated, the buffer holds {w.size - 1} words]\n"
    return text
