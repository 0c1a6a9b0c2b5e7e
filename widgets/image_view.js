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
// This module: the view, its frames and pointer; the parts are in _image_*.js.
import { el } from "./_dom.js";
import { liveControls } from "./_image_controls.js";
import { fmt, tonemap, typedView } from "./_image_pixels.js";
import { FrameStream } from "./_image_stream.js";

const STROKE_STEP = 2;  // image pixels between the mouse positions of a drag's frames

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
  const stream = new FrameStream(model);
  const controls = liveControls(ctrlBox, root, model, stream);

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
  let chain = Promise.resolve();
  const drawnTimes = [];
  function loadFrame(first = false) {
    const t0 = performance.now();
    const m = model.get("_frame_meta"), dv = model.get("_frame");
    chain = chain.then(async () => {
      if (!m || !m.width) { meta = null; return; }
      const t1 = performance.now();
      const sent = stream.settle(m);  // NaN unless the frame answers this view's own request
      if (m.render_ms != null) stream.renderMs = m.render_ms;
      let sizeChanged;
      if (m.dtype === "jpeg") {
        let bmp;
        try { bmp = await createImageBitmap(new Blob([dv], { type: "image/jpeg" })); }
        catch (e) { console.warn("ImageView: bad JPEG frame", e); return; }
        // a float frame comes tone-mapped ("toned") by the kernel with this view's settings
        meta = { ...m, dtype: "u1", channels: 4, preview: true, srcChannels: m.toned ? m.channels : 4 }; raw = null;
        // the view that asked for it fetches the exact pixels once the loop rests; so does a view that
        // starts on a preview (re-created by a pause's snapshot, perhaps before that exchange)
        stream.lastLossy = sent === sent || first;
        sizeChanged = sizeOff(m.width, m.height);
        offCtx.drawImage(bmp, 0, 0);
        bmp.close();
        if (identityTone() || m.toned) draw(); else retone();
      } else {
        meta = m; raw = m.dtype === "u1" ? typedView(dv, Uint8Array) : typedView(dv, Float32Array); stream.lastLossy = false;
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
  // shortcuts do not see those keys meanwhile.
  const onKey = (down) => (ev) => {
    const hit = controls.keyCtls.filter((c) => c.code === ev.code);
    if (!hit.length) return;
    ev.preventDefault(); ev.stopPropagation();
    if (ev.repeat) return;
    const v = {};
    for (const c of hit) v[c.name] = down ? 1 : 0;
    stream.want(v);
  };
  root.addEventListener("keydown", onKey(true));
  root.addEventListener("keyup", onKey(false));
  let drag = null, mouse = [0, 0, 0, 0];
  canvas.addEventListener("pointerdown", (ev) => {
    canvas.setPointerCapture(ev.pointerId);
    // with a Mouse control, plain drags drive it; Shift pans and Alt+click picks a pixel to debug
    if (controls.mouseCtl && !ev.shiftKey && !(ev.altKey && model.get("pixel_debug")) && ev.button === 0) {
      const p = toImage(ev);
      // RenderCanvas.vue: (x, y, downX * (isDown ? -1 : 1), downY * (clickedSinceRun ? -1 : 1))
      mouse = [p.x, p.y, -p.x, -p.y];
      drag = { mode: "mouse" };
      stream.want({ [controls.mouseCtl.name]: mouse.slice() });
      return;
    }
    drag = { mode: "pan", cx: ev.clientX, cy: ev.clientY, vx: view.x, vy: view.y, moved: false, ev };
  });
  canvas.addEventListener("pointermove", (ev) => {
    showHover(ev);
    if (!drag) return;
    if (drag.mode === "mouse") {
      // every position the pointer passed (the browser coalesces moves between two animation
      // frames), joined by points at most STROKE_STEP pixels apart: the frames before the next one
      // run at each (a painting demo draws a stroke, not a dot per frame that came back)
      const name = controls.mouseCtl.name;
      const evs = typeof ev.getCoalescedEvents === "function" ? ev.getCoalescedEvents() : [];
      for (const e of evs.length ? evs : [ev]) {
        const p = toImage(e);
        const n = Math.ceil(Math.hypot(p.x - mouse[0], p.y - mouse[1]) / STROKE_STEP);
        for (let i = 1; i < n; i++) {
          const f = i / n;
          stream.pass({ [name]: [mouse[0] + (p.x - mouse[0]) * f, mouse[1] + (p.y - mouse[1]) * f, mouse[2], mouse[3]] });
        }
        mouse = [p.x, p.y, mouse[2], mouse[3]];
        stream.pass({ [name]: mouse.slice() });
      }
      stream.want({ [name]: mouse.slice() });
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
      stream.want({ [controls.mouseCtl.name]: mouse.slice() });
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

  // ---- live controls and the frame loop (_image_controls.js, _image_stream.js)
  controls.build(true);
  const tick = setInterval(() => {
    if (!root.isConnected) { clearInterval(tick); stream.playing = false; return; }
    controls.showTime();
    const now = performance.now();
    while (drawnTimes.length && drawnTimes[0] < now - 1000) drawnTimes.shift();
    fpsLbl.textContent = stream.playing ? `  ${drawnTimes.length} fps` : "";
  }, 250);

  function showError(text) {
    const t = text || "";
    if (banner.textContent !== t) banner.textContent = t;
    banner.classList.toggle("sk-on", t !== "");
    root.dataset.error = t ? "1" : "";
  }
  function onFrame() { loadFrame().then(() => { syncBar(); errBox.textContent = ""; stream.ack(); }); }
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
      controls.setPlaying(false);
      if (Array.isArray(msg.reqs)) stream.settle(msg); else stream.inFlight.clear();
      stream.ack();
    }
  }
  function onTone() { syncBar(); retone(); }
  // snapshot() re-displays the widget; JupyterLab detaches the old view's node but never disposes of
  // the view, so a view that is detached when the epoch changes stops listening (and requesting)
  function onEpoch() { if (!root.isConnected) cleanup(); }
  // what the view listens to, once, so that cleanup() stops listening to each
  const listeners = [["change:_frame_meta", onFrame], ["msg:custom", onCustom], ["change:_epoch", onEpoch],
                     ["change:_controls", controls.update], ["change:pixel_debug", showPixel],
                     ["change:pixel_text", onPixelText],
                     ...["exposure", "colormap", "srgb", "range"].map((k) => ["change:" + k, onTone])];
  for (const [event, handler] of listeners) model.on(event, handler);
  loadFrame(true).then(() => { syncBar(); stream.ack(); });
  syncBar();
  function cleanup() {
    stream.playing = false;
    for (const [event, handler] of listeners) model.off(event, handler);
  }
  return cleanup;
}

export default { render };
