// IRGraph drawing: one column's laid-out graph (widgets/_ir_layout.js) as SVG. Every element that
// shows a function or an instruction is registered in `drawn`, where search and selection find it.
import { sv } from "./_dom.js";
import { HEAD, ROW } from "./_ir_layout.js";

const ROLE_COLOR = {
  primal: "#3b6fb6", forward: "#2a9d8f", backward_primal: "#c79a1a", backward_propagate: "#d1603d",
  rematerialize: "#8e5bd6", context: "#888888", backward: "#d1603d",
};
export const roleColor = (f) => ROLE_COLOR[(f && f.role) || "primal"] || "#3b6fb6";

export function arrowMarkers(defs) {
  for (const [id, color] of [["a", "#777"], ["b", "#d1603d"], ["d", "#8e5bd6"], ["u", "#3b6fb6"]]) {
    const mk = sv("marker", { id: `sk-irg-arrow-${id}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    sv("path", { d: "M0,0 L10,5 L0,10 z", fill: color }, mk);
  }
}

function pathD(points) {
  return points.map((p, k) => (k ? "L" : "M") + p.x.toFixed(1) + " " + p.y.toFixed(1)).join(" ");
}

function drawEdges(g, layer) {
  for (const e of g.edges()) {
    const d = g.edge(e);
    if (!d.points) continue;
    const kind = d.kind || "flow";
    const marker = kind === "back" ? "b" : kind === "derivative" ? "d" : kind === "use" ? "u" : "a";
    sv("path", { d: pathD(d.points), class: `sk-irg-edge sk-irg-e-${kind}`, "marker-end": `url(#sk-irg-arrow-${marker})` }, layer);
  }
}

// what search matches: the names as shown and as the IR spells them
const instText = (i) => [i.name, i.raw_name, "%" + i.id, i.id_label, i.op, i.callee, i.callee_label]
  .filter(Boolean).join(" ").toLowerCase();

// Column `vid`/`f` (f null: the module level) of graph `g` into `layer`. drawn: {matchables (what
// search can centre on), instEls ("view|fn|inst" -> [elements]), fnEls ("view|fn" -> element)};
// on: the actions its clicks take ({click(action): a handler that ignores the click ending a drag,
// showFunction, select, toggle (a block's key), open (a function id: its blocks, alone)}).
export function drawColumn(vid, f, g, layer, drawn, on) {
  const addInstEl = (iid, elem) => {
    const key = `${vid}|${f.id}|${iid}`;
    if (!drawn.instEls.has(key)) drawn.instEls.set(key, []);
    drawn.instEls.get(key).push(elem);
  };
  drawEdges(g, layer);
  for (const id of g.nodes()) {
    const n = g.node(id);
    if (!n || n.x === undefined) continue;
    const x0 = n.x - n.width / 2, y0 = n.y - n.height / 2;
    if (!f) {  // module level: a function
      const grp = sv("g", { class: "sk-irg-fnnode", transform: `translate(${x0},${y0})` }, layer);
      sv("rect", { width: n.width, height: n.height, rx: 5, fill: "#fff", stroke: roleColor(n.fn), "stroke-width": 2 }, grp);
      sv("text", { x: 8, y: 17, class: "sk-irg-fntext" }, grp, n.label);
      sv("title", {}, grp, n.fn.label || n.fn.name);
      grp.dataset.fn = n.fn.id;
      drawn.fnEls.set(`${vid}|${n.fn.id}`, grp);
      grp.addEventListener("dblclick", () => on.open(n.fn.id));
      grp.addEventListener("click", on.click(() => on.showFunction(vid, n.fn)));
      drawn.matchables.push({ el: grp, text: `${n.fn.name} ${n.fn.label || ""}`.toLowerCase(), x: n.x, y: n.y, layer });
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
      sv("title", {}, grp, i.text);   // demangled; the details show the IR as printed
      grp.addEventListener("click", on.click(() => on.select(vid, f.id, i.id, true)));
      addInstEl(i.id, grp);
      drawn.matchables.push({ el: grp, text: instText(i), x: n.x, y: n.y, layer });
      continue;
    }
    const b = n.block;
    const grp = sv("g", { class: "sk-irg-block" + (n.closed ? " sk-irg-closed" : ""), transform: `translate(${x0},${y0})` }, layer);
    grp.dataset.block = b.label;
    sv("rect", { width: n.width, height: n.height, rx: 5, class: "sk-irg-blockrect" }, grp);
    const head = sv("text", { x: 7, y: 14, class: "sk-irg-head" }, grp,
      `%${b.label}  ${n.closed ? "▸ " + b.insts.length + " insts" : "▾"}`);
    head.addEventListener("click", on.click(() => on.toggle(n.key)));
    drawn.matchables.push({ el: grp, text: "%" + b.label, x: n.x, y: n.y, layer });
    (n.rows || []).forEach((row, k) => {
      const i = b.insts[k];
      const rg = sv("g", { class: "sk-irg-row" + (i.nodiff ? " sk-irg-nodiff" : ""), transform: `translate(0,${HEAD + k * ROW})` }, grp);
      sv("rect", { x: 2, y: 0, width: n.width - 4, height: ROW }, rg);
      sv("text", { x: 8, y: 11 }, rg, row);
      rg.dataset.inst = i.id;
      sv("title", {}, rg, i.text);
      rg.addEventListener("click", on.click(() => on.select(vid, f.id, i.id, true)));
      addInstEl(i.id, rg);
      drawn.matchables.push({ el: rg, text: instText(i), x: n.x, y: y0 + HEAD + k * ROW, layer });
    });
  }
}
