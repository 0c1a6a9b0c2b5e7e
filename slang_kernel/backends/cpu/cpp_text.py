"""Bracket-counting walks over the C++ Slang emits, for the vector path's text rewrites
(simd.py's accessors, simd_loops.py's statements). Slang's C++ has no string or character
literals in a kernel's code that the vector path builds (printf keeps the scalar path), so brackets
are counted as they stand."""

from __future__ import annotations

__all__ = ["close", "scope_end", "statement_end"]


def _scan(text: str, start: int, statement: bool) -> int:
    """The index of the bracket closing the one at `start`, or (statement) of the `;` that ends the
    statement starting there; -1 when unbalanced or a bracket closes around the statement first."""
    depth = 0
    for k in range(start, len(text)):
        c = text[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return -1
            if depth == 0 and not statement:
                return k
        elif c == ";" and depth == 0 and statement:
            return k
    return -1


def close(text: str, start: int) -> int:
    """The index of the bracket that closes the one at `start`, or -1."""
    return _scan(text, start, statement=False)


def statement_end(text: str, start: int) -> int:
    """The index of the `;` ending the statement that starts at `start`, or -1."""
    return _scan(text, start, statement=True)


def scope_end(text: str, start: int) -> int:
    """Where the block containing `start` closes (its closing brace), or the end of the text."""
    depth = 0
    for k in range(start, len(text)):
        c = text[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return k
    return len(text)
