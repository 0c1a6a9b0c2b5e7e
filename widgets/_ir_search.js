// IRGraph search. It runs over the graph data of every view and function (IRGraph.search in Python:
// the same rule and the same order), not only over what is drawn. The hits keep that order while the
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

// every hit of the lower-case query q in `views`: {view, fn, inst (null: the function itself)}
function dataHits(views, q) {
  const out = [];
  if (!q) return out;
  for (const v of views) for (const f of v.functions) {
    if (fnHit(f, q)) out.push({ view: v.id, fn: f.id, inst: null });
    for (const b of f.blocks) for (const i of b.insts) if (instHit(i, q)) out.push({ view: v.id, fn: f.id, inst: i.id });
  }
  return out;
}

// ui: the bar's {search, hits, prevBtn, nextBtn}; w: the view's {model, root, scene, data, viewOf,
// fnOf, columns, collapsed, drawn, goTo, draw, pz, detail}. afterDraw(): the hits marked on what was
// drawn, centred on the one stepped to if it was waiting for this draw.
export function searchNav(ui, w) {
  const { model, root, scene, viewOf, fnOf } = w;
  let allHits = [], hitIdx = -1, hitQuery = null, pendingHit = null;
  function shown(h) { return w.columns().some(([vid, fid]) => vid === h.view && (fid === h.fn || fid === null)); }
  function refreshHits() {
    const q = ui.search.value.trim().toLowerCase();
    if (q !== hitQuery) { hitQuery = q; allHits = dataHits(w.data().views || [], q); hitIdx = -1; }
  }
  function drawnEl(h) {
    if (h.inst === null) return w.drawn.fnEls.get(`${h.view}|${h.fn}`) || null;
    return (w.drawn.instEls.get(`${h.view}|${h.fn}|${h.inst}`) || [])[0] || null;
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
    ui.hits.textContent = hitQuery ? `${n} hit${n === 1 ? "" : "s"}` + (hitIdx >= 0 && n ? ` (${hitIdx + 1}/${n})` : "") : "";
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
      if (w.collapsed.delete(key)) redraw = true;
    }
    if (!shown(h) || (h.inst !== null && model.get("mode") === "module")) w.goTo(h.view, h.fn);   // draws (change events)
    else if (redraw) w.draw();
    if (pendingHit) { pendingHit = null; focusHit(h); }   // drawn already, or nothing more would draw it
  }
  function focusHit(h) {
    const f = fnOf(viewOf(h.view), h.fn);
    const e = drawnEl(h);
    if (h.inst !== null) { if (f) w.detail.select(h.view, h.fn, h.inst, false); }
    else if (f) w.detail.showFunction(h.view, f);
    const m = e && w.drawn.matchables.find((x) => x.el === e);
    if (m) w.pz.centerOn(m);
    else if (e && e.parentNode === scene) { const b = e.getBBox(); w.pz.centerOn({ x: b.x + b.width / 2, y: b.y + b.height / 2 }); }
    root.dataset.current = `${h.view}|${h.fn}|${h.inst || ""}`;
  }
  function afterDraw() {
    if (pendingHit && drawnEl(pendingHit)) { const h = pendingHit; pendingHit = null; focusHit(h); }
    markHits();
  }
  ui.search.addEventListener("input", () => { markHits(); });
  ui.search.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); } });
  ui.nextBtn.onclick = () => step(1);
  ui.prevBtn.onclick = () => step(-1);
  return { afterDraw };
}
