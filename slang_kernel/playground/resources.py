"""Creating a Playground program's resources from their `[playground::...]` attributes.

ZEROS / RAND / DATA make structured buffers (device buffers where the backend has them, shared
memory on the CPU); BLACK / BLACK_3D / BLACK_SCREEN / URL make textures of the backend; SAMPLER a
sampler. A texture's texels follow the Playground: an explicit `[format("r32f")]` (or rg32f, rgba8,
r16f, rgba32ui, ...) on the declaration decides channels and storage, else the texel type does
(`RWTexture3D<float>` has one channel, `RWTexture2D<float4>` four). Slang does not reflect
`[format]`, so it is read off the cell's source next to the global's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..backends import Backend, device_buffers, shared_arrays, textures
from ..backends.registry import DEVICE_BUFFERS, SHARED_ARRAYS, TEXTURES, capability
from ..backends.common.packing import ParameterError, element_dtype, texel_dtype, typed_element
from ..compiler.reflection import TypeInfo
from ..errors import PlaygroundError

__all__ = ["Declaration", "Resource", "declared_formats", "buffer_resource", "sampler_resource", "texture_resource", "resolve_path", "texel", "texture_format"]

Declaration = tuple[TypeInfo, tuple[tuple[str, tuple[Any, ...]], ...]]


@dataclass
class Resource:
    name: str
    kind: str             # ZEROS, RAND, BLACK, BLACK_3D, BLACK_SCREEN, URL, DATA, SAMPLER
    type: TypeInfo
    args: tuple[Any, ...]
    value: Any            # numpy array (no device buffers), the backend's buffer / texture / sampler object
    shape: tuple[int, ...] = ()   # element shape: (n,) buffers, (h, w) / (d, h, w) textures
    declared: Declaration | None = field(default=None, repr=False)


# -- texel formats --------------------------------------------------------------------------------

_FORMAT = re.compile(r"^(r|rg|rgb|rgba|bgra)(8|16|32)(f|ui|i|_unorm|_snorm|snorm)?$")
_COMMENT = re.compile(r'("(?:\\.|[^"\\\n])*")|//[^\n]*|/\*.*?\*/', re.S)   # strings kept
_FORMAT_ATTR = re.compile(r"\[\s*format\s*\(\s*\"(\w+)\"\s*\)\s*\]")
_ATTRS_THEN_DECL = re.compile(r"\s*((?:\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]\s*)*)(?:\w+\s+)*?[\w:]+\s*<[^;{}()]*>\s*(\w+)\s*;")


def texture_format(fmt: str) -> tuple[np.dtype[Any], int] | None:
    """(host dtype, channels) of a Slang/HLSL image format name: r32f -> float32 x 1, rgba8 -> uint8
    x 4 (unorm, 0..255 for 0..1), rg16f -> float16 x 2, r32ui -> uint32 x 1; None for formats with
    no such form (r11f_g11f_b10f, snorm, 16-bit unorm)."""
    m = _FORMAT.match(fmt.strip().lower())
    if m is None:
        return None
    ch, bits, kind = len(m.group(1)), int(m.group(2)), m.group(3) or ""
    dt: str | None = None
    if kind == "f":
        dt = {16: "float16", 32: "float32"}.get(bits)
    elif kind in ("ui", "i") and bits == 32:
        dt = "uint32" if kind == "ui" else "int32"
    elif kind in ("", "_unorm") and bits == 8:
        dt = "uint8"
    if dt is None:
        return None
    return np.dtype(dt), ch


def declared_formats(*sources: str) -> dict[str, str]:
    """Global name -> its `[format("...")]` argument, for every declaration that has one."""
    out: dict[str, str] = {}
    for text in sources:
        src = _COMMENT.sub(lambda m: m.group(1) or " ", text)
        for m in _FORMAT_ATTR.finditer(src):
            # the declaration this attribute belongs to: back to the start of its attribute list
            start = src.rfind(";", 0, m.start()) + 1
            start = max(start, src.rfind("}", 0, m.start()) + 1)
            d = _ATTRS_THEN_DECL.match(src, start)
            if d is not None and _FORMAT_ATTR.search(d.group(1) or ""):
                out[d.group(2)] = _FORMAT_ATTR.search(d.group(1)).group(1)  # type: ignore[union-attr]
    return out


def texel(t: TypeInfo, fmt: str | None = None) -> tuple[np.dtype[Any], int]:
    """(host dtype, channels) of a texture's texels: from its explicit format, else its texel type."""
    if fmt is not None:
        got = texture_format(fmt)
        if got is not None:
            return got
    return texel_dtype(t)


# -- files ----------------------------------------------------------------------------------------


def resolve_path(url: str, base: Path | None) -> bytes:
    if re.match(r"^[a-z]+://", url) and not url.startswith("file://"):
        import urllib.request

        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                data: bytes = r.read()
                return data
        except Exception as exc:
            raise PlaygroundError(f"could not fetch {url} ({exc}); download it and use a local path") from None
    p = Path(url[7:] if url.startswith("file://") else url).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    try:
        return p.read_bytes()
    except OSError as exc:
        raise PlaygroundError(f"could not read {p}: {exc}") from None


