// ImageView / LiveImage front end (plain ESM, no build step).
// Frames arrive as raw bytes (u1 or f4, H x W x C) and are tone-mapped here: exposure,
// colormap (single channel), optional sRGB. Zoom with the wheel, pan by dragging (shift-drag when a
// Mouse control owns plain drags), hover shows (x, y) and the raw pixel values.
// Live controls: at most two frame requests are in flight (request n+1 is rendered while frame n
// travels); a new request is sent only when an answer came back (frame drawn or error), each one with
// the newest control values, so frames never queue. The controls are redrawn when `_controls` changes
// (a re-run cell with other inputs), the loop playing on. A frame's `error` (e.g. the cell's new
// revision did not compile, this frame is from the last good one) shows as a banner over the image
// until a frame without one arrives.

import { el } from "./_dom.js";
const NAN_RGB = [255, 0, 255];

function typedView(dv, Ctor) {
  if (!dv) return new Ctor(0);
  const off = dv.byteOffset, len = dv.byteLength;
  if (off % Ctor.BYTES_PER_ELEMENT === 0) return new Ctor(dv.buffer, off, len / Ctor.BYTES_PER_ELEMENT);
  return new Ctor(dv.buffer.slice(off, off + len));
}

function fmt(v) {
  if (Number.isInteger(v)) return String(v);
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(4) : String(Number(v.toPrecision(5)));
}

function hexToRgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [((n >> 16) & 255) / 255, ((n >> 8) & 255) / 255, (n & 255) / 255];
}
function rgbToHex(rgb) {
  return "#" + rgb.map((c) => Math.round(Math.min(1, Math.max(0, c)) * 255).toString(16).padStart(2, "0")).join("");
}

