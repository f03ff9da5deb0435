"""What every instance and link of a run did, as flat arrays: the data behind the timeline view and the
Chrome-trace export (:mod:`mooncake_lab.trace_export`), computed in one place.

``lanes(result)`` reads a :class:`~mooncake_lab.sim.SimResult` (any architecture, policy, router or
student policy, either engine) and returns :class:`Lanes`. Times are seconds of simulated time since the
trace start; sizes are tokens. Nothing is resampled: every interval and every step of a counter is the
run's own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..validate import fail

__all__ = ["Lanes", "Steps", "lanes", "steps", "stream_start", "REJECTION_REASONS"]

#: Outcome codes of a rejection (:data:`mooncake_lab.sim.config.OUTCOMES`) and how the view names them.
REJECTION_REASONS = {2: "rejected at arrival", 3: "rejected after prefill", 4: "rejected: too large"}


@dataclass(frozen=True)
class Steps:
    """Piecewise-linear functions, one per lane: lane ``k``'s pieces are rows ``offsets[k]:offsets[k+1]`` of
    ``t`` (s, increasing), and from ``t[j]`` on the value is ``level[j] + slope[j] · t`` (0 before the first
    piece). Counters are steps (slope 0); the KV a decode instance holds grows within a piece."""

    offsets: np.ndarray   # (lanes + 1,) int64
    t: np.ndarray         # float64
    level: np.ndarray     # float64
    slope: np.ndarray     # float64, per s

    def lane(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(t, value at t)`` of lane ``k``: its breakpoints and the value from each on."""
        a, b = self.offsets[k], self.offsets[k + 1]
        return self.t[a:b], self.level[a:b] + self.slope[a:b] * self.t[a:b]

    def at(self, k: int, t: float) -> float:
        """Lane ``k``'s value at time ``t`` (s)."""
        a, b = self.offsets[k], self.offsets[k + 1]
        j = a + np.searchsorted(self.t[a:b], t, side="right") - 1
        return float(self.level[j] + self.slope[j] * t) if j >= a else 0.0

    def peak(self) -> float:
        """The largest value of any lane (0 if none): at a breakpoint or just before the next one."""
        if not len(self.t):
            return 0.0
        nxt = np.append(self.t[1:], np.inf)
        last = np.zeros(len(self.t), dtype=bool)
        last[self.offsets[1:][self.offsets[1:] > 0] - 1] = True
        end = np.where(last | ~np.isfinite(nxt), self.t, nxt)   # a lane's last piece is flat (0 or held)
        return float(max((self.level + self.slope * self.t).max(), (self.level + self.slope * end).max()))


def steps(lane: np.ndarray, on: np.ndarray, off: np.ndarray, weight, n_lanes: int, rate=0.0) -> Steps:
    """Per lane, the sum over intervals ``[on, off)`` of ``weight + rate · (t − on)``: one piece per
    distinct time (changes at the same time are summed, so a value is never a transient)."""
    lane = np.asarray(lane, dtype=np.int64)
    on, off = np.asarray(on, np.float64), np.asarray(off, np.float64)
    w = np.broadcast_to(np.asarray(weight, dtype=np.float64), lane.shape)
    r = np.broadcast_to(np.asarray(rate, dtype=np.float64), lane.shape)
    base = w - r * on                      # weight + rate·(t − on) = base + rate·t
    ln = np.concatenate([lane, lane])
    t = np.concatenate([on, off])
    dv = np.concatenate([base, -base])
    ds = np.concatenate([r, -r])
    order = np.lexsort((t, ln))
    ln, t, dv, ds = ln[order], t[order], dv[order], ds[order]
    starts = np.searchsorted(ln, np.arange(n_lanes + 1))
    level, slope = np.empty(len(t)), np.empty(len(t))
    for k in range(n_lanes):   # sums within each lane (a lane's sum does not run into the next)
        a, b = starts[k], starts[k + 1]
        level[a:b] = np.cumsum(dv[a:b])
        slope[a:b] = np.cumsum(ds[a:b])
    last = np.ones(len(t), dtype=bool)   # keep the last change of each (lane, time)
    last[:-1] = (t[1:] != t[:-1]) | (ln[1:] != ln[:-1])
    ln, t, level, slope = ln[last], t[last], level[last], slope[last]
    flat = np.abs(slope) < 1e-12
    level = np.where(flat, np.round(level, 6), level)
    slope = np.where(flat, 0.0, slope)
    return Steps(np.searchsorted(ln, np.arange(n_lanes + 1)).astype(np.int64), t, level, slope)


def stream_start(compute_start: np.ndarray, ready: np.ndarray, tokens: np.ndarray, s_per_token: float) -> np.ndarray:
    """When a request's KV stream to decode began, s: it ends when the KV is ready at decode and takes
    ``tokens`` × ``s_per_token`` on an idle NIC, but never begins before the prefill computes."""
    return np.maximum(compute_start, ready - tokens * s_per_token)


