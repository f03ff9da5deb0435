"""What lectures 04, 06, 07 and 09 watch in the timeline view (issue 27): two runs on one clock, where the
view starts, a note saying what to watch for (its numbers computed here), and the answer of the exercise
that needs the view.

* 04 :func:`hot_document`: a hot document spreads by fetches under KVCache-centric and piles up under
  cache-aware (:func:`holds_document_s`).
* 06 :func:`interference`: a coupled node's long prefill stalls its decode batch; a disaggregated pair
  never does (:func:`longest_prefill`).
* 07 :func:`oscillation`: early rejection's bursts against prediction's (:func:`rejected_by`).
* 09 :func:`router_vs_conductor`: a router's choice beside the Conductor's (:func:`contested_request`).

Every run here is one a lecture already makes (memoised), except lecture 04's small synthetic burst.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import sim
from ..traces import BLOCK_TOKENS, Trace, trace_from_requests
from ..validate import fail, integer

__all__ = ["Watch", "hot_document_trace", "hot_document", "holds_document_s", "interference", "longest_prefill",
           "oscillation", "rejected_by", "kv_at_rejections", "OSCILLATION_S", "router_vs_conductor", "contested_request", "MAX_EXPLAINED", "HOT_DOCUMENT", "WATCH_END_S"]

#: Lecture 04's burst: users asking about one document within spread_s seconds (synthetic, seeded).
HOT_DOCUMENT = dict(users=100, doc_blocks=32, own_blocks=(2, 5), output_tokens=200, spread_s=30.0, seed=0)
#: Where lectures 06 and 09 look: the 30 s window ending here, s (ten minutes in: past the warm-up).
WATCH_END_S = 630.0


@dataclass(frozen=True)
class Watch:
    """Runs to watch on one clock (``runs``: label → SimResult), the window the view opens on (s), and a
    note (markdown) saying what to watch for."""

    runs: dict
    window_s: float
    now_s: float
    note: str

    def view(self, style: str | None = None):
        """The timeline view of the runs (:func:`mooncake_lab.timeline.timeline`)."""
        from ..timeline import timeline

        return timeline(*self.runs.values(), labels=list(self.runs), window=self.window_s, now=self.now_s,
                        style=style)

    def _repr_markdown_(self) -> str:
        return self.note


# ------------------------------------------------------------------------------------ lecture 04
def hot_document_trace(users: int = HOT_DOCUMENT["users"], doc_blocks: int = HOT_DOCUMENT["doc_blocks"],
                       spread_s: float = HOT_DOCUMENT["spread_s"], seed: int = HOT_DOCUMENT["seed"]) -> Trace:
    """``users`` requests arriving uniformly at random within ``spread_s`` s, each the same document of
    ``doc_blocks`` blocks (512 tokens each) and a question of its own (2–4 blocks, the last block part
    full), answered in 200 tokens."""
    users = integer(users, "users", lo=1, hi=10_000, where="hot_document_trace")
    doc_blocks = integer(doc_blocks, "doc_blocks", lo=1, hi=1_000, where="hot_document_trace")
    rng = np.random.default_rng(seed)
    lo, hi = HOT_DOCUMENT["own_blocks"]
    arrival = np.sort(rng.uniform(0.0, float(spread_s), users))
    own = rng.integers(lo, hi, users)
    chains = [list(range(doc_blocks)) + [10_000 + 100 * i + k for k in range(own[i])] for i in range(users)]
    tokens = [BLOCK_TOKENS * len(c) - int(rng.integers(0, BLOCK_TOKENS - 1)) for c in chains]
    return trace_from_requests(arrival, tokens, [HOT_DOCUMENT["output_tokens"]] * users, [len(c) for c in chains],
                               [b for c in chains for b in c], name="a hot document (synthetic)",
                               source="mooncake_lab.experiments.watch.hot_document_trace")


def holds_document_s(result: sim.SimResult, instance: int) -> float:
    """When prefill ``instance`` first holds the whole document of :func:`hot_document_trace`, s: the end of
    its first fetch of it, or the end of its first prefill that computed it (inf: never)."""
    a = result.arrays
    instance = integer(instance, "instance", lo=0, hi=result.config.n_prefill_instances - 1, where="holds_document_s")
    doc = HOT_DOCUMENT["doc_blocks"] * BLOCK_TOKENS
    on = a["prefill_inst"] == instance
    fetched = on & (a["fetched_tok"] >= doc)
    fetch_end = a["prefill_start"] + np.nan_to_num(a["fetch_wait"]) + a["fetch_time"]
    computed = on & (a["cached_tok"] < doc)   # not all of it from a cache: it computed the rest
    times = np.concatenate([fetch_end[fetched], a["prefill_end"][computed]])
    return float(times.min()) if len(times) else float("inf")


@lru_cache(maxsize=1)
def _hot_document_runs() -> dict:
    tr = hot_document_trace()
    return {p: sim.simulate(tr, sim.ClusterConfig(prefill_policy=p)) for p in ("kvcentric", "cache_aware")}


def hot_document() -> Watch:
    """Lecture 04: the hot document under KVCache-centric and cache-aware, 8P+8D, calibrated preset."""
    runs = _hot_document_runs()
    kv, ca = runs["kvcentric"], runs["cache_aware"]
    n = kv.config.n_prefill_instances
    spread = [holds_document_s(kv, k) for k in range(n)]
    served = np.bincount(ca.arrays["prefill_inst"], minlength=n)
    ttft = {p: float(np.mean(r.arrays["prefill_end"] - r.trace.arrival_s)) for p, r in runs.items()}
    note = (f"**What to watch.** In a synthetic burst, {len(kv.trace)} users ask about one {HOT_DOCUMENT['doc_blocks'] * BLOCK_TOKENS:,}"
            f"-token document within {HOT_DOCUMENT['spread_s']:g} s. Under KVCache-centric, P0 computes it once "
            f"(orange). The others wait for it (light blue), then fetch it (dark blue): all {n} hold it by "
            f"{max(spread):.1f} s. Under cache-aware, {int((served > 0).sum()) - 1} more instances compute it "
            f"again, and {int((served == 0).sum())} never get a request. Mean TTFT: {ttft['kvcentric']:.2f} s "
            f"against {ttft['cache_aware']:.2f} s.")
    return Watch(runs={"KVCache-centric": kv, "cache-aware": ca}, window_s=10.0, now_s=10.0, note=note)


# ------------------------------------------------------------------------------------ lecture 06
def longest_prefill(result: sim.SimResult, t0: float, t1: float) -> dict:
    """The longest prefill that runs wholly within [t0, t1] s: its request, node, start and end (s), and how
    many requests sat in that node's decode batch while it ran (a coupled node stalls all of them; 0 on a
    disaggregated cluster, whose prefill nodes hold no batch)."""
    from ..timeline.lanes import lanes

    a = result.arrays
    idx = np.flatnonzero((a["prefill_inst"] >= 0) & (a["prefill_start"] >= t0) & (a["prefill_end"] <= t1))
    if not len(idx):
        raise fail("t0, t1", (t0, t1), "a window in which some prefill starts and ends", "longest_prefill")
    i = int(idx[np.argmax(a["prefill_end"][idx] - a["prefill_start"][idx])])
    node, s, e = int(a["prefill_inst"][i]), float(a["prefill_start"][i]), float(a["prefill_end"][i])
    batch = int(round(lanes(result).batch.at(node, (s + e) / 2))) if result.config.coupled else 0
    return {"request": i, "node": node, "start_s": s, "end_s": e, "stalled": batch}


def interference() -> Watch:
    """Lecture 06: coupled nodes against Mooncake's 8P+8D at the lecture's demo speed, 30 s ten minutes in."""
    from . import l06_goodput as g

    co, mc = g.run("coupled", g.DEMO_SPEED), g.run("mooncake", g.DEMO_SPEED)
    t0 = WATCH_END_S - 30.0
    lp = longest_prefill(co, t0, WATCH_END_S)
    note = (f"**What to watch.** On a coupled node a prefill (orange) and a decode batch (purple) share the GPUs. "
            f"While the prefill runs, no token of the batch is made. Between {t0:.0f} and {WATCH_END_S:.0f} s the "
            f"longest prefill runs {lp['end_s'] - lp['start_s']:.1f} s on node N{lp['node']}: every request in that "
            f"node's batch waits that long for its next token. In Mooncake's pair here, decode nodes never prefill, so "
            f"their batches never stop.")
    return Watch(runs={"coupled": co, "Mooncake 8P+8D": mc}, window_s=30.0, now_s=WATCH_END_S, note=note)


# ------------------------------------------------------------------------------------ lecture 07
def rejected_by(result: sim.SimResult, t_s: float) -> int:
    """Requests rejected (at arrival, after their prefill, or too large) by ``t_s`` s: the count the view shows
    beside a run's arrivals lane when its clock is at ``t_s``."""
    from ..timeline.lanes import lanes

    ln = lanes(result)
    return int((ln.rej_t <= t_s).sum())


