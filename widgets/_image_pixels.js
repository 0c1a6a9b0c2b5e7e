// ImageView pixels: typed views of a frame's bytes, its tone mapping to RGBA (exposure, colormap of
// a single channel, optional sRGB; NaN shows magenta), and how values and colours are written.
const NAN_RGB = [255, 0, 255];

export function typedView(dv, Ctor) {
  if (!dv) return new Ctor(0);
  const off = dv.byteOffset, len = dv.byteLength;
  if (off % Ctor.BYTES_PER_ELEMENT === 0) return new Ctor(dv.buffer, off, len / Ctor.BYTES_PER_ELEMENT);
  return new Ctor(dv.buffer.slice(off, off + len));
}

export function fmt(v) {
  if (Number.isInteger(v)) return String(v);
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(4) : String(Number(v.toPrecision(5)));
}

export function hexToRgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [((n >> 16) & 255) / 255, ((n >> 8) & 255) / 255, (n & 255) / 255];
}
export function rgbToHex(rgb) {
  return "#" + rgb.map((c) => Math.round(Math.min(1, Math.max(0, c)) * 255).toString(16).padStart(2, "0")).join("");
}

export function tonemap(raw, meta, opts, out) {
  // raw: Uint8Array | Float32Array (H*W*C); out: Uint8ClampedArray (H*W*4)
  const n = meta.width * meta.height, c = meta.channels;
  const isU8 = meta.dtype === "u1";
  if (isU8 && c === 4 && opts.exposure === 0 && !opts.srgb) { out.set(raw); return; } // RGBA8 as is
  const k = Math.pow(2, opts.exposure) / (isU8 ? 255 : 1);
  const srgb = opts.srgb;
  if (c === 1) {
    const lut = opts.lut;
    const lo = isU8 ? 0 : opts.lo, span = isU8 ? 1 : (opts.hi - opts.lo) || 1;
    for (let i = 0; i < n; i++) {
      const v = raw[i] * k;
      const o = i * 4;
      if (v !== v) { out[o] = NAN_RGB[0]; out[o + 1] = NAN_RGB[1]; out[o + 2] = NAN_RGB[2]; out[o + 3] = 255; continue; }
      let tt = (v - lo) / span;
      tt = tt < 0 ? 0 : tt > 1 ? 1 : tt;
      const j = ((tt * 255 + 0.5) | 0) * 3;
      out[o] = lut[j]; out[o + 1] = lut[j + 1]; out[o + 2] = lut[j + 2]; out[o + 3] = 255;
    }
    return;
  }
  const m = Math.min(c, 3);
  for (let i = 0; i < n; i++) {
    const s = i * c, o = i * 4;
    let nan = false;
    for (let ch = 0; ch < 3; ch++) {
      let v = ch < m ? raw[s + ch] * k : 0;
      if (v !== v) { nan = true; v = 0; }
      v = v < 0 ? 0 : v > 1 ? 1 : v;
      if (srgb) v = v <= 0.0031308 ? v * 12.92 : 1.055 * Math.pow(v, 1 / 2.4) - 0.055;
      out[o + ch] = (v * 255 + 0.5) | 0;
    }
    let a = 255;
    if (c === 4) {
      let v = raw[s + 3] * (isU8 ? 1 / 255 : 1);
      v = v !== v ? 1 : v < 0 ? 0 : v > 1 ? 1 : v;
      a = (v * 255 + 0.5) | 0;
    }
    out[o + 3] = a;
    if (nan) { out[o] = NAN_RGB[0]; out[o + 1] = NAN_RGB[1]; out[o + 2] = NAN_RGB[2]; out[o + 3] = 255; }
  }
}
