"""Live kernels: a LiveImage whose controls drive a compute kernel's uniforms, following its cell.

``live(kernel, image="outputTexture", controls={"amp": Slider(0, 1, 0.5), "t": Time()})`` dispatches
``kernel`` with the control values as the uniforms of the same names, shows the texture (or (H, W, C)
array) parameter ``image`` and re-dispatches on every control change or time step, streaming the new
frame. Flow control: the browser asks for frames only while fewer than two are on their way, each
request carrying the newest values (LiveImage), so the view never queues stale frames.

Hot reload: each frame dispatches the kernel's current revision (a ComputeKernel follows its name),
so re-running its cell changes the running view on the next frame, and running any other cell
changes nothing. While the new revision does not compile (or does not take the view's parameters),
the view keeps dispatching the last good one and shows why over the image.

Clicking a pixel runs that pixel's thread (x, y, 0) of the same dispatch through ``k.debug`` (its
printf and marked values), shown beside the image (Alt+click when a Mouse control takes the clicks).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from slang_kernel import Backend, CompiledKernel, ComputeKernel, ParamInfo, SlangCompileError, TypeInfo
from slang_kernel.playground import last_good_message, to_rgba8
from .controls import Control
from .image_view import LiveImage

__all__ = ["KernelFollower", "LiveKernelImage", "live"]


class KernelFollower:
    """Which revision of a ComputeKernel a live view dispatches: the current one once it compiled and
    took the view's parameters, else the last good one, with ``error`` saying why (None when the
    current one runs). Looks at the session only when something in it changed."""

    def __init__(self, kernel: ComputeKernel) -> None:
        self.kernel = kernel
        self.session = kernel.session   # its service: backend, revision, failure
        self.good: CompiledKernel = kernel.compiled()   # nothing to show without one good revision
        self.error: str | None = None
        self._stuck: str | None = None                    # why the current revision is not the one run
        self._failed: tuple[BaseException | None, str] = (None, "")
        self._next: CompiledKernel | None = None          # a newer revision, not dispatched yet
        self._seen: tuple[int, Backend] = (self.session.revision, self.session.backend)

    def current(self) -> CompiledKernel:
        """What the next frame dispatches."""
        s = self.session
        if self._seen[0] != s.revision or self._seen[1] is not s.backend:
            self._seen = (s.revision, s.backend)
            try:
                ck = self.kernel.compiled()
            except SlangCompileError as exc:   # its cell (or one it uses) no longer compiles
                self._next, self._stuck = None, last_good_message(self.kernel.name, exc)
            else:
                self._next, self._stuck = (None if ck is self.good else ck), None
        cell = (self._next or self.good).cell
        failed = s.failure(cell)   # the cell's last run did not compile (a dict lookup per frame)
        if failed is None:
            self.error = self._stuck
        elif failed is not self._failed[0]:
            self._failed = (failed, last_good_message(cell, failed))
        if failed is not None:
            self.error = self._failed[1]
        return self._next or self.good

    def took(self, ck: CompiledKernel) -> None:
        """`ck` dispatched: it is the good revision now."""
        if ck is self._next:
            self.good, self._next = ck, None

    def refused(self, ck: CompiledKernel, exc: BaseException) -> None:
        """`ck` (a newer revision) did not take the view's parameters: back to the good one."""
        if ck is not self._next:
            return
        self._next = None
        self.error = self._stuck = last_good_message(ck.cell, exc)


class LiveKernelImage(LiveImage):
    """The LiveImage of :func:`live`: each frame re-dispatches ``kernel`` (the ComputeKernel), the
    revision ``follower`` picks. Requests are answered one at a time, in order (the kernel handles
    comm messages sequentially), and the browser asks only while fewer than two frames are on their
    way, so nothing piles up here."""

    kernel: ComputeKernel | None = None
    follower: KernelFollower | None = None


def _bind_value(t: TypeInfo | None, v: Any) -> Any:
    """A control's value as the uniform's type wants it (ints for int uniforms, float arrays for vectors)."""
    if isinstance(v, (tuple, list)):
        return np.asarray(v, np.float32)
    if t is not None and t.kind == "scalar" and (t.scalar or "").startswith(("int", "uint")):
        return int(v)
    if t is not None and t.kind == "scalar" and isinstance(v, (int, float)):
        return float(v)
    return v


