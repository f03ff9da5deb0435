// The timeline view of mooncake_lab.timeline: lanes of one or more runs on one clock, drawn on a canvas.
// Everything runs in the browser once the data has arrived: play, scrub and zoom never wait for the kernel.
// The kernel hears of the clock (`now`), a clicked request (`selected`) and the measured frame rate (`fps`).
// No imports: it must work offline, in JupyterLab, VS Code and Notebook.

const COLORS = {
  cached: "#009E73", fetched: "#0072B2", computed: "#E69F00", waiting: "#BBD7EA", queue: "#C8C8C8",
  batch: "#9B7FC4", kv: "#D55E00", stream: "#56B4E9", fetch: "#0072B2", arrival: "#A0A0A0",
  reject: ["#D55E00", "#CC3311", "#882255"], axis: "#444", now: "#D55E00", grid: "#E6E6E6", text: "#222",
  switch: "#117733", selected: "#000000",
};
const REASONS = { 2: "rejected at arrival", 3: "rejected after prefill", 4: "rejected: too large" };
const WINDOWS = [[2, "2 s"], [10, "10 s"], [30, "30 s"], [120, "2 min"], [600, "10 min"], [0, "whole run"]];
const SPEEDS = [1, 2, 5, 10, 30, 60, 120, 300];

function typed(dv, T) {
  if (dv == null) return new T(0);
  if (dv instanceof T) return dv;
  const buf = dv.buffer ? dv.buffer : dv;
  const off = dv.byteOffset || 0;
  const len = (dv.byteLength !== undefined ? dv.byteLength : buf.byteLength) / T.BYTES_PER_ELEMENT;
  return new T(buf, off, len);
}

// First index i in sorted a[lo, hi) with a[i] >= x.
function lowerBound(a, x, lo, hi) {
  while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; }
  return lo;
}

function prepare(run) {
  const F = (k) => typed(run[k], Float64Array), I = (k) => typed(run[k], Int32Array);
  const d = {
    meta: run.meta,
    pf: { req: I("pf_req"), lane: I("pf_lane"), row: I("pf_row"), arrival: F("pf_arrival"), start: F("pf_start"),
          compute: F("pf_compute"), end: F("pf_end"), cached: F("pf_cached"), fetched: F("pf_fetched"),
          computed: F("pf_computed"), outcome: I("pf_outcome") },
    dc: { req: I("dc_req"), lane: I("dc_lane"), admit: F("dc_admit"), finish: F("dc_finish"), pre: I("dc_preempted") },
    net: { req: I("net_req"), kind: I("net_kind"), src: I("net_src"), dst: I("net_dst"), start: F("net_start"),
           end: F("net_end") },
    rej: { req: I("rej_req"), t: F("rej_t"), reason: I("rej_reason") },
    queue: { off: I("queue_offsets"), t: F("queue_t"), v: F("queue_level"), s: F("queue_slope") },
    batch: { off: I("batch_offsets"), t: F("batch_t"), v: F("batch_level"), s: F("batch_slope") },
    kv: { off: I("kv_offsets"), t: F("kv_t"), v: F("kv_level"), s: F("kv_slope") },
    arrivals: F("arrivals"), switches: F("switches"),
  };
  const m = d.meta;
  // per prefill lane: [first, last) rows (pf is sorted by lane, then start) and the longest interval
  d.pfOff = new Int32Array(m.n_prefill + 1);
  d.pfMax = new Float64Array(m.n_prefill);
  for (let i = 0; i < d.pf.lane.length; i++) {
    const k = d.pf.lane[i];
    d.pfOff[k + 1] = i + 1;
    d.pfMax[k] = Math.max(d.pfMax[k], d.pf.end[i] - d.pf.start[i]);
  }
  for (let k = 1; k <= m.n_prefill; k++) d.pfOff[k] = Math.max(d.pfOff[k], d.pfOff[k - 1]);
  d.dcOff = new Int32Array(m.n_decode + 1);   // dc is sorted by lane, then admission
  for (let i = 0; i < d.dc.lane.length; i++) d.dcOff[d.dc.lane[i] + 1] = i + 1;
  for (let k = 1; k <= m.n_decode; k++) d.dcOff[k] = Math.max(d.dcOff[k], d.dcOff[k - 1]);
  // network transfers grouped by sending NIC (the source instance), each group in start order
  const byLane = Array.from({ length: m.n_prefill }, () => []);
  for (let i = 0; i < d.net.start.length; i++) { const s = d.net.src[i]; if (s >= 0 && s < m.n_prefill) byLane[s].push(i); }
  d.netLane = byLane.map((ix) => Int32Array.from(ix));
  d.netMax = byLane.map((ix) => ix.reduce((x, i) => Math.max(x, d.net.end[i] - d.net.start[i]), 0));
  const peak = (a) => { let m = 1; for (let i = 0; i < a.length; i++) if (a[i] > m) m = a[i]; return m; };
  d.queuePeak = peak(d.queue.v);   // counters: slope 0
  d.batchPeak = peak(d.batch.v);
  d.rows = new Int32Array(m.n_prefill).fill(1);
  for (let i = 0; i < d.pf.lane.length; i++) d.rows[d.pf.lane[i]] = Math.max(d.rows[d.pf.lane[i]], d.pf.row[i] + 1);
  return d;
}

