"""``SimResult``: per-request table, headline summary and sampled load time series of a run.

Everything here is computed from the per-request arrays, so both engines share it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..validate import fail, flag, real
from .admission import decode_load, pool_tbt_load
from .config import COMPLETED, OUTCOMES, REJECTED_AFTER_PREFILL, REJECTED_AT_ARRIVAL, REJECTED_TOO_LARGE

__all__ = ["SimResult", "MAX_SAMPLES"]

#: Rows a sampled time series may have: 10^5, 50× the pixels across a wide figure (≈ 2,000), and
#: what stays fast (≈ 0.5 s) and small (≈ 50 MB with 64 instances per pool × 8 B per value).
MAX_SAMPLES = 100_000


@dataclass(eq=False)
class SimResult:
    """The outcome of :func:`mooncake_lab.sim.simulate`.

    Attributes
    ----------
    trace, config, engine : what was run.
    arrays : the raw per-request arrays (NaN / −1 where a stage did not happen).
    max_kv_tokens : per decode instance, the most KV tokens ever reserved (≤ ``decode_kv_capacity``).
    diagnostics : events processed, ``time_reversals`` (must be 0), runs logged, max decode batch.
    wall_s : engine run time, seconds.
    switch_log : with ``role_switch_ratio`` > 0, one row per role switch (rule 14 of
        :mod:`.reference`): decided, node, new role (0 prefill, 1 decode), drained, serving from (s);
        :attr:`role_switches` is its table.
    """

    trace: object
    config: object
    engine: str
    arrays: dict
    max_kv_tokens: np.ndarray
    decode_kv_capacity: float
    diagnostics: dict
    wall_s: float
    switch_log: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)), repr=False)
    probe: dict | None = field(default=None, repr=False)  # sim.explain's numbers for one request (run._simulate)
    _frame: pd.DataFrame | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        s = self.summary()
        return (f"SimResult({self.engine}, {self.config.policy_name}, {self.config.label}: "
                f"{s['completed']:,}/{s['requests']:,} completed, "
                f"mean TTFT {s['ttft_mean_s']:.3g} s, SLO attainment {s['slo_attainment']:.1%})")

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request (times in s since the trace start, durations in s, sizes in tokens).

        ``outcome``: completed / rejected_at_arrival / rejected_after_prefill / rejected_too_large.
        ``prefill_instance``: the node, or with ``cpp_group_size`` > 1 the CPP group (0 … n_prefill / X − 1).
        ``ttft_s`` = prefill end − arrival; ``decode_wait_s`` = admission − KV ready at decode;
        ``tbt_mean_s`` / ``tbt_tail_s`` = mean / mean of the longest 10% of the token intervals
        (the first interval runs from the prefill's end to the first decode token).
        ``prefill_load`` / ``decode_load``: the loads the Conductor computed at the arrival
        (:mod:`mooncake_lab.sim.admission`; NaN if rejected as too large). ``wasted_prefill_s``:
        fetch + prefill seconds of a request rejected after its prefill (else 0).
        ``preemptions``: times the request was preempted on its decode node (``output_lengths=
        "unknown"``; 0 otherwise); its decode admission is the first one.
        ``fetch_wait_s`` / ``stream_wait_s`` (``network_contention``; else 0): seconds its prefix
        fetch waited for the links before it began (so the prefill begins at prefill start +
        fetch wait + fetch), and seconds its KV reached decode later than on an idle network
        (NaN where there was no stream: output of one token, or not prefilled).
        """
        if self._frame is None:
            a, tr = self.arrays, self.trace
            code = a["outcome"]
            df = pd.DataFrame({
                "arrival_s": tr.arrival_s, "input_len": tr.input_len, "output_len": tr.output_len,
                "outcome": pd.Categorical.from_codes(code.astype(np.int64), categories=[OUTCOMES[k] for k in range(len(OUTCOMES))]),
                "prefill_instance": a["prefill_inst"], "decode_instance": a["decode_inst"],
                "queue_wait_s": a["queue_wait"], "fetch_s": a["fetch_time"], "fetch_source": a["fetch_src"],
                "prefill_start_s": a["prefill_start"], "prefill_s": a["prefill_time"],
                "prefill_end_s": a["prefill_end"],
                "cached_tokens": a["cached_tok"], "fetched_tokens": a["fetched_tok"],
                "computed_tokens": a["computed_tok"],
                "ttft_s": a["prefill_end"] - tr.arrival_s,
                "decode_ready_s": a["ready"], "decode_admit_s": a["decode_admit"],
                "decode_wait_s": a["decode_admit"] - a["ready"],
                "finish_s": a["finish"], "tbt_mean_s": a["tbt_mean"], "tbt_tail_s": a["tbt_tail"],
                "prefill_load": a["prefill_load"], "decode_load": a["decode_load"],
                "wasted_prefill_s": self._wasted(),
                "preemptions": a["preemptions"],
                "fetch_wait_s": a["fetch_wait"], "stream_wait_s": a["stream_wait"],
            })
            df.index.name = "request"
            self._frame = df
        return self._frame

    def _wasted(self) -> np.ndarray:
        a = self.arrays
        return np.where(a["outcome"] == REJECTED_AFTER_PREFILL, a["fetch_time"] + a["prefill_time"], 0.0)

    def summary(self) -> pd.Series:
        """Headline numbers: counts; TTFT mean/p50/p90/p99 (completed, s); TBT; SLO attainment
        (share of **all** requests that completed within the SLO(s)); prefix-cache hit ratio
        (token-weighted over prefilled requests, local + fetched); decode KV peak; rejections by
        where; ``wasted_prefill_s`` (fetch + prefill seconds of requests rejected after prefill);
        ``preemptions`` (decode preemptions, all requests; ``preempted_requests``: requests preempted
        at least once)."""
        a, tr, cfg = self.arrays, self.trace, self.config
        n = len(tr)
        code = a["outcome"]
        done = code == COMPLETED
        ttft = (a["prefill_end"] - tr.arrival_s)[done]
        tail = a["tbt_tail"][done]
        tbt_ok = np.where(np.isnan(tail), True, tail <= cfg.tbt_slo_s)  # output of 1 token: no interval
        ttft_ok = ttft <= cfg.ttft_slo_s
        pre = a["prefill_inst"] >= 0
        inp = tr.input_len[pre].sum()

        def q(x, p):
            return float(np.percentile(x, p)) if len(x) else float("nan")

        def mean(x):
            x = x[~np.isnan(x)]
            return float(x.mean()) if len(x) else float("nan")

        s = {
            "requests": n, "completed": int(done.sum()),
            "rejected": int(n - done.sum() - (code == 0).sum()),
            "rejected_at_arrival": int((code == REJECTED_AT_ARRIVAL).sum()),
            "rejected_after_prefill": int((code == REJECTED_AFTER_PREFILL).sum()),
            "rejected_too_large": int((code == REJECTED_TOO_LARGE).sum()),
            "unfinished": int((code == 0).sum()),
            "wasted_prefill_s": float(self._wasted().sum()),
            "preemptions": int(a["preemptions"].sum()),
            "preempted_requests": int((a["preemptions"] > 0).sum()),
            "ttft_mean_s": mean(ttft), "ttft_p50_s": q(ttft, 50), "ttft_p90_s": q(ttft, 90),
            "ttft_p99_s": q(ttft, 99),
            "tbt_mean_s": mean(a["tbt_mean"][done]), "tbt_tail_mean_s": mean(tail),
            "tbt_tail_p90_s": q(tail[~np.isnan(tail)], 90),
            "queue_wait_mean_s": mean(a["queue_wait"][done]),
            "decode_wait_mean_s": mean((a["decode_admit"] - a["ready"])[done]),
            "ttft_slo_attainment": float(ttft_ok.sum() / n) if n else float("nan"),
            "tbt_slo_attainment": float(tbt_ok.sum() / n) if n else float("nan"),
            "slo_attainment": float((ttft_ok & tbt_ok).sum() / n) if n else float("nan"),
            "hit_ratio": float(a["cached_tok"][pre].sum() / inp) if inp else float("nan"),
            "fetched_ratio": float(a["fetched_tok"][pre].sum() / inp) if inp else float("nan"),
            "makespan_s": float(np.nanmax(a["finish"])) if done.any() else float("nan"),
            "decode_kv_peak_fraction": float(self.max_kv_tokens.max() / self.decode_kv_capacity)
            if len(self.max_kv_tokens) else float("nan"),
        }
        return pd.Series(s, name=cfg.policy_name)

    @property
    def role_switches(self) -> pd.DataFrame:
        """One row per role switch (``role_switch_ratio`` > 0; else none): when it was decided, the node, the
        pool it left and joined, when it had drained and when it served in its new role (s)."""
        g = self.switch_log
        to = np.where(g[:, 2] == 1, "decode", "prefill")
        return pd.DataFrame({"decided_s": g[:, 0], "node": g[:, 1].astype(np.int64),
                             "left": np.where(to == "decode", "prefill", "decode"), "joined": to,
                             "drained_s": g[:, 3], "serving_from_s": g[:, 4]})

    def roles_at(self, t) -> tuple[np.ndarray, np.ndarray]:
        """``(in_prefill, in_decode)``, each ``[len(t), slots]`` booleans: at each time, which prefill
        instance numbers take requests and which decode ones serve (take requests or drain). Fixed roles:
        all of them; with role switching (node numbers) as :attr:`role_switches` moves them."""
        cfg = self.config
        t = np.asarray(t, dtype=np.float64)[:, None]
        P, D = cfg.prefill_slots, cfg.decode_slots
        if not cfg.switches_roles:
            return np.ones((len(t), P), dtype=bool), np.ones((len(t), D), dtype=bool)
        k = np.arange(P)[None, :]
        in_p = np.broadcast_to(k < cfg.n_prefill, (len(t), P)).copy()
        in_d = ~in_p
        for dec, node, new, drained, serving in self.switch_log:
            node = int(node)
            if new == 1:   # left prefill when decided; serves decode from `serving`
                in_p[:, node] &= t[:, 0] < dec
                in_d[:, node] |= t[:, 0] >= serving
            else:          # drains decode until `drained`, then a prefill node
                drained = np.inf if np.isnan(drained) else drained
                in_d[:, node] &= t[:, 0] < drained
                in_p[:, node] |= t[:, 0] >= drained
        return in_p, in_d

    def timeseries(self, dt: float = 10.0, per_instance: bool = False) -> pd.DataFrame:
        """Load sampled every ``dt`` seconds from 0 to the last finish (state just after time t).

        Columns: ``prefill_queue_s`` (mean over prefill instances of queued work, s),
        ``prefill_queue_max_s``, ``decode_running`` (requests in decode batches, all instances),
        ``decode_waiting`` (KV arrived, not yet admitted), ``decode_kv_fraction`` (mean KV reserved /
        capacity), and the loads of :mod:`mooncake_lab.sim.admission` as state (no candidate
        request): ``prefill_load`` = mean queued work / TTFT SLO, ``decode_load`` =
        ``decode_load(B / D, K / D)`` over the requests running or queued in decode (B requests,
        K KV tokens reserved or needed); with ``decode_load_metric="tbt"`` the mean over instances
        of each one's TBT / SLO (``pool_tbt_load``). ``per_instance=True`` adds ``prefill_queue_s[p]`` and
        ``decode_running[d]``. With ``output_lengths="unknown"`` the decode columns still count
        each request as running from its first admission to its finish with input + output tokens
        (an upper bound: its growing KV and its preempted waits are not resampled here). ``dt``: a finite number of seconds > 0 giving at most
        :data:`MAX_SAMPLES` rows over the run (else an error saying the smallest allowed ``dt``).
        """
        a, tr, cfg = self.arrays, self.trace, self.config
        t = self._grid(dt)
        per_instance = flag(per_instance, "per_instance", "SimResult.timeseries")
        cols: dict = {}
        # coupled: each instance is both a "prefill" and a "decode" instance; CPP: one per group
        P, D = cfg.prefill_slots, cfg.decode_slots
        in_p, in_d = self.roles_at(t)  # rule 14: the nodes in each pool at each time (fixed roles: all)
        queues = self._queues(t)
        cols["prefill_queue_s"] = np.where(in_p, queues, 0.0).sum(axis=1) / in_p.sum(axis=1)
        cols["prefill_queue_max_s"] = np.where(in_p, queues, 0.0).max(axis=1)
        running = np.zeros((len(t), D))
        kv = np.zeros((len(t), D))
        waiting = np.zeros((len(t), D))
        wait_kv = np.zeros((len(t), D))
        need = (tr.input_len + tr.output_len).astype(np.float64)
        for d in range(D):  # requests rejected after prefill never queue
            on = np.flatnonzero((a["decode_inst"] == d) & (a["outcome"] != REJECTED_AFTER_PREFILL))
            adm, fin, rdy, w = a["decode_admit"][on], a["finish"][on], a["ready"][on], need[on]
            running[:, d], kv[:, d] = _active(adm, fin, w, t)
            waiting[:, d], wait_kv[:, d] = _active(rdy, adm, w, t)
        cols["decode_running"] = running.sum(axis=1)
        cols["decode_waiting"] = waiting.sum(axis=1)
        n_d = in_d.sum(axis=1)
        cols["decode_kv_fraction"] = kv.sum(axis=1) / n_d / self.decode_kv_capacity
        cols["prefill_load"] = cols["prefill_queue_s"] / cfg.ttft_slo_s
        c = cfg.resolve().cost
        if cfg.decode_load_metric == "tbt":
            bd, kd = running + waiting, kv + wait_kv
            cols["decode_load"] = np.array([pool_tbt_load(c, bd[s], kd[s], 0.0, 0.0, float(cfg.tbt_slo_s),
                                                          in_d[s].astype(np.float64))
                                            for s in range(len(t))])
        else:
            nb, kt = (cols["decode_running"] + cols["decode_waiting"]) / n_d, (kv.sum(axis=1) + wait_kv.sum(axis=1)) / n_d
            cols["decode_load"] = np.array([decode_load(c, float(b), float(k), self.decode_kv_capacity,
                                                        float(cfg.tbt_slo_s)) for b, k in zip(nb, kt)])
        if per_instance:
            for p in range(P):
                cols[f"prefill_queue_s[{p}]"] = queues[:, p]
            for d in range(D):
                cols[f"decode_running[{d}]"] = running[:, d]
        df = pd.DataFrame(cols, index=pd.Index(t, name="time_s"))
        return df

    def prefill_queues(self, dt: float = 10.0) -> pd.DataFrame:
        """Queued prefill work (s) per prefill instance (one column each, 0 … P − 1; an instance
        that got no request: 0), sampled every ``dt`` s like :meth:`timeseries` — without its
        decode-side columns (what a dashboard draws per move)."""
        t = self._grid(dt, "SimResult.prefill_queues")
        return pd.DataFrame(self._queues(t), index=pd.Index(t, name="time_s"),
                            columns=pd.Index(range(self.config.prefill_slots), name="instance"))

    def _grid(self, dt, where: str = "SimResult.timeseries") -> np.ndarray:
        """Sample times (s): every ``dt`` from 0 to the last finish, at most :data:`MAX_SAMPLES` of them."""
        dt = real(dt, "dt", lo=0.0, lo_open=True, where=where)
        fin = self.arrays["finish"]
        end = float(np.nanmax(fin)) if np.isfinite(fin).any() else 0.0
        if end / dt + 1 > MAX_SAMPLES:
            raise fail("dt", dt, f"a step of seconds giving at most {MAX_SAMPLES:,} samples over the run's "
                                 f"{end:,.1f} s, i.e. dt >= {end / (MAX_SAMPLES - 1):.3g} s", where)
        return np.arange(0.0, end + dt, dt)

    def _queues(self, t: np.ndarray) -> np.ndarray:
        """``[len(t), P]``: work queued on each prefill instance just after each time (s)."""
        a, tr = self.arrays, self.trace
        queues = np.zeros((len(t), self.config.prefill_slots))
        for p in range(queues.shape[1]):
            on = np.flatnonzero(a["prefill_inst"] == p)  # in arrival order; prefill ends increase (FIFO)
            busy = _latest(tr.arrival_s[on], a["prefill_end"][on], t)  # an idle instance: 0
            queues[:, p] = np.maximum(0.0, busy - t)
        return queues

    def load_correlation(self, dt: float = 10.0) -> float:
        """Pearson correlation of the sampled prefill and decode loads (:meth:`timeseries`) while
        requests arrive (0 … last arrival): negative = anti-phase oscillation (arXiv Fig. 9–10).
        NaN if either load is constant over that window."""
        ts = self.timeseries(dt)
        last = float(self.trace.arrival_s.max()) if len(self.trace) else 0.0
        w = ts[ts.index <= last]
        x, y = w["prefill_load"].to_numpy(), w["decode_load"].to_numpy()
        if len(x) < 3 or x.std() == 0 or y.std() == 0:
            return float("nan")
        return float(np.corrcoef(x, y)[0, 1])


def _latest(at, value, t, default=0.0):
    """For each time in ``t``: ``value`` of the last event with ``at`` ≤ t (``at`` sorted), else
    ``default`` (also when there is no event at all: an instance that received no request)."""
    pos = np.searchsorted(at, t, side="right") - 1
    if len(at) == 0:
        return np.full(len(t), float(default))
    return np.where(pos >= 0, value[np.maximum(pos, 0)], float(default))


def _active(start, stop, weight, t):
    """Count and weight of intervals [start, stop) containing each time in ``t`` (NaN start: never)."""
    ok = ~np.isnan(start)
    s, e, w = start[ok], np.where(np.isnan(stop[ok]), np.inf, stop[ok]), weight[ok]
    os_, oe = np.argsort(s), np.argsort(e)
    cs = np.concatenate([[0.0], np.cumsum(w[os_])])
    ce = np.concatenate([[0.0], np.cumsum(w[oe])])
    ns = np.searchsorted(s[os_], t, side="right")
    ne = np.searchsorted(e[oe], t, side="right")
    return (ns - ne).astype(np.float64), cs[ns] - ce[ne]
