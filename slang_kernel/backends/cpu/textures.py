"""Textures and samplers on the CPU backend.

Slang's C++ prelude declares textures as abstract interfaces (`ITexture`, `IRWTexture` with virtual
Load/Sample/refAt), which the host would have to construct inside the process that runs the kernel
(the worker, whose addresses it does not know). `prepare` replaces those two declarations in the
generated code by the plain-data versions of cpu_textures.h, so a texture parameter is a pointer to
a small descriptor the host writes (texel array, size, texel layout) and the texels are an (H, W, C)
numpy array the kernel reads and writes in place (in shared memory for the worker, like buffers).

`CpuTexture` is the backend's texture object (`backend.texture(...)`): a shared-memory array,
stored as the kernel's texel type (uint8 data as unit floats, as an rgba8 texture reads).
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...compiler.reflection import TypeInfo
from ..common import shm as _shm
from ..common.packing import ParameterError, copy_advice, describe, typed_element

__all__ = ["CpuSampler", "CpuTexture", "HEADER", "bind_sampler", "bind_texture", "prepare", "sampler"]

HEADER = Path(__file__).with_name("cpu_textures.h")
_ITEXTURE = re.compile(r"struct ITexture\s*\{.*?\n\};\n", re.S)
_IRWTEXTURE = re.compile(r"struct IRWTexture\s*:\s*ITexture\s*\{.*?\n\};\n", re.S)
_DIMS = {"texture_1d": 1, "texture_2d": 2, "texture_3d": 3, "texture_1d_array": 2, "texture_2d_array": 3}
_SCALARS = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.uint32): 2}
_DESCRIPTOR = struct.Struct("<QIIIIIIII")   # data, width, height, depth, dims, texelBytes, channels, scalar, layered
_LAYOUT = {1: "(W, C)", 2: "(H, W, C)", 3: "(D, H, W, C)"}
_ARRAY_LAYOUT = {2: "(L, W, C)", 3: "(L, H, W, C)"}   # layers first, as CUDA's layered textures


@functools.lru_cache(maxsize=1)
def header() -> str:
    """The text put in place of ITexture/IRWTexture; it ends with the subscripts (as a comment) so
    that build cache keys that include it cover everything `prepare` changes."""
    return HEADER.read_text() + "".join(f"// subscript {d}D: {text}" for d, text in _SUBSCRIPTS.items())


# Read-only textures have no subscript in Slang's C++ prelude (`tex[xy]` would not compile): one that
# loads mip 0, as on GPUs.
_SUBSCRIPTS = {
    1: "    T operator[](uint32_t loc) const { int32_t v[2] = {(int32_t)loc, 0}; T out; "
       "texture->Load(v, &out, sizeof(out)); return out; }\n",
    2: "    template<typename I> T operator[](const Vector<I, 2>& loc) const { int32_t v[3] = {(int32_t)loc.x, "
       "(int32_t)loc.y, 0}; T out; texture->Load(v, &out, sizeof(out)); return out; }\n",
    3: "    template<typename I> T operator[](const Vector<I, 3>& loc) const { int32_t v[4] = {(int32_t)loc.x, "
       "(int32_t)loc.y, (int32_t)loc.z, 0}; T out; texture->Load(v, &out, sizeof(out)); return out; }\n",
}
_TEXTURE_END = {d: re.compile(rf"(struct Texture{d}D\s*\{{.*?\n)(    ITexture\* texture;\n\}};)", re.S) for d in (1, 2, 3)}


def prepare(code: str) -> str:
    """Slang's generated C++ with the plain-data ITexture/IRWTexture of cpu_textures.h and subscripts
    on read-only textures (unchanged when the code does not declare them)."""
    m = _ITEXTURE.search(code)
    rw = _IRWTEXTURE.search(code)
    if m is None or rw is None or rw.start() < m.end():
        return code
    code = code[:m.start()] + header() + code[m.end():rw.start()] + code[rw.end():]
    for d, pattern in _TEXTURE_END.items():
        found = pattern.search(code)
        if found is not None:
            code = code[:found.end(1)] + _SUBSCRIPTS[d] + code[found.end(1):]
    return code


class CpuTexture:
    """A texture of the CPU backend: (W, C), (H, W, C) or (D, H, W, C) texels in shared memory that
    kernels read and write in place. `.numpy()` copies them out, `.upload(a)` writes them."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, data: Any = None, dims: int = 2) -> None:
        if dims not in (1, 2, 3):
            raise ValueError(f"a texture has 1, 2 or 3 dimensions; got dims={dims}")
        shape = tuple(int(x) for x in shape)
        if len(shape) == dims:
            shape = (*shape, 1)
        if len(shape) != dims + 1 or not 1 <= shape[-1] <= 4 or 0 in shape:
            raise ValueError(f"a {dims}D texture needs shape {_LAYOUT[dims]} with C in 1..4; got {shape}")
        self.dims, self.shape, self.dtype = dims, shape, np.dtype(dtype)
        self.channels = shape[-1]
        store = np.dtype(np.float32) if self.dtype.kind == "f" or self.dtype == np.uint8 else self.dtype
        if store not in _SCALARS:
            raise ValueError(f"CPU textures hold float32, int32 or uint32 texels (uint8 as unit floats); got {self.dtype}")
        self.store: np.ndarray = _shm.empty(shape, store)
        if data is not None:
            self.upload(data)

    def upload(self, array: Any) -> None:
        a = np.asarray(array)
        if a.ndim == self.dims:
            a = a[..., None]
        if a.shape != self.shape:
            raise ValueError(f"upload: texture is {self.shape}; got shape {a.shape}")
        self.store[...] = a / 255.0 if self.dtype == np.uint8 else a

    def numpy(self) -> np.ndarray:
        if self.dtype == np.uint8:
            return np.clip(np.rint(self.store * 255.0), 0, 255).astype(np.uint8)
        return self.store.astype(self.dtype, copy=True)

    def frame(self, rgba8: bool = False) -> np.ndarray:
        """The texels without a copy (a read-only view, valid until the next dispatch writes them):
        for a live view's frames; `.numpy()` gives a copy to keep. Same call as the Vulkan handles';
        rgba8 changes nothing here (the texels are in this process: the caller converts them)."""
        if self.dtype == np.uint8:
            return self.numpy()
        view: np.ndarray = self.store.view()
        view.flags.writeable = False
        return view

    def __repr__(self) -> str:
        return f"<CpuTexture {self.dtype} {self.shape}>"