// Value of piecewise-linear lane k at time t: level + slope·t of the last piece starting at or before t.
function stepAt(s, k, t) {
  const a = s.off[k], b = s.off[k + 1];
  let j = lowerBound(s.t, t, a, b);   // first piece at >= t
  if (!(j < b && s.t[j] === t)) j--;
  return j >= a ? s.v[j] + s.s[j] * t : 0;
}

// Per pixel column x < W, the largest value of lane k over [t0 + x/px, t0 + (x+1)/px), up to tEnd
// (NaN after it): at the column's start, at each breakpoint inside, and just before the column's end.
function stepColumns(s, k, t0, px, W, tEnd) {
  const out = new Float32Array(W);
  const a = s.off[k], b = s.off[k + 1];
  let j = lowerBound(s.t, t0, a, b);
  let lv = j > a ? s.v[j - 1] : 0, sl = j > a ? s.s[j - 1] : 0;
  for (let x = 0; x < W; x++) {
    const c0 = t0 + x / px, c1 = Math.min(t0 + (x + 1) / px, tEnd);
    if (c0 > tEnd) { out[x] = NaN; continue; }
    let mx = lv + sl * c0;
    while (j < b && s.t[j] < c1) {
      mx = Math.max(mx, lv + sl * s.t[j]);   // the piece that ends here, at its end
      lv = s.v[j]; sl = s.s[j];
      mx = Math.max(mx, lv + sl * s.t[j]);
      j++;
    }
    out[x] = Math.max(mx, lv + sl * c1);
  }
  return out;
}

// Rectangles gathered per colour and filled once each: one path per colour is far cheaper than a
// fillRect (and a fillStyle change) per pixel column. Columns of equal height side by side merge.
class Painter {
  constructor() { this.by = new Map(); }
  rect(color, x, y, w, h) {
    if (!(w > 0 && h > 0)) return;
    let a = this.by.get(color);
    if (!a) { a = []; this.by.set(color, a); }
    const n = a.length;
    if (n && a[n - 4] + a[n - 2] === x && a[n - 3] === y && a[n - 1] === h) { a[n - 2] += w; return; }
    a.push(x, y, w, h);
  }
  flush(ctx) {
    for (const [color, a] of this.by) {
      ctx.fillStyle = color; ctx.beginPath();
      for (let i = 0; i < a.length; i += 4) ctx.rect(a[i], a[i + 1], a[i + 2], a[i + 3]);
      ctx.fill();
    }
    this.by.clear();
  }
}
const paint = new Painter();