def _frame_of(img: Any, rgba8: bool) -> np.ndarray:
    """The frame to stream from the view's image: a device texture in a worker is read straight into
    shared memory (as rgba8 when asked, converted there) and seen through a view (`frame()`, valid
    until the next frame: the copy below takes it first); elsewhere `numpy()`, or the array itself."""
    frame = getattr(img, "frame", None)
    if frame is not None:
        out = frame(rgba8=rgba8)   # rgba8: converted by the worker, 1/4 of the bytes cross
    else:
        out = img.numpy() if hasattr(img, "numpy") else img
    return to_rgba8(out) if rgba8 and np.asarray(out).dtype.kind == "f" else np.array(out, copy=True)


def _params(ck: CompiledKernel) -> dict[str, ParamInfo]:
    return {p.name: p for p in (*ck.entry_point.uniforms, *ck.reflection.globals)}


def live(kernel: ComputeKernel, image: str = "outputTexture", controls: Mapping[str, Control] | None = None, *,
         values: Mapping[str, Any] | None = None, threads: Any = None, groups: Any = None,
         size: tuple[int, int] | None = None, rgba8: bool = True, **kwargs: Any) -> LiveKernelImage:
    """A LiveImage of ``kernel``'s ``image`` parameter, re-dispatched whenever a control changes.

    kernel: a ComputeKernel. image: the name of a texture parameter (RWTexture2D) or of an (H, W, C)
    array in ``values``. controls: name -> Slider/Color/Time/Frame/Mouse; each drives the kernel
    uniform of the same name. values: the other parameters (fixed). The texture is created when not
    given: ``size`` (width, height), default 512x512, float4; on a backend with textures it stays on
    the device. threads/groups: the dispatch size (default: one thread per pixel). rgba8: stream
    floats clamped to 8 bits (4x less data per frame); False keeps floats (HDR, exposure in the view).
    """
    follower = KernelFollower(kernel)
    session = follower.session
    params = _params(follower.good)
    controls = dict(controls or {})
    for n in controls:
        if n not in params:
            raise KeyError(f"control {n!r} is not a parameter of {kernel.name}; its parameters: {', '.join(params)}")
    fixed = dict(values or {})
    if image not in params:
        raise KeyError(f"{kernel.name} has no parameter {image!r}; its parameters: {', '.join(params)}")
    own: tuple[int, int] | None = None   # (w, h) of a texture made here, per backend
    made_on: list[Backend] = []
    if image not in fixed:
        pt = params[image].type
        if not pt.is_texture:
            raise TypeError(f"{image} is {pt.name}: pass its array in values= (or name a texture parameter)")
        own = size or (512, 512)

    def texture(backend: Backend) -> Any:
        assert own is not None
        made_on[:] = [backend]
        return kernel.new_texture(image, *own)

    if own is not None:
        fixed[image] = texture(session.backend)
    shape = fixed[image].shape
    if threads is None and groups is None:
        threads = (shape[1], shape[0], 1)
    known: dict[str, dict[str, ParamInfo]] = {follower.good.key: params}

    def run(ck: CompiledKernel, vals: Mapping[str, Any]) -> None:
        p = known.get(ck.key) or known.setdefault(ck.key, _params(ck))
        args = dict(fixed)
        for n, v in vals.items():
            args[n] = _bind_value(p[n].type if n in p else None, v)
        kernel.run_build(ck, threads=threads, groups=groups, **args)

    def render(vals: dict[str, Any]) -> np.ndarray:
        backend = session.backend
        if own is not None and made_on[0] is not backend:   # a backend switch: the old device is gone
            fixed[image] = texture(backend)
        ck = follower.current()
        try:
            run(ck, vals)
        except TypeError as exc:   # ParameterError too: a newer revision wants other parameters
            if ck is follower.good:
                raise
            follower.refused(ck, exc)
            run(follower.good, vals)
        else:
            follower.took(ck)
        return _frame_of(fixed[image], rgba8)

    view = LiveKernelImage(render, controls, size=tuple(kwargs.pop("display_size", (512, 512))),
                           status=lambda: follower.error, **kwargs)
    view.kernel, view.follower = kernel, follower

    def debug_pixel(x: int, y: int) -> Any:
        """A click on pixel (x, y): its thread of the view's current dispatch, through k.debug."""
        ck = follower.good
        p = known.get(ck.key) or known.setdefault(ck.key, _params(ck))
        args = dict(fixed)
        for n, v in view.values.items():
            args[n] = _bind_value(p[n].type if n in p else None, v)
        return kernel.debug(thread=(x, y, 0), threads=threads, groups=groups, **args)

    view.on_pixel = debug_pixel
    return view
