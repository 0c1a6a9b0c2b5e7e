"""Device-resident Vulkan objects (sgl buffers and textures with `.numpy()`/`.upload()`) and the
texel formats numpy arrays map to; used by the Vulkan backend (device) and its binding of
parameters (binding)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol

import numpy as np

from ..common.packing import ParameterError

__all__ = ["DeviceHost", "VulkanBuffer", "VulkanTexture"]


class DeviceHost(Protocol):
    """What the objects need of the backend that makes them."""

    spy: Any
    device: Any
    adapter: str

    def _new_buffer(self, nbytes: int, data: np.ndarray | None, clear: bool = True, format: Any = None) -> Any: ...
    def read_back(self, nbytes: int, record: Callable[[Any, Any], None]) -> np.ndarray: ...


# -- formats --------------------------------------------------------------------------------------

_TEX_DIMS = {"texture_1d": 1, "texture_2d": 2, "texture_3d": 3, "texture_cube": 2,
             "texture_1d_array": 2, "texture_2d_array": 3}


def _format_for(spy: Any, scalar: str, channels: int, normalized8: bool = False) -> Any:
    ch = {1: "r", 2: "rg", 3: "rgba", 4: "rgba"}[channels]
    if normalized8:
        return getattr(spy.Format, f"{ch}8_unorm")
    kind = {"float32": "32_float", "float16": "16_float", "uint32": "32_uint", "int32": "32_sint",
            "uint16": "16_uint", "int16": "16_sint", "uint8": "8_uint", "int8": "8_sint"}.get(scalar)
    if kind is None:
        raise ParameterError(f"no texture format holds {scalar} texels")
    return getattr(spy.Format, ch + kind)


_ZERO_CHECK_BYTES = 1 << 16   # RW arrays at least this big are checked for all-zeros (then cleared, not uploaded)

_DTYPE_SCALAR = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(np.uint32): "uint32",
                 np.dtype(np.int32): "int32", np.dtype(np.uint16): "uint16", np.dtype(np.int16): "int16",
                 np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}


# -- device-resident objects ----------------------------------------------------------------------


class VulkanBuffer:
    """A buffer that lives on the device: pass it to kernels (no copy); `.numpy()` reads it back."""

    def __init__(self, backend: DeviceHost, shape: tuple[int, ...], dtype: np.dtype, data: np.ndarray | None):
        self.backend, self.shape, self.dtype = backend, shape, np.dtype(dtype)
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        base, inner = (self.dtype.subdtype if self.dtype.subdtype is not None else (self.dtype, ()))
        if not inner and len(shape) > 1:
            inner = tuple(shape[1:])
        self.format = _buffer_format(backend.spy, base, tuple(inner)) if self.dtype.names is None else None
        self.sgl = backend._new_buffer(self.nbytes, data, format=self.format)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def numpy(self) -> np.ndarray:
        n = self.nbytes
        raw = self.backend.read_back(n, lambda encoder, stage: encoder.copy_buffer(stage, 0, self.sgl, 0, n)) if n \
            else np.zeros(0, np.uint8)
        out: np.ndarray = raw.view(self.dtype).reshape(self.shape)   # a fresh array: viewed, not copied again
        return out

    def upload(self, array: Any) -> None:
        arr = np.ascontiguousarray(array, dtype=self.dtype)
        if arr.size != self.size:
            raise ValueError(f"upload: buffer holds {self.shape} of {self.dtype}; got shape {arr.shape}")
        if arr.nbytes:
            self.sgl.copy_from_numpy(arr.reshape(-1).view(np.uint8))

    def __repr__(self) -> str:
        return f"<VulkanBuffer {self.dtype} {self.shape} on {self.backend.adapter}>"


class VulkanTexture:
    """A texture that lives on the device ((H, W, C) for 2D, (D, H, W, C) for 3D, (W, C) for 1D)."""

    def __init__(self, backend: DeviceHost, shape: tuple[int, ...], dtype: np.dtype, data: np.ndarray | None,
                 dims: int = 2, layered: bool = False):
        """layered: a Texture1DArray (dims 2, shape (L, W, C)) or Texture2DArray (dims 3, (L, H, W, C))."""
        spy = backend.spy
        self.backend, self.dims, self.dtype, self.layered = backend, dims, np.dtype(dtype), layered and dims > 1
        if len(shape) == dims:
            shape = (*shape, 1)
        if len(shape) != dims + 1 or shape[-1] not in (1, 2, 3, 4):
            raise ValueError(f"a {dims}D texture needs shape {'(D, H, W, C)' if dims == 3 else '(H, W, C)' if dims == 2 else '(W, C)'}"
                             f" with C in 1..4; got {shape}")
        self.shape = tuple(int(x) for x in shape)
        scalar = _DTYPE_SCALAR.get(self.dtype)
        if scalar is None:
            raise ValueError(f"no texture format holds {self.dtype} texels")
        self.channels = self.shape[-1]
        self._layout: tuple[int, int, int] | None = None   # _slices(), asked of the device once
        self.format = _format_for(spy, scalar, self.channels, normalized8=self.dtype == np.uint8)
        self._stored = 4 if self.channels == 3 else self.channels
        width, height, depth = self._extent()
        kind = {1: spy.TextureType.texture_1d, 2: spy.TextureType.texture_2d, 3: spy.TextureType.texture_3d}[dims]
        extent: dict[str, int] = {"width": width, "height": height, "depth": depth}
        if self.layered:   # the layer count is the outermost axis
            kind = spy.TextureType.texture_1d_array if dims == 2 else spy.TextureType.texture_2d_array
            extent["array_length"] = self.shape[0]
        usage = (spy.TextureUsage.shader_resource | spy.TextureUsage.unordered_access
                 | spy.TextureUsage.copy_source | spy.TextureUsage.copy_destination)
        if self.channels == 3:   # stored as rgba: sampled only (an rgba8 storage image is tried, e.g. [format("rgba8")])
            usage = spy.TextureUsage.shader_resource | spy.TextureUsage.copy_source | spy.TextureUsage.copy_destination
        try:
            self.sgl = backend.device.create_texture(type=kind, format=self.format, usage=usage, **extent)
        except Exception:  # storage usage unsupported for this format: sampled only
            usage = spy.TextureUsage.shader_resource | spy.TextureUsage.copy_source | spy.TextureUsage.copy_destination
            self.sgl = backend.device.create_texture(type=kind, format=self.format, usage=usage, **extent)
        if data is not None:
            self.upload(data)

    def stored(self, array: Any) -> np.ndarray:
        """`array`'s texels as the device stores them (3 channels padded to 4, one without its axis)."""
        arr = np.asarray(array)
        if arr.ndim == self.dims:
            arr = arr[..., None]
        if arr.shape != self.shape:
            raise ValueError(f"upload: texture is {self.shape}; got shape {arr.shape}")
        arr = arr.astype(self.dtype, copy=False)
        if self._stored != self.channels:
            pad = np.zeros((*arr.shape[:-1], self._stored), self.dtype)
            pad[..., : self.channels] = arr
            if self.dtype == np.uint8:
                pad[..., 3] = 255
            elif self.dtype.kind == "f":
                pad[..., 3] = 1
            arr = pad
        if self._stored == 1:
            arr = arr[..., 0]
        return np.ascontiguousarray(arr)

    def upload(self, array: Any) -> None:
        arr = self.stored(array)
        if self.layered:
            for i in range(arr.shape[0]):
                self.sgl.copy_from_numpy(arr[i].copy(), layer=i)
            return
        self.sgl.copy_from_numpy(arr if arr.flags.writeable else arr.copy())

    # -- copies through a staging buffer in a dispatch's own command buffer ----------------------------

    def _extent(self) -> tuple[int, int, int]:
        """(width, height, depth) in texels of one layer (an array texture's layer count is its outermost
        axis, the channels its innermost)."""
        axes = self.shape[1:-1] if self.layered else self.shape[:-1]
        width, height, depth = (*axes[::-1], 1, 1)[:3]
        return width, height, depth

    def _slices(self) -> tuple[int, int, int]:
        """(row pitch, slice count, bytes per slice) of the texels in a buffer, as the device copies
        them: a slice is a layer of an array texture, a depth slice of a 3D one. Asked of the device
        once per texture (every staged copy needs it)."""
        if self._layout is None:
            lay = self.sgl.get_subresource_layout(0)
            size = int(lay.size_in_bytes)
            if self.layered:
                self._layout = int(lay.row_pitch), self.shape[0], size
            else:
                depth = self._extent()[2]
                self._layout = int(lay.row_pitch), depth, size // depth
        return self._layout

    def staging_layout(self) -> tuple[int, int]:
        """(row pitch, size) in bytes of all the texels in a buffer, as the device copies them."""
        pitch, count, each = self._slices()
        return pitch, count * each

    def _rows(self, data: np.ndarray) -> np.ndarray:
        """The (slice, row, byte) view of staged bytes, each row cut to its texels."""
        w, h, _ = self._extent()
        pitch, count, each = self._slices()
        rows = data[: count * each].reshape(count, each)[:, : h * pitch].reshape(count, h, pitch)
        return rows[:, :, : w * self._stored * self.dtype.itemsize]

    def staged(self, array: Any) -> np.ndarray:
        """`array`'s texels as bytes laid out for copy_in (rows padded to the device's pitch)."""
        raw = self.stored(array).reshape(-1).view(np.uint8)
        size = self.staging_layout()[1]
        if raw.nbytes == size:
            return raw
        out = np.zeros(size, np.uint8)
        rows = self._rows(out)
        rows[...] = raw.reshape(rows.shape)
        return out

    def unstaged(self, data: np.ndarray) -> np.ndarray:
        """The texels, as the device stores them (3 channels padded to 4), from the bytes copy_out left
        in a buffer."""
        rows = self._rows(data.reshape(-1).view(np.uint8))
        return np.ascontiguousarray(rows).view(self.dtype).reshape((*self.shape[:-1], self._stored))

    def texels(self, data: np.ndarray) -> np.ndarray:
        """The texels with the texture's own channels (a view), from the bytes copy_out left in a buffer."""
        return self.unstaged(data)[..., : self.channels]

    def _copies(self) -> Iterator[tuple[int, int, int, int, Any]]:
        """(layer, byte offset in the staging buffer, bytes, row pitch, extent) of each copy between the
        texture and a staging buffer: one per layer of an array texture, else one for all of it."""
        pitch, count, each = self._slices()
        extent = self.backend.spy.uint3(*self._extent())
        if not self.layered:
            yield 0, 0, count * each, pitch, extent
            return
        for layer in range(count):
            yield layer, layer * each, each, pitch, extent

    def copy_in(self, encoder: Any, stage: Any) -> None:
        origin = self.backend.spy.uint3(0)
        for layer, offset, size, pitch, extent in self._copies():
            encoder.copy_buffer_to_texture(self.sgl, layer, 0, origin, stage, offset, size, pitch, extent)

    def copy_out(self, encoder: Any, stage: Any) -> None:
        origin = self.backend.spy.uint3(0)
        for layer, offset, size, pitch, extent in self._copies():
            encoder.copy_texture_to_buffer(stage, offset, size, pitch, self.sgl, layer, 0, origin, extent)

    def numpy(self) -> np.ndarray:
        return np.ascontiguousarray(self.texels(self.backend.read_back(self.staging_layout()[1], self.copy_out)))

    def __repr__(self) -> str:
        return f"<VulkanTexture {self.format.name} {self.shape} on {self.backend.adapter}>"


_BUFFER_FORMATS = {"float32": "32_float", "float16": "16_float", "uint32": "32_uint", "int32": "32_sint",
                   "uint16": "16_uint", "int16": "16_sint", "uint8": "8_uint", "int8": "8_sint"}


def _buffer_format(spy: Any, base: np.dtype, shape: tuple[int, ...]) -> Any:
    """The texel format of a typed buffer's elements (float4 -> rgba32_float), None if there is none."""
    n = shape[0] if shape else 1
    kind = _BUFFER_FORMATS.get(np.dtype(base).name)
    if kind is None or len(shape) > 1 or not 1 <= n <= 4:
        return None
    return getattr(spy.Format, ("r", "rg", "rgb", "rgba")[n - 1] + kind, None)


def _writable_bytes(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous, writable uint8 view (sgl's numpy arguments refuse read-only arrays)."""
    arr = np.ascontiguousarray(arr)
    if not arr.flags.writeable:
        arr = arr.copy()
    return arr.reshape(-1).view(np.uint8)