export default {
  render({ model, el }) {
    el.classList.add("mooncake-timeline");
    const root = document.createElement("div");
    root.className = "mt-root";
    el.appendChild(root);
    const bar = document.createElement("div");
    bar.className = "mt-bar";
    root.appendChild(bar);
    const mk = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text) e.textContent = text; return e; };
    const play = mk("button", "mt-play", "▶ play");
    const next = mk("button", "mt-next", "⏭ next arrival");
    const speedSel = mk("select", "mt-speed");
    SPEEDS.forEach((s) => { const o = mk("option", null, `${s}× real time`); o.value = s; speedSel.appendChild(o); });
    const winSel = mk("select", "mt-window");
    WINDOWS.forEach(([w, label]) => { const o = mk("option", null, `window ${label}`); o.value = w; winSel.appendChild(o); });
    const slider = mk("input", "mt-slider");
    slider.type = "range"; slider.min = 0; slider.step = "any";
    const clock = mk("span", "mt-clock");
    [play, next, speedSel, winSel, slider, clock].forEach((e) => bar.appendChild(e));
    const legend = mk("div", "mt-legend");
    legend.innerHTML = [["cached", "prompt from own cache"], ["fetched", "fetched prefix"], ["computed", "computed"],
      ["waiting", "waiting for a fetch"], ["queue", "queue (requests)"], ["batch", "decode batch (requests)"],
      ["kv", "decode KV in use (line, of capacity)"], ["stream", "KV stream (NIC lanes)"], ["reject", "rejection"]]
      .map(([k, t]) => `<span><i style="background:${Array.isArray(COLORS[k]) ? COLORS[k][0] : COLORS[k]}"></i>${t}</span>`).join("")
      + `<span>▼ admitted, later preempted</span><span style="color:${COLORS.switch}">┆ │ role switch decided, serving</span>`;
    root.appendChild(legend);
    const canvas = mk("canvas", "mt-canvas");
    root.appendChild(canvas);
    const tip = mk("div", "mt-tip");
    root.appendChild(tip);
    const ctx = canvas.getContext("2d");

    let runs = [], end = 1, now = model.get("now"), playing = false, lastFrame = 0, layout = [];
    let frames = 0, fpsSince = 0, lastSync = 0, width = 800;
    const big = () => Boolean(model.get("projector"));
    const font = (px) => `${big() ? Math.round(px * 1.45) : px}px sans-serif`;

    function load() {
      runs = (model.get("runs") || []).map(prepare);
      end = Math.max(1e-9, ...runs.map((r) => r.meta.end_s));
      slider.max = end;
      const w = model.get("window");
      winSel.value = String(WINDOWS.some(([x]) => x === w) ? w : 0);
      speedSel.value = String(SPEEDS.includes(model.get("speed")) ? model.get("speed") : 10);
      now = Math.min(Math.max(model.get("now"), 0), end);
      relayout();
      draw();
    }

    function windowS() { const w = Number(winSel.value); return w > 0 ? Math.min(w, end) : end; }

    function relayout() {
      el.classList.toggle("mt-projector", big());
      width = Math.max(320, Math.floor(root.clientWidth || el.clientWidth || 900));
      const laneH = big() ? 26 : 18;
      layout = [];
      let y = 0;
      for (const r of runs) {
        const m = r.meta, L = { run: r, top: y, lanes: [] };
        const h = (n) => Math.max(8, Math.min(laneH, Math.floor((big() ? 560 : 420) / Math.max(1, n))));
        const nLanes = m.n_prefill + m.n_decode + (m.contention ? m.n_prefill : 0);
        const lh = h(nLanes);
        y += big() ? 30 : 22;   // title
        L.lanes.push({ kind: "admission", y, h: Math.max(lh, big() ? 22 : 16), label: "arrivals" });
        y += L.lanes[0].h + 4;
        for (let k = 0; k < m.n_prefill; k++) { const hh = lh * Math.min(2, r.rows[k]); L.lanes.push({ kind: "prefill", k, y, h: hh, label: `${m.prefill_abbr}${k}` }); y += hh + 1; }
        y += 4;
        if (m.contention) {
          for (let k = 0; k < m.n_prefill; k++) { L.lanes.push({ kind: "net", k, y, h: Math.max(6, lh - 4), label: `NIC ${m.prefill_abbr}${k}` }); y += Math.max(6, lh - 4) + 1; }
          y += 4;
        }
        for (let k = 0; k < m.n_decode; k++) { L.lanes.push({ kind: "decode", k, y, h: lh + 2, label: `${m.decode_abbr}${k}` }); y += lh + 3; }
        y += big() ? 40 : 30;   // time axis
        L.bottom = y;
        layout.push(L);
        y += 8;
      }
      const dpr = window.devicePixelRatio || 1;
      canvas.style.width = `${width}px`; canvas.style.height = `${y}px`;
      canvas.width = Math.round(width * dpr); canvas.height = Math.round(y * dpr);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    }

    const LEFT = () => (big() ? 120 : 86), RIGHT = 12;

    // Per pixel column, coverage of [t, t+1/px) by the intervals of one lane row: fraction busy, and the
    // token-weighted shares of cached / fetched / computed prompt.
    function drawPrefill(r, lane, t0, t1, px, x0, W) {
      const pf = r.pf, a = r.pfOff[lane.k], b = r.pfOff[lane.k + 1], rows = Math.min(2, r.rows[lane.k]);
      const boxes = [], selected = model.get("selected");
      let chosen = null;
      let rh;
      // queue behind the work, scaled to the run's longest queue
      const q = stepColumns(r.queue, lane.k, t0, px, W, now);
      const qh = Math.max(3, Math.round(lane.h * 0.3));   // the queue: a strip on top of the lane
      for (let x = 0; x < W; x++) if (q[x] > 0) { const hh = Math.max(1, Math.round(qh * q[x] / r.queuePeak)); paint.rect(COLORS.queue, x0 + x, lane.y + qh - hh, 1, hh); }
      const wy = lane.y + qh, wh = lane.h - qh;
      rh = wh / rows;
      const cov = Array.from({ length: rows }, () => [new Float32Array(W), new Float32Array(W), new Float32Array(W), new Float32Array(W)]);
      let i = lowerBound(pf.start, t0 - r.pfMax[lane.k], a, b);
      for (; i < b && pf.start[i] < t1; i++) {
        const e = Math.min(pf.end[i], now);
        if (e <= t0 || pf.start[i] >= now) continue;
        const row = Math.min(rows - 1, pf.row[i]);
        const segs = [[pf.start[i], Math.min(pf.compute[i], e), -1], [Math.max(pf.compute[i], pf.start[i]), e, 0]];
        for (const [s0, s1, kind] of segs) {
          if (s1 <= s0) continue;
          const xa = Math.max(0, (s0 - t0) * px), xb = Math.min(W, (s1 - t0) * px);
          if (xb <= xa) continue;
          if (xb - xa >= 3) {   // wide enough to show one request as a box
            const X = x0 + xa, Y = wy + row * rh, w = xb - xa;
            if (kind < 0) { paint.rect(COLORS.waiting, X, Y + 1, w, rh - 2); continue; }
            const tot = pf.cached[i] + pf.fetched[i] + pf.computed[i] || 1;
            let yy = Y + rh - 1;
            for (const [key, v] of [["cached", pf.cached[i]], ["fetched", pf.fetched[i]], ["computed", pf.computed[i]]]) {
              const hh = (rh - 2) * v / tot;
              paint.rect(COLORS[key], X, yy - hh, w, hh); yy -= hh;
            }
            if (w >= 6) boxes.push(X + 0.5, Y + 1.5, w - 1, rh - 3);
            if (pf.req[i] === selected) chosen = [X, Y, w, rh];
            continue;
          }
          const c = cov[row], tot = pf.cached[i] + pf.fetched[i] + pf.computed[i] || 1;
          for (let x = Math.floor(xa); x < Math.ceil(xb) && x < W; x++) {
            const f = Math.min(x + 1, xb) - Math.max(x, xa);
            if (f <= 0) continue;
            if (kind < 0) { c[3][x] += f; continue; }
            c[0][x] += f * pf.cached[i] / tot; c[1][x] += f * pf.fetched[i] / tot; c[2][x] += f * pf.computed[i] / tot;
          }
        }
      }
      for (let row = 0; row < rows; row++) {   // the aggregated columns: height = busy fraction
        const c = cov[row], Y = wy + (row + 1) * rh - 1;
        for (let x = 0; x < W; x++) {
          const busy = c[0][x] + c[1][x] + c[2][x] + c[3][x];
          if (busy <= 0) continue;
          const s = Math.min(1, busy) * (rh - 2) / busy;
          let yy = Y;
          for (const [key, v] of [["cached", c[0][x]], ["fetched", c[1][x]], ["computed", c[2][x]], ["waiting", c[3][x]]]) {
            if (v <= 0) continue;
            const hh = Math.round(v * s * 2) / 2;
            paint.rect(COLORS[key], x0 + x, yy - hh, 1, hh); yy -= hh;
          }
        }
      }
      paint.flush(ctx);
      ctx.strokeStyle = "rgba(0,0,0,0.35)"; ctx.lineWidth = 1; ctx.beginPath();
      for (let j = 0; j < boxes.length; j += 4) ctx.rect(boxes[j], boxes[j + 1], boxes[j + 2], boxes[j + 3]);
      ctx.stroke();
      if (chosen) { ctx.strokeStyle = COLORS.selected; ctx.lineWidth = 2; ctx.strokeRect(...chosen); }
      return q;
    }

    function drawNet(r, lane, t0, t1, px, x0, W) {
      const ix = r.netLane[lane.k], n = r.net;
      const cov = [new Float32Array(W), new Float32Array(W)];
      // ix is in start order; skip those that ended before the window
      let lo = 0, hi = ix.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (n.start[ix[m]] < t0 - r.netMax[lane.k]) lo = m + 1; else hi = m; }
      let count = 0;
      for (let j = lo; j < ix.length && n.start[ix[j]] < t1; j++) {
        const i = ix[j], e = Math.min(n.end[i], now);
        if (e <= t0 || n.start[i] >= now) continue;
        if (n.start[i] <= now && n.end[i] > now) count++;
        const xa = Math.max(0, (n.start[i] - t0) * px), xb = Math.min(W, (e - t0) * px);
        for (let x = Math.floor(xa); x < Math.ceil(xb) && x < W; x++) {
          const f = Math.min(x + 1, xb) - Math.max(x, xa);
          if (f > 0) cov[n.kind[i]][x] += f;
        }
      }
      for (let x = 0; x < W; x++) {
        const tot = cov[0][x] + cov[1][x];
        if (tot <= 0) continue;
        const hh = Math.round(lane.h * Math.min(1, tot / 2));   // 2 transfers at once fill the lane
        paint.rect(cov[1][x] > cov[0][x] ? COLORS.fetch : COLORS.stream, x0 + x, lane.y + lane.h - hh, 1, hh);
      }
      paint.flush(ctx);
      return count;
    }

    function drawDecode(r, lane, t0, px, x0, W) {
      const b = stepColumns(r.batch, lane.k, t0, px, W, now);
      for (let x = 0; x < W; x++) if (b[x] > 0) { const hh = Math.max(1, Math.round(lane.h * b[x] / r.batchPeak)); paint.rect(COLORS.batch, x0 + x, lane.y + lane.h - hh, 1, hh); }
      paint.flush(ctx);
      const kv = stepColumns(r.kv, lane.k, t0, px, W, now);
      ctx.strokeStyle = COLORS.kv; ctx.lineWidth = big() ? 2 : 1.2; ctx.beginPath();
      let pen = false;
      for (let x = 0; x < W; x++) {
        if (!(kv[x] >= 0)) { pen = false; continue; }
        const y = lane.y + lane.h - lane.h * Math.min(1, kv[x] / r.meta.kv_capacity);
        if (pen) ctx.lineTo(x0 + x, y); else { ctx.moveTo(x0 + x, y); pen = true; }
      }
      ctx.stroke();
      // preempted requests: a mark where they were admitted
      const dc = r.dc;
      ctx.fillStyle = COLORS.kv;
      const hi = r.dcOff[lane.k + 1];
      for (let i = lowerBound(dc.admit, t0, r.dcOff[lane.k], hi); i < hi && dc.admit[i] <= now; i++) {
        if (dc.pre[i] <= 0) continue;
        const x = x0 + (dc.admit[i] - t0) * px;
        ctx.beginPath(); ctx.moveTo(x - 3, lane.y); ctx.lineTo(x + 3, lane.y); ctx.lineTo(x, lane.y + 5); ctx.fill();
      }
    }

    function drawAdmission(r, lane, t0, t1, px, x0, W) {
      const cnt = new Float32Array(W);
      const a = r.arrivals;
      let peak = 0;
      for (let i = lowerBound(a, t0, 0, a.length); i < a.length && a[i] < Math.min(t1, now); i++) {
        const x = Math.floor((a[i] - t0) * px); if (x >= 0 && x < W) { cnt[x]++; if (cnt[x] > peak) peak = cnt[x]; }
      }
      for (let x = 0; x < W; x++) if (cnt[x] > 0) { const hh = Math.max(1, Math.round(lane.h * cnt[x] / Math.max(peak, 1))); paint.rect(COLORS.arrival, x0 + x, lane.y + lane.h - hh, 1, hh); }
      paint.flush(ctx);
      const rj = r.rej;
      for (let i = 0; i < rj.t.length; i++) {
        if (rj.t[i] < t0 || rj.t[i] > now) continue;
        ctx.fillStyle = COLORS.reject[(rj.reason[i] - 2) % 3];
        ctx.fillRect(x0 + (rj.t[i] - t0) * px - 1, lane.y, 2, lane.h * 0.6);
      }
      // role switches: decided (dashed) and serving from (solid)
      const sw = r.switches, n = sw.length / 5;
      for (let i = 0; i < n; i++) {
        const dec = sw[5 * i], serving = sw[5 * i + 4];
        for (const [t, dash] of [[dec, [3, 3]], [serving, []]]) {
          if (!(t >= t0 && t <= now)) continue;
          ctx.strokeStyle = COLORS.switch; ctx.setLineDash(dash); ctx.lineWidth = 2; ctx.beginPath();
          const x = x0 + (t - t0) * px; ctx.moveTo(x, lane.y); ctx.lineTo(x, lane.y + lane.h); ctx.stroke(); ctx.setLineDash([]);
        }
      }
      let shown = 0;
      for (let i = 0; i < rj.t.length; i++) if (rj.t[i] <= now) shown++;
      return shown;
    }

    function niceStep(span, n) {
      const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
      for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
      return 10 * p;
    }

    function draw() {
      const t1 = now, win = windowS(), t0 = Math.max(0, Math.min(now - win, end - win)) ;
      const x0 = LEFT(), W = Math.max(50, width - x0 - RIGHT), px = W / Math.max(win, 1e-9);
      const tEnd = t0 + win;
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.textBaseline = "middle";
      for (const L of layout) {
        const r = L.run, m = r.meta;
        ctx.fillStyle = COLORS.text; ctx.font = `bold ${font(13)}`; ctx.textAlign = "left";
        ctx.fillText(m.title, 4, L.top + (big() ? 14 : 10));
        let rejected = 0;
        for (const lane of L.lanes) {
          ctx.fillStyle = "#FAFAFA"; ctx.fillRect(x0, lane.y, W, lane.h);
          let note = "";
          if (lane.kind === "admission") { rejected = drawAdmission(r, lane, t0, tEnd, px, x0, W); note = rejected ? `${rejected} rej.` : ""; }
          else if (lane.kind === "prefill") { drawPrefill(r, lane, t0, tEnd, px, x0, W); const q = Math.round(stepAt(r.queue, lane.k, now)); note = q ? `q ${q}` : ""; }
          else if (lane.kind === "net") { const c = drawNet(r, lane, t0, tEnd, px, x0, W); note = c ? `${c} ⇄` : ""; }
          else { drawDecode(r, lane, t0, px, x0, W); note = `${Math.round(stepAt(r.batch, lane.k, now))}`; }
          ctx.fillStyle = COLORS.text; ctx.font = font(lane.h >= 14 ? 11 : 9); ctx.textAlign = "left";
          ctx.fillText(lane.label, 2, lane.y + lane.h / 2);
          ctx.textAlign = "right"; ctx.fillStyle = "#555";
          if (note) ctx.fillText(note, x0 - 3, lane.y + lane.h / 2);
        }
        // time axis
        const yA = L.bottom - (big() ? 36 : 27);
        ctx.strokeStyle = COLORS.axis; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(x0, yA); ctx.lineTo(x0 + W, yA); ctx.stroke();
        const st = niceStep(win, Math.max(2, Math.floor(W / (big() ? 140 : 100))));
        ctx.font = font(11); ctx.textAlign = "center"; ctx.fillStyle = COLORS.text;
        for (let t = Math.ceil(t0 / st) * st; t <= tEnd + 1e-9; t += st) {
          const x = x0 + (t - t0) * px;
          ctx.beginPath(); ctx.moveTo(x, yA); ctx.lineTo(x, yA + 4); ctx.stroke();
          ctx.fillText(st < 1 ? t.toFixed(Math.ceil(-Math.log10(st))) : `${Math.round(t)}`, x, yA + (big() ? 14 : 11));
        }
        ctx.textAlign = "left";
        ctx.fillText(`simulated time (s) — trace replayed at ${m.replay_speed}× its recorded rate`, x0, yA + (big() ? 30 : 22));
        // the clock
        const xn = x0 + (now - t0) * px;
        ctx.strokeStyle = COLORS.now; ctx.lineWidth = 2; ctx.beginPath(); ctx.moveTo(xn, L.top + 16); ctx.lineTo(xn, yA); ctx.stroke();
      }
      clock.textContent = `t = ${now.toFixed(win < 20 ? 2 : 1)} s of ${end.toFixed(0)} s`;
      slider.value = now;
      el.dataset.now = now.toFixed(6);
      el.dataset.drawn = String((Number(el.dataset.drawn) || 0) + 1);
    }

    function setNow(t, sync) {
      now = Math.min(Math.max(t, 0), end);
      draw();
      const ms = performance.now();
      if (sync || ms - lastSync > 250) { lastSync = ms; model.set("now", now); model.save_changes(); }
    }

    function tick(ms) {
      if (!playing) return;
      const dt = lastFrame ? (ms - lastFrame) / 1000 : 0;
      lastFrame = ms;
      frames++;
      if (ms - fpsSince >= 1000) {
        const fps = frames * 1000 / (ms - fpsSince);
        el.dataset.fps = fps.toFixed(1);
        model.set("fps", fps); model.save_changes();
        frames = 0; fpsSince = ms;
      }
      const t = now + dt * Number(speedSel.value);
      if (t >= end) { setNow(end, true); stop(); return; }
      setNow(t, false);
      requestAnimationFrame(tick);
    }
    function start() {
      if (playing) return;
      if (now >= end) now = 0;
      playing = true; play.textContent = "⏸ pause"; lastFrame = 0; frames = 0; fpsSince = performance.now();
      model.set("playing", true); model.save_changes();
      requestAnimationFrame(tick);
    }
    function stop() {
      playing = false; play.textContent = "▶ play";
      model.set("playing", false); model.set("now", now); model.save_changes();
    }

    play.addEventListener("click", () => (playing ? stop() : start()));
    slider.addEventListener("input", () => setNow(Number(slider.value), false));
    slider.addEventListener("change", () => setNow(Number(slider.value), true));
    winSel.addEventListener("change", () => { model.set("window", Number(winSel.value)); model.save_changes(); draw(); });
    speedSel.addEventListener("change", () => { model.set("speed", Number(speedSel.value)); model.save_changes(); });
    next.addEventListener("click", () => {
      // the next arrival after the clock, in any run; it becomes the selected request
      let best = Infinity, req = -1;
      for (const r of runs) {
        const a = r.arrivals, j = lowerBound(a, now + 1e-9, 0, a.length);
        if (j < a.length && a[j] < best) { best = a[j]; req = j; }   // requests are numbered in arrival order
      }
      if (req >= 0) { model.set("selected", req); setNow(best, true); }
    });

    function hit(ev) {
      const rect = canvas.getBoundingClientRect(), mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
      const win = windowS(), t0 = Math.max(0, Math.min(now - win, end - win));
      const x0 = LEFT(), W = Math.max(50, width - x0 - RIGHT), px = W / Math.max(win, 1e-9), t = t0 + (mx - x0) / px;
      for (const L of layout) for (const lane of L.lanes) {
        if (my < lane.y || my > lane.y + lane.h || mx < x0) continue;
        const r = L.run;
        if (lane.kind === "prefill") {
          const pf = r.pf, a = r.pfOff[lane.k], b = r.pfOff[lane.k + 1], tol = 2 / px;
          for (let i = lowerBound(pf.start, t - r.pfMax[lane.k] - tol, a, b); i < b && pf.start[i] <= t + tol; i++) {
            if (pf.end[i] + tol >= t && pf.start[i] <= Math.min(now, t + tol)) {
              return { req: pf.req[i], text: `request ${pf.req[i]} on ${lane.label}: arrived ${pf.arrival[i].toFixed(2)} s, ` +
                `waited ${(pf.start[i] - pf.arrival[i]).toFixed(2)} s, prefill ${pf.compute[i].toFixed(2)}–${pf.end[i].toFixed(2)} s; ` +
                `prompt ${pf.cached[i] + pf.fetched[i] + pf.computed[i]} tokens: ${pf.cached[i]} cached, ${pf.fetched[i]} fetched, ${pf.computed[i]} computed` };
            }
          }
          return { req: -1, text: `${lane.label} at ${t.toFixed(2)} s: queue ${Math.round(stepAt(r.queue, lane.k, Math.min(t, now)))}` };
        }
        if (lane.kind === "decode") {
          const tt = Math.min(t, now);
          return { req: -1, text: `${lane.label} at ${tt.toFixed(2)} s: batch ${Math.round(stepAt(r.batch, lane.k, tt))} requests, ` +
            `KV ${(100 * stepAt(r.kv, lane.k, tt) / r.meta.kv_capacity).toFixed(0)}% of ${Math.round(r.meta.kv_capacity)} tokens` };
        }
        if (lane.kind === "admission") {
          const rj = r.rej, tol = 3 / px;
          for (let i = 0; i < rj.t.length; i++) if (Math.abs(rj.t[i] - t) <= tol && rj.t[i] <= now)
            return { req: rj.req[i], text: `request ${rj.req[i]}: ${REASONS[rj.reason[i]]} at ${rj.t[i].toFixed(2)} s` };
          return { req: -1, text: "arrivals per pixel column (grey); rejections (red)" };
        }
        return { req: -1, text: `${lane.label}: KV streams (light blue) and prefix fetches (dark blue) it sends` };
      }
      return null;
    }
    canvas.addEventListener("mousemove", (ev) => {
      const h = hit(ev);
      if (!h) { tip.style.display = "none"; return; }
      const rect = root.getBoundingClientRect();
      tip.textContent = h.text; tip.style.display = "block";
      tip.style.left = `${Math.min(ev.clientX - rect.left + 12, rect.width - 320)}px`; tip.style.top = `${ev.clientY - rect.top + 14}px`;
    });
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    canvas.addEventListener("click", (ev) => {
      const h = hit(ev);
      if (h && h.req >= 0) { model.set("selected", h.req); model.set("now", now); model.save_changes(); draw(); }
    });

    model.on("change:runs", load);
    model.on("change:projector", () => { relayout(); draw(); });
    model.on("change:now", () => { if (!playing && Math.abs(model.get("now") - now) > 1e-9) { now = Math.min(Math.max(model.get("now"), 0), end); draw(); } });
    model.on("change:window", () => { winSel.value = String(model.get("window")); draw(); });
    model.on("change:selected", draw);
    model.on("change:playing", () => { const p = model.get("playing"); if (p && !playing) start(); else if (!p && playing) stop(); });
    const ro = new ResizeObserver(() => { const w = Math.floor(root.clientWidth); if (w && Math.abs(w - width) > 2) { relayout(); draw(); } });
    ro.observe(root);
    load();
    return () => { playing = false; ro.disconnect(); };
  },
};
