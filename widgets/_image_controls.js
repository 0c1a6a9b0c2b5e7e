// ImageView live controls: the inputs of a LiveImage's `_controls` (sliders, colour pickers, the
// play button and clock of a time control), each change sent through the frame stream. KEY and MOUSE
// controls have no input here: the view's key and pointer handlers drive them (keyCtls, mouseCtl).
import { el } from "./_dom.js";
import { fmt, hexToRgb, rgbToHex } from "./_image_pixels.js";

// ctrlBox: where the inputs go; root: the view (focusable when there are KEY controls);
// stream: the view's FrameStream
export function liveControls(ctrlBox, root, model, stream) {
  const c = { specs: [], keyCtls: [], mouseCtl: undefined };
  let playBtn = null, timeLbl = null;
  c.setPlaying = (on) => {
    stream.play(on);
    if (!playBtn) return;
    // the icon is drawn by CSS (.sk-play::before): the fonts of a notebook may lack U+23F8 (a box)
    playBtn.textContent = stream.playing ? "pause" : "play";
    playBtn.dataset.state = stream.playing ? "playing" : "paused";
  };
  c.showTime = () => { if (timeLbl) timeLbl.textContent = `t = ${stream.timeMs.toFixed(0)} ms`; };
  c.build = (first) => {
    // first: the view's own start (it may continue a clock: a re-created or re-displayed view);
    // later: the controls changed (a re-run cell with other inputs), the loop plays on as it was
    const specs = c.specs = model.get("_controls") || [];
    stream.timeCtl = specs.find((s) => s.kind === "time");
    stream.frameCtl = specs.find((s) => s.kind === "frame");
    c.keyCtls = specs.filter((s) => s.kind === "key");
    c.mouseCtl = specs.find((s) => s.kind === "mouse");
    if (c.keyCtls.length) root.tabIndex = 0;  // KEY inputs: 1 while held with the image focused
    ctrlBox.textContent = "";
    playBtn = timeLbl = null;
    for (const spec of specs) {
      const row = el("label", "sk-ctl sk-ctl-" + spec.kind, ctrlBox);
      row.dataset.name = spec.name;
      if (spec.kind === "slider") {
        el("span", "sk-ctl-name", row, spec.name + " ");
        const inp = el("input", "", row);
        Object.assign(inp, { type: "range", min: spec.min, max: spec.max, step: spec.step });
        inp.value = spec.value;
        const val = el("span", "sk-img-val", row, fmt(Number(spec.value)));
        inp.addEventListener("input", () => { val.textContent = fmt(Number(inp.value)); stream.want({ [spec.name]: Number(inp.value) }); });
      } else if (spec.kind === "color") {
        el("span", "sk-ctl-name", row, spec.name + " ");
        const inp = el("input", "", row);
        inp.type = "color";
        inp.value = rgbToHex(spec.value);
        inp.addEventListener("input", () => stream.want({ [spec.name]: hexToRgb(inp.value) }));
      } else if (spec.kind === "time") {
        if (first) stream.timeMs = Number(spec.value) || 0;  // a re-created view continues where it was
        playBtn = el("button", "sk-play", row);
        timeLbl = el("span", "sk-img-val", row, `t = ${stream.timeMs.toFixed(0)} ms`);
        playBtn.addEventListener("click", () => {
          const pausing = stream.playing;
          c.setPlaying(!stream.playing);
          if (pausing) model.send({ type: "paused" });  // Python makes the saved PNG this last frame
        });
      }
    }
    if (first && stream.frameCtl) stream.frameId = Number(stream.frameCtl.value) || 0;
    c.setPlaying(first ? !!(stream.timeCtl && stream.timeCtl.playing) : stream.playing);
  };
  c.update = () => {
    // the same controls with new values (LiveImage.set_values from Python): move the inputs only,
    // so a drag or the play state is not disturbed; other controls: rebuild
    const next = model.get("_controls") || [];
    const sig = (l) => l.map((s) => `${s.name}:${s.kind}:${s.min}:${s.max}`).join("|");
    if (sig(next) !== sig(c.specs)) { c.build(false); return; }
    c.specs = next;
    for (const spec of next) {
      const row = ctrlBox.querySelector(`[data-name="${CSS.escape(spec.name)}"]`);
      const inp = row && row.querySelector("input");
      if (!inp) continue;
      if (spec.kind === "slider") {
        inp.value = spec.value;
        const val = row.querySelector(".sk-img-val");
        if (val) val.textContent = fmt(Number(spec.value));
      } else if (spec.kind === "color") inp.value = rgbToHex(spec.value);
    }
  };
  return c;
}
