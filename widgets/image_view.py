"""ImageView and LiveImage: float/uint8 images with exposure, colormaps, zoom/pan and pixel inspection.

Frames travel as raw binary (uint8 stays uint8, floats become float32, channel count kept) and are
tone-mapped in the browser: exposure/colormap changes need no kernel round trip (they work while the
kernel is busy), and hovering shows the exact raw values. The numpy twin of that arithmetic
(:func:`._encode.tonemap`) renders the PNG fallback for static viewers.

Clicking a pixel (with ``on_pixel`` set, or ``debug=kernel``; ``live()`` views of a kernel always)
asks Python what is behind that pixel; for a kernel's image that is the pixel's own thread run
through ``ComputeKernel.debug`` with the view's parameters (its printf and marked values), shown in a
panel beside the image (:meth:`ImageView.pixel`).
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any, Callable, Literal, Mapping

import anywidget
import numpy as np
import traitlets as t

from ._esm import bundle_css, bundle_esm
from ._encode import COLORMAPS, colormap_lut, png_preview, tonemap
from ._wire import FrameError, FrameMeta, PixelReply
from .controls import Control, InvalidControlValue, validate_values

__all__ = ["ImageView", "LiveImage"]

log = logging.getLogger("slang_kernel.widgets")


JPEG_QUALITY = 90
MAX_BATCH = 4           # frames one request may ask for
MAX_INTERVAL_MS = 100  # the longest pause between the frames of a batch (the kernel waits meanwhile)
MAX_PATH = 48          # frames run (not sent) at the positions a drag passed before a request


def _frame_payload(img: np.ndarray, seq: int, lossy: bool = False,
                   tone: Callable[[np.ndarray, float, float], np.ndarray] | None = None,
                   error: str | None = None) -> tuple[bytes, FrameMeta]:
    """Binary frame + header for an (H, W) / (H, W, 1..4) float or uint8 array.

    ``lossy``: a frame of a running loop may travel as JPEG (dtype ``"jpeg"``); the browser asks for
    the exact frame again once the loop rests. An opaque RGB(A) uint8 frame is sent as it is; a float
    frame is first tone-mapped here by ``tone(image, lo, hi)`` (the view's exposure, colormap and
    range; ``toned`` in the header tells the browser not to apply them again): 35 KB instead of 1-4 MB."""
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or not 1 <= a.shape[2] <= 4 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"image must be (H, W) or (H, W, 1..4), got shape {np.shape(img)}")
    dtype: Literal["u1", "f4"]
    if a.dtype == np.uint8:
        data, dtype = np.ascontiguousarray(a), "u1"
    elif a.dtype.kind in "fiub":
        data, dtype = np.ascontiguousarray(a, dtype="<f4"), "f4"
    else:
        raise TypeError(f"unsupported image dtype {a.dtype}")
    lo, hi = 0.0, 1.0
    if dtype == "f4" and a.shape[2] == 1:
        finite = data[np.isfinite(data)]
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            hi = hi if hi > lo else lo + 1.0
    meta: FrameMeta = {"width": a.shape[1], "height": a.shape[0], "channels": a.shape[2],
                       "dtype": dtype, "seq": seq, "lo": lo, "hi": hi, "error": error}
    if lossy and dtype == "u1" and a.shape[2] >= 3:
        jpeg = _jpeg(data)
        if jpeg is not None:  # decoded to RGBA u1 in the browser
            meta["dtype"], meta["channels"] = "jpeg", 4
            return jpeg, meta
    opaque = a.shape[2] < 4 or bool((data[..., 3] >= 1.0).all())  # what tone() turns into alpha 255
    if lossy and dtype == "f4" and tone is not None and opaque:
        jpeg = _jpeg(tone(data, lo, hi))
        if jpeg is not None:
            meta["dtype"], meta["toned"] = "jpeg", True
            return jpeg, meta
    return data.tobytes(), meta


def _jpeg(rgb: np.ndarray) -> bytes | None:
    """JPEG (quality 90, no chroma subsampling) of an opaque (H, W, 3|4) uint8 image; None when it has
    transparency or Pillow is missing. ~1 ms and ~35 KB for 512x512 instead of 1 MB raw."""
    rgb = np.ascontiguousarray(rgb)
    h, w, c = rgb.shape
    if c == 4 and rgb[..., 3].min() != 255:
        return None
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a dependency of matplotlib
        return None
    # Pillow reads RGBX rows directly: slicing off alpha in numpy first would cost as much as the encode
    img = Image.frombuffer("RGB", (w, h), rgb, "raw", "RGBX", 0, 1) if c == 4 else Image.fromarray(rgb)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=JPEG_QUALITY, subsampling=0)
    return buf.getvalue()


class ImageView(anywidget.AnyWidget):
    """Show an image; ``update(img)`` replaces it. Wheel zooms, drag pans, hover shows raw values."""

    _esm = bundle_esm("image_view.js")
    _css = bundle_css("image_view.css")

    _frame = t.Bytes(b"").tag(sync=True)
    _frame_meta = t.Dict().tag(sync=True)
    _luts = t.Dict().tag(sync=True)
    exposure = t.Float(0.0).tag(sync=True)
    colormap = t.Enum(COLORMAPS, default_value="viridis").tag(sync=True)
    srgb = t.Bool(False).tag(sync=True)
    range = t.List(t.Float(), default_value=[], help="[lo, hi] for the colormap; [] = auto").tag(sync=True)
    display_size = t.List(t.Int(), default_value=[512, 512]).tag(sync=True)
    _controls = t.List(t.Dict()).tag(sync=True)
    _epoch = t.Int(0).tag(sync=True)  # bumped by snapshot(): views it left detached stop
    pixel_debug = t.Bool(False).tag(sync=True)  # a click sends PixelRequest (on_pixel is set)
    pixel_text = t.Unicode("").tag(sync=True)   # the last pixel's answer, for views drawn later

    def __init__(self, image: np.ndarray | None = None, *, exposure: float = 0.0, colormap: str = "viridis",
                 srgb: bool = False, size: tuple[int, int] = (512, 512),
                 on_pixel: Callable[[int, int], Any] | None = None, debug: Any = None,
                 params: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """on_pixel(x, y): called when the user clicks pixel (x, y); what it returns is shown beside the
        image (its ``text()`` if it has one, else ``str``). debug: a ComputeKernel whose output this is;
        a click runs ``debug.debug(thread=(x, y, 0), **params)`` (params: the dispatch's parameters,
        ``threads``/``groups`` included)."""
        luts = {name: colormap_lut(name) for name in COLORMAPS}
        super().__init__(exposure=exposure, colormap=colormap, srgb=srgb, display_size=list(size),
                         _luts=luts, **kwargs)
        self._image: np.ndarray | None = None
        self._seq = 0
        self._answer: dict[str, Any] = {}
        self._display: Any = None  # the handle of this view's output, for snapshot()
        self._on_pixel: Callable[[int, int], Any] | None = None
        self.last_pixel: Any = None  # what the last click's on_pixel returned
        if debug is not None:
            if on_pixel is not None:
                raise TypeError("ImageView: give on_pixel= or debug=, not both")
            on_pixel = debug_thread(debug, params or {})
        elif params is not None:
            raise TypeError("ImageView: params= are the parameters of debug=kernel; pass debug= too")
        self.on_pixel = on_pixel
        self.on_msg(self._on_view_msg)
        if image is not None:
            self.update(image)

    @property
    def on_pixel(self) -> Callable[[int, int], Any] | None:
        """What a click on pixel (x, y) runs; None: clicks only pan."""
        return self._on_pixel

    @on_pixel.setter
    def on_pixel(self, fn: Callable[[int, int], Any] | None) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"on_pixel must be a function (x, y) -> result, got {type(fn).__name__}")
        self._on_pixel = fn
        self.pixel_debug = fn is not None

    def pixel(self, x: int, y: int) -> Any:
        """Run ``on_pixel(x, y)`` as a click on that pixel does; the panel beside the image shows the
        result. Returns it (e.g. a ThreadDebug)."""
        if self._on_pixel is None:
            raise RuntimeError("this view has no on_pixel: pass on_pixel= or debug=kernel")
        h, w = (self._image.shape[:2] if self._image is not None else (None, None))
        if not isinstance(x, (int, np.integer)) or not isinstance(y, (int, np.integer)) or x < 0 or y < 0 or (
                w is not None and h is not None and (x >= w or y >= h)):
            raise ValueError(f"pixel ({x}, {y}) is outside the image ({w} x {h})")
        result = self._on_pixel(int(x), int(y))
        self.last_pixel = result
        self.pixel_text = f"pixel ({x}, {y})\n" + _as_text(result)
        return result

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "pixel":
            return
        req, x, y = content.get("req"), content.get("x"), content.get("y")
        reply: PixelReply = {"type": "pixel", "req": req if isinstance(req, int) else -1,
                             "x": x if isinstance(x, int) else -1, "y": y if isinstance(y, int) else -1,
                             "text": "", "error": None}
        try:
            if isinstance(x, bool) or isinstance(y, bool):
                raise ValueError(f"pixel ({x}, {y}) is not a pair of integers")
            self.pixel(x, y)  # type: ignore[arg-type]
            reply["text"] = self.pixel_text
        except Exception as exc:  # noqa: BLE001 - the browser shows why; the view stays usable
            log.info("pixel (%s, %s): %s", x, y, exc)
            reply["error"] = f"pixel ({x}, {y}): {type(exc).__name__}: {exc}"
        self.send(reply)

    @property
    def image(self) -> np.ndarray | None:
        """The last image shown (as given)."""
        return self._image

    def update(self, image: Any, *, lossy: bool = False, error: str | None = None) -> None:
        """Show a new image (one binary state message carrying frame and header).

        lossy: send it as JPEG where it is opaque (live loops: 25-100x fewer bytes; the browser's
        websocket receive, not the kernel, bounds the frame rate of 1 MB frames); a float image
        tone-mapped first, as the view would. error: text shown over the image (see FrameMeta)."""
        if hasattr(image, "detach") and hasattr(image, "cpu"):   # a torch tensor a training loop updates
            image = image.detach().cpu().numpy()
        self._seq += 1
        data, meta = _frame_payload(image, self._seq, lossy, self._tone, error)
        self._image = np.asarray(image)
        extra: dict[str, Any] = dict(self._answer)  # which requests this frame answers + timings
        self._answer = {}
        extra["t_sent"] = time.time() * 1e3
        with self.hold_sync():
            self._frame = data
            self._frame_meta = {**meta, **extra}

    def to_rgba(self) -> np.ndarray:
        """The current image tone-mapped as the browser shows it, (H, W, 4) uint8."""
        if self._image is None:
            return np.zeros((1, 1, 4), np.uint8)
        meta = self._frame_meta
        return self._tone(np.asarray(self._image), meta.get("lo", 0.0), meta.get("hi", 1.0))

    def _tone(self, img: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """`img` as the browser shows it with this view's settings; lo/hi: its automatic range."""
        if len(self.range) == 2:
            lo, hi = self.range
        if img.dtype == np.uint8:
            lo, hi = 0.0, 1.0
        return tonemap(img, self.exposure, self.colormap, lo, hi, self.srgb)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle
        if self._image is not None:
            data["image/png"] = png_preview(self.to_rgba())
        return data, meta

    def _ipython_display_(self, **kwargs: Any) -> None:
        """Display with a display id, so that snapshot() can refresh the saved PNG fallback."""
        from IPython import display as ipd

        display: Callable[..., Any] = ipd.display   # IPython is untyped
        bundle = self._repr_mimebundle_()
        if bundle is None:
            return
        data, meta = bundle
        self._display = display(data, metadata=meta, raw=True, display_id=True)

    def snapshot(self) -> None:
        """Make the output's static fallback (what GitHub or nbviewer show) the current frame.

        The notebook stores the bundle of the moment the view was displayed; this replaces it, and
        the live view is re-created from the widget model (view-local zoom resets). LiveImage does
        this when the user pauses its loop; call it yourself after updating a view from Python."""
        if self._display is None or self._image is None:
            return
        bundle = self._repr_mimebundle_()
        if bundle is not None:
            self._display.update(bundle[0], metadata=bundle[1], raw=True)
            self._epoch += 1


