// GradientFlow front end (plain ESM; dagre and _dom.js inlined by widgets/_esm.py).
// 1. A table per input: primal value, bwd_diff gradient, fwd_diff directional derivative, central
//    finite differences, max |error|; mismatching inputs flagged red.
// 2. The function's data-flow graph (instructions, def-use edges): inputs show value and gradient,
//    flagged inputs red, no_diff parameters/calls and [TreatAsDifferentiable] callees orange, calls
//    of custom derivatives purple, the returned value shows the result. Drag pans, wheel zooms.
//    Nodes are sized to their text (measured). Clicking a node shows, beside the graph, its value
//    and its derivative at the checked inputs (graph.values, slang_kernel.views.flow_eval); nodes whose
//    derivative disagrees with finite differences get a red outline. Before a click the panel
//    shows the output node.
// 3. Training history: per parameter buffer the gradient norm per step, a histogram of the latest
//    gradient, and a heat map (steps x element bins of |grad|) from the binary `_heat` buffer.
import dagre from "./vendor/dagre.esm.js";
import { el, sv } from "./_dom.js";

// node text width as drawn: measured with the SVG text's font (11px code font)
let measureCtx = null;
function textWidth(s) {
  if (!measureCtx) {
    measureCtx = document.createElement("canvas").getContext("2d");
    const fam = getComputedStyle(document.body).getPropertyValue("--jp-code-font-family").trim() || "monospace";
    measureCtx.font = `11px ${fam}`;
  }
  return measureCtx.measureText(s).width;
}

function num(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "string") return v;   // "nan", "inf", "-inf" (JSON has no such numbers)
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}
function flat(v) { return Array.isArray(v) ? v.flat(Infinity) : v === null || v === undefined ? [] : [v]; }
function show(v) {
  if (v === null || v === undefined) return "—";
  if (!Array.isArray(v)) return num(v);
  const f = flat(v);
  if (f.length <= 6) return "[" + f.map(num).join(", ") + "]";
  const fin = f.filter(Number.isFinite);
  return `${f.length} values, mean ${num(fin.reduce((a, b) => a + b, 0) / (fin.length || 1))}, max ${num(Math.max(...fin))}`;
}

function viridis(t) {  // small polynomial approximation, t in [0, 1]
  const r = 0.2777 + t * (0.1050 + t * (-0.3308 + t * (-4.6342 + t * (6.2282 + t * (4.7763 - 5.4354 * t)))));
  const g = 0.0054 + t * (1.4046 + t * (0.2148 + t * (-5.7991 + t * (14.1799 + t * (-13.7451 + 4.6459 * t)))));
  const b = 0.3341 + t * (1.3846 + t * (0.0951 + t * (-19.3324 + t * (56.6906 + t * (-65.3530 + 26.3124 * t)))));
  return [r, g, b].map((c) => Math.max(0, Math.min(255, Math.round(c * 255))));
}