@dataclass(frozen=True)
class Lanes:
    """A run as lanes (see the module doc). Prefill work: one row per prefilled request (``pf_*``),
    sorted by lane then start; decode residency: one row per admitted request (``dc_*``); network
    transfers (``net_*``: kind 0 = KV stream prefill → decode, 1 = prefix fetch holder → prefill); the
    admission's rejections (``rej_*``); counters ``queue`` (requests waiting, per prefill lane),
    ``batch`` (requests in the decode batch) and ``kv`` (KV tokens reserved, per decode lane)."""

    title: str
    coupled: bool
    contention: bool
    n_prefill: int
    n_decode: int
    prefill_name: str            # "prefill", "node" (coupled) or "CPP group"
    decode_name: str
    end_s: float
    replay_speed: float
    kv_capacity: float           # tokens a decode lane holds
    n_requests: int
    pf_req: np.ndarray
    pf_lane: np.ndarray
    pf_row: np.ndarray           # rows within a lane so that its intervals never overlap (CPP pipelines)
    pf_arrival: np.ndarray
    pf_start: np.ndarray         # left the queue (the fetch wait, if any, begins)
    pf_compute: np.ndarray       # the prefill computes from here (after fetch wait and fetch)
    pf_end: np.ndarray           # the first token
    pf_cached: np.ndarray        # tokens of the prompt from the instance's own cache
    pf_fetched: np.ndarray       # from another instance's cache
    pf_computed: np.ndarray
    pf_outcome: np.ndarray
    dc_req: np.ndarray
    dc_lane: np.ndarray
    dc_admit: np.ndarray
    dc_finish: np.ndarray
    dc_preempted: np.ndarray     # times the request was preempted
    net_req: np.ndarray
    net_kind: np.ndarray
    net_src: np.ndarray
    net_dst: np.ndarray
    net_start: np.ndarray
    net_end: np.ndarray
    rej_req: np.ndarray
    rej_t: np.ndarray
    rej_reason: np.ndarray       # outcome code, a key of REJECTION_REASONS
    queue: Steps
    batch: Steps
    kv: Steps
    arrivals: np.ndarray         # every request's arrival, s (sorted)
    switches: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)))   # SimResult.switch_log

    @property
    def rows(self) -> np.ndarray:
        """Rows each prefill lane needs (≥ 1)."""
        r = np.ones(self.n_prefill, dtype=np.int64)
        if len(self.pf_lane):
            np.maximum.at(r, self.pf_lane, self.pf_row + 1)
        return r

    def nbytes(self) -> int:
        """Bytes of the arrays (what the view sends to the browser, before its own copies)."""
        return int(sum(getattr(self, k).nbytes for k in self.__dataclass_fields__
                       if isinstance(getattr(self, k), np.ndarray))
                   + sum(s.t.nbytes + s.level.nbytes + s.slope.nbytes + s.offsets.nbytes for s in (self.queue, self.batch, self.kv)))


