"""The text side of Playground cells (slang_kernel.playground.text): share links, what marks a cell as a
Playground cell, and printed records decoded with their string hashes."""

from __future__ import annotations

import base64
import zlib

import numpy as np

from slang_kernel.playground.text import (decode_playground_link, decode_prints, is_playground,
                                          playground_link, string_hash)
from tests.test_playground import SHADER


def test_share_link_round_trip() -> None:
    link = playground_link(SHADER)
    assert link.startswith("https://shader-slang.org/slang-playground/?target=")
    code = link.split("code=", 1)[1]
    assert "=" not in code and "+" not in code and "/" not in code
    raw = base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))
    assert zlib.decompress(raw).decode() == SHADER
    assert decode_playground_link(link) == SHADER


def test_decode_prints_and_hash() -> None:
    strings = {string_hash("a=%d b=%.2f %s\n"): "a=%d b=%.2f %s\n", string_hash("x"): "x"}
    words = [8, 3, string_hash("a=%d b=%.2f %s\n"), 1, np.int32(-4).view(np.uint32), 3,
             np.float32(2.5).view(np.uint32), 4, string_hash("x")]
    assert decode_prints(np.array(words, np.uint32), strings) == "a=-4 b=2.50 x\n"
    assert is_playground(SHADER) and not is_playground("float f(float x) { return x; }")