@dataclass(frozen=True)
class CpuSampler:
    """A SamplerState on the CPU: filter "linear" or "point", address "wrap" or "clamp"."""

    filter: str = "linear"
    address: str = "wrap"


def sampler(spec: Any = None) -> CpuSampler:
    """None / "linear", "point" / "nearest", or a dict {"filter": ..., "address": ...}."""
    if isinstance(spec, CpuSampler):
        return spec
    if spec is None or spec == "linear":
        return CpuSampler()
    if spec in ("point", "nearest"):
        return CpuSampler("point")
    if isinstance(spec, Mapping) and set(spec) <= {"filter", "address"}:
        f = {"nearest": "point"}.get(str(spec.get("filter", "linear")), str(spec.get("filter", "linear")))
        a = {"repeat": "wrap", "clamp_to_edge": "clamp"}.get(str(spec.get("address", "wrap")),
                                                            str(spec.get("address", "wrap")))
        if f in ("linear", "point") and a in ("wrap", "clamp"):
            return CpuSampler(f, a)
    raise ParameterError(f"a SamplerState on the CPU needs None, 'linear', 'point' or a dict with filter "
                         f"('linear'/'point') and address ('wrap'/'clamp'); got {describe(spec)}")


Place = Callable[[bytes], int]
Pointer = Callable[[np.ndarray, bool], int]