function render({ model, el: host }) {
  const root = el("div", "sk-gf", host);
  const head = el("div", "sk-gf-head", root);
  const table = el("table", "sk-gf-table", root);
  const graphBox = el("div", "sk-gf-graphbox", root);
  const svg = sv("svg", { class: "sk-gf-graph" }, graphBox);
  const defs = sv("defs", {}, svg);
  const mk = sv("marker", { id: "sk-gf-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#888" }, mk);
  const scene = sv("g", {}, svg);
  const info = el("div", "sk-gf-info", graphBox);
  const legend = el("div", "sk-gf-legend", root);
  legend.innerHTML = '<span class="sk-gf-lg-bad">■ gradient ≠ finite differences</span> <span class="sk-gf-lg-ok">■ agrees</span> ' +
    '<span class="sk-gf-lg-nodiff">■ no_diff / treat-as-differentiable</span> <span class="sk-gf-lg-custom">■ custom derivative</span>';
  const train = el("div", "sk-gf-train", root);
  let tf = { x: 10, y: 10, k: 1 };

  // pan / zoom of the graph
  let drag = null;
  const applyTf = () => scene.setAttribute("transform", `translate(${tf.x},${tf.y}) scale(${tf.k})`);
  svg.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, y: e.clientY, tx: tf.x, ty: tf.y }; });
  svg.addEventListener("pointermove", (e) => { if (drag) { tf.x = drag.tx + e.clientX - drag.x; tf.y = drag.ty + e.clientY - drag.y; moved = true; applyTf(); } });
  svg.addEventListener("pointerup", () => { drag = null; });
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    const k = Math.min(4, Math.max(0.05, tf.k * Math.exp(-e.deltaY * 0.0015)));
    tf.x = mx - ((mx - tf.x) * k) / tf.k; tf.y = my - ((my - tf.y) * k) / tf.k; tf.k = k; moved = true; applyTf();
  }, { passive: false });

  function drawReport() {
    const rep = model.get("report") || {};
    table.innerHTML = ""; head.innerHTML = "";
    if (!rep.inputs) { head.style.display = table.style.display = "none"; return; }
    head.style.display = table.style.display = "";
    el("div", "sk-gf-sig", head, `${rep.signature}  =  ${show(rep.result)}`);
    const flagged = rep.flagged || [];
    el("div", flagged.length ? "sk-gf-verdict sk-gf-badtext" : "sk-gf-verdict sk-gf-oktext", head,
      flagged.length ? `gradient mismatch: ${flagged.join(", ")}` : "all gradients agree with central finite differences");
    root.dataset.flagged = flagged.join(",");
    const tr = el("tr", "", el("thead", "", table));
    for (const h of ["input", "type", "value", "bwd_diff", "fwd_diff", "finite diff", "max |err|", ""]) el("th", "", tr, h);
    const body = el("tbody", "", table);
    for (const i of rep.inputs) {
      const row = el("tr", i.ok === false ? "sk-gf-bad" : i.kind !== "diff" ? "sk-gf-nd" : "", body);
      row.dataset.input = i.name;
      el("td", "", row, i.name); el("td", "", row, i.type); el("td", "", row, show(i.value));
      el("td", "", row, show(i.bwd)); el("td", "", row, show(i.fwd)); el("td", "", row, show(i.numeric));
      el("td", "", row, i.kind === "diff" ? num(i.max_abs_error) : "");
      const st = i.ok === false ? "✗ mismatch" : i.ok ? "✓" : i.kind === "no_diff" ? "no_diff" : i.kind === "nondiff" ? "not differentiable" : "unchecked";
      el("td", "sk-gf-status", row, st + (i.fwd_ok === false ? " (fwd ≠ bwd)" : ""));
    }
  }

  // the side panel: one node's instruction, source line, value, derivative (adjoint) and check
  function showNode(gd, n, d, keepHint) {
    if (!keepHint) info.innerHTML = "";
    const nv = (gd.values || {})[n.id], marks = n.marks || [];
    info.dataset.node = n.id;
    el("div", "sk-gf-ititle", info, d.lines[0]);
    el("div", "sk-gf-itext", info, n.text);
    if (n.loc) el("div", "sk-gf-iloc", info, `${gd.cell} line ${n.loc[0]}: ${((gd.source || "").split("\n")[n.loc[0] - 1] || "").trim()}`);
    if (marks.length) el("div", "sk-gf-imarks", info, `marks: ${marks.join(", ")}`);
    if (!nv) { el("div", "sk-gf-inote", info, gd.values_note || "no values for this node"); return; }
    const row = (cls, label, v) => { const r = el("div", "sk-gf-ival " + cls, info); el("b", "", r, label + " "); el("span", "", r, show(v)); };
    row("sk-gf-iv-value", "value", nv.value);
    if (nv.grad !== null) row("sk-gf-iv-grad", "∂out/∂node", nv.grad);
    if (nv.numeric !== null) row("sk-gf-iv-fd", "finite diff", nv.numeric);
    if (nv.bad) el("div", "sk-gf-ibad", info, "✗ the derivative disagrees with finite differences here");
    else if (nv.grad !== null && nv.numeric !== null) el("div", "sk-gf-iok", info, "✓ derivative agrees with finite differences");
    if (nv.note) el("div", "sk-gf-inote", info, nv.note);
    el("div", "sk-gf-hint sk-gf-ikey", info, "∂out/∂node: the gradient that backpropagation carries to this node " +
      "(calls through their derivatives, custom ones included); finite diff: the same measured on the primal.");
  }
  function selectNode(id) {
    for (const e of scene.querySelectorAll(".sk-gf-sel")) e.classList.remove("sk-gf-sel");
    const e = scene.querySelector(`g[data-node="${CSS.escape(id)}"]`);
    if (e) e.classList.add("sk-gf-sel");
  }

  // fit, but keep node text legible (>= 0.7 x 11 px); a larger graph is reached by panning
  let extent = null, moved = false;
  function fitGraph() {
    if (!extent) return;
    const W = svg.clientWidth || 700, H = model.get("height");
    tf.k = Math.max(0.7, Math.min(1, (W - 20) / (extent.width || 1), (H - 20) / (extent.height || 1)));
    tf.x = extent.width * tf.k <= W - 20 ? (W - extent.width * tf.k) / 2 : 10; tf.y = 10; applyTf();
    root.dataset.zoom = tf.k.toFixed(3);
    moved = false;
  }
  // drawn before it is laid out (width unknown): fit again at its real size unless the user moved it
  const ro = new ResizeObserver(() => { if (!moved && svg.clientWidth) fitGraph(); });
  ro.observe(svg);

  function drawGraph() {
    const gd = model.get("graph") || {}, rep = model.get("report") || {};
    scene.innerHTML = "";
    if (!gd.nodes || !gd.nodes.length) { graphBox.style.display = "none"; return; }
    graphBox.style.display = "";
    svg.style.height = model.get("height") + "px";
    const inputs = rep.inputs || [];
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 12, ranksep: 26, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const n of gd.nodes) {
      const lines = [n.callee ? `${n.label.split(" = ")[0]} = ${n.callee}()` : n.label];
      const inp = n.param !== undefined ? inputs[n.param] : undefined;
      if (inp) { lines[0] = `${inp.name}: ${inp.type}`; lines.push(`value ${show(inp.value)}`); if (inp.kind === "diff") lines.push(`∂ ${show(inp.bwd)}`); if (inp.ok === false) lines.push(`fd ${show(inp.numeric)}`); }
      if ((n.marks || []).includes("output") && rep.result !== undefined) lines.push(`= ${show(rep.result)}`);
      const nf = gd.first_nonfinite;
      if (nf && nf.node === n.id) lines.push(`${nf.kind} starts here (its ${nf.what})`);
      const w = Math.max(...lines.map(textWidth)) * 1.06 + 16;  // a little slack for font fallbacks
      g.setNode(n.id, { width: w, height: 8 + 14 * lines.length, n, lines, inp });
    }
    for (const e of gd.edges) if (g.hasNode(e.source) && g.hasNode(e.target)) g.setEdge(e.source, e.target);
    const t0 = performance.now();
    dagre.layout(g);
    root.dataset.layoutMs = (performance.now() - t0).toFixed(1);
    for (const e of g.edges()) {
      const p = g.edge(e).points;
      sv("path", { d: p.map((q, k) => (k ? "L" : "M") + q.x.toFixed(1) + " " + q.y.toFixed(1)).join(" "), class: "sk-gf-edge", "marker-end": "url(#sk-gf-arrow)" }, scene);
    }
    for (const id of g.nodes()) {
      const d = g.node(id), n = d.n, marks = n.marks || [];
      let cls = "sk-gf-node";
      if (d.inp) cls += d.inp.ok === false ? " sk-gf-n-bad" : d.inp.kind === "diff" ? " sk-gf-n-ok" : " sk-gf-n-nodiff";
      if (marks.includes("no_diff") || marks.includes("treat_as_differentiable")) cls += " sk-gf-n-nodiff";
      if (marks.includes("custom_derivative")) cls += " sk-gf-n-custom";
      if (marks.includes("output")) cls += " sk-gf-n-out";
      const grp = sv("g", { class: cls, transform: `translate(${d.x - d.width / 2},${d.y - d.height / 2})` }, scene);
      if (d.inp) grp.dataset.input = d.inp.name;
      grp.dataset.marks = marks.join(" ");
      sv("rect", { width: d.width, height: d.height, rx: 4 }, grp);
      const nv = (gd.values || {})[n.id];
      if (nv && nv.bad) grp.classList.add("sk-gf-n-wrong");
      if (gd.first_nonfinite && gd.first_nonfinite.node === n.id) {   // where a NaN/Inf starts (slang_kernel.views.gradients.first_nonfinite_node)
        grp.classList.add("sk-gf-n-nonfinite");
      }
      grp.dataset.node = n.id;
      d.lines.forEach((l, k) => sv("text", { x: 8, y: 15 + 14 * k }, grp, l));
      grp.addEventListener("click", () => { showNode(gd, n, d); selectNode(id); });
    }
    root.dataset.firstNonfinite = gd.first_nonfinite ? gd.first_nonfinite.node : "";
    const out = g.nodes().map((id) => g.node(id)).find((d) => (d.n.marks || []).includes("output"));
    info.innerHTML = "";
    el("div", "sk-gf-hint", info, "Click a node to see its value and its derivative at these inputs.");
    if (out) showNode(gd, out.n, out, true);
    extent = g.graph();
    fitGraph();
  }

  function drawTrain() {
    const meta = model.get("_train") || {}, dv = model.get("_heat");
    train.innerHTML = "";
    const params = meta.params || [];
    root.dataset.trainParams = String(params.length);
    root.dataset.trainSteps = String((meta.steps || []).length);
    if (!params.length) return;
    const bytes = dv ? new Uint8Array(dv.buffer, dv.byteOffset, dv.byteLength) : new Uint8Array(0);
    el("div", "sk-gf-sig", train, `gradient buffers over ${meta.steps.length} steps (last step ${meta.steps[meta.steps.length - 1]})`);
    for (const p of params) {
      const card = el("div", "sk-gf-card", train);
      card.dataset.param = p.name;
      const last = [...p.norms].reverse().find((x) => x !== null);
      el("div", "sk-gf-cardtitle", card, `${p.name} [${p.shape.join("×")}]  |grad| = ${num(last)}`);
      const row = el("div", "sk-gf-cardrow", card);
      // norms per step (log scale when they span decades)
      const c1 = el("canvas", "sk-gf-norms", row); c1.width = 260; c1.height = 90;
      const ctx = c1.getContext("2d");
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, 260, 90);
      const vals = p.norms.map((x) => (x === null ? NaN : x));
      const fin = vals.filter((x) => Number.isFinite(x) && x > 0);
      const lo = Math.min(...fin), hi = Math.max(...fin);
      const useLog = fin.length && hi / lo > 100;
      const tr = (v) => (useLog ? Math.log10(v) : v);
      const a = fin.length ? tr(lo) : 0, b = fin.length ? tr(hi) : 1, span = b - a || 1;
      ctx.strokeStyle = "#3b6fb6"; ctx.beginPath();
      vals.forEach((v, k) => {
        const x = 4 + (252 * k) / Math.max(1, vals.length - 1), y = 84 - (78 * (tr(v) - a)) / span;
        if (!Number.isFinite(v)) { ctx.fillStyle = "#d00"; ctx.fillRect(x - 1, 4, 2, 80); return; }
        k ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
      });
      ctx.stroke();
      ctx.fillStyle = "#666"; ctx.font = "10px monospace";
      ctx.fillText(`norm ${useLog ? "(log) " : ""}${num(hi)}`, 4, 10);
      // histogram of the latest gradient
      const c2 = el("canvas", "sk-gf-hist", row); c2.width = 200; c2.height = 90;
      const h = c2.getContext("2d"); h.fillStyle = "#fff"; h.fillRect(0, 0, 200, 90);
      const counts = p.hist.counts || [], cmax = Math.max(1, ...counts);
      counts.forEach((c, k) => { h.fillStyle = "#2a9d8f"; const bw = 196 / counts.length; h.fillRect(2 + k * bw, 84 - (74 * c) / cmax, Math.max(1, bw - 1), (74 * c) / cmax); });
      h.fillStyle = "#666"; h.font = "10px monospace";
      if (p.hist.edges && p.hist.edges.length) h.fillText(`${num(p.hist.edges[0])} … ${num(p.hist.edges[p.hist.edges.length - 1])}`, 4, 10);
      if (p.hist.nonfinite) { h.fillStyle = "#d00"; h.fillText(`${p.hist.nonfinite} NaN/Inf`, 110, 10); }
      // heat map: rows = steps, columns = element bins, |grad|
      const c3 = el("canvas", "sk-gf-heat", row); c3.width = p.cols; c3.height = p.rows;
      c3.style.width = "256px"; c3.style.height = "90px";
      const img = c3.getContext("2d").createImageData(p.cols, p.rows);
      for (let k = 0; k < p.rows * p.cols; k++) {
        const code = bytes[p.offset + k];
        const rgb = code === 254 ? [255, 0, 255] : viridis(code / 252);
        img.data[4 * k] = rgb[0]; img.data[4 * k + 1] = rgb[1]; img.data[4 * k + 2] = rgb[2]; img.data[4 * k + 3] = 255;
      }
      c3.getContext("2d").putImageData(img, 0, 0);
      c3.title = `|grad| per element bin (x) and step (y), 0 … ${num(p.hmax)}`;
    }
  }

  drawReport(); drawGraph(); drawTrain();
  model.on("change:report", () => { drawReport(); drawGraph(); });
  model.on("change:graph", drawGraph);
  model.on("change:height", drawGraph);
  model.on("change:_train", drawTrain);
  model.on("change:_heat", drawTrain);
  return () => { ro.disconnect(); root.remove(); };
}

export default { render };
