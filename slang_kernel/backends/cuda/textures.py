"""CUDA textures, surfaces and samplers for the CUDA backend (CuPy's CUDA arrays and texture objects).

Slang's CUDA target passes a `Texture*` as a CUtexObject and an `RWTexture*` as a CUsurfObject (both
64-bit handles); a `SamplerState` is an unused pointer, because on CUDA the sampling state (filter,
address mode) belongs to the texture object. So a texture here is one CUDA array (allocated with
surface load/store, so the same data can be read, sampled and written) plus a texture object per
(sampler, read mode), made when first needed; the sampler of a dispatch is the one its SamplerState
parameters name (they must agree: CUDA has no separate sampler to bind per call).

Layouts match the Vulkan backend's handles: (W, C) for 1D, (H, W, C) for 2D, (D, H, W, C) for 3D and
(L, H, W, C) for a Texture2DArray of L layers; C in 1..4, 3 stored padded to 4 (alpha 1, or 255 for
uint8). uint8 data read by a float texture reads as 0..1 (normalised), as on Vulkan's rgba8_unorm.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...compiler.reflection import ParamInfo, TypeInfo
from ..common.packing import ParameterError, copy_advice, texel

__all__ = ["CudaSampler", "CudaTexture", "TextureBinder", "dispatch_sampler", "sampler_from", "sampler_paths",
           "texel", "unsupported_texture_use"]

# CUDA runtime enum values (cuda_runtime_api.h; stable since CUDA 5)
_KIND_SIGNED, _KIND_UNSIGNED, _KIND_FLOAT = 0, 1, 2
_RESOURCE_ARRAY = 0
_ARRAY_LAYERED, _ARRAY_SURFACE = 0x01, 0x02
_READ_ELEMENT, _READ_NORMALIZED = 0, 1
_FILTERS = {"point": 0, "linear": 1}
_ADDRESS = {"wrap": 0, "clamp": 1, "mirror": 2, "border": 3}
_ADDRESS_ALIASES = {"wrap": "wrap", "repeat": "wrap", "clamp": "clamp", "clamp_to_edge": "clamp",
                    "mirror": "mirror", "mirror_repeat": "mirror", "mirrored_repeat": "mirror",
                    "border": "border", "clamp_to_border": "border"}
_FILTER_ALIASES = {"linear": "linear", "point": "point", "nearest": "point"}

_DTYPES = (np.float32, np.float16, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32)
# texture shape (reflection) -> (dimensions of one layer, layered)
_SHAPES = {"texture_1d": (1, False), "texture_2d": (2, False), "texture_3d": (3, False),
           "texture_2d_array": (2, True)}


def _layout(ndims: int) -> str:
    return {1: "(W, C)", 2: "(H, W, C)", 3: "(D, H, W, C)"}[ndims]


def describe(v: Any) -> str:
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(v).__name__} of {dtype} with shape {tuple(shape)}"
    return f"{type(v).__name__} {v!r:.60}"


_HALF_READ = re.compile(r"\btex\w*<\s*__half")


def unsupported_texture_use(body: str) -> str | None:
    """What in this generated CUDA (after the prelude) Slang's CUDA target cannot run, said with the
    workaround; None when all is well. Both were measured on an H200 (2026-12)."""
    if "tex1Dfetch_int" in body:
        return ("calls Load on a Texture1D, which Slang's CUDA target does not implement (shader-slang/slang#12630: "
                "it reads garbage); on CUDA use SampleLevel(pointSampler, (x + 0.5) / width, 0) or a Texture2D "
                "of height 1")
    if _HALF_READ.search(body):
        return ("reads a half texture (Texture*<half...>), which Slang's CUDA prelude has no fetch for; declare it "
                "with float texels (e.g. Texture2D<float4>): float16 arrays bound to it are read as float. "
                "RWTexture*<half...> and half buffers work")
    return None


# -- samplers -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CudaSampler:
    """A sampler's state as CUDA keeps it (inside each texture object): filter and address modes."""

    filter: str = "linear"
    address: tuple[str, str, str] = ("wrap", "wrap", "wrap")

    def __repr__(self) -> str:
        a = self.address[0] if len(set(self.address)) == 1 else ",".join(self.address)
        return f"<CudaSampler {self.filter} {a}>"


