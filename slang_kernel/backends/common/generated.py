"""What the C++ (CPU) and CUDA targets share in generated code: typed buffers compiled as structured
ones, and the user's part of the text after Slang's inlined prelude (for error messages and hashes)."""

from __future__ import annotations

import re

__all__ = ["TYPED_AS_STRUCTURED", "body"]

TYPED_AS_STRUCTURED = ("-DBuffer=StructuredBuffer", "-DRWBuffer=RWStructuredBuffer")

_USER_LINE = re.compile(r'#line \d+ "')


def body(code: str) -> str:
    """The generated code after Slang's inlined prelude (which mentions every intrinsic): it starts
    at the first `#line N "path"` directive, which points into the user's cells."""
    m = _USER_LINE.search(code)
    return code[m.start():] if m else code