function tonemap(raw, meta, opts, out) {
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

function render({ model, el: host }) {
  const root = el("div", "sk-img", host);
  root.dataset.frames = "0";
  const stats = root.__skStats = [];
  const bar = el("div", "sk-img-bar", root);
  const expLabel = el("label", "sk-img-exp", bar, "exposure ");
  const exp = el("input", "", expLabel);
  Object.assign(exp, { type: "range", min: -10, max: 10, step: 0.1 });
  const expVal = el("span", "sk-img-val", expLabel);
  const cmap = el("select", "sk-img-cmap", bar);
  for (const name of ["viridis", "magma", "gray"]) el("option", "", cmap, name).value = name;
  const srgbLabel = el("label", "", bar, " sRGB");
  const srgb = el("input", "", srgbLabel);
  srgb.type = "checkbox";
  srgbLabel.prepend(srgb);
  const fitBtn = el("button", "sk-img-fit", bar, "fit");
  const zoomLbl = el("span", "sk-img-zoom", bar);

  const ctrlBox = el("div", "sk-img-controls", root);
  const [dw, dh] = model.get("display_size");
  const row = el("div", "sk-img-row", root);
  const stage = el("div", "sk-img-stage", row);
  // pixel debugging (pixel_debug): a click asks Python about that pixel (PixelRequest); the answer
  // (for a kernel's image: that pixel's thread's printf and marked values) shows in this panel
  const pixPanel = el("div", "sk-img-pixel", row);
  const pixTitle = el("div", "sk-img-pixtitle", pixPanel, "thread debugger");
  const pixText = el("pre", "sk-img-pixtext", pixPanel);
  let pixReq = 0, picked = null;
  const canvas = el("canvas", "sk-img-canvas", stage);
  const banner = el("pre", "sk-img-banner", stage);
  canvas.width = dw; canvas.height = dh;
  canvas.style.width = dw + "px"; canvas.style.height = dh + "px";
  const ctx = canvas.getContext("2d");
  const status = el("div", "sk-img-status", root);
  const hover = el("span", "sk-img-hover", status, "\u00a0");
  const fpsLbl = el("span", "sk-img-fps", status);
  const errBox = el("div", "sk-img-error", root);

  const off = document.createElement("canvas");
  const offCtx = off.getContext("2d");
  let raw = null, meta = null, imgData = null;
  let view = { s: 1, x: 0, y: 0 }, fitted = false;

  function luts() { return model.get("_luts") || {}; }
  function currentRange() {
    const r = model.get("range");
    return r && r.length === 2 ? r : [meta.lo, meta.hi];
  }
  function sizeOff(w, h) {
    if (off.width === w && off.height === h) return false;
    off.width = w; off.height = h; imgData = null;
    return true;
  }
  function identityTone() { return model.get("exposure") === 0 && !model.get("srgb"); }
  function pixels() {
    // a JPEG preview drawn as is leaves raw unset: its pixels are the offscreen canvas's, read on demand
    if (!raw && meta && meta.preview) raw = offCtx.getImageData(0, 0, meta.width, meta.height).data;
    return raw;
  }
  function retone() {
    if (!meta || meta.toned || !pixels()) return;  // a toned preview: the kernel applied the settings
    sizeOff(meta.width, meta.height);
    if (!imgData) imgData = offCtx.createImageData(meta.width, meta.height);
    const [lo, hi] = currentRange();
    tonemap(raw, meta, {
      exposure: model.get("exposure"), srgb: model.get("srgb"), lo, hi,
      lut: typedView(luts()[model.get("colormap")], Uint8Array),
    }, imgData.data);
    offCtx.putImageData(imgData, 0, 0);
    draw();
  }
  function fit() {
    if (!meta) return;
    const s = Math.min(canvas.width / meta.width, canvas.height / meta.height);
    view = { s, x: (canvas.width - meta.width * s) / 2, y: (canvas.height - meta.height * s) / 2 };
    fitted = true;
    draw();
  }
  function draw() {
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = "#222";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (!meta) return;
    ctx.imageSmoothingEnabled = false;
    ctx.setTransform(view.s, 0, 0, view.s, view.x, view.y);
    ctx.drawImage(off, 0, 0);
    if (picked) {  // the pixel whose thread the panel shows
      ctx.strokeStyle = "#ff3d00"; ctx.lineWidth = 2 / view.s;
      ctx.strokeRect(picked.x, picked.y, 1, 1);
    }
    const lbl = ` ${meta.width}\u00d7${meta.height}\u00d7${meta.channels} ${meta.dtype}${meta.preview ? " (jpeg)" : ""}  zoom ${(view.s * 100).toFixed(0)}%`;
    if (zoomLbl.textContent !== lbl) zoomLbl.textContent = lbl;  // no layout work per frame
  }
  // Frames are shown in arrival order. A JPEG frame (dtype "jpeg": a live loop's preview of an opaque
  // RGB(A) u1 frame) is decoded off the main thread and, with neutral tone settings, drawn as is: no
  // pixel readback or tone-map pass per frame (hover or a tone change reads the pixels back once).
  let chain = Promise.resolve(), lastLossy = false;
  function loadFrame(first = false) {
    const t0 = performance.now();
    const m = model.get("_frame_meta"), dv = model.get("_frame");
    chain = chain.then(async () => {
      if (!m || !m.width) { meta = null; return; }
      const t1 = performance.now();
      const sent = settle(m);  // NaN unless the frame answers this view's own request
      if (m.render_ms != null) renderMs = m.render_ms;
      let sizeChanged;
      if (m.dtype === "jpeg") {
        let bmp;
        try { bmp = await createImageBitmap(new Blob([dv], { type: "image/jpeg" })); }
        catch (e) { console.warn("ImageView: bad JPEG frame", e); return; }
        // a float frame comes tone-mapped ("toned") by the kernel with this view's settings
        meta = { ...m, dtype: "u1", channels: 4, preview: true, srcChannels: m.toned ? m.channels : 4 }; raw = null;
        // the view that asked for it fetches the exact pixels once the loop rests; so does a view that
        // starts on a preview (re-created by a pause's snapshot, perhaps before that exchange)
        lastLossy = sent === sent || first;
        sizeChanged = sizeOff(m.width, m.height);
        offCtx.drawImage(bmp, 0, 0);
        bmp.close();
        if (identityTone() || m.toned) draw(); else retone();
      } else {
        meta = m; raw = m.dtype === "u1" ? typedView(dv, Uint8Array) : typedView(dv, Float32Array); lastLossy = false;
        sizeChanged = off.width !== m.width || off.height !== m.height;
        retone();
      }
      if (sizeChanged || !fitted) fit();
      showError(m.error);
      root.dataset.frames = String(Number(root.dataset.frames) + 1);
      const now = performance.now();
      drawnTimes.push(now);
      root.dataset.drawMs = (now - t1).toFixed(2);
      if (sent === sent) root.dataset.rttMs = (now - sent).toFixed(1);
      // per-frame timestamps (ms since the epoch; one machine, so comparable with Python's) for benches
      const T0 = performance.timeOrigin;
      stats.push({ req: T0 + sent, pyRecv: m.t_recv, pySent: m.t_sent, render: m.render_ms, bytes: dv ? dv.byteLength : 0,
                   ws: window.__skWs || 0, recv: T0 + t0, start: T0 + t1, drawn: T0 + now });
      if (stats.length > 600) stats.splice(0, stats.length - 600);
    });
    return chain;
  }
  function syncBar() {
    const ch = meta ? meta.srcChannels || meta.channels : 0;
    cmap.style.display = ch === 1 ? "" : "none"; // colormaps apply to one channel
    srgbLabel.style.display = ch > 1 ? "" : "none";
    exp.value = model.get("exposure");
    expVal.textContent = Number(model.get("exposure")).toFixed(1);
    cmap.value = model.get("colormap");
    srgb.checked = model.get("srgb");
  }

  // ---- pixel picking, zoom, pan
  function toImage(ev) {
    const r = canvas.getBoundingClientRect();
    const cx = (ev.clientX - r.left) * (canvas.width / r.width);
    const cy = (ev.clientY - r.top) * (canvas.height / r.height);
    return { cx, cy, x: (cx - view.x) / view.s, y: (cy - view.y) / view.s };
  }
  function showHover(ev) {
    if (!meta) return;
    const p = toImage(ev);
    const x = Math.floor(p.x), y = Math.floor(p.y);
    if (x < 0 || y < 0 || x >= meta.width || y >= meta.height) { hover.textContent = "\u00a0"; return; }
    const c = meta.channels, i = (y * meta.width + x) * c;
    const vals = Array.from(pixels().subarray(i, i + c), fmt);
    hover.textContent = `(${x}, ${y}) = ${c === 1 ? vals[0] : "(" + vals.join(", ") + ")"}`;
  }
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const p = toImage(ev);
    const f = Math.pow(1.0015, -ev.deltaY);
    const s = Math.min(256, Math.max(0.02, view.s * f));
    view = { s, x: p.cx - p.x * s, y: p.cy - p.y * s };
    fitted = true;
    draw();
  }, { passive: false });

  // KEY inputs: 1 while the key is held with the image focused (click it first); the notebook's own
  // shortcuts do not see those keys meanwhile. The controls of each kind are set by buildControls.
  let specs = [], timeCtl, frameCtl, keyCtls = [], mouseCtl;
  const onKey = (down) => (ev) => {
    const hit = keyCtls.filter((c) => c.code === ev.code);
    if (!hit.length) return;
    ev.preventDefault(); ev.stopPropagation();
    if (ev.repeat) return;
    const v = {};
    for (const c of hit) v[c.name] = down ? 1 : 0;
    want(v);
  };
  root.addEventListener("keydown", onKey(true));
  root.addEventListener("keyup", onKey(false));
  let drag = null, mouse = [0, 0, 0, 0];
  canvas.addEventListener("pointerdown", (ev) => {
    canvas.setPointerCapture(ev.pointerId);
    // with a Mouse control, plain drags drive it; Shift pans and Alt+click picks a pixel to debug
    if (mouseCtl && !ev.shiftKey && !(ev.altKey && model.get("pixel_debug")) && ev.button === 0) {
      const p = toImage(ev);
      // RenderCanvas.vue: (x, y, downX * (isDown ? -1 : 1), downY * (clickedSinceRun ? -1 : 1))
      mouse = [p.x, p.y, -p.x, -p.y];
      drag = { mode: "mouse" };
      want({ [mouseCtl.name]: mouse.slice() });
      return;
    }
    drag = { mode: "pan", cx: ev.clientX, cy: ev.clientY, vx: view.x, vy: view.y, moved: false, ev };
  });
  canvas.addEventListener("pointermove", (ev) => {
    showHover(ev);
    if (!drag) return;
    if (drag.mode === "mouse") {
      const p = toImage(ev);
      mouse = [p.x, p.y, mouse[2], mouse[3]];
      want({ [mouseCtl.name]: mouse.slice() });
      return;
    }
    if (Math.abs(ev.clientX - drag.cx) + Math.abs(ev.clientY - drag.cy) > 3) drag.moved = true;
    const r = canvas.getBoundingClientRect(), k = canvas.width / r.width;
    view.x = drag.vx + (ev.clientX - drag.cx) * k;
    view.y = drag.vy + (ev.clientY - drag.cy) * k;
    draw();
  });
  function pickPixel(ev) {
    if (!meta || !model.get("pixel_debug")) return;
    const p = toImage(ev), x = Math.floor(p.x), y = Math.floor(p.y);
    if (x < 0 || y < 0 || x >= meta.width || y >= meta.height) return;
    picked = { x, y }; draw();
    pixReq += 1;
    root.dataset.pixelReq = String(pixReq);
    pixPanel.classList.remove("sk-err");
    pixText.textContent = `pixel (${x}, ${y}): running its thread…`;
    model.send({ type: "pixel", req: pixReq, x, y });
  }
  const endDrag = (ev) => {
    if (drag && drag.mode === "pan" && !drag.moved && ev && ev.type === "pointerup") pickPixel(ev);
    if (drag && drag.mode === "mouse") {
      mouse = [mouse[0], mouse[1], Math.abs(mouse[2]), -Math.abs(mouse[3])];
      want({ [mouseCtl.name]: mouse.slice() });
    }
    drag = null;
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
  canvas.addEventListener("pointerleave", () => { if (!drag) hover.textContent = "\u00a0"; });
  fitBtn.addEventListener("click", fit);

  // ---- tone-mapping controls (synced back so the PNG fallback matches)
  exp.addEventListener("input", () => { model.set("exposure", Number(exp.value)); model.save_changes(); });
  cmap.addEventListener("change", () => { model.set("colormap", cmap.value); model.save_changes(); });
  srgb.addEventListener("change", () => { model.set("srgb", srgb.checked); model.save_changes(); });

  // ---- live controls + frame loop with acknowledgement-based flow control
  // Flow control (like jupyter_rfb's max_buffered_frames): a request goes out only when fewer than
  // LOW frames are on their way, so the kernel renders the next frame while the last one travels and
  // frames never queue up. Every request carries the newest values. A playing loop asks for BATCH
  // frames per request (rendered back to back, at most one per display refresh): each request costs
  // a kernel busy/idle round that JupyterLab redraws its toolbar, status bar and tab icon for, which
  // on a small machine cost more than the frames. Slow renders (> SLOW ms) go one at a time, so a
  // control change never waits behind a batch.
  const LOW = 2, BATCH = 3, SLOW = 25, FRAME_MS = 1000 / 60;
  const inFlight = new Map(); // request id -> {t: performance.now() when sent, left: frames to come}
  let nextReq = 1, pending = {}, hasPending = false, renderMs = 0;
  let playing = false, timeMs = 0, playStart = 0, frameId = 0;
  const drawnTimes = [];

  function outstanding() { let n = 0; for (const r of inFlight.values()) n += r.left; return n; }
  function want(values) { Object.assign(pending, values); hasPending = true; pump(); }
  function pump() {
    const now = performance.now();
    for (const [id, r] of inFlight) if (now - r.t > 10000) inFlight.delete(id); // lost (kernel restart)
    if (!hasPending && !playing) return;
    if (outstanding() >= LOW) return;
    const values = pending, count = playing && renderMs < SLOW ? BATCH : 1;
    if (playing) {
      timeMs = now - playStart;
      if (timeCtl) values[timeCtl.name] = timeMs;
      if (frameCtl) values[frameCtl.name] = frameId;
      frameId += count;
    }
    pending = {}; hasPending = false;
    const req = nextReq++;
    inFlight.set(req, { t: now, left: count });
    model.send({ type: "frame", values, req, count, interval_ms: playing ? FRAME_MS : 0, lossy: true });
  }
  function settle(m) {
    // a frame (or error) arrived: one of request m.part's frames, or the last one of m.reqs;
    // returns when its request was sent (NaN: another view's request)
    let sent = NaN;
    const r = m.part != null ? inFlight.get(m.part) : undefined;
    if (r) { r.left = Math.max(1, r.left - 1); sent = r.t; }
    for (const id of m.reqs || []) {
      const q = inFlight.get(id);
      if (q) { sent = sent < q.t ? sent : q.t; inFlight.delete(id); }
    }
    return sent;
  }
  function ack() {
    pump();
    if (lastLossy && !playing && !hasPending && inFlight.size === 0) {
      // the loop rests on a JPEG preview: fetch the exact pixels of that frame (no re-render)
      const req = nextReq++;
      inFlight.set(req, { t: performance.now(), left: 1 });
      lastLossy = false;
      model.send({ type: "exact", req });
    }
  }
  let playBtn = null, timeLbl = null;
  function setPlaying(on) {
    playing = on && !!timeCtl;
    if (playBtn) playBtn.textContent = playing ? "\u23f8 pause" : "\u25b6 play";
    if (playing) { playStart = performance.now() - timeMs; pump(); }
  }
  function buildControls(first) {
    // first: the view's own start (it may continue a clock: a re-created or re-displayed view);
    // later: the controls changed (a re-run cell with other inputs), the loop plays on as it was
    specs = model.get("_controls") || [];
    timeCtl = specs.find((c) => c.kind === "time");
    frameCtl = specs.find((c) => c.kind === "frame");
    keyCtls = specs.filter((c) => c.kind === "key");
    mouseCtl = specs.find((c) => c.kind === "mouse");
    if (keyCtls.length) root.tabIndex = 0;  // KEY inputs: 1 while held with the image focused
    ctrlBox.textContent = "";
    playBtn = timeLbl = null;
    for (const spec of specs) {
      const row = el("label", "sk-ctl sk-ctl-" + spec.kind, ctrlBox);
      row.dataset.name = spec.name;
      if (spec.kind === "slider") {
        el("span", "sk-ctl-name", row, spec.name + " ");
        const inp = el("input", "", row);
        Object.assign(inp, { type: "range", min: spec.min, max: spec.max, step: spec.step });
        inp.value = spec.value;
        const val = el("span", "sk-img-val", row, fmt(Number(spec.value)));
        inp.addEventListener("input", () => { val.textContent = fmt(Number(inp.value)); want({ [spec.name]: Number(inp.value) }); });
      } else if (spec.kind === "color") {
        el("span", "sk-ctl-name", row, spec.name + " ");
        const inp = el("input", "", row);
        inp.type = "color";
        inp.value = rgbToHex(spec.value);
        inp.addEventListener("input", () => want({ [spec.name]: hexToRgb(inp.value) }));
      } else if (spec.kind === "time") {
        if (first) timeMs = Number(spec.value) || 0;  // a re-created view continues where it was
        playBtn = el("button", "sk-play", row);
        timeLbl = el("span", "sk-img-val", row, `t = ${timeMs.toFixed(0)} ms`);
        playBtn.addEventListener("click", () => {
          const pausing = playing;
          setPlaying(!playing);
          if (pausing) model.send({ type: "paused" });  // Python makes the saved PNG this last frame
        });
      }
    }
    if (first && frameCtl) frameId = Number(frameCtl.value) || 0;
    setPlaying(first ? !!(timeCtl && timeCtl.playing) : playing);
  }
  buildControls(true);
  const tick = setInterval(() => {
    if (!root.isConnected) { clearInterval(tick); playing = false; return; }
    if (timeLbl) timeLbl.textContent = `t = ${timeMs.toFixed(0)} ms`;
    const now = performance.now();
    while (drawnTimes.length && drawnTimes[0] < now - 1000) drawnTimes.shift();
    fpsLbl.textContent = playing ? `  ${drawnTimes.length} fps` : "";
  }, 250);

  function showError(text) {
    const t = text || "";
    if (banner.textContent !== t) banner.textContent = t;
    banner.classList.toggle("sk-on", t !== "");
    root.dataset.error = t ? "1" : "";
  }
  function onFrame() { loadFrame().then(() => { syncBar(); errBox.textContent = ""; ack(); }); }
  function onControls() {
    // the same controls with new values (LiveImage.set_values from Python): move the inputs only,
    // so a drag or the play state is not disturbed; other controls: rebuild
    const next = model.get("_controls") || [];
    const sig = (l) => l.map((c) => `${c.name}:${c.kind}:${c.min}:${c.max}`).join("|");
    if (sig(next) !== sig(specs)) { buildControls(false); return; }
    specs = next;
    for (const spec of next) {
      const row = ctrlBox.querySelector(`[data-name="${CSS.escape(spec.name)}"]`);
      const inp = row && row.querySelector("input");
      if (!inp) continue;
      if (spec.kind === "slider") {
        inp.value = spec.value;
        const val = row.querySelector(".sk-img-val");
        if (val) val.textContent = fmt(Number(spec.value));
      } else if (spec.kind === "color") inp.value = rgbToHex(spec.value);
    }
  }
  function showPixel() {
    pixPanel.style.display = model.get("pixel_debug") ? "" : "none";
    if (!pixText.textContent) pixText.textContent = model.get("pixel_text") || "click a pixel to run its thread through k.debug";
  }
  showPixel();
  function onPixelText() { pixPanel.classList.remove("sk-err"); pixText.textContent = model.get("pixel_text"); }  // view.pixel() from Python
  function onCustom(msg) {
    if (msg && msg.type === "pixel") {
      if (msg.req !== pixReq) return;  // an older click's answer
      pixPanel.classList.toggle("sk-err", !!msg.error);
      pixText.textContent = msg.error || msg.text;
      root.dataset.pixel = `${msg.x},${msg.y}`;
      root.dataset.pixelDone = String(msg.req);
      return;
    }
    if (msg && msg.type === "error") {  // the render failed: no frame, the loop stops
      errBox.textContent = msg.message;
      setPlaying(false);
      if (Array.isArray(msg.reqs)) settle(msg); else inFlight.clear();
      ack();
    }
  }
  function onTone() { syncBar(); retone(); }
  // snapshot() re-displays the widget; JupyterLab detaches the old view's node but never disposes of
  // the view, so a view that is detached when the epoch changes stops listening (and requesting)
  function onEpoch() { if (!root.isConnected) cleanup(); }
  model.on("change:_frame_meta", onFrame);
  model.on("msg:custom", onCustom);
  model.on("change:_epoch", onEpoch);
  model.on("change:_controls", onControls);
  model.on("change:pixel_debug", showPixel);
  model.on("change:pixel_text", onPixelText);
  for (const k of ["exposure", "colormap", "srgb", "range"]) model.on("change:" + k, onTone);
  loadFrame(true).then(() => { syncBar(); ack(); });
  syncBar();
  function cleanup() {
    playing = false;
    model.off("change:_frame_meta", onFrame);
    model.off("msg:custom", onCustom);
    model.off("change:_epoch", onEpoch);
    model.off("change:_controls", onControls);
    model.off("change:pixel_debug", showPixel);
    model.off("change:pixel_text", onPixelText);
    for (const k of ["exposure", "colormap", "srgb", "range"]) model.off("change:" + k, onTone);
  }
  return cleanup;
}

export default { render };