def _name(v: Any) -> str:
    return str(getattr(v, "name", v)).lower()


def sampler_from(spec: Any = None) -> CudaSampler:
    """None/"linear", "point"/"nearest", "linear_clamp"-style strings, a dict
    ({"filter": "point", "address": "clamp"}, or sgl's min_filter/address_u/... keys) or a CudaSampler."""
    if isinstance(spec, CudaSampler):
        return spec
    if spec is None:
        return CudaSampler()
    if isinstance(spec, str):
        filt, _, addr = spec.lower().replace("-", "_").partition("_")
        if filt in _FILTER_ALIASES and (not addr or addr in _ADDRESS_ALIASES):
            a = _ADDRESS_ALIASES[addr] if addr else "wrap"
            return CudaSampler(_FILTER_ALIASES[filt], (a, a, a))
    elif isinstance(spec, Mapping):
        try:
            filt = _name(spec.get("filter", spec.get("min_filter", spec.get("mag_filter", "linear"))))
            filt = _FILTER_ALIASES[filt]
            base = spec.get("address", "wrap")
            modes = [_ADDRESS_ALIASES[_name(spec.get(k, base))] for k in ("address_u", "address_v", "address_w")]
            known = {"filter", "min_filter", "mag_filter", "mip_filter", "address", "address_u", "address_v",
                     "address_w"}
            extra = [k for k in spec if k not in known]
            if not extra:
                return CudaSampler(filt, (modes[0], modes[1], modes[2]))
        except KeyError:
            pass
    raise ParameterError(
        f"a SamplerState on CUDA needs None, 'linear', 'point', 'linear_clamp', 'point_clamp', a dict such as "
        f"{{'filter': 'point', 'address': 'clamp'}} (address: wrap, clamp, mirror, border) or a backend.sampler(...); "
        f"got {spec!r:.80}")


def sampler_paths(params: Sequence[ParamInfo]) -> list[tuple[str, ...]]:
    """Where the SamplerState parameters are, as name paths through structs and parameter blocks."""
    out: list[tuple[str, ...]] = []

    def walk(t: TypeInfo, path: tuple[str, ...]) -> None:
        if t.kind == "sampler":
            out.append(path)
        elif t.kind in ("constant_buffer", "parameter_block") and t.element is not None:
            walk(t.element, path)
        elif t.kind == "struct":
            for f in t.fields:
                walk(f.type, (*path, f.name))

    for p in params:
        if not p.varying:
            walk(p.type, (p.name,))
    return out


def dispatch_sampler(paths: Sequence[tuple[str, ...]], values: Mapping[str, Any], entry: str) -> CudaSampler:
    """The one sampler state of a dispatch: what its SamplerState parameters say (they must agree)."""
    found: dict[CudaSampler, str] = {}
    for path in paths:
        v: Any = values
        for part in path:
            if isinstance(v, Mapping) and part in v:
                v = v[part]
            elif hasattr(v, part) and not isinstance(v, Mapping):
                v = getattr(v, part)
            else:
                v = None
                break
        if v is not None:
            found.setdefault(sampler_from(v), ".".join(path))
    if len(found) > 1:
        listed = ", ".join(f"`{n}` = {s!r}" for s, n in found.items())
        raise ParameterError(
            f"{entry}: CUDA keeps the sampling state inside each texture object, so one dispatch can use one "
            f"sampler setting; this one got {listed}. Pass equal samplers, or split the kernel.")
    return next(iter(found), CudaSampler())


# -- textures -------------------------------------------------------------------------------------