def bind_sampler(value: Any, place: Place) -> bytes:
    """SamplerState {ISamplerState* state}: a pointer to {filter, address}."""
    s = sampler(value)
    return place(struct.pack("<II", 0 if s.filter == "linear" else 1, 0 if s.address == "wrap" else 1)).to_bytes(8, "little")


def bind_texture(name: str, t: TypeInfo, value: Any, pointer: Pointer, place: Place) -> bytes:
    """Texture*D<T> / RWTexture*D<T> {ITexture* texture}: a pointer to the descriptor of `value`'s texels."""
    dims = _DIMS.get(t.shape or "")
    if dims is None:
        raise ParameterError(f"parameter `{name}` is {t.name}: the CPU backend binds Texture1D/2D/3D, "
                             "Texture1DArray/2DArray and their RW forms (not cube maps); run it on "
                             "Session(backend='vulkan')")
    layered = (t.shape or "").endswith("_array")
    layout = _ARRAY_LAYOUT[dims] if layered else _LAYOUT[dims]
    try:
        base, eshape = typed_element(t)
    except ParameterError:
        raise ParameterError(f"parameter `{name}` is {t.name}: texels must be scalars or vectors of 1-4 components") from None
    channels = eshape[0] if eshape else 1
    if base.kind == "f" and base != np.float32:
        raise ParameterError(f"parameter `{name}` is {t.name}: CPU textures hold 32-bit texels; declare the texel "
                             "type as float/float2/float4 (or int/uint)")
    store = np.dtype(np.float32) if base.kind == "f" else base
    if store not in _SCALARS:
        raise ParameterError(f"parameter `{name}` is {t.name}: CPU textures hold float, int or uint texels")
    want = f"a numpy array of shape {layout} with C = {channels} ({store})"
    if isinstance(value, CpuTexture):
        arr = value.store
        if value.dims != dims or arr.dtype != store or value.channels != channels:
            raise ParameterError(f"parameter `{name}` is {t.name}: that texture is {value.dims}D {value.dtype} "
                                 f"{value.shape}; it needs {dims}D texels of {store} x {channels}")
    elif isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        arr = np.asarray(value)
        if arr.ndim == dims and channels == 1:
            arr = arr[..., None]
        if arr.ndim != dims + 1 or arr.shape[-1] != channels or 0 in arr.shape:
            raise ParameterError(f"parameter `{name}` is {t.name}: pass {want} or a backend.texture(...); "
                                 f"got {describe(value)}")
        if t.writable:
            if not isinstance(value, np.ndarray) or value.dtype != store or not value.flags.c_contiguous \
                    or not value.flags.writeable:
                raise ParameterError(f"parameter `{name}` ({t.name}) is written by the kernel in place: pass a "
                                     f"writable C-contiguous array of {store}, shape {layout} with "
                                     f"C = {channels}; got {describe(value)}"
                                     + (f". {copy_advice(name, store)}" if isinstance(value, np.ndarray) else ""))
        elif arr.dtype != store:
            if arr.dtype.kind not in "biuf" or (store.kind in "iu" and arr.dtype.kind == "f"):
                raise ParameterError(f"parameter `{name}` is {t.name}: pass {want}; got {describe(value)}")
            arr = arr / 255.0 if arr.dtype == np.uint8 and store.kind == "f" else arr
            arr = np.ascontiguousarray(arr, dtype=store)
        else:
            arr = np.ascontiguousarray(arr)
    else:
        raise ParameterError(f"parameter `{name}` is {t.name}: pass {want} or a backend.texture(...); "
                             f"got {describe(value)}")
    size = arr.shape[:-1][::-1]   # width first
    data = pointer(arr, bool(t.writable))
    desc = _DESCRIPTOR.pack(data, size[0], size[1] if dims > 1 else 1, size[2] if dims > 2 else 1, dims,
                            channels * 4, channels, _SCALARS[store], int(layered))
    return place(desc).to_bytes(8, "little")
