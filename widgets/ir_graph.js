// IRGraph front end (plain ESM; the vendored dagre and _dom.js are inlined by widgets/_esm.py).
// Levels: module (functions + call/derivative edges) -> blocks (CFG; each block lists its
// instructions; click a header to collapse) -> dataflow (instructions with def-use edges, clustered
// by block). Several columns can be shown side by side: the primal function beside its generated
// derivatives, or one function before/after a pass. Pan: drag; zoom: wheel; search: type, Enter = next.
// Clicking an instruction selects it and shows its source line (from -g IR) in the cell text.
import dagre from "./vendor/dagre.esm.js";
import { el, sv } from "./_dom.js";

const ROW = 14, HEAD = 20, MAXCH = 72;
// width of one character of the 11px code font the boxes' text is drawn in, measured (fonts differ:
// a fixed guess let long rows run past their box)
let CH = 6.6;
function measureCh() {
  const fam = getComputedStyle(document.body).getPropertyValue("--jp-code-font-family").trim() || "monospace";
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = `11px ${fam}`;
  const w = ctx.measureText("0123456789abcdef%=(), ".repeat(4)).width / 88;
  return Number.isFinite(w) && w > 4 ? Math.max(6.2, w * 1.03) : 6.6;
}
// instructions; above this the data-flow level falls back to blocks (dagre lays out ~1500 nodes in
// ~0.9 s on one core of the 2-core dev machine, growing about linearly: bench/RESULTS.md)
const DATAFLOW_MAX = 1000;
const ROLE_COLOR = {
  primal: "#3b6fb6", forward: "#2a9d8f", backward_primal: "#c79a1a", backward_propagate: "#d1603d",
  rematerialize: "#8e5bd6", context: "#888888", backward: "#d1603d",
};

const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
// a function as the user wrote it (`bwd_diff(f) context` for the generated s_bwdCallableCtx_f); the
// IR's own name is the hover text
const fname = (f) => (f && (f.label || f.name)) || "";
const roleColor = (f) => ROLE_COLOR[(f && f.role) || "primal"] || "#3b6fb6";

function instLabel(i) {
  const name = i.name || (/^\d+$/.test(i.id) ? "%" + i.id : i.id);
  if (i.op === "param") return `${name}: ${i.type || ""}`;
  if (i.op === "call" && i.callee) return `${name} = call ${i.callee_label || i.callee}`;
  return i.type ? `${name} = ${i.op}` : i.op;
}
function instRow(i) {  // one line of a block box: the IR text without the leading `let`
  return clip(i.text.replace(/^(@\w+\s+)?let\s+/, "").replace(/\s+/g, " "), MAXCH);
}

