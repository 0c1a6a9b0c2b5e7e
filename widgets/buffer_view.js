// BufferView front end (plain ESM). The table asks Python for the rows it shows (plus a prefetch
// margin) with custom messages; replies carry one binary buffer per column. At most one page
// request is in flight per view; the latest wanted position wins.

import { el } from "./_dom.js";

const ROW_H = 20;
const MAX_SCROLL_PX = 4000000; // browsers cap element heights (~33M px); beyond this scroll is proportional
const CTORS = {
  "<f4": Float32Array, "<f8": Float64Array, "|i1": Int8Array, "|u1": Uint8Array, "|b1": Uint8Array,
  "<i2": Int16Array, "<u2": Uint16Array, "<i4": Int32Array, "<u4": Uint32Array,
  "<i8": BigInt64Array, "<u8": BigUint64Array,
};

function typed(dv, Ctor) {
  const off = dv.byteOffset, len = dv.byteLength;
  if (off % Ctor.BYTES_PER_ELEMENT === 0) return new Ctor(dv.buffer, off, len / Ctor.BYTES_PER_ELEMENT);
  return new Ctor(dv.buffer.slice(off, off + len));
}
function fmt(v, wire) {
  if (typeof v === "bigint") return v.toString();
  if (wire === "|b1") return v ? "true" : "false";
  if (Number.isInteger(v) && wire[1] !== "f") return String(v);
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a === 0) return "0";
  return a < 1e-4 || a >= 1e7 ? v.toExponential(5) : String(Number(v.toPrecision(wire === "<f8" ? 10 : 7)));
}
function differs(a, b, rtol, atol) {
  if (typeof a === "bigint" || typeof b === "bigint") return a !== b;
  if (a !== a && b !== b) return false;
  if (a === b) return false;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return true;
  return Math.abs(a - b) > atol + rtol * Math.abs(b);
}

let viewCounter = 0;

