// IRGraph pan and zoom: dragging the canvas pans the scene, the wheel zooms about the pointer.
// `dragged`: the pointer moved while down, so the click that ends it is no click on a node;
// `moved`: the user panned or zoomed since the last fit (a resize does not fit again then).
export function panZoom(svg, scene, root) {
  const pz = { tf: { x: 10, y: 10, k: 1 }, dragged: false, moved: false };
  function apply() {
    const tf = pz.tf;
    scene.setAttribute("transform", `translate(${tf.x},${tf.y}) scale(${tf.k})`);
    root.dataset.zoom = tf.k.toFixed(3);
  }
  // Readable first: instruction text stays >= 11 px (scale >= lo: 1, the module level with its short
  // labels 0.6). What does not fit the extent {w, h} is reached by panning, from the top left.
  pz.fit = (extent, lo) => {
    const W = svg.clientWidth || 800, H = svg.clientHeight || 500;
    const k = Math.min(1.2, Math.max(lo, Math.min((W - 20) / extent.w, (H - 20) / extent.h)));
    pz.tf = { x: extent.w * k <= W - 20 ? (W - extent.w * k) / 2 : 10, y: 10, k };
    pz.moved = false;
    apply();
  };
  pz.centerOn = (m) => {  // the scene point {x, y} in the middle, zoomed in to >= 1
    const W = svg.clientWidth || 800, H = svg.clientHeight || 500, tf = pz.tf;
    tf.k = Math.max(tf.k, 1);
    tf.x = W / 2 - m.x * tf.k; tf.y = H / 2 - m.y * tf.k; pz.moved = true; apply();
  };

  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, tx: pz.tf.x, ty: pz.tf.y }; pz.dragged = false;
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!pz.dragged && Math.abs(dx) + Math.abs(dy) > 4) { pz.dragged = true; pz.moved = true; svg.setPointerCapture(e.pointerId); }
    if (pz.dragged) { pz.tf.x = drag.tx + dx; pz.tf.y = drag.ty + dy; apply(); }
  });
  const endDrag = () => { drag = null; };
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top, tf = pz.tf;
    // one wheel notch (deltaY ~100 px, or 3 lines) zooms by at most x1.1; trackpads scroll smoothly
    const dy = e.deltaMode === 1 ? e.deltaY * 33 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    const k = Math.min(4, Math.max(0.2, tf.k * Math.pow(1.1, -Math.max(-1, Math.min(1, dy / 100)))));
    tf.x = mx - ((mx - tf.x) * k) / tf.k; tf.y = my - ((my - tf.y) * k) / tf.k; tf.k = k; pz.moved = true;
    apply();
  }, { passive: false });
  return pz;
}