function pathD(points) {
  return points.map((p, k) => (k ? "L" : "M") + p.x.toFixed(1) + " " + p.y.toFixed(1)).join(" ");
}

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
  const defs = sv("defs", {}, svg);
  for (const [id, color] of [["a", "#777"], ["b", "#d1603d"], ["d", "#8e5bd6"], ["u", "#3b6fb6"]]) {
    const mk = sv("marker", { id: `sk-irg-arrow-${id}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    sv("path", { d: "M0,0 L10,5 L0,10 z", fill: color }, mk);
  }
  const scene = sv("g", {}, svg);
  const side = el("div", "sk-irg-side", main);
  const detail = el("div", "sk-irg-detail", side, "click an instruction");
  const srcTitle = el("div", "sk-irg-srctitle", side);
  const src = el("div", "sk-irg-src", side);

  const collapsed = new Set();
  let tf = { x: 10, y: 10, k: 1 }, extent = { w: 1, h: 1 }, fitted = false;
  let matchables = [];
  let instEls = new Map();  // "view|fn|inst" -> [elements]
  let fnEls = new Map();    // "view|fn" -> the element that shows a function (column title, module node)
  let srcLines = [];

  const data = () => model.get("data") || {};
  const viewOf = (id) => (data().views || []).find((v) => v.id === id);
  const fnOf = (v, id) => (v ? v.functions.find((f) => f.id === id) : undefined);

  function applyTf() {
    scene.setAttribute("transform", `translate(${tf.x},${tf.y}) scale(${tf.k})`);
    root.dataset.zoom = tf.k.toFixed(3);
  }
  function fit() {
    // Readable first: instruction text stays >= 11 px (scale >= 1; the module level, with short
    // labels, may shrink to 0.6). What does not fit is reached by panning, from the top left.
    const W = svg.clientWidth || 800, H = svg.clientHeight || 500;
    const lo = model.get("mode") === "module" ? 0.6 : 1;
    const k = Math.min(1.2, Math.max(lo, Math.min((W - 20) / extent.w, (H - 20) / extent.h)));
    tf = { x: extent.w * k <= W - 20 ? (W - extent.w * k) / 2 : 10, y: 10, k };
    moved = false;
    applyTf();
  }

  // -- pan / zoom -------------------------------------------------------------------------------
  let drag = null, dragged = false, moved = false;  // moved: the user panned/zoomed since the last fit
  svg.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, tx: tf.x, ty: tf.y }; dragged = false;
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) > 4) { dragged = true; moved = true; svg.setPointerCapture(e.pointerId); }
    if (dragged) { tf.x = drag.tx + dx; tf.y = drag.ty + dy; applyTf(); }
  });
  const endDrag = () => { drag = null; };
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    // one wheel notch (deltaY ~100 px, or 3 lines) zooms by at most x1.1; trackpads scroll smoothly
    const dy = e.deltaMode === 1 ? e.deltaY * 33 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    const k = Math.min(4, Math.max(0.2, tf.k * Math.pow(1.1, -Math.max(-1, Math.min(1, dy / 100)))));
    tf.x = mx - ((mx - tf.x) * k) / tf.k; tf.y = my - ((my - tf.y) * k) / tf.k; tf.k = k; moved = true;
    applyTf();
  }, { passive: false });

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
    srcLines = (d.source || "").split("\n");
    src.innerHTML = "";
    srcLines.forEach((line, k) => {
      const row = el("div", "sk-irg-srcline", src);
      el("span", "sk-irg-lno", row, String(k + 1));
      el("span", "sk-irg-srctext", row, line || " ");
    });
    srcTitle.textContent = d.cell ? `source: ${d.cell}` : "";
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

  // -- layouts ----------------------------------------------------------------------------------
  function layoutModule(v) {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 14, ranksep: 50, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    const shown = v.functions.filter((f) => f.user || libCheck.checked);
    const ids = new Set(shown.map((f) => f.id));
    for (const f of shown) {
      const label = `${fname(f)}  (${f.n_insts})`;
      g.setNode(f.id, { width: Math.min(MAXCH, label.length) * CH + 18, height: 26, fn: f, label });
    }
    v.edges.forEach((e, k) => {
      if (ids.has(e.source) && ids.has(e.target)) g.setEdge(e.source, e.target, { kind: e.kind, role: e.role }, "e" + k);
    });
    return g;
  }
  function layoutBlocks(vid, f) {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 30, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const b of f.blocks) {
      const key = `${vid}|${f.id}|${b.label}`, closed = collapsed.has(key);
      const rows = closed ? [] : b.insts.map(instRow);
      const w = Math.max(16, ...rows.map((r) => r.length)) * CH + 16;
      g.setNode(b.label, { width: w, height: HEAD + rows.length * ROW + 6, block: b, rows, key, closed });
    }
    for (const b of f.blocks) {
      for (const s of b.succ) if (g.hasNode(s)) g.setEdge(b.label, s, { kind: b.back.includes(s) ? "back" : "flow" }, "f" + s);
      for (const [kind, s] of b.structure) if (g.hasNode(s)) g.setEdge(b.label, s, { kind: "structure", sk: kind }, kind + s);
    }
    return g;
  }
  function layoutDataflow(vid, f) {
    // One node per instruction, def-use edges. A value used more than HUB times (a parameter used
    // everywhere) gets a small stub per use instead of long edges: long edges make dagre add dummy
    // nodes on every rank they cross, and its ordering phase then takes seconds. Nodes are tinted by
    // block; a collapsed block is one node.
    const HUB = 3;
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 10, ranksep: 22, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    const owner = new Map(), uses = new Map();
    f.blocks.forEach((b, bi) => {
      const key = `${vid}|${f.id}|${b.label}`, cl = "blk:" + b.label;
      if (collapsed.has(key)) {
        g.setNode(cl, { width: 16 * CH, height: 24, block: b, key, closed: true, rows: [] });
        for (const i of b.insts) owner.set(i.id, cl);
        return;
      }
      for (const i of b.insts) {
        const label = clip(instLabel(i), 40);
        g.setNode("i:" + i.id, { width: label.length * CH + 14, height: 20, inst: i, label, tint: bi % 6, blockLabel: b.label });
        owner.set(i.id, "i:" + i.id);
      }
    });
    for (const b of f.blocks) for (const i of b.insts) for (const op of i.ops) if (owner.has(op)) uses.set(op, (uses.get(op) || 0) + 1);
    for (const b of f.blocks) for (const i of b.insts) {
      const dst = owner.get(i.id);
      for (const op of i.ops) {
        const s = owner.get(op);
        if (!s || s === dst) continue;
        if (uses.get(op) > HUB) {
          const st = `s:${op}:${i.id}`, def = g.node(s);
          const name = def && def.inst ? (def.inst.name || "%" + op) : "%" + op;
          g.setNode(st, { width: clip(name, 14).length * CH + 10, height: 14, stub: clip(name, 14), ref: op });
          g.setEdge(st, dst, { kind: "use" }, "u" + op);
        } else if (!g.hasEdge(s, dst, "u" + op)) g.setEdge(s, dst, { kind: "use" }, "u" + op);
      }
    }
    return g;
  }

  // -- drawing ----------------------------------------------------------------------------------
  function drawEdges(g, layer) {
    for (const e of g.edges()) {
      const d = g.edge(e);
      if (!d.points) continue;
      const kind = d.kind || "flow";
      const marker = kind === "back" ? "b" : kind === "derivative" ? "d" : kind === "use" ? "u" : "a";
      sv("path", { d: pathD(d.points), class: `sk-irg-edge sk-irg-e-${kind}`, "marker-end": `url(#sk-irg-arrow-${marker})` }, layer);
    }
  }
  function addInstEl(vid, fid, iid, elem) {
    const key = `${vid}|${fid}|${iid}`;
    if (!instEls.has(key)) instEls.set(key, []);
    instEls.get(key).push(elem);
  }
  function drawColumn(vid, f, g, layer) {
    const mode = model.get("mode") === "dataflow" && f && f.n_insts > DATAFLOW_MAX ? "blocks" : model.get("mode");
    drawEdges(g, layer);
    for (const id of g.nodes()) {
      const n = g.node(id);
      if (!n || n.x === undefined) continue;
      const x0 = n.x - n.width / 2, y0 = n.y - n.height / 2;
      if (mode === "module") {
        const grp = sv("g", { class: "sk-irg-fnnode", transform: `translate(${x0},${y0})` }, layer);
        sv("rect", { width: n.width, height: n.height, rx: 5, fill: "#fff", stroke: roleColor(n.fn), "stroke-width": 2 }, grp);
        sv("text", { x: 8, y: 17, class: "sk-irg-fntext" }, grp, n.label);
        sv("title", {}, grp, n.fn.name);
        grp.dataset.fn = n.fn.id;
        fnEls.set(`${vid}|${n.fn.id}`, grp);
        grp.addEventListener("dblclick", () => {
          model.set("function", n.fn.id); model.set("mode", "blocks"); model.set("columns", "single"); model.save_changes();
        });
        grp.addEventListener("click", () => { if (!dragged) showFunction(vid, n.fn); });
        matchables.push({ el: grp, text: n.fn.name.toLowerCase(), x: n.x, y: n.y, layer });
        continue;
      }
      if (n.stub) {  // a use of a widely used value
        const grp = sv("g", { class: "sk-irg-stub", transform: `translate(${x0},${y0})` }, layer);
        sv("rect", { width: n.width, height: n.height, rx: 7 }, grp);
        sv("text", { x: 5, y: 10.5 }, grp, n.stub);
        continue;
      }
      if (n.inst) {  // dataflow instruction node
        const i = n.inst;
        const grp = sv("g", { class: `sk-irg-inode sk-irg-tint${n.tint}` + (i.op === "param" ? " sk-irg-param" : "") + (i.nodiff ? " sk-irg-nodiff" : ""),
          transform: `translate(${x0},${y0})` }, layer);
        sv("rect", { width: n.width, height: n.height, rx: 4 }, grp);
        sv("text", { x: 7, y: 14 }, grp, n.label);
        grp.dataset.inst = i.id;
        sv("title", {}, grp, i.raw_text || i.text);
        grp.addEventListener("click", () => { if (!dragged) select(vid, f.id, i.id, true); });
        addInstEl(vid, f.id, i.id, grp);
        matchables.push({ el: grp, text: `${(i.name || "").toLowerCase()} %${i.id} ${i.op.toLowerCase()} ${(i.callee || "").toLowerCase()}`, x: n.x, y: n.y, layer });
        continue;
      }
      const b = n.block;
      if (n.cluster) {  // dataflow block cluster (drawn behind its nodes)
        const r = sv("rect", { x: x0, y: y0, width: n.width, height: n.height, rx: 6, class: "sk-irg-cluster" }, null);
        layer.insertBefore(r, layer.firstChild);
        const t = sv("text", { x: x0 + 6, y: y0 + 12, class: "sk-irg-clustertext" }, null, `%${b.label} ▾`);
        layer.insertBefore(t, r.nextSibling);
        t.addEventListener("click", () => { if (!dragged) toggle(n.key); });
        continue;
      }
      const grp = sv("g", { class: "sk-irg-block" + (n.closed ? " sk-irg-closed" : ""), transform: `translate(${x0},${y0})` }, layer);
      grp.dataset.block = b.label;
      sv("rect", { width: n.width, height: n.height, rx: 5, class: "sk-irg-blockrect" }, grp);
      const head = sv("text", { x: 7, y: 14, class: "sk-irg-head" }, grp,
        `%${b.label}  ${n.closed ? "▸ " + b.insts.length + " insts" : "▾"}`);
      head.addEventListener("click", () => { if (!dragged) toggle(n.key); });
      matchables.push({ el: grp, text: "%" + b.label, x: n.x, y: n.y, layer });
      (n.rows || []).forEach((row, k) => {
        const i = b.insts[k];
        const rg = sv("g", { class: "sk-irg-row" + (i.nodiff ? " sk-irg-nodiff" : ""), transform: `translate(0,${HEAD + k * ROW})` }, grp);
        sv("rect", { x: 2, y: 0, width: n.width - 4, height: ROW }, rg);
        sv("text", { x: 8, y: 11 }, rg, row);
        rg.dataset.inst = i.id;
        sv("title", {}, rg, i.raw_text || i.text);
        rg.addEventListener("click", () => { if (!dragged) select(vid, f.id, i.id, true); });
        addInstEl(vid, f.id, i.id, rg);
        matchables.push({ el: rg, text: `${(i.name || "").toLowerCase()} %${i.id} ${i.op.toLowerCase()} ${(i.callee || "").toLowerCase()}`,
          x: n.x, y: y0 + HEAD + k * ROW, layer });
      });
    }
  }

  function draw() {
    CH = measureCh();
    const t0 = performance.now();
    scene.innerHTML = "";
    matchables = []; instEls = new Map(); fnEls = new Map();
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
      const g = mode === "module" ? layoutModule(v) : mode === "dataflow" && !big ? layoutDataflow(vid, f) : layoutBlocks(vid, f);
      const tl = performance.now();
      dagre.layout(g);
      layoutMs += performance.now() - tl;
      nodes += g.nodeCount();
      if (f) insts += f.n_insts;
      const gi = g.graph();
      const layer = sv("g", { transform: `translate(${xoff},28)`, class: "sk-irg-col" }, scene);
      layer.dataset.view = vid; if (f) layer.dataset.fn = f.id;
      const title = mode === "module" ? v.title : `${fname(f)}${f.role ? " [" + f.role + "]" : ""} — ${v.title}`;
      const tt = sv("text", { x: xoff + 4, y: 16, class: "sk-irg-coltitle", fill: roleColor(f) }, scene, title);
      if (f) { tt.addEventListener("click", () => showFunction(vid, f)); sv("title", {}, tt, f.name); fnEls.set(`${vid}|${f.id}`, tt); }
      for (const m of matchables) if (!m.layer) m.layer = layer;
      drawColumn(vid, f, g, layer);
      for (const m of matchables) if (m.layer === layer) { m.x += xoff; m.y += 28; m.layer = true; }
      const w = Math.max(gi.width || 0, title.length * 7.5);
      xoff += w + 40; hmax = Math.max(hmax, (gi.height || 0) + 28);
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
    if (pendingHit && drawnEl(pendingHit)) { const h = pendingHit; pendingHit = null; focusHit(h); }
    markHits();
    applySelection(false);
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
  const ro = new ResizeObserver(() => { if (!moved && svg.clientWidth) fit(); });
  ro.observe(svg);

  // -- search -----------------------------------------------------------------------------------
  function centerOn(m) {
    const W = svg.clientWidth || 800, H = svg.clientHeight || 500;
    tf.k = Math.max(tf.k, 1);
    tf.x = W / 2 - m.x * tf.k; tf.y = H / 2 - m.y * tf.k; moved = true; applyTf();
  }
  // The search runs over the graph data of every view and function (IRGraph.search in Python: the
  // same rule and the same order), not only over what is drawn. The hits keep that order while the
  // query stays, so stepping visits each one once, in order, wrapping; a hit in a function not shown
  // switches to it (its block opened, the blocks level for an instruction), and every hit drawn is
  // highlighted wherever it is.
  function instHit(i, q) {
    const id = String(i.id).toLowerCase();
    return (i.name || "").toLowerCase().includes(q) || q === id || q === "%" + id
      || (i.callee || "").toLowerCase().includes(q) || (i.callee_label || "").toLowerCase().includes(q)
      || i.op.toLowerCase().includes(q);
  }
  const fnHit = (f, q) => f.name.toLowerCase().includes(q) || (f.label || "").toLowerCase().includes(q);
  function dataHits(q) {
    const out = [];
    if (!q) return out;
    for (const v of data().views || []) for (const f of v.functions) {
      if (fnHit(f, q)) out.push({ view: v.id, fn: f.id, inst: null });
      for (const b of f.blocks) for (const i of b.insts) if (instHit(i, q)) out.push({ view: v.id, fn: f.id, inst: i.id });
    }
    return out;
  }
  let allHits = [], hitIdx = -1, hitQuery = null, pendingHit = null;
  function shown(h) { return columns().some(([vid, fid]) => vid === h.view && (fid === h.fn || fid === null)); }
  function refreshHits() {
    const q = search.value.trim().toLowerCase();
    if (q !== hitQuery) { hitQuery = q; allHits = dataHits(q); hitIdx = -1; }
  }
  function drawnEl(h) {
    if (h.inst === null) return fnEls.get(`${h.view}|${h.fn}`) || null;
    return (instEls.get(`${h.view}|${h.fn}|${h.inst}`) || [])[0] || null;
  }
  function markHits() {
    refreshHits();
    for (const e of scene.querySelectorAll(".sk-irg-match, .sk-irg-current")) e.classList.remove("sk-irg-match", "sk-irg-current");
    let drawn = 0;
    for (const h of allHits) {
      const e = drawnEl(h);
      if (e) { e.classList.add("sk-irg-match"); drawn++; }
    }
    const cur = hitIdx >= 0 ? drawnEl(allHits[hitIdx]) : null;
    if (cur) cur.classList.add("sk-irg-current");
    const n = allHits.length;
    hits.textContent = hitQuery ? `${n} hit${n === 1 ? "" : "s"}` + (hitIdx >= 0 && n ? ` (${hitIdx + 1}/${n})` : "") : "";
    root.dataset.hits = String(n);
    root.dataset.hitsShown = String(drawn);
    root.dataset.hitIndex = String(hitIdx);
  }
  function step(d) {
    refreshHits();
    if (allHits.length) {
      hitIdx = hitIdx < 0 ? (d > 0 ? 0 : allHits.length - 1) : (hitIdx + d + allHits.length) % allHits.length;
      reveal(allHits[hitIdx]);
    }
    markHits();
  }
  function reveal(h) {
    pendingHit = h;
    let redraw = false;
    if (h.inst !== null) {  // its block open
      const f = fnOf(viewOf(h.view), h.fn);
      const b = f && f.blocks.find((x) => x.insts.some((i) => i.id === h.inst));
      const key = b ? `${h.view}|${h.fn}|${b.label}` : "";
      if (collapsed.delete(key)) redraw = true;
    }
    if (!shown(h) || (h.inst !== null && model.get("mode") === "module")) goTo(h.view, h.fn);   // draws (change events)
    else if (redraw) draw();
    if (pendingHit) { pendingHit = null; focusHit(h); }   // drawn already, or nothing more would draw it
  }
  function focusHit(h) {
    const f = fnOf(viewOf(h.view), h.fn);
    const e = drawnEl(h);
    if (h.inst !== null) { if (f) select(h.view, h.fn, h.inst, false); }
    else if (f) showFunction(h.view, f);
    const m = e && matchables.find((x) => x.el === e);
    if (m) centerOn(m);
    else if (e && e.parentNode === scene) { const b = e.getBBox(); centerOn({ x: b.x + b.width / 2, y: b.y + b.height / 2 }); }
    root.dataset.current = `${h.view}|${h.fn}|${h.inst || ""}`;
  }
  search.addEventListener("input", () => { markHits(); });
  search.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); } });
  nextBtn.onclick = () => step(1);
  prevBtn.onclick = () => step(-1);

  // -- selection and source ---------------------------------------------------------------------
  function showFunction(vid, f) {
    const v = viewOf(vid);
    detail.innerHTML = "";
    const t = el("div", "sk-irg-dtitle", detail, `${fname(f)}${f.role ? " — " + f.role + " of " + f.primal : ""}`);
    t.title = f.name;
    root.dataset.detailFn = `${vid}|${f.id}`;
    el("div", "", detail, `${v.title} · ${f.blocks.length} blocks · ${f.n_insts} instructions`);
    if (f.decorations.length) el("div", "sk-irg-deco", detail, f.decorations.join(", "));
  }
  function select(vid, fid, iid, fromClick) {
    const f = fnOf(viewOf(vid), fid);
    const i = f && f.blocks.flatMap((b) => b.insts).find((x) => x.id === iid);
    if (!i) return;
    const block = f.blocks.find((b) => b.insts.includes(i));
    const line = i.loc ? i.loc[0] : null;
    const sel = { view: vid, function: fid, inst: iid, text: i.text, line };
    if (fromClick) { model.set("selected", sel); model.save_changes(); }
    detail.innerHTML = "";
    el("div", "sk-irg-dtitle", detail, `${fname(f)} · %${block.label}`).title = f.name;
    el("pre", "sk-irg-itext", detail, i.text).title = i.raw_text || i.text;
    root.dataset.detailFn = `${vid}|${fid}`;
    if (i.type) el("div", "", detail, `type: ${i.type}`);
    if (i.nodiff) el("div", "sk-irg-flag", detail, "no_diff / treat-as-differentiable call");
    el("div", "sk-irg-loc", detail, line ? `${data().cell} line ${line}, column ${i.loc[1]}` : "no source location (generated or library code)");
    root.dataset.selected = iid;
    root.dataset.selectedLine = line ? String(line) : "";
    applySelection(true);
  }
  function applySelection(scroll) {
    const sel = model.get("selected") || {};
    for (const arr of instEls.values()) for (const e of arr) e.classList.remove("sk-irg-sel");
    for (const e of instEls.get(`${sel.view}|${sel.function}|${sel.inst}`) || []) e.classList.add("sk-irg-sel");
    const rows = src.children;
    for (const r of rows) r.classList.remove("sk-irg-srchit");
    const line = sel.line;
    if (line && rows[line - 1]) {
      const r = rows[line - 1];
      r.classList.add("sk-irg-srchit");
      if (scroll) src.scrollTop = Math.max(0, r.offsetTop - src.offsetTop - src.clientHeight / 2);
      srcTitle.textContent = `source: ${data().cell} line ${line}`;
    }
  }

  function followDetail() {  // the detail panel shows a function that is on screen, never the previous one
    const cols = columns();
    if (cols.some(([vid, fid]) => `${vid}|${fid}` === root.dataset.detailFn)) return;
    const [vid, fid] = cols[0] || [];
    const f = fnOf(viewOf(vid), fid || model.get("function"));
    if (f) showFunction(vid, f);
  }

  // -- model wiring -----------------------------------------------------------------------------
  function sizeUp() { main.style.height = model.get("height") + "px"; }
  sizeUp();
  fillViews(); fillFunctions(); draw();
  model.on("change:data", () => { fillViews(); fillFunctions(); fitted = false; draw(); });
  model.on("change:view", () => { viewSel.value = model.get("view"); fillFunctions(); fitted = false; draw(); followDetail(); });
  model.on("change:function", () => { fnSel.value = model.get("function"); fitted = false; draw(); followDetail(); });
  model.on("change:mode", () => { fitted = false; draw(); });
  model.on("change:columns", () => { fitted = false; draw(); });
  model.on("change:height", () => { sizeUp(); fit(); });
  model.on("change:selected", () => {
    const s = model.get("selected") || {};
    if (s.inst && s.inst !== root.dataset.selected) select(s.view, s.function, s.inst, false);
    else applySelection(true);
  });
  return () => { ro.disconnect(); root.remove(); };
}

export default { render };
