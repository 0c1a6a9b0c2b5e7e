"""The Vulkan device in this process: slangpy's sgl device (a GPU driver, or Mesa lavapipe in software).

`backends.vulkan.create` uses it directly (Session(isolate=False)) or inside the worker process of
backends/vulkan/isolated.py (the default).

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

import sys
import threading
import time
from typing import Any, Callable, Mapping

import numpy as np

from ...compiler.reflection import TypeInfo
from .. import BackendConfig, DispatchTiming
from ...compiled import CompiledKernel, ModuleSource
from ...errors import BackendUnavailable, VulkanCompileError
from ..common.packing import ParameterError, describe
from .bounds_slang import Checked, dispatch_checked, is_variant, with_variants
from .binding import _Binder
from .finite import first_nonfinite_f32, scans
from .prepared import (SET0_ANCHOR, Prepared, bind_values, cursor as cursor_of, fast_kind, needs_set0_anchor,
                               write_changed)
from .objects import VulkanBuffer, VulkanTexture, _writable_bytes
from ..common.wait import wait_polled
from ..common.printing import rewrite_printf, uses_printf
from .options import INSTALL_HINT, _split_head, compile_options, software_adapter

__all__ = ["INSTALL_HINT", "VulkanBackend", "VulkanBuffer", "VulkanCompileError", "VulkanTexture", "compile_options", "software_adapter"]

MODULES_PER_SESSION = 128

# -- the backend ----------------------------------------------------------------------------------


class VulkanBackend:
    """The sgl device in this process (Session(isolate=False)); the worker process runs one of these.

    Trade-off: no process boundary (no round trip per dispatch, no copy of numpy arrays into shared
    memory, `.device` is the sgl Device for slangpy's own API), and no protection: on lavapipe a
    shader that indexes groupshared memory out of range or follows a null pointer kills this process
    (the notebook's kernel), and a dispatch that never ends cannot be stopped (Session(timeout=)
    only reports it). The default, Session(isolate=True), is isolated.IsolatedVulkanBackend."""

    name = "vulkan"
    target = "spirv"

    capabilities = frozenset({"device_buffers", "textures", "timing", "type_conformances", "replay", "finite_scan"})

    def __init__(self, config: BackendConfig | None = None) -> None:
        try:
            import slangpy as spy
        except ImportError as exc:  # pragma: no cover - slangpy is a dependency
            raise BackendUnavailable(f"slangpy is not installed ({exc}): pip install slangpy==0.43.1") from None
        self.spy = spy
        self.config = config or BackendConfig()
        self._lock = threading.RLock()
        self._timestamp_pool: tuple[Any, Any] | None = None   # (device, its timestamp QueryPool or None)
        self._checked: dict[str, Checked] = {}   # Session(checked=True): kernel key -> its variant (_bounds_slang)
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
        self.gpu = not software_adapter(self.adapter)
        self._paths = paths
        self._slang = self.device.slang_session   # where our modules load (renewed, see forget)
        self._modules: dict[str, Any] = {}        # content-named module -> sgl SlangModule
        self._kernels: dict[str, tuple[Any, bool]] = {}   # CompiledKernel.key -> (sgl ComputeKernel, uses printf)
        self._samplers: dict[Any, Any] = {}
        # (memory, size) -> free buffers: "device" ones a dispatch binds numpy data through, "upload" and
        # "read_back" (host-visible) ones its data goes up and comes back through, in its own command buffer
        self._pool: dict[tuple[str, int, Any], list[Any]] = {}   # (memory, size, texel format or None)
        self._prepared: dict[str, Prepared] = {}        # CompiledKernel.key -> root object + cursors
        self._by_ref = frozenset((spy.Buffer, spy.Texture, spy.Sampler))   # bound by reference: same object, same binding

    def reset(self) -> None:
        """A new device: buffers and textures made by the old one can no longer be used."""
        with self._lock:
            self.close()
            self._open()

    def describe(self) -> str:
        return f"{self.adapter} ({'Vulkan' if self.gpu else 'software Vulkan, Mesa lavapipe'})"

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
                                 f"Sampler; got {describe(spec)}")
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
            anchor = needs_set0_anchor(kernel)
            for i, m in enumerate(kernel.chain):
                mod, uses = self._module(m, anchor=anchor and i == len(kernel.chain) - 1)
                modules.append(mod)
                printf = printf or uses
            try:
                import slangpy as spy

                conformances = [spy.TypeConformance(i, t, n) for i, t, n in
                                (kernel.specialization.conformances if kernel.specialization else ())]
                entry = modules[-1].entry_point(kernel.entry, conformances) if conformances \
                    else modules[-1].entry_point(kernel.entry)
                program = self._slang.link_program(modules, [entry])
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
                source += SET0_ANCHOR
            try:
                mod = self._slang.load_module_from_source(name, source, path=m.path)
            except Exception as exc:
                raise VulkanCompileError(f"slangpy could not load {m.cell} for Vulkan:\n{exc}") from None
            self._modules[name] = mod
        return mod, uses

    # -- dispatch ---------------------------------------------------------------------------------

    def prepare(self, kernel: CompiledKernel) -> "Prepared":
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
                params.append((p.name, p.type, fast_kind(p.type), cursor_of(cursor, p)))
            if kernel.entry_point.uniforms:
                ecur = cursor.find_entry_point(0)
                for p in kernel.entry_point.uniforms:
                    params.append((p.name, p.type, fast_kind(p.type), cursor_of(ecur, p)))
            pk = Prepared(sk, printf, root, params)
            self._prepared[kernel.key] = pk
            return pk

    def prepare_step(self, launches: list[tuple[CompiledKernel, tuple[int, int, int], Mapping[str, Any]]]) -> Any:
        """The "replay" capability (slang_kernel.steps.Step, which never asks a checked session): see step."""
        from .step import VulkanStep

        return VulkanStep(self, launches)

    def scans(self, value: Any) -> bool:
        """The "finite_scan" capability: float32 device buffers of this backend (see finite)."""
        return scans(self, value, VulkanBuffer)

    def first_nonfinite(self, value: Any) -> tuple[tuple[int, ...], float, int] | None:
        return first_nonfinite_f32(self, value)

    def dispatch(self, kernel: CompiledKernel, groups: tuple[int, int, int], values: Mapping[str, Any]) -> None:
        if self.config.checked and not is_variant(kernel):
            return dispatch_checked(self.dispatch, self._checked, kernel, groups, values)
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
            pk = self.prepare(kernel)
        pool = None
        if marks is not None:
            marks["start"] = time.perf_counter()
            pool = self._timestamps()
        binder: _Binder | None = None

        def slow(t: TypeInfo, v: Any, name: str) -> Any:
            nonlocal binder
            if binder is None:
                binder = _Binder(self)
            return binder.value(t, v, name)

        try:
            objs = bind_values(pk, values, self, slow)
        except Exception:
            if binder is not None:
                binder.release()
            raise
        try:
            with self._lock:
                write_changed(pk, objs, self._by_ref, kernel.entry)
                encoder = self.device.create_command_encoder()
                if marks is not None:
                    marks["bound"] = time.perf_counter()
                    if pool is not None:
                        pool.reset()
                        marks["pool"] = pool
                        encoder.write_timestamp(pool, 0)
                if binder is not None:
                    for copy in binder.copies_in:
                        copy(encoder)
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
                if binder is not None:
                    for copy in binder.copies_out:
                        copy(encoder)
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

    def replay(self, launches: list[tuple[Prepared, tuple[int, int, int], list[Any], str]], times: int,
               wait: bool = False) -> None:
        """A replayed step's call (step): `times` rounds of its launches (prepared kernel, groups,
        objects from bind_values, entry) recorded into one command encoder, a compute pass each (slang-rhi
        puts its barriers between them), one submission; waited for with `wait` or Session(timeout=)."""
        with self._lock:
            encoder = self.device.create_command_encoder()
            for _ in range(times):
                for pk, groups, objs, entry in launches:
                    write_changed(pk, objs, self._by_ref, entry)   # sgl snapshots the bindings per dispatch
                    with encoder.begin_compute_pass() as cpass:
                        cpass.bind_pipeline(pk.sk.pipeline, pk.root)
                        cpass.dispatch_compute(groups)
            submit = self.device.submit_command_buffer(encoder.finish())
        timeout = self.config.timeout
        if wait and timeout is None:
            self.device.wait_for_submit(submit)
        elif wait or timeout is not None:
            self._wait(submit, launches[0][3], timeout)

    def _wait(self, submit: int, entry: str, timeout: float | None) -> None:
        """Poll the submission (see _wait.wait_polled): sgl's own waits block in native code."""
        wait_polled(lambda: self.device.is_submit_finished(submit), entry, timeout, self.adapter, "Vulkan")

    # -- buffer pool --------------------------------------------------------------------------------

    def _usage(self) -> Any:
        U = self.spy.BufferUsage
        return U.shader_resource | U.unordered_access | U.copy_source | U.copy_destination

    def read_back(self, nbytes: int, record: Callable[[Any, Any], None]) -> np.ndarray:
        """The `nbytes` bytes that `record(encoder, buffer)` copies into a pooled read-back buffer, once
        the device has copied them: one submission, no staging buffer of sgl's own per call."""
        stage = self._pool_take(nbytes, "read_back")
        try:
            with self._lock:
                encoder = self.device.create_command_encoder()
                record(encoder, stage)
                submit = self.device.submit_command_buffer(encoder.finish())
            self.device.wait_for_submit(submit)
            out: np.ndarray = np.asarray(stage.to_numpy()).reshape(-1).view(np.uint8)[:nbytes]   # a fresh array
            return out
        finally:
            self._pool_give(stage, "read_back")

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

    def _pool_take(self, nbytes: int, memory: str = "device", format: Any = None) -> Any:
        """A buffer of at least nbytes: "device" (bound to kernels; of texel `format` for a typed
        buffer), "upload" (host-written, copied from) or "read_back" (copied into, host-read). sgl's
        own uploads and read-backs allocate a staging buffer per call, which on a discrete GPU costs
        more than the copy (bench/RESULTS.md)."""
        size = max(4, (int(nbytes) + 3) // 4 * 4)
        free = self._pool.get((memory, size, format))
        if free:
            try:
                return free.pop()   # atomic: a live view's thread may take from the same list
            except IndexError:
                pass
        spy = self.spy
        if memory == "device":
            fmt = {} if format is None else {"format": format}
            return self.device.create_buffer(size=size, usage=self._usage(), **fmt)
        usage = spy.BufferUsage.copy_source if memory == "upload" else spy.BufferUsage.copy_destination
        return self.device.create_buffer(size=size, usage=usage, memory_type=getattr(spy.MemoryType, memory))

    def _pool_give(self, buf: Any, memory: str = "device", format: Any = None) -> None:
        free = self._pool.setdefault((memory, int(buf.size), format), [])
        if len(free) < 8 and buf.size <= (64 << 20):
            free.append(buf)

    def forget(self, keys: list[str]) -> None:
        """Drop the kernels of replaced revisions. A Slang session cannot unload modules, and every
        revision is a module of its own (~1 MB each in sgl), so after MODULES_PER_SESSION modules new
        ones go into a fresh Slang session on the same device: the old one goes with its last kernel."""
        keys = with_variants(keys, self._checked)
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
