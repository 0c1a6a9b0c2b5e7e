// IRGraph side panel: what was clicked (a function, or an instruction with its type and source
// location) above the cell's source, whose line of the selected instruction is highlighted.
import { el } from "./_dom.js";
import { fname } from "./_ir_layout.js";

// side: the panel's element; w: {model, root, data, viewOf, fnOf, columns, drawn} of the view
export function detailPanel(side, w) {
  const { model, root, data, viewOf, fnOf } = w;
  const detail = el("div", "sk-irg-detail", side, "click an instruction");
  const srcTitle = el("div", "sk-irg-srctitle", side);
  const src = el("div", "sk-irg-src", side);

  function fillSource(d) {
    src.innerHTML = "";
    (d.source || "").split("\n").forEach((line, k) => {
      const row = el("div", "sk-irg-srcline", src);
      el("span", "sk-irg-lno", row, String(k + 1));
      el("span", "sk-irg-srctext", row, line || " ");
    });
    srcTitle.textContent = d.cell ? `source: ${d.cell}` : "";
  }
  function showFunction(vid, f) {
    const v = viewOf(vid);
    detail.innerHTML = "";
    const t = el("div", "sk-irg-dtitle", detail, `${fname(f)}${f.role ? " — " + f.role + " of " + f.primal : ""}`);
    t.title = fname(f);
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
    el("div", "sk-irg-dtitle", detail, `${fname(f)} · %${block.label}`).title = fname(f);
    el("pre", "sk-irg-itext", detail, i.text).title = i.text;
    root.dataset.detailFn = `${vid}|${fid}`;
    if (i.type) el("div", "sk-irg-type", detail, `type: ${i.type}`);
    if (i.nodiff) el("div", "sk-irg-flag", detail, "no_diff / treat-as-differentiable call");
    if (i.raw_text || f.label !== f.name) {  // the IR's own names, folded: search and the IR dump use them
      const raw = el("details", "sk-irg-raw", detail);
      el("summary", "", raw, "IR as printed");
      el("pre", "", raw, `${f.name}\n${i.raw_text || i.text}`);
    }
    el("div", "sk-irg-loc", detail, line ? `${data().cell} line ${line}, column ${i.loc[1]}` : "no source location (generated or library code)");
    root.dataset.selected = iid;
    root.dataset.selectedLine = line ? String(line) : "";
    applySelection(true);
  }
  function applySelection(scroll) {  // the model's selection highlighted where it is drawn
    const sel = model.get("selected") || {};
    const instEls = w.drawn.instEls;
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
  function followDetail() {  // the panel shows a function that is on screen, never the previous one
    const cols = w.columns();
    if (cols.some(([vid, fid]) => `${vid}|${fid}` === root.dataset.detailFn)) return;
    const [vid, fid] = cols[0] || [];
    const f = fnOf(viewOf(vid), fid || model.get("function"));
    if (f) showFunction(vid, f);
  }
  return { fillSource, showFunction, select, applySelection, followDetail };
}