def pack_rows(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Row of each interval within its lane so that intervals of one row never overlap (greedy in start
    order: the first row free by then)."""
    rows = np.zeros(len(start), dtype=np.int64)
    ends: dict[int, list[float]] = {}
    for i in np.lexsort((start, lane)):
        e = ends.setdefault(int(lane[i]), [])
        for r, x in enumerate(e):
            if x <= start[i] + 1e-12:
                e[r], rows[i] = end[i], r
                break
        else:
            rows[i] = len(e)
            e.append(end[i])
    return rows


def lanes(result) -> Lanes:
    """The lanes of ``result`` (a :class:`~mooncake_lab.sim.SimResult`)."""
    from ..sim.result import SimResult
    from ..trace_export import replay_speed

    if not isinstance(result, SimResult):
        raise fail("result", result, "a SimResult (what mooncake_lab.sim.simulate returns)", "lanes")
    a, tr, cfg = result.arrays, result.trace, result.config
    coupled = bool(cfg.coupled)
    P, D = int(cfg.prefill_slots), int(cfg.decode_slots)
    cpp = not coupled and cfg.cpp_group_size > 1
    arrival = np.asarray(tr.arrival_s, dtype=np.float64)

    # prefill work
    done = np.flatnonzero(a["prefill_inst"] >= 0)
    lane = a["prefill_inst"][done].astype(np.int64)
    start = a["prefill_start"][done]
    f_w = np.nan_to_num(a["fetch_wait"][done])   # coupled runs record no fetch wait (NaN)
    compute = start + f_w + a["fetch_time"][done]
    end = a["prefill_end"][done]
    order = np.lexsort((start, lane))
    done, lane, start, compute, end = done[order], lane[order], start[order], compute[order], end[order]
    fetched = a["fetched_tok"][done].astype(np.int64)
    cached = a["cached_tok"][done].astype(np.int64) - fetched

    # decode residency
    dec = np.flatnonzero((a["decode_inst"] >= 0) & np.isfinite(a["decode_admit"]))
    d_lane = a["decode_inst"][dec].astype(np.int64)
    d_order = np.lexsort((a["decode_admit"][dec], d_lane))
    dec, d_lane = dec[d_order], d_lane[d_order]
    admit = a["decode_admit"][dec]
    fin = np.where(np.isfinite(a["finish"][dec]), a["finish"][dec], np.inf)   # unfinished: resident to the end
    L_in, L_out = tr.input_len[dec].astype(np.float64), tr.output_len[dec].astype(np.float64)
    if cfg.output_lengths == "unknown" and not coupled:
        # nothing is reserved: a request holds its prompt and the tokens made so far, one a step, from
        # admission to its last token (interpolated between the two; a preempted one is counted throughout)
        kv_w, kv_rate = L_in, np.where(np.isfinite(fin) & (fin > admit), L_out / np.maximum(fin - admit, 1e-300), 0.0)
    else:
        kv_w, kv_rate = L_in + L_out, 0.0      # reserved whole at admission

    # network: KV streams and prefix fetches (a fetch waits for the links first)
    per_token = float(cfg.resolve().cost[12])   # s of RDMA per KV token (roofline.cm_kv_transfer_time)
    s_ok = np.isfinite(a["ready"][done]) & (a["decode_inst"][done] >= 0) & (not coupled)
    s_idx = done[s_ok]
    s_t1 = a["ready"][s_idx]
    s_t0 = stream_start(compute[s_ok], s_t1, tr.input_len[s_idx].astype(np.float64), per_token)
    f_ok = a["fetch_time"][done] > 0
    f_idx = done[f_ok]
    f_t0 = start[f_ok] + f_w[f_ok]
    net_req = np.concatenate([s_idx, f_idx])
    net = dict(kind=np.concatenate([np.zeros(len(s_idx), np.int64), np.ones(len(f_idx), np.int64)]),
               src=np.concatenate([a["prefill_inst"][s_idx], a["fetch_src"][f_idx]]).astype(np.int64),
               dst=np.concatenate([a["decode_inst"][s_idx], a["prefill_inst"][f_idx]]).astype(np.int64),
               start=np.concatenate([s_t0, f_t0]), end=np.concatenate([np.maximum(s_t0, s_t1), compute[f_ok]]))
    n_order = np.argsort(net["start"], kind="stable")

    # rejections: at arrival, or when the prefill ended (after-prefill)
    rej = np.flatnonzero(np.isin(a["outcome"], list(REJECTION_REASONS)))
    rej_t = np.where(a["outcome"][rej] == 3, a["prefill_end"][rej], arrival[rej])

    ends = [arrival[-1] if len(arrival) else 0.0, np.nanmax(a["finish"]) if np.isfinite(a["finish"]).any() else 0.0,
            end.max() if len(end) else 0.0]
    name = "node" if coupled else "CPP group" if cpp else "prefill"
    return Lanes(
        title=f"{tr.name}: {cfg.policy_name}, {cfg.label}", coupled=coupled,
        contention=bool(cfg.network_contention) and not coupled, n_prefill=P, n_decode=D,
        prefill_name=name, decode_name="node" if coupled else "decode",
        end_s=float(max(ends)), replay_speed=float(replay_speed(tr)),
        kv_capacity=float(result.decode_kv_capacity), n_requests=len(tr),
        pf_req=done.astype(np.int64), pf_lane=lane, pf_row=pack_rows(lane, start, end), pf_arrival=arrival[done],
        pf_start=start, pf_compute=compute, pf_end=end, pf_cached=cached, pf_fetched=fetched,
        pf_computed=a["computed_tok"][done].astype(np.int64), pf_outcome=a["outcome"][done].astype(np.int64),
        dc_req=dec.astype(np.int64), dc_lane=d_lane, dc_admit=admit, dc_finish=fin,
        dc_preempted=a["preemptions"][dec].astype(np.int64),
        net_req=net_req[n_order].astype(np.int64), **{f"net_{k}": v[n_order] for k, v in net.items()},
        rej_req=rej.astype(np.int64), rej_t=rej_t, rej_reason=a["outcome"][rej].astype(np.int64),
        queue=steps(lane, arrival[done], start, 1.0, P),
        batch=steps(d_lane, admit, fin, 1.0, D),
        kv=steps(d_lane, admit, fin, kv_w, D, kv_rate),
        arrivals=np.sort(arrival), switches=np.asarray(result.switch_log, dtype=np.float64))
