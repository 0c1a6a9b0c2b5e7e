"""Layouts: the numpy dtype of a Slang type as a buffer element on the session's current target."""

from __future__ import annotations

import re
from typing import Any

from ._session_requests import _Requests
from .compiler.diagnostics import SlangCompileError

_BUILTIN_TYPE = re.compile(r"(float|half|double|int|uint|bool|u?int(8|16|32|64)_t|float(16|32|64)_t)([1-4](x[1-4])?)?")


class _Layouts(_Requests):
    """Session.dtype."""

    def dtype(self, type_name: str) -> Any:
        """The numpy dtype of Slang type `type_name` (a struct `P`, `float3`, `MyGeneric<float>`) as the
        elements of a `StructuredBuffer<type_name>` on the current backend's target: that target's
        field offsets and padding, vector and matrix fields as subarrays, nested structs as structured
        fields; the same machinery as `ComputeKernel.dtype`. Fill a struct buffer with
        `np.zeros(n, s.dtype("P"))`: the same fields give the same answer on every backend."""
        import numpy as np

        from .backends.packing import element_dtype
        from .errors import ParameterError

        name = " ".join(str(type_name).split())
        head = re.match(r"[A-Za-z_]\w*", name)
        if head is None or not re.fullmatch(r"[\w<>, :]+", name):
            raise ParameterError(f"dtype({type_name!r}): give a Slang type name, e.g. s.dtype(\"Particle\")")
        structs = sorted(n for n, d in self.names().items() if d.kind in ("struct", "generic"))
        if head.group(0) not in self.names() and not _BUILTIN_TYPE.fullmatch(head.group(0)) and \
                head.group(0) not in ("vector", "matrix"):
            raise ParameterError(f"dtype({name!r}): no type `{head.group(0)}` in this session's cells; "
                                 f"structs defined: {', '.join(structs) or 'none'}")
        entry = "sk_dtype_probe"
        src = (f"[shader(\"compute\")][numthreads(1, 1, 1)]\n"
               f"void {entry}(uniform StructuredBuffer<{name}> sk_elements) {{}}\n")
        try:
            ck = self.compile(self.request("compile", source=src, entries=[entry], what=f"dtype({name})"))[entry]
        except SlangCompileError as exc:
            first = next((d.message for d in exc.diagnostics if d.severity == "error"), str(exc))
            raise ParameterError(f"dtype({name!r}): Slang cannot lay out `{name}` as a buffer element on target "
                                 f"{self.backend.target}: {first}") from None
        t = ck.entry_point.uniforms[0].type.element
        assert t is not None
        base, shape = element_dtype(t)
        return np.dtype((base, shape)) if shape else base