function render({ model, el: host }) {
  const viewId = `v${Date.now().toString(36)}${viewCounter++}`;
  const root = el("div", "sk-buf", host);
  const head = el("div", "sk-buf-head", root);
  const title = el("span", "sk-buf-title", head);
  const tabs = el("span", "sk-buf-tabs", head);
  const tabBtns = {};
  for (const m of ["table", "heatmap", "histogram"]) {
    const b = el("button", "", tabs, m);
    b.addEventListener("click", () => { model.set("mode", m); model.save_changes(); });
    tabBtns[m] = b;
  }
  const colSel = el("select", "sk-buf-col", head);
  colSel.addEventListener("change", () => { model.set("column", Number(colSel.value)); model.save_changes(); });
  const warn = el("span", "sk-buf-warn", head);
  const nextNaN = el("button", "sk-buf-nextnan", head, "next NaN/Inf");
  const nextDiff = el("button", "sk-buf-nextdiff", head, "next diff");

  // ---- table
  const tableBox = el("div", "sk-buf-tablebox", root);
  const bar = el("div", "sk-buf-bar", tableBox);
  const btn = (t, c) => el("button", c, bar, t);
  const bFirst = btn("\u00ab first", "sk-first"), bPrev = btn("\u25c0 prev", "sk-prev"),
    bNext = btn("next \u25b6", "sk-next"), bLast = btn("last \u00bb", "sk-last");
  const range = el("span", "sk-buf-range", bar);
  const gotoIn = el("input", "sk-buf-goto", bar);
  Object.assign(gotoIn, { type: "number", min: 0, placeholder: "go to row" });
  gotoIn.style.width = "8em";
  const scroller = el("div", "sk-buf-scroll", tableBox);
  const sticky = el("div", "sk-buf-sticky", scroller);
  const spacer = el("div", "sk-buf-spacer", scroller);
  const table = el("table", "", sticky);
  const thead = el("thead", "", table);
  const tbody = el("tbody", "", table);

  // ---- plots
  const plotBox = el("div", "sk-buf-plotbox", root);
  const plot = el("canvas", "sk-buf-plot", plotBox);
  const info = el("div", "sk-buf-info", plotBox, "\u00a0");

  let cols = [], rows = 0, vis = 20, start = 0;
  let cache = null; // {start, count, values: [array per column], cmp: [...]|null, labels, version}
  let inFlight = null, wantedAt = 0, reqId = 0;
  root.dataset.start = "0";

  function summary() { return model.get("_summary") || {}; }
  function setupColumns() {
    cols = model.get("_columns") || [];
    rows = model.get("rows");
    vis = Math.max(1, Math.min(model.get("page_size"), rows || 1));
    const shape = model.get("shape");
    title.textContent = `[${shape.join(", ")}] ${model.get("dtype")}  ${rows.toLocaleString()} rows`;
    thead.innerHTML = "";
    const tr = el("tr", "", thead);
    el("th", "", tr, "#");
    for (const c of cols) el("th", "", tr, c.name);
    tbody.innerHTML = "";
    for (let r = 0; r < vis; r++) {
      const row = el("tr", "", tbody);
      el("th", "", row);
      for (let i = 0; i < cols.length; i++) el("td", "", row);
    }
    const cur = colSel.value;
    colSel.innerHTML = "";
    cols.forEach((c, i) => { el("option", "", colSel, c.name).value = String(i); });
    colSel.value = String(model.get("column"));
    if (colSel.value === "" && cur) colSel.value = cur;
    scroller.style.height = vis * ROW_H + ROW_H + 4 + "px";
    spacer.style.height = Math.max(0, scrollSpan()) + "px";
    const s = summary();
    const parts = [];
    if (s.nan || s.inf) parts.push(`${s.nan} NaN, ${s.inf} Inf`);
    if (s.diff) parts.push(`${s.diff_count} elements differ in ${s.diff_rows} rows (max |\u0394| ${Number(s.max_abs).toPrecision(4)})`);
    warn.textContent = parts.join("; ");
    nextNaN.style.display = s.nan || s.inf ? "" : "none";
    nextDiff.style.display = s.diff && s.diff_count ? "" : "none";
  }
  const maxStart = () => Math.max(0, rows - vis);
  const scrollSpan = () => Math.min(rows * ROW_H, MAX_SCROLL_PX) - vis * ROW_H; // scrollable pixels
  const scrollForStart = (s) => (maxStart() ? Math.round((s / maxStart()) * scrollSpan()) : 0);
  const startForScroll = (top) => (scrollSpan() > 0 ? Math.round((top / scrollSpan()) * maxStart()) : 0);

  function goTo(s, fromScroll) {
    start = Math.max(0, Math.min(maxStart(), Math.floor(s)));
    wantedAt = performance.now();
    if (!fromScroll) {
      const top = scrollForStart(start);
      if (Math.abs(scroller.scrollTop - top) >= 1) scroller.scrollTop = top;
    }
    show();
  }
  function covered() {
    return cache && cache.version === model.get("_version") && start >= cache.start &&
      Math.min(start + vis, rows) <= cache.start + cache.count;
  }
  function show() {
    range.textContent = `rows ${start.toLocaleString()}\u2013${Math.min(start + vis, rows) - 1 >= start ? (Math.min(start + vis, rows) - 1).toLocaleString() : start} of ${rows.toLocaleString()}`;
    if (covered()) { paint(); return; }
    request();
  }
  function request() {
    if (inFlight && performance.now() - inFlight.at < 5000) return;
    const pre = vis * 2; // prefetch margin on each side
    const s = Math.max(0, start - pre);
    const count = Math.min(rows - s, vis + 2 * pre);
    inFlight = { req: ++reqId, at: performance.now(), version: model.get("_version") };
    model.send({ type: "page", view: viewId, req: reqId, start: s, count });
  }
  function paint() {
    const s = summary(), rtol = s.rtol || 0, atol = s.atol || 0;
    const trs = tbody.children;
    for (let r = 0; r < vis; r++) {
      const tr = trs[r], row = start + r, k = row - cache.start;
      const cells = tr.children;
      if (row >= rows) { tr.style.visibility = "hidden"; continue; }
      tr.style.visibility = "";
      cells[0].textContent = cache.labels.length ? cache.labels[k] : String(row);
      for (let i = 0; i < cols.length; i++) {
        const td = cells[i + 1], wire = cols[i].wire;
        let cls = "";
        if (wire === "text") { td.textContent = cache.text[cols[i].name][k]; td.className = ""; continue; }
        const v = cache.values[i][k];
        let txt = fmt(v, wire);
        if (typeof v === "number" && !Number.isFinite(v)) cls = v !== v ? "sk-nan" : "sk-inf";
        if (cache.cmp) {
          const b = cache.cmp[i][k];
          if (differs(v, b, rtol, atol)) {
            cls += " sk-diff";
            td.title = `compare: ${fmt(b, wire)}`;
            td.textContent = txt;
            el("span", "sk-b", td, "\u2260 " + fmt(b, wire));
            td.className = cls;
            continue;
          }
          td.title = "";
        }
        td.textContent = txt;
        td.className = cls;
      }
    }
    root.dataset.start = String(start);
    root.dataset.firstLabel = trs[0].children[0].textContent;
    if (wantedAt) {
      root.dataset.latency = (performance.now() - wantedAt).toFixed(1);
      const l = (window.__skBufLatency = window.__skBufLatency || []);
      l.push(performance.now() - wantedAt);
      wantedAt = 0;
    }
  }
  function onCustom(msg, buffers) {
    if (!msg || msg.view !== viewId) return;
    if (msg.type === "seek") {
      if (msg.row >= 0) { model.set("mode", "table"); model.save_changes(); goTo(msg.row - Math.floor(vis / 2)); }
      return;
    }
    if (msg.type !== "page") return;
    if (inFlight && msg.req === inFlight.req) inFlight = null;
    const values = [], cmp = msg.diff ? [] : null;
    let b = 0;
    for (const target of msg.diff ? [values, cmp] : [values]) {
      for (const c of cols) target.push(c.wire === "text" ? null : typed(buffers[b++], CTORS[c.wire]));
    }
    cache = { start: msg.start, count: msg.count, values, cmp, labels: msg.labels, text: msg.text, version: model.get("_version") };
    if (covered()) paint(); else request();
  }

  let scrollRaf = 0;
  scroller.addEventListener("scroll", () => {
    const top = scroller.scrollTop;
    if (Math.abs(scrollForStart(start) - top) < 1) return; // our own positioning
    if (scrollRaf) return;
    scrollRaf = requestAnimationFrame(() => { scrollRaf = 0; goTo(startForScroll(scroller.scrollTop), true); });
  });
  scroller.addEventListener("wheel", (ev) => {
    if (Math.abs(ev.deltaY) < Math.abs(ev.deltaX)) return;
    ev.preventDefault();
    const lines = ev.deltaMode === 1 ? ev.deltaY : ev.deltaMode === 2 ? ev.deltaY * vis : ev.deltaY / ROW_H;
    goTo(start + Math.sign(lines) * Math.max(1, Math.round(Math.abs(lines))));
  }, { passive: false });
  bFirst.addEventListener("click", () => goTo(0));
  bPrev.addEventListener("click", () => goTo(start - vis));
  bNext.addEventListener("click", () => goTo(start + vis));
  bLast.addEventListener("click", () => goTo(maxStart()));
  gotoIn.addEventListener("change", () => goTo(Number(gotoIn.value)));
  nextNaN.addEventListener("click", () => model.send({ type: "seek", view: viewId, what: "nonfinite", after: start + Math.floor(vis / 2) }));
  nextDiff.addEventListener("click", () => model.send({ type: "seek", view: viewId, what: "diff", after: start + Math.floor(vis / 2) }));

  // ---- heat map
  let heat = null;
  function drawHeat() {
    const meta = model.get("_heat_meta") || {};
    root.dataset.plot = "";
    if (!meta.width) { info.textContent = meta.error || "computing\u2026"; heat = null; plot.width = 0; return; }
    const codes = typed(model.get("_heat"), Uint8Array);
    const lut = typed(model.get("_lut"), Uint8Array);
    // marimo applies a change of several traits one by one: the meta may come before its codes
    // (change:_heat draws again), where Jupyter has both at once
    if (codes.length < meta.width * meta.height || lut.length < 768) { info.textContent = "computing\u2026"; heat = null; return; }
    plot.width = meta.width; plot.height = meta.height;
    const k = Math.max(1, Math.floor(512 / Math.max(meta.width, meta.height)));
    plot.style.width = meta.width * k + "px"; plot.style.height = meta.height * k + "px";
    const ctx = plot.getContext("2d");
    const img = ctx.createImageData(meta.width, meta.height);
    const d = img.data;
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i], o = i * 4;
      if (c <= 252) { const j = Math.round((c / 252) * 255) * 3; d[o] = lut[j]; d[o + 1] = lut[j + 1]; d[o + 2] = lut[j + 2]; }
      else if (c === 253) { d[o] = d[o + 1] = d[o + 2] = 40; }
      else if (c === 254) { d[o] = 255; d[o + 1] = 0; d[o + 2] = 255; }
      else { d[o] = 255; d[o + 1] = 140; d[o + 2] = 0; }
      d[o + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    heat = { meta, codes };
    root.dataset.plot = "heatmap";
    info.textContent = `${cols[meta.column]?.name ?? ""}: ${fmt(meta.lo, "<f8")} \u2026 ${fmt(meta.hi, "<f8")}` +
      `  (${meta.grid_h}\u00d7${meta.grid_w} grid, ${meta.block_h}\u00d7${meta.block_w} per cell; magenta NaN, orange Inf; click: open row)`;
  }
  function heatRow(ev) {
    const r = plot.getBoundingClientRect();
    const cx = Math.floor(((ev.clientX - r.left) / r.width) * heat.meta.width);
    const cy = Math.floor(((ev.clientY - r.top) / r.height) * heat.meta.height);
    const m = heat.meta;
    return { cx, cy, row: cy * m.block_h * m.grid_w + cx * m.block_w };
  }
  // ---- histogram
  let hist = null;
  function drawHist() {
    hist = model.get("_hist") || {};
    const ctx = plot.getContext("2d");
    plot.width = 512; plot.height = 200;
    plot.style.width = "512px"; plot.style.height = "200px";
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, 512, 200);
    if (!hist.counts) { info.textContent = hist.error || "computing\u2026"; return; }
    const n = hist.counts.length, max = Math.max(1, ...hist.counts), w = 512 / Math.max(1, n);
    ctx.fillStyle = "#3b6fb6";
    hist.counts.forEach((c, i) => { const h = (c / max) * 190; ctx.fillRect(i * w, 200 - h, Math.max(1, w - 1), h); });
    const e = hist.edges;
    info.textContent = `${cols[hist.column]?.name ?? ""}: [${fmt(e[0], "<f8")}, ${fmt(e[e.length - 1], "<f8")}]  ` +
      `${hist.counts.reduce((a, b) => a + b, 0)} finite, ${hist.nan} NaN, ${hist.posinf} +Inf, ${hist.neginf} -Inf`;
  }
  plot.addEventListener("mousemove", (ev) => {
    const mode = model.get("mode");
    if (mode === "heatmap" && heat) {
      const { cx, cy, row } = heatRow(ev);
      if (cx < 0 || cy < 0 || cx >= heat.meta.width || cy >= heat.meta.height) return;
      const c = heat.codes[cy * heat.meta.width + cx];
      const v = c <= 252 ? fmt(heat.meta.lo + (c / 252) * (heat.meta.hi - heat.meta.lo), "<f8") : ["empty", "NaN", "Inf"][c - 253];
      root.dataset.heatHover = String(row);
      plot.title = `cell (${cx}, ${cy}) from row ${row}: ~${v}`;
    } else if (mode === "histogram" && hist && hist.counts) {
      const r = plot.getBoundingClientRect();
      const i = Math.floor(((ev.clientX - r.left) / r.width) * hist.counts.length);
      if (i >= 0 && i < hist.counts.length) plot.title = `[${fmt(hist.edges[i], "<f8")}, ${fmt(hist.edges[i + 1], "<f8")}): ${hist.counts[i]}`;
    }
  });
  plot.addEventListener("click", (ev) => {
    if (model.get("mode") !== "heatmap" || !heat) return;
    const { row } = heatRow(ev);
    model.set("mode", "table"); model.save_changes();
    goTo(row);
  });

  function onMode() {
    const mode = model.get("mode");
    for (const [m, b] of Object.entries(tabBtns)) b.classList.toggle("sk-on", m === mode);
    tableBox.style.display = mode === "table" ? "" : "none";
    plotBox.style.display = mode === "table" ? "none" : "";
    colSel.style.display = mode === "table" ? "none" : "";
    colSel.value = String(model.get("column"));
    if (mode === "heatmap") drawHeat();
    else if (mode === "histogram") drawHist();
  }
  function onData() { setupColumns(); cache = null; inFlight = null; goTo(Math.min(start, maxStart())); onMode(); }
  const listeners = [["change:_version", onData], ["change:mode", onMode], ["change:_heat_meta", onMode], ["change:_heat", onMode],
    ["change:_hist", onMode], ["change:column", onMode], ["msg:custom", onCustom]];
  for (const [ev, fn] of listeners) model.on(ev, fn);
  setupColumns();
  onMode();
  goTo(0);
  return () => { for (const [ev, fn] of listeners) model.off(ev, fn); };
}

export default { render };