def kv_at_rejections(result: sim.SimResult, t_s: float) -> tuple[float, float]:
    """The decode pool's KV in use as a share of its capacity (0–1): the mean at the rejections by ``t_s`` s,
    and the mean over [0, ``t_s``] (sampled every 0.5 s)."""
    from ..timeline.lanes import lanes

    ln = lanes(result)
    cap = ln.kv_capacity * ln.n_decode

    def used(t):
        return sum(ln.kv.at(k, t) for k in range(ln.n_decode)) / cap

    at = [used(t) for t in ln.rej_t[(ln.rej_t <= t_s) & (ln.rej_reason != 4)]]   # not "too large": no load check
    return (float(np.mean(at)) if at else float("nan"), float(np.mean([used(t) for t in np.arange(0.0, t_s, 0.5)])))


#: Lecture 07's view: the first ten minutes of the run, s.
OSCILLATION_S = 600.0


def oscillation(trace="toolagent-like") -> Watch:
    """Lecture 07: early rejection against prediction on ``trace`` at 2× (the lecture's cluster), the first
    ten minutes."""
    from . import l07_overload as ov

    runs = {"early rejection": ov.run(trace, admission="early"), "prediction": ov.run(trace, admission="predicted")}
    t = OSCILLATION_S
    at, mean = kv_at_rejections(runs["early rejection"], t)
    fewer = rejected_by(runs["prediction"], t) < rejected_by(runs["early rejection"], t)
    note = (f"**What to watch.** Red marks on the arrivals lane are rejections. They come in bursts, while the "
            f"decode KV lines (orange) run high: under early rejection the pool's KV is {at:.0%} full at a "
            f"rejection, {mean:.0%} on average. Prediction looks ahead to the memory decode will free, and "
            f"{'rejects fewer' if fewer else 'here rejects no fewer'}. "
            f"The count beside each arrivals lane is the rejections up to the clock.")
    return Watch(runs=runs, window_s=t, now_s=t, note=note)


