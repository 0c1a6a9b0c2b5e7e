"""The Vulkan device in this process: slangpy's sgl device (a GPU driver, or Mesa lavapipe in software).

`backends.vulkan.create` uses it directly (Session(isolate=False)) or inside the worker process of
backends/_vulkan_isolated.py (the default).

sgl compiles Slang *source* modules itself (it needs its own reflection to bind parameters by name),
so a kernel is built from its `CompiledKernel.chain`: each module is loaded into sgl's Slang
session under its content name (sgl refuses to reload a name with new source, slangpy #966), its
text starting with its own `#define`s and the imports renamed to match. Modules are cached by that
name (an unchanged cell is never reloaded) and compute kernels per kernel revision
(`CompiledKernel.key`); `import playground;` resolves through the include path (BackendConfig). Our own compiler still reflects the kernel for target "spirv" (thread group
size, parameter checks, buffer element layouts).

Parameters are bound by name through sgl's shader cursor: entry-point uniforms on the entry point,
globals on the root object. numpy arrays are uploaded; RW buffers and RW textures are read back into
the same arrays. `backend.buffer(...)` / `backend.texture(...)` make device-resident objects that
kernels use without copies (`.numpy()` reads them back).

`printf` in a kernel is rewritten (in sgl's copy of the source only) into sgl's `print` (format
converted from printf's `%d` style to `{}`), and its output is written to sys.stdout after the
dispatch, so it shows up in the notebook cell.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any, Mapping

import numpy as np

from ..compiler.reflection import ParamInfo, TypeInfo
from . import BackendConfig, DispatchTiming
from ..compiled import CompiledKernel, ModuleSource
from ..errors import BackendUnavailable, VulkanCompileError
from ._packing import (ParameterError, _describe, buffer_array, copy_fields, element_dtype, numpy_dtype, struct_array,
                       typed_element)
from ._wait import wait_polled
from .printing import rewrite_printf, uses_printf

__all__ = ["INSTALL_HINT", "VulkanBackend", "VulkanBuffer", "VulkanCompileError", "VulkanTexture", "compile_options"]

INSTALL_HINT = (
    "install a Vulkan driver: on Debian 12 `apt-get install -t bookworm-backports mesa-vulkan-drivers "
    "libvulkan1` (Mesa >= 25 lavapipe; needs `deb http://deb.debian.org/debian bookworm-backports main` "
    "in the apt sources), on Debian 13 / Ubuntu 24.04 `apt-get install mesa-vulkan-drivers libvulkan1`; "
    "with an NVIDIA GPU the NVIDIA driver's Vulkan ICD. Check with `vulkaninfo --summary` (vulkan-tools)")


MODULES_PER_SESSION = 128


def compile_options(target: str) -> tuple[str, ...]:
    """sgl compiles for Vulkan with scalar block layout and row-major matrices: reflect the same
    layouts (buffer element dtypes come from this reflection)."""
    if target in ("spirv", "spirv-asm", "glsl"):
        return ("-fvk-use-scalar-layout", "-matrix-layout-row-major")
    return ()


def _split_head(source: str) -> tuple[str, str, str]:
    """A module source's head (its #define lines and the one line of imports), the newline, the text."""
    lines = source.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith("#define "):
        i += 1
    head = "\n".join(lines[: i + 1])
    return head, "\n", "\n".join(lines[i + 1:])


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


def _texel(t: TypeInfo) -> tuple[str, int]:
    """(scalar, channels) of a texture's element type; float4 when reflection does not say."""
    el = t.element
    if el is not None and el.kind in ("scalar", "vector") and el.scalar:
        return el.scalar, (el.count if el.kind == "vector" else 1) or 1
    m = _TEXEL_NAME.search(el.name if el is not None else "")
    if m is None:
        return "float32", 4
    return _TEXEL_SCALARS[m.group(1)], int(m.group(2) or 1)


_TEXEL_NAME = re.compile(r"\b(float|half|double|int|uint|int16_t|uint16_t|int8_t|uint8_t|bool)([1-4])?\b")
_TEXEL_SCALARS = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "uint": "uint32",
                  "int16_t": "int16", "uint16_t": "uint16", "int8_t": "int8", "uint8_t": "uint8", "bool": "uint32"}


_ZERO_CHECK_BYTES = 1 << 16   # RW arrays at least this big are checked for all-zeros (then cleared, not uploaded)

_DTYPE_SCALAR = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(np.uint32): "uint32",
                 np.dtype(np.int32): "int32", np.dtype(np.uint16): "uint16", np.dtype(np.int16): "int16",
                 np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}


# -- device-resident objects ----------------------------------------------------------------------


