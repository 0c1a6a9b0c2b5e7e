// IRGraph front end (plain ESM; widgets/_esm.py inlines the vendored dagre and the _*.js modules).
// Levels: module (functions + call/derivative edges) -> blocks (CFG; each block lists its
// instructions; click a header to collapse) -> dataflow (instructions with def-use edges, tinted
// by block; a block collapsed is one node). Several columns can be shown side by side: the primal function beside its generated
// derivatives, or one function before/after a pass. Pan: drag; zoom: wheel; search: type, Enter = next.
// Clicking an instruction selects it and shows its source line (from -g IR) in the cell text.
// This module: the bar, the columns shown and drawing them; the parts are in _ir_*.js.
import { el, sv } from "./_dom.js";
import { DATAFLOW_MAX, fname, layOut, layoutBlocks, layoutDataflow, layoutModule, measureCh } from "./_ir_layout.js";
import { arrowMarkers, drawColumn, roleColor } from "./_ir_draw.js";
import { detailPanel } from "./_ir_detail.js";
import { panZoom } from "./_ir_panzoom.js";
import { searchNav } from "./_ir_search.js";

function render({ model, el: host }) {
  const root = el("div", "sk-irg", host);
  const bar = el("div", "sk-irg-bar", root);
  const viewSel = el("select", "sk-irg-view", bar);
  const fnSel = el("select", "sk-irg-fn", bar);
  const modes = el("span", "sk-irg-modes", bar);
  const modeBtn = {};
  for (const m of ["module", "blocks", "dataflow"]) {
    modeBtn[m] = el("button", "sk-irg-mode", modes, m);
    modeBtn[m].dataset.mode = m;
    modeBtn[m].onclick = () => { model.set("mode", m); model.save_changes(); };
  }
  const colSel = el("select", "sk-irg-cols", bar);
  for (const [v, t] of [["single", "one function"], ["derivatives", "with derivatives"], ["compare", "before/after pass"]]) {
    const o = el("option", "", colSel, t); o.value = v;
  }
  colSel.onchange = () => { model.set("columns", colSel.value); model.save_changes(); };
  const search = el("input", "sk-irg-search", bar);
  search.placeholder = "search name / %id / opcode";
  const hits = el("span", "sk-irg-hits", bar);
  const prevBtn = el("button", "sk-irg-prev", bar, "◀");
  const nextBtn = el("button", "sk-irg-next", bar, "▶");
  const collapseAll = el("button", "sk-irg-collapse", bar, "collapse all");
  const expandAll = el("button", "sk-irg-expand", bar, "expand all");
  const fitBtn = el("button", "sk-irg-fit", bar, "fit");
  const libBox = el("label", "sk-irg-lib", bar);
  const libCheck = el("input", "", libBox); libCheck.type = "checkbox";
  libBox.appendChild(document.createTextNode(" library"));
  const status = el("span", "sk-irg-status", bar);
  const notes = el("div", "sk-irg-notes", root);
  const chips = el("div", "sk-irg-chips", root);  // the related functions, one click away
  const main = el("div", "sk-irg-main", root);
  const svg = sv("svg", { class: "sk-irg-canvas" }, main);
  arrowMarkers(sv("defs", {}, svg));
  const scene = sv("g", {}, svg);
  const side = el("div", "sk-irg-side", main);

  const collapsed = new Set();  // "view|fn|block" of the blocks shown closed
  const drawn = { matchables: [], instEls: new Map(), fnEls: new Map() };  // see drawColumn
  let extent = { w: 1, h: 1 }, fitted = false;

  const data = () => model.get("data") || {};
  const viewOf = (id) => (data().views || []).find((v) => v.id === id);
  const fnOf = (v, id) => (v ? v.functions.find((f) => f.id === id) : undefined);
  // what the parts (_ir_detail.js, _ir_search.js) share with this one
  const w = { model, root, scene, data, viewOf, fnOf, columns, collapsed, drawn, goTo, draw };
  const pz = w.pz = panZoom(svg, scene, root);
  const detail = w.detail = detailPanel(side, w);
  const nav = searchNav({ search, hits, prevBtn, nextBtn }, w);
  function fit() { pz.fit(extent, model.get("mode") === "module" ? 0.6 : 1); }

  // -- selects ----------------------------------------------------------------------------------
  function fillViews() {
    viewSel.innerHTML = "";
    for (const v of data().views || []) { const o = el("option", "", viewSel, v.title); o.value = v.id; }
    viewSel.value = model.get("view");
    const d = data();
    notes.textContent = (d.notes || []).join("\n");
    notes.style.display = (d.notes || []).length ? "" : "none";
    colSel.querySelector('option[value="compare"]').disabled = !(d.compare || []).length;
    colSel.querySelector('option[value="derivatives"]').disabled = (d.related || []).length < 2;
    detail.fillSource(d);
    fillChips();
  }
  function fillChips() {
    chips.innerHTML = "";
    const rel = data().related || [];
    if (rel.length < 2) { chips.style.display = "none"; return; }
    chips.style.display = "";
    el("span", "sk-irg-chiplabel", chips, "functions:");
    for (const [vid, fid] of rel) {
      const f = fnOf(viewOf(vid), fid);
      if (!f) continue;
      const b = el("button", "sk-irg-chip", chips, fname(f));
      b.style.borderColor = roleColor(f);
      b.title = `${f.name} · ${f.role || "primal"} · ${f.n_insts} instructions`;
      b.dataset.view = vid; b.dataset.fn = fid;
      b.classList.toggle("sk-on", vid === model.get("view") && fid === model.get("function") && model.get("columns") === "single");
      b.onclick = () => goTo(vid, fid);
    }
  }
  function goTo(vid, fid) {  // show one function on its own
    const f = fnOf(viewOf(vid), fid);
    if (f && !f.user && !libCheck.checked) { libCheck.checked = true; }
    model.set("view", vid); model.set("function", fid); model.set("columns", "single");
    if (model.get("mode") === "module") model.set("mode", "blocks");
    model.save_changes();
  }
  function fillFunctions() {
    const v = viewOf(model.get("view"));
    fnSel.innerHTML = "";
    if (!v) return;
    const fns = v.functions.filter((f) => f.user || libCheck.checked);
    for (const f of fns) {
      const o = el("option", "", fnSel, `${fname(f)} (${f.n_insts})${f.role ? " [" + f.role + "]" : ""}`);
      o.value = f.id; o.title = f.name;
    }
    fnSel.value = model.get("function");
  }
  viewSel.onchange = () => {
    const old = fnOf(viewOf(model.get("view")), model.get("function"));
    const v = viewOf(viewSel.value);
    const same = v && old && v.functions.find((f) => f.name === old.name);
    model.set("view", viewSel.value);
    model.set("function", same ? same.id : (v && v.functions.length ? (v.functions.find((f) => f.user) || v.functions[0]).id : ""));
    model.save_changes();
  };
  fnSel.onchange = () => { model.set("function", fnSel.value); model.save_changes(); };
  libCheck.onchange = () => { fillFunctions(); draw(); };

  // -- columns ----------------------------------------------------------------------------------
  function columns() {
    const d = data(), mode = model.get("mode"), cols = model.get("columns");
    if (mode === "module") return [[model.get("view"), null]];
    if (cols === "derivatives" && (d.related || []).length > 1) return d.related;
    if (cols === "compare" && (d.compare || []).length === 2) {
      const cur = fnOf(viewOf(model.get("view")), model.get("function"));
      const name = cur ? cur.name : d.name;
      return d.compare.map((vid) => {
        const f = (viewOf(vid) || { functions: [] }).functions.find((g) => g.name === name);
        return [vid, f ? f.id : null];
      });
    }
    return [[model.get("view"), model.get("function")]];
  }

  // -- drawing ----------------------------------------------------------------------------------
  const actions = {
    click: (action) => () => { if (!pz.dragged) action(); },
    showFunction: detail.showFunction, select: detail.select, toggle,
    open: (fid) => { model.set("function", fid); model.set("mode", "blocks"); model.set("columns", "single"); model.save_changes(); },
  };
  function draw() {
    const CH = measureCh();
    const t0 = performance.now();
    scene.innerHTML = "";
    Object.assign(drawn, { matchables: [], instEls: new Map(), fnEls: new Map() });
    const mode = model.get("mode");
    for (const m in modeBtn) modeBtn[m].classList.toggle("sk-on", m === mode);
    colSel.value = model.get("columns");
    colSel.disabled = mode === "module";
    let xoff = 0, hmax = 0, layoutMs = 0, nodes = 0, insts = 0;
    const tooBig = [];
    for (const [vid, fid] of columns()) {
      const v = viewOf(vid);
      if (!v) continue;
      const f = fid ? fnOf(v, fid) : null;
      if (mode !== "module" && !f) continue;
      const big = mode === "dataflow" && f.n_insts > DATAFLOW_MAX;
      if (big) tooBig.push(f.name);
      const g = mode === "module" ? layoutModule(v, CH, libCheck.checked)
        : mode === "dataflow" && !big ? layoutDataflow(vid, f, CH, collapsed) : layoutBlocks(vid, f, CH, collapsed);
      layoutMs += layOut(g);
      nodes += g.nodeCount();
      if (f) insts += f.n_insts;
      const gi = g.graph();
      const layer = sv("g", { transform: `translate(${xoff},28)`, class: "sk-irg-col" }, scene);
      layer.dataset.view = vid; if (f) layer.dataset.fn = f.id;
      const title = mode === "module" ? v.title : `${fname(f)}${f.role ? " [" + f.role + "]" : ""} — ${v.title}`;
      const tt = sv("text", { x: xoff + 4, y: 16, class: "sk-irg-coltitle", fill: roleColor(f) }, scene, title);
      if (f) { tt.addEventListener("click", () => detail.showFunction(vid, f)); sv("title", {}, tt, f.name); drawn.fnEls.set(`${vid}|${f.id}`, tt); }
      for (const m of drawn.matchables) if (!m.layer) m.layer = layer;
      drawColumn(vid, f, g, layer, drawn, actions);
      for (const m of drawn.matchables) if (m.layer === layer) { m.x += xoff; m.y += 28; m.layer = true; }
      xoff += Math.max(gi.width || 0, title.length * 7.5) + 40; hmax = Math.max(hmax, (gi.height || 0) + 28);
    }
    extent = { w: Math.max(1, xoff - 40), h: Math.max(1, hmax) };
    const total = performance.now() - t0;
    root.dataset.layoutMs = layoutMs.toFixed(1);
    root.dataset.renderMs = total.toFixed(1);
    root.dataset.nodes = String(nodes);
    root.dataset.insts = String(insts);
    root.dataset.mode = mode;
    root.dataset.columns = String(columns().length);
    status.textContent = `${nodes} nodes · layout ${layoutMs.toFixed(0)} ms · draw ${total.toFixed(0)} ms` +
      (tooBig.length ? ` · ${tooBig.join(", ")}: over ${DATAFLOW_MAX} instructions, shown as blocks` : "");
    model.set("layout_ms", { layout: +layoutMs.toFixed(2), total: +total.toFixed(2), nodes, insts, mode });
    model.save_changes();
    if (!fitted) { fit(); fitted = true; }
    fillChips();
    nav.afterDraw();
    detail.applySelection(false);
  }

  function toggle(key) { collapsed.has(key) ? collapsed.delete(key) : collapsed.add(key); draw(); }
  function setAll(close) {
    collapsed.clear();
    if (close) for (const [vid, fid] of columns()) {
      const f = fnOf(viewOf(vid), fid);
      if (f) for (const b of f.blocks) collapsed.add(`${vid}|${f.id}|${b.label}`);
    }
    draw();
  }
  collapseAll.onclick = () => setAll(true);
  expandAll.onclick = () => setAll(false);
  fitBtn.onclick = fit;
  // the view is often drawn before it is laid out (its width unknown): fit again once it has its
  // real size, and when the notebook resizes, unless the user has zoomed or panned meanwhile
  const ro = new ResizeObserver(() => { if (!pz.moved && svg.clientWidth) fit(); });
  ro.observe(svg);

  // -- model wiring -----------------------------------------------------------------------------
  function sizeUp() { main.style.height = model.get("height") + "px"; }
  sizeUp();
  fillViews(); fillFunctions(); draw();
  model.on("change:data", () => { fillViews(); fillFunctions(); fitted = false; draw(); });
  model.on("change:view", () => { viewSel.value = model.get("view"); fillFunctions(); fitted = false; draw(); detail.followDetail(); });
  model.on("change:function", () => { fnSel.value = model.get("function"); fitted = false; draw(); detail.followDetail(); });
  model.on("change:mode", () => { fitted = false; draw(); });
  model.on("change:columns", () => { fitted = false; draw(); });
  model.on("change:height", () => { sizeUp(); fit(); });
  model.on("change:selected", () => {
    const s = model.get("selected") || {};
    if (s.inst && s.inst !== root.dataset.selected) detail.select(s.view, s.function, s.inst, false);
    else detail.applySelection(true);
  });
  return () => { ro.disconnect(); root.remove(); };
}

export default { render };
