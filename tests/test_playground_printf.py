"""slang_kernel's printf for Playground programs against the Playground's own: the same print records
formatted by playground_text.decode_prints and by canvasUtils.ts's parsePrintfBuffer, run in node
(tests/oracle/printing.py). The demos exercise few specifiers; these cases cover every specifier, the
flags and widths, negative and large integers, %c past 16 bits and a missing argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slang_kernel.playground.text import decode_prints, string_hash
from tests.oracle.printing import node, parse_printf_buffer

pytestmark = pytest.mark.skipif(node() is None, reason="node is not installed: the Playground's printf "
                                "(canvasUtils.ts) runs in node (scripts/setup installs nodejs)")

# (format, [(slang type, value)]): what a shader passes to printf
CASES: list[tuple[str, list[tuple[str, Any]]]] = [
    ("%d|%i|%d\n", [("int", -5), ("int", 7), ("uint", 4294967291)]),
    ("%u %x %X %o\n", [("uint", 255), ("uint", 255), ("uint", 3000000000), ("uint", 8)]),
    ("%u %x\n", [("int", -5), ("int", -255)]),
    ("%5d|%-5d|%05d|%+d|% d|%+5d|% 5d\n", [("int", 42), ("int", 42), ("int", -42), ("int", 3), ("int", 3),
                                            ("int", 3), ("int", -3)]),
    ("%f %.2f %8.3f %-8.1f| %+.1f %08.2f\n", [("float", 3.14159), ("float", -0.005), ("float", 2.5),
                                              ("float", 1.25), ("float", 0.25), ("float", -1.5)]),
    ("%F %e %E %.0e %.3e\n", [("float", 1e10), ("float", 0.000123), ("float", 123456.0), ("float", 5.5),
                              ("float", -1.0)]),
    ("%g %G %.3g %g %g\n", [("float", 1e-7), ("float", 123456789.0), ("float", 0.0001234), ("float", 0.0),
                            ("float", 100000.0)]),
    ("%f %e %g\n", [("float", float("inf")), ("float", float("-inf")), ("float", float("nan"))]),
    ("%c%c%c\n", [("int", 72), ("uint", 105), ("int", 65536 + 33)]),
    ("[%s] [%.2s] [%8s] [%-8s]\n", [("String", "hello"), ("String", "hello"), ("String", "hi"),
                                    ("String", "hi")]),
    ("%d %u %x %d %u %c\n", [("float", 3.7), ("float", -3.7), ("float", 255.9), ("float", float("inf")),
                            ("float", float("nan")), ("float", 65.9)]),
    ("%F %E %G %e\n", [("float", float("inf")), ("float", float("nan")), ("float", float("-inf")),
                       ("float", -0.0)]),
    ("%d and %f %s %u %c|\n", [("int", 1)]),   # missing arguments (a missing %d stops the Playground)
    ("no specifiers, 100%% literal\n", []),
]


def _playground_words(fmt: str, args: list[tuple[str, Any]]) -> np.ndarray:
    """The Playground's g_printedBuffer for one print call (printing.slang: {type, low, high} records)."""
    recs = [(1, string_hash(fmt))]
    for ty, v in args:
        if ty == "String":
            recs.append((2, string_hash(v)))
        elif ty == "float":
            recs.append((4, int(np.float32(v).view(np.uint32))))
        else:
            recs.append((3, int(v) & 0xFFFFFFFF))
    recs.append((0xFFFFFFFF, 0))
    return np.array([(t, low, 0) for t, low in recs] + [(0, 0, 0)], np.uint32).reshape(-1)


def _engine_words(fmt: str, args: list[tuple[str, Any]]) -> np.ndarray:
    """slang_kernel's buffer for the same call (slang/printing.slang: [used, n, fmt, (tag, bits)*])."""
    tags = {"int": 1, "uint": 2, "float": 3, "String": 4}
    rec = [len(args), string_hash(fmt)]
    for ty, v in args:
        bits = string_hash(v) if ty == "String" else int(np.float32(v).view(np.uint32)) if ty == "float" \
            else int(v) & 0xFFFFFFFF
        rec += [tags[ty], bits]
    return np.array([len(rec), *rec], np.uint32)


@pytest.mark.parametrize("fmt,args", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_printf_as_the_playground_formats(fmt: str, args: list[tuple[str, Any]]) -> None:
    strings = [fmt, *(v for t, v in args if t == "String")]
    # the reflection's hashedStrings, as Slang writes them: {string: signed 32-bit hash}
    hashed = {s: string_hash(s) - (1 << 32 if string_hash(s) >= 1 << 31 else 0) for s in strings}
    want = "".join(parse_printf_buffer(hashed, _playground_words(fmt, args)))
    got = decode_prints(_engine_words(fmt, args), {string_hash(s): s for s in strings})
    assert got == want