class CudaTexture:
    """A texture on the GPU: a CUDA array that kernels sample, load and (as RWTexture) write in place.
    `.numpy()` reads it back, `.upload(array)` replaces its contents."""

    def __init__(self, cupy: Any, owner: object, shape: tuple[int, ...], dtype: Any, dims: int = 2,
                 layered: bool = False) -> None:
        self.cupy, self.owner = cupy, owner
        self.dims, self.layered, self.dtype = dims, layered, np.dtype(dtype)
        nd = dims + (1 if layered else 0)   # axes before the channel axis
        if len(shape) == nd:
            shape = (*shape, 1)
        if dims not in (1, 2, 3) or (layered and dims != 2):
            raise ValueError(f"CUDA textures are 1D, 2D, 3D or 2D arrays (layered); got dims={dims}, layered={layered}")
        if len(shape) != nd + 1 or shape[-1] not in (1, 2, 3, 4) or 0 in shape:
            want = "(L, H, W, C)" if layered else _layout(dims)
            raise ValueError(f"a {dims}D{' array' if layered else ''} texture needs shape {want} with C in 1..4; "
                             f"got {shape}")
        if self.dtype not in [np.dtype(d) for d in _DTYPES]:
            raise ValueError(f"no CUDA texture format holds {self.dtype} texels "
                             "(float32, float16, uint8/int8, uint16/int16, uint32/int32)")
        self.shape = tuple(int(x) for x in shape)
        self.channels = self.shape[-1]
        self.stored = 4 if self.channels == 3 else self.channels
        bits = self.dtype.itemsize * 8
        kind = _KIND_FLOAT if self.dtype.kind == "f" else _KIND_SIGNED if self.dtype.kind == "i" else _KIND_UNSIGNED
        tex = cupy.cuda.texture
        self._desc = tex.ChannelFormatDescriptor(bits, bits if self.stored > 1 else 0, bits if self.stored > 2 else 0,
                                                 bits if self.stored > 3 else 0, kind)
        extent = self.shape[:-1][::-1]   # width first; a layered 2D array puts its layers in depth
        w, h, d = extent[0], extent[1] if len(extent) > 1 else 0, extent[2] if len(extent) > 2 else 0
        flags = _ARRAY_SURFACE | (_ARRAY_LAYERED if layered else 0)
        self.array = tex.CUDAarray(self._desc, w, h, d, flags)
        self._objects: dict[tuple[CudaSampler, int], Any] = {}
        self._surface: Any = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape[:-1], dtype=np.int64) * self.stored * self.dtype.itemsize)

    def _copy_shape(self) -> tuple[int, ...]:
        return (*self.shape[:-2], self.shape[-2] * self.stored)

    def upload(self, array: Any) -> None:
        """Replace the contents from a numpy or CuPy array of this texture's shape."""
        xp = self.cupy.get_array_module(array) if isinstance(array, self.cupy.ndarray) else np
        arr = xp.asarray(array)
        if arr.ndim == len(self.shape) - 1:
            arr = arr[..., None]
        if tuple(arr.shape) != self.shape:
            raise ValueError(f"upload: texture is {self.shape}; got shape {tuple(arr.shape)}")
        arr = arr.astype(self.dtype, copy=False)
        if self.stored != self.channels:
            pad = xp.zeros((*arr.shape[:-1], self.stored), self.dtype)
            pad[..., : self.channels] = arr
            pad[..., 3] = 255 if self.dtype == np.uint8 else 1 if self.dtype.kind == "f" else 0
            arr = pad
        arr = xp.ascontiguousarray(arr).reshape(self._copy_shape())
        stream = self.cupy.cuda.get_current_stream()
        self.array.copy_from(arr, stream)
        if xp is np:
            stream.synchronize()   # the host array may be freed or changed as soon as we return

    def copy_to(self, out: Any) -> None:
        """Copy the texels into `out` (numpy or CuPy, this texture's shape; any dtype numpy can cast to)."""
        raw = self.numpy() if not isinstance(out, self.cupy.ndarray) else self._device_copy()
        xp = np if isinstance(raw, np.ndarray) else self.cupy
        xp.copyto(out, raw.reshape(out.shape), casting="unsafe")

    def _device_copy(self) -> Any:
        dev = self.cupy.empty(self._copy_shape(), self.dtype)
        self.array.copy_to(dev, self.cupy.cuda.get_current_stream())
        return dev.reshape((*self.shape[:-1], self.stored))[..., : self.channels]

    def numpy(self) -> np.ndarray:
        out = np.empty(self._copy_shape(), self.dtype)
        stream = self.cupy.cuda.get_current_stream()
        self.array.copy_to(out, stream)
        stream.synchronize()
        got: np.ndarray = np.ascontiguousarray(out.reshape((*self.shape[:-1], self.stored))[..., : self.channels])
        return got

    def cupy_array(self) -> Any:
        """A CuPy copy of the texels, on the GPU."""
        return self.cupy.ascontiguousarray(self._device_copy())

    def texture_object(self, sampler: CudaSampler, normalized_read: bool) -> int:
        """The CUtexObject for sampling with `sampler` (integer texels are never filtered)."""
        read = _READ_NORMALIZED if normalized_read else _READ_ELEMENT
        if self.dtype.kind != "f" and read == _READ_ELEMENT and sampler.filter != "point":
            sampler = CudaSampler("point", sampler.address)   # CUDA refuses linear filtering of integers
        key = (sampler, read)
        obj = self._objects.get(key)
        if obj is None:
            tex = self.cupy.cuda.texture
            res = tex.ResourceDescriptor(_RESOURCE_ARRAY, cuArr=self.array)
            desc = tex.TextureDescriptor(tuple(_ADDRESS[a] for a in sampler.address), _FILTERS[sampler.filter],
                                         read, normalizedCoords=1)
            obj = self._objects[key] = tex.TextureObject(res, desc)
        return int(obj.ptr)

    def surface_object(self) -> int:
        """The CUsurfObject RW textures write through."""
        if self._surface is None:
            tex = self.cupy.cuda.texture
            self._surface = tex.SurfaceObject(tex.ResourceDescriptor(_RESOURCE_ARRAY, cuArr=self.array))
        return int(self._surface.ptr)

    def __repr__(self) -> str:
        return f"<CudaTexture {self.dtype} {self.shape}{' layered' if self.layered else ''}>"


