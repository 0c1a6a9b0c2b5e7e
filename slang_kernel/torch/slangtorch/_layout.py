"""Kernel parameter layouts read from the compiler's CUDA output, and Python values packed into them.

Slang lowers each `[CUDAKernel]` parameter to a C type in the generated code (`TensorView`,
`_VectorStorage_float3_0`, `FixedArray<T, N>`, `Foo_0`, `DiffTensorView_0`, ...); the kernel's
parameter block is those types in C layout, so the code itself is the one source of truth.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["CType", "Layouts", "diff_pair", "kernel_signatures", "pack", "reorder_rows", "reorders", "slang_name"]

_SCALARS: dict[str, tuple[str, int]] = {
    "float": ("f", 4), "int": ("i", 4), "uint": ("I", 4), "double": ("d", 8), "bool": ("?", 1),
    "int64_t": ("q", 8), "uint64_t": ("Q", 8), "__half": ("e", 2), "half": ("e", 2),
    "int16_t": ("h", 2), "uint16_t": ("H", 2), "int8_t": ("b", 1), "uint8_t": ("B", 1),
    # the names Slang's CUDA output gives them
    "char": ("b", 1), "uchar": ("B", 1), "short": ("h", 2), "ushort": ("H", 2), "longlong": ("q", 8),
    "ulonglong": ("Q", 8),
}
_GLOBAL = re.compile(r"__global__ void (\w+)\(([^)]*)\)")
_STRUCT = re.compile(r"\nstruct (\w+)\s*\n\{([^{}]*)\}")
_FIXED = re.compile(r"FixedArray<\s*(.+?)\s*,\s*(\d+)\s*>$")
# `Matrix<..> unpackStorage_N(_MatrixStorage_float3x3_0 * s) { return makeMatrix<..> (s->data[int(0)], ...); }`:
# which storage slot each element (row by row) is read from, in this compile's matrix layout
_UNPACK = re.compile(r"unpackStorage_\d+\((_MatrixStorage_\w+)\s*\*\s*\w+\)(?:\s|#line[^\n]*\n)*\{"
                     r"(?:\s|#line[^\n]*\n)*return\s+makeMatrix<[^>]*>\s*\(([^;]*)\);")
_SLOT = re.compile(r"\[int\((\d+)\)\]")
TENSOR_VIEW = "TensorView"


def slang_name(c_name: str) -> str:
    """`U_StructStorage_MyStruct_0` / `Foo_0` / `A_0` -> `MyStruct` / `Foo` / `A`."""
    return re.sub(r"_\d+$", "", c_name.removeprefix("U_StructStorage_"))


@dataclass(frozen=True)
class CType:
    """One C type of a kernel parameter: kind is scalar, tensor, array or struct."""

    name: str
    kind: str
    size: int
    align: int
    fmt: str = ""                                   # scalar: struct format letter
    element: "CType | None" = None                  # array
    count: int = 0                                  # array
    fields: tuple[tuple[str, int, "CType"], ...] = ()  # struct: (Slang field name, offset, type)
    order: tuple[int, ...] = ()                     # matrix storage: the slot of each element, row by row


def kernel_signatures(code: str) -> dict[str, list[tuple[str, str]]]:
    """Each `__global__` function of the code: its (C type, C parameter name) list."""
    out: dict[str, list[tuple[str, str]]] = {}
    for m in _GLOBAL.finditer(code):
        params = [p.strip() for p in _split(m.group(2)) if p.strip()]
        out[m.group(1)] = [tuple(p.rsplit(None, 1)) for p in params]  # type: ignore[misc]
    return out


def _split(text: str) -> list[str]:
    """Split on commas outside <...>."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


