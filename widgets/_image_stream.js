// ImageView frame stream: the requests for frames of a live view and their acknowledgement.
// Flow control (like jupyter_rfb's max_buffered_frames): a request goes out only when fewer than
// LOW frames are on their way, so the kernel renders the next frame while the last one travels and
// frames never queue up. Every request carries the newest values. A playing loop asks for BATCH
// frames per request (rendered back to back, at most one per display refresh): each request costs
// a kernel busy/idle round that JupyterLab redraws its toolbar, status bar and tab icon for, which
// on a small machine cost more than the frames. Slow renders (> SLOW ms) go one at a time, so a
// control change never waits behind a batch. A drag's positions between two requests travel as the
// request's `path`: the kernel runs a frame at each before the one it sends (at most MAX_PATH).
const LOW = 2, BATCH = 3, SLOW = 25, FRAME_MS = 1000 / 60, MAX_PATH = 48;

export class FrameStream {
  constructor(model) {
    this.model = model;
    this.inFlight = new Map(); // request id -> {t: performance.now() when sent, left: frames to come}
    this.nextReq = 1; this.pending = {}; this.hasPending = false;
    this.path = [];            // values passed through since the last request (a drag's positions)
    this.renderMs = 0;         // the kernel's last render time (a frame's render_ms)
    this.playing = false; this.timeMs = 0; this.playStart = 0; this.frameId = 0;
    this.timeCtl = undefined; this.frameCtl = undefined;  // the controls a playing loop advances
    this.lastLossy = false;    // the last frame drawn is a JPEG preview of this view's request
  }
  outstanding() { let n = 0; for (const r of this.inFlight.values()) n += r.left; return n; }
  want(values) { Object.assign(this.pending, values); this.hasPending = true; this.pump(); }
  pass(values) { this.path.push(values); }
  takePath() {
    // the passed values but the last (the request's own values), evenly thinned to MAX_PATH
    const p = this.path.slice(0, -1);
    this.path = [];
    if (p.length <= MAX_PATH) return p;
    return Array.from({ length: MAX_PATH }, (_, i) => p[Math.floor(((i + 1) * p.length) / MAX_PATH) - 1]);
  }
  pump() {
    const now = performance.now();
    for (const [id, r] of this.inFlight) if (now - r.t > 10000) this.inFlight.delete(id); // lost (kernel restart)
    if (!this.hasPending && !this.playing) return;
    if (this.outstanding() >= LOW) return;
    const values = this.pending, count = this.playing && this.renderMs < SLOW ? BATCH : 1;
    if (this.playing) {
      this.timeMs = now - this.playStart;
      if (this.timeCtl) values[this.timeCtl.name] = this.timeMs;
      if (this.frameCtl) values[this.frameCtl.name] = this.frameId;
      this.frameId += count;
    }
    this.pending = {}; this.hasPending = false;
    const req = this.nextReq++;
    this.inFlight.set(req, { t: now, left: count });
    const path = this.takePath();
    this.model.send({ type: "frame", values, req, count, interval_ms: this.playing ? FRAME_MS : 0, lossy: true,
                      ...(path.length ? { path } : {}) });
  }
  settle(m) {
    // a frame (or error) arrived: one of request m.part's frames, or the last one of m.reqs;
    // returns when its request was sent (NaN: another view's request)
    let sent = NaN;
    const r = m.part != null ? this.inFlight.get(m.part) : undefined;
    if (r) { r.left = Math.max(1, r.left - 1); sent = r.t; }
    for (const id of m.reqs || []) {
      const q = this.inFlight.get(id);
      if (q) { sent = sent < q.t ? sent : q.t; this.inFlight.delete(id); }
    }
    return sent;
  }
  ack() {
    this.pump();
    if (this.lastLossy && !this.playing && !this.hasPending && this.inFlight.size === 0) {
      // the loop rests on a JPEG preview: fetch the exact pixels of that frame (no re-render)
      const req = this.nextReq++;
      this.inFlight.set(req, { t: performance.now(), left: 1 });
      this.lastLossy = false;
      this.model.send({ type: "exact", req });
    }
  }
  play(on) {  // playing needs a time control
    this.playing = on && !!this.timeCtl;
    if (this.playing) { this.playStart = performance.now() - this.timeMs; this.pump(); }
  }
}