def _load_image(url: str, base: Path | None, channels: int, dt: np.dtype[Any]) -> np.ndarray:
    import io

    from PIL import Image

    raw = resolve_path(url, base)
    try:
        img = Image.open(io.BytesIO(raw)).convert("RGBA")
    except Exception as exc:
        raise PlaygroundError(f"{url} is not an image Pillow can read ({exc})") from None
    if dt == np.uint8:
        a = np.asarray(img, np.uint8)
    else:
        a = (np.asarray(img, np.float32) / 255.0).astype(dt)
    if channels < 4:
        a = a[..., :channels]
    return np.ascontiguousarray(a)


# -- creation -------------------------------------------------------------------------------------


def sampler_resource(backend: Backend, name: str, t: TypeInfo, kind: str, args: tuple[Any, ...], declared: Declaration,
                     *, rng: np.random.Generator, screen: tuple[int, int], base_dir: Path | None,
                     formats: Mapping[str, str] | None = None) -> Resource:
    """[playground::SAMPLER]: linear filtering, wrap addressing (an sgl sampler's defaults); None on a
    backend without textures (its textures are plain arrays, sampled in the kernel's own code)."""
    value = textures(backend).sampler("linear") if capability(backend, TEXTURES) else None
    return Resource(name, kind, t, args, value, (), declared)


def buffer_resource(backend: Backend, name: str, t: TypeInfo, kind: str, args: tuple[Any, ...], declared: Declaration,
                     *, rng: np.random.Generator, screen: tuple[int, int], base_dir: Path | None,
                     formats: Mapping[str, str] | None = None) -> Resource:
    """[playground::ZEROS(n)], RAND(n), DATA("file"): a structured buffer of n elements (zeros, random
    values, a file's bytes), device-resident or shared with the worker where the backend offers it."""
    value: Any
    if not t.is_buffer:
        raise PlaygroundError(f"[playground::{kind}] on `{name}` needs a structured buffer; it is {t.name}")
    eshape: tuple[int, ...] = ()
    if t.shape == "byte_address_buffer" or t.element is None:
        base = np.dtype(np.uint32)
    else:
        base, eshape = element_dtype(t.element)
    if kind == "DATA":
        raw = resolve_path(str(args[0]), base_dir)
        item = base.itemsize * int(np.prod(eshape, dtype=np.int64))
        n = max(1, -(-len(raw) // item))
        raw = raw + bytes(n * item - len(raw))
        arr = np.frombuffer(raw, base).reshape((n, *eshape)).copy()
    else:
        n = int(args[0])
        if n <= 0:
            raise PlaygroundError(f"[playground::{kind}({n})] on `{name}`: the size must be positive")
        arr = np.zeros((n, *eshape), base)
        if kind == "RAND":
            arr[...] = rng.random(arr.shape).astype(base) if base.kind == "f" else \
                (rng.random(arr.shape) * 2**31).astype(base)
    value = arr
    if capability(backend, DEVICE_BUFFERS):
        value = device_buffers(backend).buffer(arr)
    elif capability(backend, SHARED_ARRAYS):   # the CPU worker uses shared memory without copies
        value = shared_arrays(backend).zeros(arr.shape, arr.dtype)
        value[...] = arr
    return Resource(name, kind, t, args, value, (arr.shape[0],), declared)


def texture_resource(backend: Backend, name: str, t: TypeInfo, kind: str, args: tuple[Any, ...], declared: Declaration,
                     *, rng: np.random.Generator, screen: tuple[int, int], base_dir: Path | None,
                     formats: Mapping[str, str] | None = None) -> Resource:
    """[playground::BLACK(w, h)], BLACK_3D(w, h, d), BLACK_SCREEN(fw, fh) (fractions of `screen`) and
    URL("image"): a texture of the declared format, on a backend with textures."""
    value: Any
    if not t.is_texture:
        raise PlaygroundError(f"[playground::{kind}] on `{name}` needs a texture; it is {t.name}")
    if not capability(backend, TEXTURES):
        raise PlaygroundError(
            f"`{name}` ({t.name}, [playground::{kind}]) is a texture, and the {backend.name} backend has no "
            "textures: run this cell on Vulkan (`%slang_backend vulkan`, or Session(backend='vulkan'))")
    dt, ch = texel(t, (formats or {}).get(name))
    if dt == np.uint8 and t.writable and backend.target == "cuda":
        dt = texel(t)[0]   # CUDA surfaces hold the kernel's texel type (an rgba8 one refuses float4 writes)
    dims = 3 if kind == "BLACK_3D" else 2
    if kind == "URL":
        arr = _load_image(str(args[0]), base_dir, ch, dt)
    else:
        shape: tuple[int, ...]
        if kind == "BLACK":
            shape = (int(args[1]), int(args[0]))
        elif kind == "BLACK_3D":
            shape = (int(args[2]), int(args[1]), int(args[0]))
        else:
            shape = (max(1, int(screen[1] * float(args[1]))), max(1, int(screen[0] * float(args[0]))))
        arr = np.zeros((*shape, ch), dt)
    value = textures(backend).texture(arr, dims=dims)
    return Resource(name, kind, t, args, value, arr.shape[:dims], declared)