# -- binding --------------------------------------------------------------------------------------


class TextureBinder:
    """Binds one dispatch's texture parameters: device CudaTextures as they are, numpy/CuPy arrays
    through a temporary CUDA array (RW ones copied back after the launch, by `write_back`)."""

    def __init__(self, cupy: Any, owner: object, sampler: CudaSampler,
                 on_device: Callable[[Any], Any | None]) -> None:
        self.cupy, self.owner, self.sampler, self.on_device = cupy, owner, sampler, on_device
        self.made: dict[int, CudaTexture] = {}
        self._backs: list[Callable[[], None]] = []
        self._backed: set[int] = set()

    def bind(self, name: str, t: TypeInfo, value: Any) -> int:
        shape_kind = t.shape or ""
        if shape_kind not in _SHAPES:
            raise ParameterError(f"parameter `{name}` is {t.name}: the CUDA backend binds Texture1D/2D/3D, "
                                 "Texture2DArray and their RW forms; cube maps and 1D arrays are not supported")
        dims, layered = _SHAPES[shape_kind]
        scalar, channels = texel(t)
        if isinstance(value, CudaTexture):
            return self._bind_device(name, t, value, dims, layered, scalar, channels)
        return self._bind_array(name, t, value, dims, layered, scalar, channels)

    def _bind_device(self, name: str, t: TypeInfo, tex: CudaTexture, dims: int, layered: bool, scalar: str,
                     channels: int) -> int:
        if tex.owner is not self.owner:
            raise ParameterError(f"parameter `{name}`: that texture belongs to another CUDA session")
        if (tex.dims, tex.layered) != (dims, layered):
            what = f"{tex.dims}D{' array' if tex.layered else ''}"
            hint = ", layered=True" if layered else ""
            raise ParameterError(f"parameter `{name}` is {t.name}; got a {what} texture: make it with "
                                 f"backend.texture(..., dims={dims}{hint})")
        if t.writable:
            self._check_surface(name, t, tex.dtype, tex.stored, scalar, channels)
            return tex.surface_object()
        return tex.texture_object(self.sampler, scalar.startswith("float") and tex.dtype.kind in "iu")

    def _check_surface(self, name: str, t: TypeInfo, dtype: np.dtype, stored: int, scalar: str, channels: int) -> None:
        want = np.dtype(scalar)
        if channels == 3:
            raise ParameterError(f"parameter `{name}` is {t.name}: CUDA surfaces have no 3-channel formats; "
                                 f"declare it with 4 channels (e.g. RWTexture2D<float4>)")
        if dtype != want or stored != channels:
            raise ParameterError(f"parameter `{name}` is {t.name}: the kernel writes {channels} x {want} texels, "
                                 f"but the texture holds {stored} x {dtype}; make it with "
                                 f"backend.texture(shape + ({channels},), {want.name})")

    def _bind_array(self, name: str, t: TypeInfo, value: Any, dims: int, layered: bool, scalar: str,
                    channels: int) -> int:
        nd = dims + (1 if layered else 0)
        want = "(L, H, W, C)" if layered else _layout(dims)
        dev = self.on_device(value)
        if dev is None:
            try:
                arr = value if isinstance(value, np.ndarray) else np.asarray(
                    value, dtype=np.float32 if scalar.startswith("float") else None)
            except (TypeError, ValueError):
                arr = None
        else:
            arr = dev
        shape = tuple(arr.shape) if arr is not None and getattr(arr, "dtype", np.dtype(object)).kind in "biuf" else ()
        if len(shape) == nd and channels == 1:
            shape = (*shape, 1)
        if len(shape) != nd + 1 or shape[-1] != channels or 0 in shape:
            raise ParameterError(
                f"parameter `{name}` is {t.name}: pass a numpy or CuPy array of shape {want} with C = {channels} "
                f"(float32, or uint8 for 0..1 values), or a backend.texture(...); got {describe(value)}")
        assert arr is not None
        kind = arr.dtype.kind
        unorm8 = arr.dtype == np.uint8 and scalar.startswith("float")
        if not scalar.startswith("float") and kind == "f":
            raise ParameterError(f"parameter `{name}` is {t.name}: its texels are {scalar}; got float data "
                                 f"({describe(value)}): pass an integer array")
        if t.writable:
            if dev is None and not (isinstance(value, np.ndarray) and value.flags.writeable):
                raise ParameterError(f"parameter `{name}` ({t.name}) is written by the kernel: pass a writable numpy "
                                     f"or CuPy array of shape {want} with C = {channels}; got {describe(value)}"
                                     + (f". {copy_advice(name)}" if isinstance(value, np.ndarray) else ""))
            if scalar.startswith("float") and not unorm8 and kind != "f":
                raise ParameterError(f"parameter `{name}` ({t.name}) is written with floats: pass a float32 array "
                                     f"(or uint8 for 0..1 values); got {describe(value)}")
            if scalar not in ("float32", "float16", "uint32", "int32"):
                raise ParameterError(f"parameter `{name}` ({t.name}): RW textures of {scalar} are not supported on CUDA")
            store = np.dtype(scalar)
            self._check_surface(name, t, store, 4 if channels == 3 else channels, scalar, channels)
        elif unorm8:
            store = np.dtype(np.uint8)
        else:
            store = np.dtype(scalar if scalar in ("float16", "uint32", "int32", "uint16", "int16", "int8", "uint8")
                             else np.float32)
        key = id(value)
        tex = self.made.get(key)
        if tex is None:
            tex = CudaTexture(self.cupy, self.owner, shape, store, dims, layered)
            data = arr.reshape(shape)
            if unorm8 and t.writable:
                data = data.astype(np.float32) / 255.0
            tex.upload(data)
            self.made[key] = tex
        if t.writable and key not in self._backed:
            self._backed.add(key)
            self._backs.append(lambda: self._back(tex, value, arr, unorm8))
            return tex.surface_object()
        if t.writable:
            return tex.surface_object()
        handle: int = tex.texture_object(self.sampler, unorm8)
        return handle

    def _back(self, tex: CudaTexture, target: Any, arr: Any, unorm8: bool) -> None:
        if not unorm8:
            tex.copy_to(target)
            return
        got = tex.numpy() if isinstance(target, np.ndarray) else tex.cupy_array()
        xp = np if isinstance(got, np.ndarray) else self.cupy
        xp.copyto(target, xp.clip(xp.rint(got * 255.0), 0, 255).reshape(target.shape), casting="unsafe")

    def write_back(self) -> None:
        """After the launch: copy RW textures made from arrays back into those arrays."""
        for back in self._backs:
            back()