class LiveImage(ImageView):
    """An image re-rendered by ``render(values)`` whenever a control changes or time advances.

    ``controls`` maps names to :class:`~.controls.Control` objects; ``values`` holds the validated
    current values. With a ``Time`` control, play/pause runs a frame loop driven by the browser: it
    asks for the next few frames (each request carries the newest values) only when fewer than two
    are on their way, so frames never queue up. A playing loop asks for up to three frames at a
    time, rendered here back to back (``Time`` and ``Frame`` advanced for each, at most one per
    ``interval_ms``): every request costs the kernel a busy/idle status round, which JupyterLab
    redraws its toolbar, status bar and tab icon for, and on a 2-core machine that, not the render,
    bounded the frame rate (38 -> 57 fps for a light kernel without it).

    lossy: while the loop runs (or a control is dragged), opaque frames travel as JPEG (~35 KB instead
    of 1 MB of uint8 or 4 MB of float32 at 512x512; float frames tone-mapped here with the view's
    exposure, colormap and range first); once it rests the browser fetches the exact pixels of the
    last frame (no re-render), so hovering and the PNG fallback always see exact values.

    status: asked after each render for the text to show over the frame (``error``: e.g. "the new
    revision did not compile, this is the last good one"), None for none; it travels in each
    frame's header, so the banner clears with the first frame that has nothing to say.
    """

    def __init__(self, render: Callable[[dict[str, Any]], np.ndarray],
                 controls: Mapping[str, Control] | None = None, *, size: tuple[int, int] = (512, 512),
                 lossy: bool = True, status: Callable[[], str | None] | None = None, **kwargs: Any) -> None:
        super().__init__(size=size, **kwargs)
        self.lossy = lossy
        self.render = render
        self.status = status
        self.error: str | None = None
        self.controls: dict[str, Control] = dict(controls or {})
        self.values: dict[str, Any] = {k: c.default for k, c in self.controls.items()}
        self.render_ms: float = 0.0
        self.frames_rendered = 0
        self._reqs: list[int] = []  # browser request ids the next frame completes
        self._part: int | None = None  # the request the next frame is one (not the last) of
        self._last_start = 0.0  # perf_counter() when the last render began
        self._t_recv = 0.0
        self._lossy = False
        self._controls = [dict(c.spec(k)) for k, c in self.controls.items()]
        self.on_msg(self._on_msg)
        self.refresh()

    def refresh(self) -> None:
        """Call ``render`` with the current values and stream the frame."""
        t0 = self._last_start = time.perf_counter()
        img = self.render(dict(self.values))
        self.error = self.status() if self.status is not None else None
        self.render_ms = (time.perf_counter() - t0) * 1e3
        self.frames_rendered += 1
        self._answer = {"reqs": self._reqs, "t_recv": self._t_recv, "render_ms": self.render_ms}
        if self._part is not None:
            self._answer["part"] = self._part
        self._reqs, self._part = [], None
        self.update(img, lossy=self._lossy, error=self.error)

    def set_values(self, incoming: object) -> dict[str, Any]:
        """Validate ``incoming`` against the controls, merge what is valid, return it.

        Called from Python, the browser's controls (sliders, colour pickers) move to the new values;
        ``refresh()`` renders a frame with them."""
        clean = self._merge(incoming)
        if clean:
            self._controls = [dict(spec, value=self.values.get(spec["name"], spec.get("value")))
                              for spec in self._controls]
        return clean

    def carry_on(self) -> None:
        """Make the controls' values those the frames reached (the clock where it is): a view shown
        again (the output of a re-run cell) continues from there, where it restarted at the start."""
        self._controls = [dict(spec, value=self.values.get(spec["name"], spec.get("value")))
                          for spec in self._controls]

    def _merge(self, incoming: object) -> dict[str, Any]:
        """Validate and merge values (from the browser: its controls already show them)."""
        clean = validate_values(self.controls, incoming)
        self.values.update(clean)
        return clean

    def set_controls(self, controls: Mapping[str, Control]) -> None:
        """Replace the controls (the view of a cell whose new revision has other inputs): a control
        keeps the value of the old one of its name where it accepts it; the browser redraws the
        controls and the play state stays as it is."""
        old = self.values
        self.controls = dict(controls)
        values: dict[str, Any] = {}
        for name, c in self.controls.items():
            values[name] = c.default
            if name in old:
                try:
                    values[name] = c.validate(old[name])
                except InvalidControlValue:
                    pass
        self.values = values
        self._controls = [dict(c.spec(k), value=values[k]) for k, c in self.controls.items()]

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        self._t_recv = time.time() * 1e3
        if isinstance(content, dict) and content.get("type") == "paused":
            # The user paused: make the notebook's static fallback this last frame. The live view is
            # re-created from the model, so hand it the current control values first.
            self._controls = [dict(c.spec(k), value=self.values.get(k, c.default), playing=False)
                              for k, c in self.controls.items()]
            self.snapshot()
            return
        if isinstance(content, dict) and content.get("type") == "pixel":
            return  # ImageView._on_view_msg answers it
        if isinstance(content, dict) and content.get("type") == "exact":
            # the loop rests: the exact (raw) pixels of the frame shown last, without re-rendering
            req = content.get("req")
            if self._image is not None:
                self._answer = {"reqs": [req] if isinstance(req, int) else [], "t_recv": self._t_recv}
                self.update(self._image, error=self.error)
            return
        if not isinstance(content, dict) or content.get("type") != "frame":
            log.warning("LiveImage: ignored message of type %r",
                        content.get("type") if isinstance(content, dict) else type(content).__name__)
            return
        reqs = content.get("reqs", [content.get("req")])
        reqs = [r for r in reqs if isinstance(r, int) and not isinstance(r, bool)] if isinstance(reqs, list) else []
        count = int(_bounded(content.get("count"), 1, MAX_BATCH, 1))
        interval = _bounded(content.get("interval_ms"), 0, MAX_INTERVAL_MS, 0) / 1e3
        self._lossy = self.lossy and content.get("lossy") is True
        self._run_path(content.get("path"))
        self._merge(content.get("values", {}))
        base = dict(self.values)
        for i in range(count):
            if interval:  # pace the loop (the browser shows at most one frame per display refresh)
                wait = self._last_start + interval - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            if i:
                self._advance(base, i)
            last = i == count - 1
            self._reqs = reqs if last else []
            self._part = None if last or not reqs else reqs[0]
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - the browser must get an answer or its loop stalls
                log.exception("LiveImage render failed")
                err: FrameError = {"type": "error", "message": f"{type(exc).__name__}: {exc}", "reqs": reqs}
                self._reqs, self._part = [], None
                self.send(err)
                return

    def _run_path(self, path: object) -> None:
        """Frames at the values a drag passed since the last request, rendered and not sent: a
        painting program draws at each, so the frame sent shows a stroke (before, the positions
        between two frames on their way were lost and a fast drag painted dots)."""
        if not isinstance(path, list):
            return
        if len(path) > MAX_PATH:   # thinned evenly, as the browser does
            path = [path[(i + 1) * len(path) // MAX_PATH - 1] for i in range(MAX_PATH)]
        for step in path:
            if not self._merge(step):
                continue
            try:
                self.render(dict(self.values))
            except Exception:  # noqa: BLE001 - the request's own frame reports it
                return
            self.frames_rendered += 1

    def _advance(self, base: dict[str, Any], i: int) -> None:
        """Values for frame ``i`` of a batch: time moves on by the real time since the request came,
        frame counters by ``i``."""
        for name, c in self.controls.items():
            if c.kind == "time":
                self.values[name] = base[name] + (time.time() * 1e3 - self._t_recv)
            elif c.kind == "frame":
                self.values[name] = base[name] + i


def _bounded(v: object, lo: float, hi: float, default: float) -> float:
    """A number from the browser, clamped to [lo, hi]; `default` for anything else (bool, NaN, text)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return default
    return float(min(hi, max(lo, v)))


def _as_text(result: Any) -> str:
    """What the pixel panel shows for an on_pixel result."""
    text = getattr(result, "text", None)
    if callable(text):
        return str(text())
    return "" if result is None else str(result)


def debug_thread(kernel: Any, params: Mapping[str, Any]) -> Callable[[int, int], Any]:
    """on_pixel for an image a kernel wrote: pixel (x, y) is thread (x, y, 0) of the same dispatch."""
    debug = getattr(kernel, "debug", None)
    if not callable(debug):
        raise TypeError(f"debug= wants a ComputeKernel (with .debug), got {type(kernel).__name__}")
    fixed = dict(params)

    def run(x: int, y: int) -> Any:
        return debug(thread=(x, y, 0), **fixed)
    return run