# ------------------------------------------------------------------------------------ lecture 09
#: Requests :func:`contested_request` explains at most (each is a re-run of the trace, ≈ 30–70 ms).
MAX_EXPLAINED = 100


def contested_request(router_run: sim.SimResult, t0: float):
    """The first request arriving at or after ``t0`` s that the router sent to another instance than the
    Conductor would have (of the next :data:`MAX_EXPLAINED`): its :class:`~mooncake_lab.sim.explain.Decision`,
    or None if they all agree."""
    from ..sim.explain import explain

    tr = router_run.trace
    for i in np.flatnonzero(tr.arrival_s >= t0)[:MAX_EXPLAINED]:
        d = explain(router_run, int(i))
        if d.chosen >= 0 and d.conductor_pick >= 0 and d.chosen != d.conductor_pick:
            return d
    return None


def router_vs_conductor(router: str = "sglang") -> Watch:
    """Lecture 09: a router against the Conductor on lecture 04's cluster and trace, from ten minutes in."""
    from . import l09_routers as l09

    runs = {router: l09.run("conversation", router), "Conductor (kvcentric)": l09.run("conversation", "kvcentric")}
    d = contested_request(runs[router], WATCH_END_S - 30.0)
    now = WATCH_END_S if d is None else min(max(WATCH_END_S, d.arrival_s + 5.0), runs[router].trace.arrival_s[-1])
    pick = (f"Request {d.request}, at {d.arrival_s:.1f} s, is the first from {WATCH_END_S - 30:.0f} s on where they "
            f"differ: select it with `view.selected = {d.request}`." if d else
            f"From {WATCH_END_S - 30:.0f} s on, {router} and the Conductor agree on the next {MAX_EXPLAINED} requests.")
    note = (f"**What to watch.** The queues (grey, 'q' beside a lane) of each run. Click a request, or press "
            f"⏭ next arrival, and the panel below the view shows the router's scores beside the Conductor's "
            f"terms. {pick}")
    return Watch(runs=runs, window_s=30.0, now_s=float(now), note=note)
