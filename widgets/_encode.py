"""Pixel helpers shared by the widgets: colormap tables, tone mapping in numpy, PNG encoding.

The browser does the interactive tone mapping (``image_view.js``); :func:`tonemap` is the same
arithmetic in numpy, used for the static PNG fallback so both agree.
"""

from __future__ import annotations

import functools
import struct
import zlib

import numpy as np

__all__ = ["COLORMAPS", "colormap_lut", "tonemap", "encode_png", "png_preview"]

COLORMAPS: tuple[str, ...] = ("gray", "viridis", "magma")
_NAN_RGB = (255, 0, 255)


@functools.lru_cache(maxsize=None)
def colormap_lut(name: str) -> bytes:
    """256 x RGB uint8 table for ``name`` (taken from matplotlib; ``gray`` is the identity ramp)."""
    if name not in COLORMAPS:
        raise ValueError(f"unknown colormap {name!r}; choose one of {COLORMAPS}")
    if name == "gray":
        ramp = np.arange(256, dtype=np.uint8)
        return np.stack([ramp] * 3, axis=1).tobytes()
    from matplotlib import colormaps  # lazy: only needed for the coloured maps

    rgba = colormaps[name](np.linspace(0.0, 1.0, 256))
    return np.round(rgba[:, :3] * 255).astype(np.uint8).tobytes()


def _as_hwc(img: np.ndarray) -> np.ndarray:
    if img.ndim == 2:
        return img[:, :, None]
    if img.ndim == 3 and 1 <= img.shape[2] <= 4:
        return img
    raise ValueError(f"image must be (H, W) or (H, W, 1..4), got shape {img.shape}")


def tonemap(
    img: np.ndarray,
    exposure: float = 0.0,
    colormap: str = "gray",
    lo: float = 0.0,
    hi: float = 1.0,
    srgb: bool = False,
) -> np.ndarray:
    """Map an (H, W[, C]) float or uint8 image to (H, W, 4) uint8 RGBA, as the browser does.

    uint8 input is read as value/255. Values are scaled by ``2**exposure``. One channel goes through
    ``colormap`` over [lo, hi]; 2..4 channels are RG(B)(A) clamped to [0, 1] (optionally sRGB-encoded).
    NaN shows as magenta.
    """
    x = _as_hwc(np.asarray(img))
    f = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    f = f * np.float32(2.0**exposure)
    h, w, c = f.shape
    out = np.empty((h, w, 4), np.uint8)
    nan = np.isnan(f).any(axis=2)
    if c == 1:
        span = (hi - lo) or 1.0
        t = np.clip((f[:, :, 0] - lo) / span, 0.0, 1.0)
        idx = np.nan_to_num(t * 255.0 + 0.5, nan=0.0).astype(np.intp)
        lut = np.frombuffer(colormap_lut(colormap), np.uint8).reshape(256, 3)
        out[:, :, :3] = lut[idx]
        out[:, :, 3] = 255
    else:
        rgb = np.zeros((h, w, 3), np.float32)
        rgb[:, :, : min(c, 3)] = f[:, :, : min(c, 3)]
        rgb = np.clip(np.nan_to_num(rgb, nan=0.0), 0.0, 1.0)
        if srgb:
            rgb = np.where(rgb <= 0.0031308, rgb * 12.92, 1.055 * np.power(rgb, 1 / 2.4) - 0.055)
        out[:, :, :3] = (rgb * 255.0 + 0.5).astype(np.uint8)
        alpha = np.clip(np.nan_to_num(f[:, :, 3], nan=1.0), 0, 1) if c == 4 else np.ones((h, w), np.float32)
        out[:, :, 3] = (alpha * 255.0 + 0.5).astype(np.uint8)
    out[nan] = (*_NAN_RGB, 255)
    return out


def encode_png(rgba: np.ndarray) -> bytes:
    """Encode (H, W, 4) uint8 RGBA as PNG with zlib only (no Pillow needed)."""
    rgba = np.ascontiguousarray(rgba, dtype=np.uint8)
    h, w, c = rgba.shape
    if c != 4:
        raise ValueError("encode_png wants (H, W, 4) uint8")
    raw = np.empty((h, 1 + w * 4), np.uint8)
    raw[:, 0] = 0  # filter: none
    raw[:, 1:] = rgba.reshape(h, w * 4)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)
    idat = zlib.compress(raw.tobytes(), 6)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def png_preview(rgba: np.ndarray, max_side: int = 512) -> bytes:
    """PNG of ``rgba`` shrunk by an integer stride (nearest) so neither side exceeds ``max_side``."""
    step = max(1, -(-max(rgba.shape[:2]) // max_side))
    return encode_png(rgba[::step, ::step])