class Layouts:
    """The C types of one compiled module, resolved on demand from its struct definitions."""

    def __init__(self, code: str) -> None:
        self._bodies = {m.group(1): m.group(2) for m in _STRUCT.finditer(code)}
        self._orders = {m.group(1): tuple(int(i) for i in _SLOT.findall(m.group(2))) for m in _UNPACK.finditer(code)}
        self._types: dict[str, CType] = {}

    def structs(self) -> dict[str, str]:
        return dict(self._bodies)

    def ctype(self, name: str) -> CType:
        name = " ".join(name.split())
        t = self._types.get(name)
        if t is None:
            t = self._types[name] = self._resolve(name)
        return t

    def _resolve(self, name: str) -> CType:
        if name in _SCALARS:
            fmt, size = _SCALARS[name]
            return CType(name, "scalar", size, size, fmt=fmt)
        if name == TENSOR_VIEW:
            return CType(name, "tensor", 56, 8)
        m = _FIXED.match(name)
        if m:
            el = self.ctype(m.group(1))
            n = int(m.group(2))
            return CType(name, "array", el.size * n, el.align, element=el, count=n)
        body = self._bodies.get(name)
        if body is None:
            raise TypeError(f"kernel parameter type {name} is not supported by slang_kernel.slangtorch")
        fields, offset, align = [], 0, 1
        for line in body.split(";"):
            line = line.strip()
            if not line:
                continue
            ftype, fname = line.rsplit(None, 1)
            ft = self.ctype(ftype)
            offset = -(-offset // ft.align) * ft.align
            fields.append((slang_name(fname), offset, ft))
            offset += ft.size
            align = max(align, ft.align)
        size = -(-offset // align) * align
        order = self._orders.get(name, ())
        if len(fields) != 1 or fields[0][2].count != len(order):
            order = ()   # not a matrix the kernels read (or not read at all): stored as given
        return CType(name, "struct", size, align, fields=tuple(fields), order=order)


def pack(t: CType, value: Any, where: str, tensor: Callable[[Any, str], bytes]) -> bytes:
    """The bytes of `value` as C type `t`; `tensor` packs one TensorView. TypeError names `where`."""
    if t.kind == "tensor":
        return tensor(value, where)
    if t.name.startswith("DiffTensorView"):
        return _pack_diff(t, value, where, tensor)
    if t.kind == "scalar":
        try:
            return struct.pack("<" + t.fmt, value)
        except struct.error as exc:
            raise TypeError(f"`{where}` takes a {t.name} scalar, got {value!r}: {exc}") from None
    if t.kind == "array":
        assert t.element is not None
        items = _flat(value, t.count) if t.element.kind == "scalar" else list(value)
        if len(items) != t.count:
            raise TypeError(f"`{where}` takes {t.count} elements, got {len(items)}")
        return b"".join(pack(t.element, v, f"{where}[{i}]", tensor) for i, v in enumerate(items))
    return _pack_struct(t, value, where, tensor)


def _flat(value: Any, count: int) -> list[Any]:
    """Vectors and matrices come as nested tuples/lists; their storage is flat."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return [x for row in value for x in _flat(row, -1)]
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _pack_struct(t: CType, value: Any, where: str, tensor: Callable[[Any, str], bytes]) -> bytes:
    names = [n for n, _, _ in t.fields]
    if len(t.fields) == 1 and t.fields[0][2].kind == "array" and not isinstance(value, Mapping) \
            and not hasattr(value, "_fields"):
        values = [value]  # vector/matrix storage wraps one flat array
        if t.order:       # a matrix, given row by row: each element into the slot the kernel reads it from
            items = _flat(value, len(t.order))
            if len(items) == len(t.order):
                slots: list[Any] = [None] * len(items)
                for k, slot in enumerate(t.order):
                    slots[slot] = items[k]
                values = [slots]
    elif isinstance(value, Mapping) or hasattr(value, "_asdict"):
        d = dict(value) if isinstance(value, Mapping) else value._asdict()
        missing = [n for n in names if n not in d]
        extra = [k for k in d if k not in names]
        if missing or extra:
            raise TypeError(f"`{where}` is struct {slang_name(t.name)} with fields {', '.join(names)}: "
                            + "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                                        + ([f"unknown {', '.join(extra)}"] if extra else [])))
        values = [d[n] for n in names]
    elif isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise TypeError(f"`{where}` is struct {slang_name(t.name)} with {len(names)} fields "
                            f"({', '.join(names)}); got {len(value)} values")
        values = list(value)
    else:
        raise TypeError(f"`{where}` is struct {slang_name(t.name)}: pass a dict, tuple or namedtuple of "
                        f"{', '.join(names)}")
    out = bytearray(t.size)
    for (n, off, ft), v in zip(t.fields, values):
        b = pack(ft, v, f"{where}.{n}", tensor)
        out[off:off + len(b)] = b
    return bytes(out)


def reorders(t: CType) -> bool:
    """Whether `t` holds a matrix whose kernel reads its storage in other than row order."""
    if t.order:
        return list(t.order) != list(range(len(t.order)))
    return any(reorders(f) for _, _, f in t.fields) or (t.element is not None and reorders(t.element))


def reorder_rows(t: CType, data: bytearray, offset: int = 0) -> None:
    """Move the matrices in `data` (a value of type `t` at `offset`, each stored row by row, as Slang's
    host code packs them) into the slots the kernel reads them from (row-major compiles differ)."""
    if t.order and reorders(t):
        el = t.fields[0][2].element
        assert el is not None
        n, start = el.size, offset + t.fields[0][1]
        items = [bytes(data[start + k * n:start + (k + 1) * n]) for k in range(len(t.order))]
        for k, slot in enumerate(t.order):
            data[start + slot * n:start + (slot + 1) * n] = items[k]
    for _, off, f in t.fields:
        reorder_rows(f, data, offset + off)
    if t.element is not None and reorders(t.element):
        for i in range(t.count):
            reorder_rows(t.element, data, offset + i * t.element.size)


def diff_pair(value: Any) -> tuple[Any, Any]:
    """slangtorch's DiffTensorView forms: a tensor, `(x,)`, `(x, dx)` or `DiffTensorView(value=, grad=)`."""
    if hasattr(value, "_asdict"):
        d = value._asdict()
        return d.get("value"), d.get("grad")
    if isinstance(value, (tuple, list)):
        if len(value) not in (1, 2):
            raise TypeError(f"a DiffTensorView takes a tensor, (value,) or (value, grad); got {len(value)} items")
        return value[0], (value[1] if len(value) == 2 else None)
    return value, None


def _pack_diff(t: CType, value: Any, where: str, tensor: Callable[[Any, str], bytes]) -> bytes:
    primal, grad = diff_pair(value)
    if grad is None:
        import torch

        grad = torch.zeros_like(primal)  # slangtorch: a primal alone gets a zero derivative
    out = bytearray(t.size)
    (_, p_off, _), (_, d_off, _) = t.fields[0], t.fields[1]
    out[p_off:p_off + 56] = tensor(primal, where)
    out[d_off:d_off + 56] = tensor(grad, where + ".grad")
    return bytes(out)
