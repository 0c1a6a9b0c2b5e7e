// IRGraph layouts: each level of a function (or a module) as a dagre graph whose nodes carry their
// size and what they show (widgets/_ir_draw.js draws them), and the labels those sizes are made from.
import dagre from "./vendor/dagre.esm.js";

export const ROW = 14;  // a block box: the height of an instruction row, of the header
export const HEAD = 20;
const MAXCH = 72;  // the characters of a row shown
// instructions; above this the data-flow level falls back to blocks (dagre lays out ~1500 nodes in
// ~0.9 s on one core of the 2-core dev machine, growing about linearly: bench/RESULTS.md)
export const DATAFLOW_MAX = 1000;

// width of one character of the 11px code font the boxes' text is drawn in, measured (fonts differ:
// a fixed guess let long rows run past their box)
export function measureCh() {
  const fam = getComputedStyle(document.body).getPropertyValue("--jp-code-font-family").trim() || "monospace";
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = `11px ${fam}`;
  const w = ctx.measureText("0123456789abcdef%=(), ".repeat(4)).width / 88;
  return Number.isFinite(w) && w > 4 ? Math.max(6.2, w * 1.03) : 6.6;
}

export const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
// a function as the user wrote it (`bwd_diff(f) context` for the generated s_bwdCallableCtx_f); the
// IR's own name is the hover text
export const fname = (f) => (f && (f.label || f.name)) || "";

function instLabel(i) {
  const name = i.name || (/^\d+$/.test(i.id) ? "%" + i.id : i.id_label || i.id);
  if (i.op === "param") return `${name}: ${i.type || ""}`;
  if (i.op === "call" && i.callee) return `${name} = call ${i.callee_label || i.callee}`;
  return i.type ? `${name} = ${i.op}` : i.op;
}
function instRow(i) {  // one line of a block box: the IR text without the leading `let`
  return clip(i.text.replace(/^(@\w+\s+)?let\s+/, "").replace(/\s+/g, " "), MAXCH);
}

function graph(rankdir, nodesep, ranksep) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir, nodesep, ranksep, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  return g;
}

// the module level: one node per function shown (the library's too when `library`), call and
// derivative edges; CH: the measured character width
export function layoutModule(v, CH, library) {
  const g = graph("LR", 14, 50);
  const shown = v.functions.filter((f) => f.user || library);
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

// the blocks level: the CFG, each block a box listing its instructions unless `collapsed` has its key
export function layoutBlocks(vid, f, CH, collapsed) {
  const g = graph("TB", 24, 30);
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

export function layoutDataflow(vid, f, CH, collapsed) {
  // One node per instruction, def-use edges. A value used more than HUB times (a parameter used
  // everywhere) gets a small stub per use instead of long edges: long edges make dagre add dummy
  // nodes on every rank they cross, and its ordering phase then takes seconds. Nodes are tinted by
  // block; a collapsed block is one node.
  const HUB = 3;
  const g = graph("TB", 10, 22);
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
        const name = def && def.inst ? (def.inst.name || "%" + (def.inst.id_label || op)) : "%" + op;
        g.setNode(st, { width: clip(name, 14).length * CH + 10, height: 14, stub: clip(name, 14), ref: op });
        g.setEdge(st, dst, { kind: "use" }, "u" + op);
      } else if (!g.hasEdge(s, dst, "u" + op)) g.setEdge(s, dst, { kind: "use" }, "u" + op);
    }
  }
  return g;
}

// dagre's layout of `g` (node positions, edge points) in place; returns the milliseconds it took
export function layOut(g) {
  const t = performance.now();
  dagre.layout(g);
  return performance.now() - t;
}