class VulkanBuffer:
    """A buffer that lives on the device: pass it to kernels (no copy); `.numpy()` reads it back."""

    def __init__(self, backend: "VulkanBackend", shape: tuple[int, ...], dtype: np.dtype, data: np.ndarray | None):
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
        raw = self.sgl.to_numpy()
        data = np.frombuffer(raw.tobytes()[: self.nbytes], dtype=self.dtype)
        out: np.ndarray = data.reshape(self.shape).copy()
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

    def __init__(self, backend: "VulkanBackend", shape: tuple[int, ...], dtype: np.dtype, data: np.ndarray | None,
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
        self.format = _format_for(spy, scalar, self.channels, normalized8=self.dtype == np.uint8)
        self._stored = 4 if self.channels == 3 else self.channels
        size = self.shape[:-1][::-1]  # width first
        kind = {1: spy.TextureType.texture_1d, 2: spy.TextureType.texture_2d, 3: spy.TextureType.texture_3d}[dims]
        extent: dict[str, int] = {"width": size[0], "height": size[1] if dims > 1 else 1, "depth": size[2] if dims > 2 else 1}
        if self.layered:   # the layer count is the outermost axis
            kind = spy.TextureType.texture_1d_array if dims == 2 else spy.TextureType.texture_2d_array
            extent = {"width": size[0], "height": size[1] if dims == 3 else 1, "depth": 1, "array_length": size[-1]}
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

    def upload(self, array: Any) -> None:
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
        arr = np.ascontiguousarray(arr)
        if self.layered:
            for i in range(arr.shape[0]):
                self.sgl.copy_from_numpy(arr[i].copy(), layer=i)
            return
        self.sgl.copy_from_numpy(arr if arr.flags.writeable else arr.copy())

    def raw(self) -> np.ndarray:
        """The texels as sgl reads them back (every layer of an array texture, stacked)."""
        if self.layered:
            return np.stack([np.asarray(self.sgl.to_numpy(layer=i)) for i in range(self.shape[0])])
        return np.asarray(self.sgl.to_numpy())

    def numpy(self) -> np.ndarray:
        raw = self.raw()
        raw = raw.reshape((*self.shape[:-1], -1))[..., : self.channels]
        return np.ascontiguousarray(raw.view(self.dtype) if raw.dtype != self.dtype and raw.dtype.itemsize == self.dtype.itemsize
                                    else raw.astype(self.dtype, copy=False))

    def __repr__(self) -> str:
        return f"<VulkanTexture {self.format.name} {self.shape} on {self.backend.adapter}>"


# -- the backend ----------------------------------------------------------------------------------


class VulkanBackend:
    """The sgl device in this process (Session(isolate=False)); the worker process runs one of these.

    Trade-off: no process boundary (no round trip per dispatch, no copy of numpy arrays into shared
    memory, `.device` is the sgl Device for slangpy's own API), and no protection: on lavapipe a
    shader that indexes groupshared memory out of range or follows a null pointer kills this process
    (the notebook's kernel), and a dispatch that never ends cannot be stopped (Session(timeout=)
    only reports it). The default, Session(isolate=True), is _vulkan_isolated.IsolatedVulkanBackend."""

    name = "vulkan"
    target = "spirv"

    capabilities = frozenset({"device_buffers", "textures", "timing"})

    def __init__(self, config: BackendConfig | None = None) -> None:
        try:
            import slangpy as spy
        except ImportError as exc:  # pragma: no cover - slangpy is a dependency
            raise BackendUnavailable(f"slangpy is not installed ({exc}): pip install slangpy==0.43.1") from None
        self.spy = spy
        self.config = config or BackendConfig()
        self._lock = threading.RLock()
        self._timestamp_pool: tuple[Any, Any] | None = None   # (device, its timestamp QueryPool or None)
        self._open()

    def _open(self) -> None:
        spy = self.spy
        # slangpy's shader folder on the include path, as slangpy.create_device does, so slangpy's
        # functional API (spy.Module) works on this same device; then ours (`import playground;`).
        # Defines are not set here: each module's source carries its own (CompiledKernel.chain).
        from pathlib import Path

        paths = [str(Path(spy.__file__).parent / "slang"), *self.config.include_paths]
        try:
            self.device = spy.Device(
                type=spy.DeviceType.vulkan, enable_print=True, enable_hot_reload=False,
                compiler_options=spy.SlangCompilerOptions({"include_paths": paths}))
        except RuntimeError as exc:
            raise BackendUnavailable(f"no Vulkan device ({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}): "
                                     + INSTALL_HINT) from None
        self.adapter = self.device.info.adapter_name
        self._paths = paths
        self._slang = self.device.slang_session   # where our modules load (renewed, see forget)
        self._modules: dict[str, Any] = {}        # content-named module -> sgl SlangModule
        self._kernels: dict[str, tuple[Any, bool]] = {}   # CompiledKernel.key -> (sgl ComputeKernel, uses printf)
        self._samplers: dict[Any, Any] = {}
        self._pool: dict[int, list[Any]] = {}            # size -> free staging buffers
        self._prepared: dict[str, _Prepared] = {}        # CompiledKernel.key -> root object + cursors
        self._by_ref = frozenset((spy.Buffer, spy.Texture, spy.Sampler))   # bound by reference: same object, same binding

    def reset(self) -> None:
        """A new device: buffers and textures made by the old one can no longer be used."""
        with self._lock:
            self.close()
            self._open()

    def describe(self) -> str:
        soft = "llvmpipe" in self.adapter.lower() or "lavapipe" in self.adapter.lower()
        return f"{self.adapter} ({'software Vulkan, Mesa lavapipe' if soft else 'Vulkan'})"

    def compile_options(self, target: str) -> tuple[str, ...]:
        return compile_options(target)

    # -- device-resident objects ------------------------------------------------------------------

    def buffer(self, array_or_shape: Any, dtype: Any = None) -> VulkanBuffer:
        """A device buffer: from an array (uploaded) or a shape (+ dtype, default float32; zero-filled)."""
        if isinstance(array_or_shape, np.ndarray) or (
                not isinstance(array_or_shape, (int, tuple)) and hasattr(array_or_shape, "__array__")):
            arr = np.ascontiguousarray(array_or_shape, dtype=dtype)
            return VulkanBuffer(self, arr.shape, arr.dtype, arr)
        shape = (array_or_shape,) if isinstance(array_or_shape, int) else tuple(array_or_shape)
        return VulkanBuffer(self, shape, np.dtype(dtype or np.float32), None)

    def texture(self, array_or_shape: Any, dtype: Any = None, *, dims: int = 2) -> VulkanTexture:
        """A device texture from an (H, W, C) array (uint8 -> *8_unorm, float32 -> *32_float) or a shape."""
        if isinstance(array_or_shape, np.ndarray) or hasattr(array_or_shape, "__array__") and not isinstance(array_or_shape, tuple):
            arr = np.asarray(array_or_shape, dtype=dtype)
            return VulkanTexture(self, arr.shape if arr.ndim > dims else (*arr.shape, 1), arr.dtype, arr, dims)
        return VulkanTexture(self, tuple(array_or_shape), np.dtype(dtype or np.float32), None, dims)

    def sampler(self, spec: Any = None) -> Any:
        """An sgl Sampler: None/"linear", "point"/"nearest", or a dict of create_sampler options."""
        spy = self.spy
        if spec is not None and type(spec).__name__ == "Sampler":
            return spec
        key = repr(sorted(spec.items())) if isinstance(spec, Mapping) else spec
        hit = self._samplers.get(key)
        if hit is not None:
            return hit
        if spec is None or spec == "linear":
            s = self.device.create_sampler()
        elif spec in ("point", "nearest"):
            p = spy.TextureFilteringMode.point
            s = self.device.create_sampler(min_filter=p, mag_filter=p, mip_filter=p)
        elif isinstance(spec, Mapping):
            s = self.device.create_sampler(**spec)
        else:
            raise ParameterError(f"a SamplerState needs None, 'linear', 'point', a dict of options or an sgl "
                                 f"Sampler; got {_describe(spec)}")
        self._samplers[key] = s
        return s

    # -- compile ----------------------------------------------------------------------------------

    def load(self, kernel: CompiledKernel) -> tuple[Any, bool]:
        """The sgl compute kernel of this kernel revision: its module chain loaded as sources, each
        under its content name (an unchanged module is never reloaded)."""
        hit = self._kernels.get(kernel.key)
        if hit is not None:
            return hit
        if not kernel.chain:
            raise VulkanCompileError(f"{kernel.entry}: the compiled kernel carries no module sources "
                                     "(it was not compiled for a source-compiling backend)")
        with self._lock:
            hit = self._kernels.get(kernel.key)
            if hit is not None:
                return hit
            modules, printf = [], False
            anchor = _needs_set0_anchor(kernel)
            for i, m in enumerate(kernel.chain):
                mod, uses = self._module(m, anchor=anchor and i == len(kernel.chain) - 1)
                modules.append(mod)
                printf = printf or uses
            try:
                program = self._slang.link_program(modules, [modules[-1].entry_point(kernel.entry)])
                sk = self.device.create_compute_kernel(program)
            except Exception as exc:
                raise VulkanCompileError(f"slangpy could not build {kernel.entry} ({kernel.cell}) for Vulkan:\n{exc}") from None
            hit = (sk, printf)
            self._kernels[kernel.key] = hit
            return hit

    def _module(self, m: ModuleSource, anchor: bool = False) -> tuple[Any, bool]:
        head, sep, body = _split_head(m.source)
        uses = uses_printf(body)
        name = m.name + ("_set0" if anchor else "")
        mod = self._modules.get(name)
        if mod is None:
            source = m.source
            if uses:  # sgl's print instead of printf, in sgl's copy only
                source = head + "import sgl.device.print; " + sep + rewrite_printf(body)
            if anchor:
                source += _SET0_ANCHOR
            try:
                mod = self._slang.load_module_from_source(name, source, path=m.path)
            except Exception as exc:
                raise VulkanCompileError(f"slangpy could not load {m.cell} for Vulkan:\n{exc}") from None
            self._modules[name] = mod
        return mod, uses

    # -- dispatch ---------------------------------------------------------------------------------

    def _prepare(self, kernel: CompiledKernel) -> "_Prepared":
        """Per kernel revision: the sgl kernel, one persistent root shader object and a cursor per
        parameter (looked up once, not by name at every call)."""
        with self._lock:
            pk = self._prepared.get(kernel.key)
            if pk is not None:
                return pk
            sk, printf = self.load(kernel)
            root = self.device.create_root_shader_object(sk.program)
            cursor = self.spy.ShaderCursor(root)
            params: list[tuple[str, TypeInfo, int, Any]] = []
            for p in kernel.reflection.globals:
                params.append((p.name, p.type, _fast_kind(p.type), _cursor(cursor, p)))
            if kernel.entry_point.uniforms:
                ecur = cursor.find_entry_point(0)
                for p in kernel.entry_point.uniforms:
                    params.append((p.name, p.type, _fast_kind(p.type), _cursor(ecur, p)))
            pk = _Prepared(sk, printf, root, params)
            self._prepared[kernel.key] = pk
            return pk

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        text = self.run(kernel, groups, values)
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()

    def dispatch_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                       values: Mapping[str, Any]) -> DispatchTiming:
        text, timing = self.run_timed(kernel, groups, values)
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
        return timing

    def run_timed(self, kernel: CompiledKernel, groups: tuple[int, int, int],
                  values: Mapping[str, Any]) -> tuple[str, DispatchTiming]:
        """One dispatch, waited for, with timestamp queries written around the uploads and the compute
        pass (where the device has them): bind/upload is the host's binding plus the device's uploads,
        run the compute pass on the device, readback the copies into the arrays."""
        m: dict[str, Any] = {}
        text = self.run(kernel, groups, values, wait=True, marks=m)
        pool = m.get("pool")
        if pool is not None:
            t = pool.get_timestamp_results(0, 3)
            upload, run, dev = (t[1] - t[0]) * 1000, (t[2] - t[1]) * 1000, True
        else:
            upload, run, dev = 0.0, (m["ran"] - m["bound"]) * 1000, False
        return text, DispatchTiming((m["bound"] - m["start"]) * 1000 + upload, run, (m["read"] - m["ran"]) * 1000,
                                    dev, "Vulkan timestamp queries" if dev else "wall clock (no timestamp queries)")

    def _timestamps(self) -> Any:
        """A 3-entry timestamp query pool of the current device (None without timestamp queries)."""
        got = self._timestamp_pool
        if got is not None and got[0] is self.device:
            return got[1]
        spy, pool = self.spy, None
        if self.device.has_feature(spy.Feature.timestamp_query):
            pool = self.device.create_query_pool(type=spy.QueryType.timestamp, count=3)
        self._timestamp_pool = (self.device, pool)
        return pool

    def run(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any],
            wait: bool = False, marks: dict[str, Any] | None = None) -> str:
        """One dispatch; returns what the kernel printed. `wait`: return only once the device has
        finished it (the worker process does, so that a crash or hang is the dispatch's own).
        marks: filled with the wall-clock marks (and the timestamp pool) of run_timed."""
        # The hot path. Parameters are written into a root shader object kept per kernel revision,
        # through cursors looked up once; a parameter whose value is the same as at the previous
        # dispatch (the same device buffer / texture / sampler, an equal scalar) is not written again.
        # sgl snapshots the root object's bindings when the dispatch is recorded, so rewriting it for
        # the next call while this one is still in flight is safe. Device-resident and scalar values
        # skip the _Binder; anything else (numpy arrays, structs, vectors) goes through it.
        pk = self._prepared.get(kernel.key)
        if pk is None:
            pk = self._prepare(kernel)
        pool = None
        if marks is not None:
            marks["start"] = time.perf_counter()
            pool = self._timestamps()
        binder: _Binder | None = None
        objs: list[Any] = []
        try:
            for name, t, fast, _ in pk.params:
                v = values.get(name, _MISSING)
                if v is _MISSING:       # a global the kernel never touches, left out
                    objs.append(v)
                    continue
                tv = type(v)
                if fast == _F_BUF and tv is VulkanBuffer and v.backend is self:
                    objs.append(v.sgl)
                elif fast == _F_INT and tv is int:
                    objs.append(v)
                elif fast == _F_FLOAT and (tv is float or tv is int):
                    objs.append(float(v))
                elif fast == _F_TEX and tv is VulkanTexture and v.backend is self:
                    objs.append(v.sgl)
                else:
                    if binder is None:
                        binder = _Binder(self)
                    objs.append(binder.value(t, v, name))
        except Exception:
            if binder is not None:
                binder.release()
            raise
        try:
            with self._lock:
                last = pk.last
                by_ref = self._by_ref
                for i, o in enumerate(objs):
                    if o is _MISSING:
                        continue
                    was = last[i]
                    to = type(o)
                    if to is type(was) and ((to in by_ref and o is was) or (to in _BY_VALUE and o == was)):
                        continue
                    last[i] = _MISSING
                    param = pk.params[i]
                    try:
                        param[3].write(o)
                    except Exception as exc:
                        raise ParameterError(f"{kernel.entry}(): could not bind parameter `{param[0]}` on Vulkan: {exc}") from None
                    last[i] = o
                encoder = self.device.create_command_encoder()
                if marks is not None:
                    marks["bound"] = time.perf_counter()
                    if pool is not None:
                        pool.reset()
                        marks["pool"] = pool
                        encoder.write_timestamp(pool, 0)
                if binder is not None:
                    for buf, raw in binder.uploads:
                        encoder.upload_buffer_data(buf, 0, raw)
                    for kind, obj in binder.clears:   # RW outputs given as zeros: cleared on the device, not uploaded
                        if kind == "buf":
                            encoder.clear_buffer(obj)
                        elif kind == "texf":
                            encoder.clear_texture_float(obj)
                        else:
                            encoder.clear_texture_uint(obj)
                if pool is not None:
                    encoder.write_timestamp(pool, 1)
                with encoder.begin_compute_pass() as cpass:
                    cpass.bind_pipeline(pk.sk.pipeline, pk.root)
                    cpass.dispatch_compute(groups)
                if pool is not None:
                    encoder.write_timestamp(pool, 2)
                submit = self.device.submit_command_buffer(encoder.finish())
            timeout = self.config.timeout
            if wait and timeout is None:
                self.device.wait_for_submit(submit)
            elif wait or timeout is not None or (binder is not None and binder.writeback):
                self._wait(submit, kernel.entry, timeout)
            if marks is not None:
                marks["ran"] = time.perf_counter()
            if binder is not None:
                binder.read_back()
            if marks is not None:
                marks["read"] = time.perf_counter()
            return str(self.device.flush_print_to_string()) if pk.printf else ""
        finally:
            if binder is not None:
                binder.release()

    def _wait(self, submit: int, entry: str, timeout: float | None) -> None:
        """Poll the submission (see _wait.wait_polled): sgl's own waits block in native code."""
        wait_polled(lambda: self.device.is_submit_finished(submit), entry, timeout, self.adapter, "Vulkan")

    # -- buffer pool --------------------------------------------------------------------------------

    def _usage(self) -> Any:
        U = self.spy.BufferUsage
        return U.shader_resource | U.unordered_access | U.copy_source | U.copy_destination

    def _new_buffer(self, nbytes: int, data: np.ndarray | None, clear: bool = True, format: Any = None) -> Any:
        size = max(4, (int(nbytes) + 3) // 4 * 4)
        fmt = {} if format is None else {"format": format}   # a texel format: it binds to typed buffers too
        if data is not None and data.nbytes:
            raw = _writable_bytes(data)
            if raw.nbytes != size:
                raw = np.concatenate([raw, np.zeros(size - raw.nbytes, np.uint8)])
            return self.device.create_buffer(size=size, usage=self._usage(), data=raw, **fmt)
        buf = self.device.create_buffer(size=size, usage=self._usage(), **fmt)
        if data is None and clear:
            enc = self.device.create_command_encoder()
            enc.clear_buffer(buf)
            self.device.submit_command_buffer(enc.finish())
        return buf

    def _pool_take(self, nbytes: int) -> Any:
        size = max(4, (int(nbytes) + 3) // 4 * 4)
        free = self._pool.get(size)
        if free:
            return free.pop()
        return self.device.create_buffer(size=size, usage=self._usage())

    def _pool_give(self, buf: Any) -> None:
        free = self._pool.setdefault(int(buf.size), [])
        if len(free) < 8 and buf.size <= (64 << 20):
            free.append(buf)

    def forget(self, keys: list[str]) -> None:
        """Drop the kernels of replaced revisions. A Slang session cannot unload modules, and every
        revision is a module of its own (~1 MB each in sgl), so after MODULES_PER_SESSION modules new
        ones go into a fresh Slang session on the same device: the old one goes with its last kernel."""
        with self._lock:
            for k in keys:
                self._kernels.pop(k, None)
                self._prepared.pop(k, None)
            if len(self._modules) > MODULES_PER_SESSION:
                self._slang = self.device.create_slang_session(
                    compiler_options=self.spy.SlangCompilerOptions({"include_paths": self._paths}))
                self._modules.clear()

    def close(self) -> None:
        self._pool.clear()
        self._prepared.clear()
        self._kernels.clear()
        self._modules.clear()
        self._samplers.clear()
        try:
            self.device.close()
        except Exception:
            pass


# sgl 0.43 / slang-rhi: when the global scope holds only ParameterBlocks that contain resources, and
# the entry point has uniforms, the kernel reads a wrong descriptor (SIGSEGV on lavapipe). One more
# global resource of the kernel's own scope (declared, never used or bound) puts the layout right;
# sgl's copy of the entry module gets it (our own reflection and every other backend do not).
_SET0_ANCHOR = "\nRWStructuredBuffer<uint> sk_vulkan_set0_anchor;\n"


def _needs_set0_anchor(kernel: CompiledKernel) -> bool:
    globs = kernel.reflection.globals
    if not kernel.entry_point.uniforms or any(g.type.kind in ("resource", "sampler") for g in globs):
        return False
    return any(g.type.kind == "parameter_block" and g.type.element is not None and _holds_resources(g.type.element)
               for g in globs)


def _holds_resources(t: TypeInfo, depth: int = 0) -> bool:
    if t.kind in ("resource", "sampler", "parameter_block", "constant_buffer"):
        return True
    if depth > 8:
        return False
    return any(_holds_resources(f.type, depth + 1) for f in t.fields) or (
        t.element is not None and t.kind == "array" and _holds_resources(t.element, depth + 1))


def _cursor(parent: Any, p: ParamInfo) -> Any:
    """The cursor a parameter's value is written through. sgl writes a ConstantBuffer<S> or
    ParameterBlock<S> of a struct from a dict at the block itself, but a block of anything else
    (ConstantBuffer<float4x4>) only at its dereferenced element ("Expected dict" otherwise)."""
    c = parent[p.name]
    t = p.type
    if t.kind in ("constant_buffer", "parameter_block") and t.element is not None and t.element.kind != "struct":
        return c.dereference()
    return c


_MISSING: Any = object()
_BY_VALUE = (int, float, bool)   # scalars: an equal value needs no rewrite
_F_NONE, _F_BUF, _F_TEX, _F_INT, _F_FLOAT = range(5)


def _fast_kind(t: TypeInfo) -> int:
    """Which values of this parameter type the dispatch binds without the _Binder."""
    if t.kind == "scalar":
        s = t.scalar or "float32"
        if s.startswith(("int", "uint")):
            return _F_INT
        if s.startswith("float"):
            return _F_FLOAT
        return _F_NONE
    if t.kind == "resource":
        if t.is_buffer:
            return _F_BUF
        if t.is_texture:
            return _F_TEX
    return _F_NONE


class _Prepared:
    """A kernel revision ready to dispatch: its sgl kernel, a persistent root shader object, a cursor
    per parameter (globals, then entry-point uniforms) and the values last written through them."""

    __slots__ = ("sk", "printf", "root", "params", "last")

    def __init__(self, sk: Any, printf: bool, root: Any, params: list[tuple[str, TypeInfo, int, Any]]) -> None:
        self.sk, self.printf, self.root, self.params = sk, printf, root, params
        self.last: list[Any] = [_MISSING] * len(params)


class _Binder:
    """Converts one dispatch's Python values into what sgl's cursor takes, and writes RW data back."""

    def __init__(self, backend: VulkanBackend) -> None:
        self.b = backend
        self.spy = backend.spy
        self.writeback: list[Any] = []                # callables: device -> the user's numpy array
        self.by_id: dict[tuple[int, str], Any] = {}   # same array passed twice -> one device object
        self.clears: list[tuple[str, Any]] = []       # device objects to zero before the dispatch
        self.uploads: list[tuple[Any, np.ndarray]] = []
        self.pooled: list[Any] = []

    def release(self) -> None:
        for buf in self.pooled:
            self.b._pool_give(buf)
        self.pooled.clear()
        self.uploads.clear()
        self.writeback.clear()
        self.by_id.clear()
        self.clears.clear()

    def read_back(self) -> None:
        for fn in self.writeback:
            fn()

    def value(self, t: TypeInfo, v: Any, name: str) -> Any:
        k = t.kind
        if k == "scalar":
            return _scalar(t, v, name)
        if k in ("vector", "matrix"):
            dt = numpy_dtype(t)
            base, shape = dt.subdtype if dt.subdtype is not None else (dt, ())
            if isinstance(v, np.ndarray) and v.dtype == base and v.shape == tuple(shape):
                return v
            src = np.asarray(v)
            if src.dtype.kind == "c" or (base.kind in "iub" and src.dtype.kind == "f") or src.dtype.kind in "OUS":
                raise _mismatch(t, v, name)
            try:
                arr = src.astype(base).reshape(shape) if src.size == int(np.prod(shape)) and (
                    src.shape == tuple(shape) or src.ndim == 1 and k == "vector") else None
            except (ValueError, TypeError):
                arr = None
            if arr is None:
                raise _mismatch(t, v, name)
            return arr
        if k == "struct":
            from ._packing import _as_mapping

            m = _as_mapping(v, t, name)
            return {f.name: self.value(f.type, m[f.name], f"{name}.{f.name}") for f in t.fields}
        if k == "array" and t.element is not None:
            el = t.element
            try:
                seq = list(v)
            except TypeError:
                raise _mismatch(t, v, name) from None
            if t.count and len(seq) != t.count:
                raise ParameterError(f"parameter `{name}` ({t.name}) needs {t.count} elements; got {len(seq)}")
            return [self.value(el, x, f"{name}[{i}]") for i, x in enumerate(seq)]
        if k in ("constant_buffer", "parameter_block") and t.element is not None:
            return self.value(t.element, v, name)
        if k == "sampler":
            return self.b.sampler(v)
        if k == "resource":
            if t.is_buffer:
                return self.buffer(t, v, name)
            if t.shape == "texture_buffer":
                return self.typed_buffer(t, v, name)
            if t.is_texture:
                return self.texture(t, v, name)
        raise ParameterError(f"parameter `{name}` is {t.name} ({t.kind}{', ' + t.shape if t.shape else ''}): "
                             "the Vulkan backend cannot bind that kind of parameter yet")

    # buffers
    def buffer(self, t: TypeInfo, v: Any, name: str) -> Any:
        if isinstance(v, VulkanBuffer):
            if v.backend is not self.b:
                raise ParameterError(f"parameter `{name}`: that buffer belongs to another Vulkan session")
            return v.sgl
        if type(v).__name__ == "Buffer" and hasattr(v, "to_numpy"):
            return v
        if isinstance(v, VulkanTexture):
            raise ParameterError(f"parameter `{name}` is {t.name}: got a texture, need a buffer")
        staged = self._struct_stage(t, v, name)
        arr = staged if staged is not None else buffer_array(v, name, t)[0]
        key = (id(v), "buf")
        hit = self.by_id.get(key)
        if hit is not None:
            return hit
        # staging buffers come from a pool (freed when the dispatch ends); data goes up in the
        # dispatch's own command buffer
        buf = self.b._pool_take(arr.nbytes)
        self.pooled.append(buf)
        if t.writable and arr.nbytes >= _ZERO_CHECK_BYTES and not arr.reshape(-1).view(np.uint8).any():
            self.clears.append(("buf", buf))
        elif arr.nbytes:
            self.uploads.append((buf, _writable_bytes(arr)))
        self.by_id[key] = buf
        if t.writable and isinstance(v, np.ndarray):
            target, nbytes = v, arr.nbytes

            def back() -> None:
                raw = np.asarray(buf.to_numpy()).reshape(-1)[:nbytes]
                if staged is None:
                    target.reshape(-1).view(np.uint8)[:] = raw
                else:
                    copy_fields(target, raw.view(arr.dtype).reshape(arr.shape))

            self.writeback.append(back)
        return buf

    def typed_buffer(self, t: TypeInfo, v: Any, name: str) -> Any:
        """A typed Buffer<T>/RWBuffer<T>: like a structured buffer, but the device buffer carries the
        texel format of T (Vulkan reads and writes typed buffers through a formatted view)."""
        base, shape = typed_element(t)
        fmt = _buffer_format(self.spy, base, shape)
        if fmt is None:
            raise ParameterError(f"parameter `{name}` is {t.name}: no Vulkan texel format holds {base} x "
                                 f"{shape[0] if shape else 1}; use a StructuredBuffer")
        if isinstance(v, VulkanBuffer):
            if v.backend is not self.b:
                raise ParameterError(f"parameter `{name}`: that buffer belongs to another Vulkan session")
            if v.format != fmt:
                raise ParameterError(f"parameter `{name}` is {t.name}: that device buffer holds {v.dtype} "
                                     f"{v.shape}, not elements of {base}" + (f" x {shape[0]}" if shape else ""))
            return v.sgl
        if type(v).__name__ == "Buffer" and hasattr(v, "to_numpy"):
            return v
        arr = buffer_array(v, name, t)[0]
        key = (id(v), "typed")
        hit = self.by_id.get(key)
        if hit is not None:
            return hit
        raw = _writable_bytes(arr)
        size = max(4, raw.nbytes)
        if raw.nbytes != size:
            raw = np.concatenate([raw, np.zeros(size - raw.nbytes, np.uint8)])
        buf = self.b.device.create_buffer(size=size, usage=self.b._usage(), data=raw, format=fmt)
        self.by_id[key] = buf
        if t.writable and isinstance(v, np.ndarray):
            target, nbytes = v, arr.nbytes

            def back() -> None:
                target.reshape(-1).view(np.uint8)[:] = np.ascontiguousarray(buf.to_numpy()).reshape(-1).view(np.uint8)[:nbytes]

            self.writeback.append(back)
        return buf

    def _struct_stage(self, t: TypeInfo, v: Any, name: str) -> np.ndarray | None:
        """A structured array laid out differently from this target (e.g. made for the CPU backend):
        repacked field by field into the target layout (and written back field by field); None for
        any other value."""
        if t.shape != "structured_buffer" or t.element is None or t.element.kind != "struct":
            return None
        if not isinstance(v, np.ndarray) or v.dtype.names is None:
            return None
        want, _ = element_dtype(t.element)
        if v.dtype == want:
            return None
        return struct_array(v, name, t, want)   # fields matched by name, at every level

    # textures
    def texture(self, t: TypeInfo, v: Any, name: str) -> Any:
        if isinstance(v, VulkanTexture):
            if v.backend is not self.b:
                raise ParameterError(f"parameter `{name}`: that texture belongs to another Vulkan session")
            return v.sgl
        if type(v).__name__ == "Texture" and hasattr(v, "to_numpy"):
            return v
        dims = _TEX_DIMS.get(t.shape or "")
        if dims is None or t.shape in ("texture_cube",):
            raise ParameterError(f"parameter `{name}` is {t.name}: the Vulkan backend binds numpy arrays to "
                                 "Texture1D/2D/3D and Texture1DArray/2DArray (and RW forms; arrays as (L, W, C) / "
                                 "(L, H, W, C)); pass an sgl Texture for other shapes")
        layered = (t.shape or "").endswith("_array")
        scalar, channels = _texel(t)
        if not isinstance(v, np.ndarray):
            try:
                v2 = np.asarray(v, dtype=np.float32 if scalar.startswith("float") else None)
            except (TypeError, ValueError):
                raise _tex_mismatch(t, v, name, dims, channels) from None
        else:
            v2 = v
        shape = v2.shape
        if v2.ndim == dims and channels == 1:
            shape = (*shape, 1)
        if len(shape) != dims + 1 or shape[-1] != channels or 0 in shape:
            raise _tex_mismatch(t, v, name, dims, channels)
        if t.writable and not (isinstance(v, np.ndarray) and v.flags.writeable):
            raise ParameterError(f"parameter `{name}` ({t.name}) is written by the kernel: pass a writable numpy "
                                 f"array of shape {'(D, H, W, C)' if dims == 3 else '(H, W, C)' if dims == 2 else '(W, C)'} "
                                 f"with C = {channels}; got {_describe(v)}")
        key = (id(v), "tex")
        hit = self.by_id.get(key)
        if hit is not None:
            return hit
        unorm8 = v2.dtype == np.uint8 and scalar.startswith("float")
        if t.writable and scalar.startswith("float") and not unorm8 and v2.dtype.kind != "f":
            raise _tex_mismatch(t, v, name, dims, channels)  # the kernel's floats would be truncated
        if t.writable:
            # storage images use the format Slang declares for the element type (float4 -> rgba32f)
            store_dt = {"float32": np.float32, "float16": np.float16, "uint32": np.uint32, "int32": np.int32}.get(scalar)
            if store_dt is None:
                raise ParameterError(f"parameter `{name}` ({t.name}): RW textures of {scalar} are not supported")
            data = v2.astype(np.float32) / 255.0 if unorm8 else v2
            dev_dtype = np.dtype(store_dt)
        else:
            dev_dtype = np.dtype(np.uint8) if unorm8 else np.dtype({"float16": np.float16, "uint32": np.uint32,
                                                                     "int32": np.int32}.get(scalar, np.float32))
            data = v2
        if dev_dtype.kind != data.dtype.kind and not unorm8:
            if data.dtype.kind == "f" and dev_dtype.kind in "iu":
                raise _tex_mismatch(t, v, name, dims, channels)
        tex = VulkanTexture(self.b, shape, dev_dtype, None, dims, layered)
        if t.writable and v.nbytes >= _ZERO_CHECK_BYTES and not np.any(v):
            self.clears.append(("texf" if dev_dtype.kind == "f" else "texu", tex.sgl))
        else:
            tex.upload(np.asarray(data).reshape(shape).astype(dev_dtype, copy=False))
        self.by_id[key] = tex.sgl
        if t.writable:
            target = v

            def back() -> None:
                raw = tex.raw()
                raw = raw.reshape((*shape[:-1], -1))
                if raw.dtype != dev_dtype:
                    raw = raw.view(dev_dtype)
                got = raw[..., :channels].reshape(target.shape)
                if unorm8:
                    got = np.clip(np.rint(got * 255.0), 0, 255)
                np.copyto(target, got, casting="unsafe")

            self.writeback.append(back)
        return tex.sgl


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


def _scalar(t: TypeInfo, v: Any, name: str) -> Any:
    if isinstance(v, (bool, np.bool_)) and t.scalar == "bool":
        return bool(v)
    arr = np.asarray(v)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        raise _mismatch(t, v, name)
    x = arr.reshape(()).item()
    s = t.scalar or "float32"
    if s == "bool":
        return bool(x)
    if s.startswith(("int", "uint")):
        if arr.dtype.kind == "f":
            raise _mismatch(t, v, name)
        return int(x)
    return float(x)


def _mismatch(t: TypeInfo, v: Any, name: str) -> ParameterError:
    try:
        dt = numpy_dtype(t)
        what = f"{t.kind} of {dt.subdtype[0] if dt.subdtype else dt}" + (
            f" with shape {dt.subdtype[1]}" if dt.subdtype else "")
    except ParameterError:
        what = t.kind
    return ParameterError(f"parameter `{name}` is {t.name}: it needs a {what}; got {_describe(v)}")


def _tex_mismatch(t: TypeInfo, v: Any, name: str, dims: int, channels: int) -> ParameterError:
    want = {1: "(W, C)", 2: "(H, W, C)", 3: "(D, H, W, C)"}[dims]
    return ParameterError(f"parameter `{name}` is {t.name}: pass a numpy array of shape {want} with C = {channels} "
                          f"(float32, or uint8 for 0..1 values), or a backend.texture(...); got {_describe(v)}")
