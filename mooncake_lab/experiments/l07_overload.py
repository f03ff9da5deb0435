"""Lecture 07: overload-oriented scheduling — baseline vs early vs prediction-based rejection (arXiv §7).

:func:`overload_comparison` runs the simulator once per admission policy on the same overloaded
trace. The paper's run (arXiv v3 Table 3: 8P+8D, ~23k real requests at 2× replay) used a trace
that is not public in that form; ours is the **toolagent-like synthetic trace** (23,608 requests,
``synthetic_trace(preset="toolagent-like")``), with the released conversation trace as a second
column in the notebook.

Regime. The paper's overload is decode-bound (hence a decode-side check that wastes prefills). Our
default cost model is not: with the ``calibrated`` preset the prefill pool saturates first (2.06×
its capacity at 2× on toolagent) and a LLaMA2-70B decode node holds 1.47 M tokens of KV, so at 2×
the decode KV peaks at 13% and all three policies reject the same requests, at arrival on their
predicted TTFT (2,195 each). The baseline's arrival check is that TTFT term alone; arXiv v3 Algorithm 1
line 25 rejects at arrival if the TTFT *or* the TBT SLO cannot be met, which is closer to early rejection. To recreate a decode-bound 2× overload we use the ``modern`` preset (prefill at 0.58
of capacity at 2×) and cap decode KV at 40,000 tokens per node (DEFAULT_CONFIG; both sliders).

When the paper's ordering holds (:func:`speed_sweep`, :func:`regime_table`): baseline rejects the
most only in a *mild* decode overload (≈ 1–1.25× here); at 2× our baseline rejects the fewest,
because its late check is per-node fit — it refuses mostly *large* requests (:func:`overload_comparison`
column ``rejected_kv_mean``) — while early/predicted decide size-blind on the pool average.

Which assumption decides the ordering (:func:`semantics_table`, :func:`split_table`): the decode side.
With the paper's decode semantics (:data:`PAPER_DECODE`: real KV capacity, decode instance chosen at
arrival, TBT load) the 8P+8D cluster on the ``modern`` preset is not overloaded at 2× on either trace:
no policy rejects a request (mean prefill and decode loads far below 1), so the policies cannot differ;
only a decode-starved split (2 or 1 decode nodes of 16) makes the decode pool bind. :data:`DECODE_SEMANTICS` names both settings for the
lecture's control; a key added to PAPER_DECODE reaches every table, dashboard and metric that uses it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import paper as _paper
from .. import sim
from ..reproduce import Metric, figure_group, metric_group
from ..traces import Trace
from .common import as_trace as _trace, simulate_all, simulate_at_speed

__all__ = ["overload_comparison", "policy_counts", "policy_jobs", "PAPER_TABLE3_REJECTED", "DEFAULT_CONFIG", "DEFAULT_SPEED",
           "PAPER_DECODE", "LECTURE_SEMANTICS", "DECODE_SEMANTICS", "semantics_config", "semantics_table", "describe_semantics",
           "SPLITS", "SPLIT_SPEEDS", "split_table", "describe_splits", "ISOLATION", "ISOLATION_SPEEDS",
           "isolation_table", "describe_isolation",
           "POLICIES", "run", "policy_runs", "load_timeseries", "speed_sweep", "SWEEP_SPEEDS", "regime_table",
           "REGIMES",
           "rejection_ordering", "paper_ordering_holds", "crossover_speed", "real_kv_capacity_tokens",
           "requests_per_node", "TRACES", "decode_time_estimate", "td_sweep", "TD_SWEEP", "mean_decode_time",
           "crossing_speed", "describe_comparison", "describe_td_sweep", "describe_correlations",
           "readable", "comparison_view", "regime_view", "td_view", "sweep_view", "size_view", "semantics_view",
           "split_view", "isolation_view", "nothing_overloaded", "boxed", "key_view", "describe_sweep", "sweep_regimes",
           "summary_table"]

#: arXiv v3 Table 3: rejected requests, 8P+8D, ~23k real requests replayed at 2× (:mod:`mooncake_lab.paper`).
PAPER_TABLE3_REJECTED = dict(_paper.TABLE3_REJECTED)
_TABLE3 = "arXiv v3 Table 3 (8P+8D, ~23k real requests, 2× replay)"
POLICIES = ("baseline", "early", "predicted")
TRACES = ("toolagent-like", "conversation")
DEFAULT_SPEED = 2.0  # arXiv v3 §8.2: the trace replayed at 2× speed
#: The lecture's decode semantics, pinned (not ClusterConfig's defaults, which are the paper's): the decode
#: instance chosen when the KV is ready, load = max(TBT / SLO, KV / capacity), output lengths known in
#: advance (KV reserved at admission, no preemption), an uncontended network, DRAM ↔ HBM loads not
#: charged. The lecture says so and its
#: "decode semantics" control shows the paper's (:data:`PAPER_DECODE`).
LECTURE_SEMANTICS = dict(sim.SIMPLE_SEMANTICS)
#: A decode-bound overload at 2× (module docstring): fast prefill (``modern``), 40k-token decode KV.
DEFAULT_CONFIG = dict(preset="modern", decode_kv_capacity_tokens=40_000.0, **LECTURE_SEMANTICS)
#: The paper's decode semantics (issue 14 parts 2 and 4), to pass on top of DEFAULT_CONFIG (e.g.
#: ``overload_comparison(trace, **PAPER_DECODE)``): real decode KV capacity (the cost model's, what
#: ``decode_kv_capacity_tokens=None`` gives: :func:`real_kv_capacity_tokens`), the decode instance
#: chosen at arrival (arXiv v3 Algorithm 1 line 24) and the TBT-based decode load (§7.1, §7.4).
PAPER_DECODE = dict(decode_kv_capacity_tokens=None, decode_binding="arrival", decode_load_metric="tbt",
                    output_lengths="unknown", network_contention=True, dram_hbm_load=True)
#: The decode semantics a lecture control switches between: name → ClusterConfig overrides on top of
#: DEFAULT_CONFIG. ``"lecture"``: today's (DEFAULT_CONFIG's decode KV shrunk to 40k tokens/node, the
#: decode instance chosen when the KV is ready, load = max(TBT / SLO, KV / capacity); pinned, so a
#: change of ClusterConfig's defaults does not move it); ``"paper"``: :data:`PAPER_DECODE`
#: (whatever keys it holds: adding one there changes every table, dashboard and metric that uses it).
DECODE_SEMANTICS = {"lecture": dict(LECTURE_SEMANTICS),
                    "paper": PAPER_DECODE}
#: P:D splits of :func:`split_table` (16 nodes, as Table 3's 8P+8D): fewer and fewer decode nodes.
SPLITS = ((8, 8), (12, 4), (14, 2), (15, 1))
#: Replay speeds of :func:`split_table`: the paper's 2× and twice that.
SPLIT_SPEEDS = (2.0, 4.0)
#: Replay speeds of the lecture's sweep (× the trace's own arrival rate): mild to the paper's 2×.
SWEEP_SPEEDS = (0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
#: t_d (s) of :func:`td_sweep`: from far too short to the simulator's round default and beyond.
TD_SWEEP = (1.0, 2.0, 5.0, 10.0, 20.0, 40.0)
#: Named regimes of :func:`regime_table`: (replay speed, ClusterConfig overrides on top of 8P+8D).
REGIMES = {
    "decode-bound, 2× (lecture default)": (2.0, dict(DEFAULT_CONFIG)),
    "decode-bound, mild (1.25×)": (1.25, dict(DEFAULT_CONFIG)),
    "both pools loaded (calibrated, 1×)": (1.0, dict(preset="calibrated", decode_kv_capacity_tokens=40_000.0, **LECTURE_SEMANTICS)),
    "real node KV, calibrated, 2×": (2.0, dict(preset="calibrated", decode_kv_capacity_tokens=None, **LECTURE_SEMANTICS)),
}

# ---------------------------------------------------------------------------------------- runs
#: Admission parameters that only some policies read (sim.reference rules 11–13): t_d and the
#: horizon only ``predicted``, the threshold every policy but ``none``.
_READ_BY = {"decode_time_s": ("predicted",), "prediction_horizon": ("predicted",),
            "admission_threshold": ("baseline", "early", "predicted")}


def _config(trace: Trace | str | None = None, **config) -> sim.ClusterConfig:
    """``ClusterConfig(**DEFAULT_CONFIG, **config)`` with the admission parameters the policy does not
    read left at their defaults: runs that must be equal share one memo entry (a dashboard moving
    t_d under ``early`` runs nothing). ``predicted`` without a ``decode_time_s`` gets
    :func:`decode_time_estimate` of ``trace`` and this config (not the simulator's round 10 s)."""
    c = {**DEFAULT_CONFIG, **config}
    adm = c.get("admission", "none")
    if adm == "predicted" and c.get("decode_time_s") is None and trace is not None:
        c["decode_time_s"] = decode_time_estimate(trace, **{k: v for k, v in c.items() if k != "decode_time_s"})
    return sim.ClusterConfig(**{k: v for k, v in c.items() if adm in _READ_BY.get(k, (adm,))})


def decode_time_estimate(trace: Trace | str = "toolagent-like", **config) -> float:
    """t_d (s) for prediction-based rejection, derived from the trace and the cost model in use:
    the trace's mean output length (tokens) × the decode step time (s) of a *full* decode node —
    as many requests of the trace's mean size (input + output tokens) as its KV holds, attending to
    all of it. ``config`` as for :func:`run` (preset, ``decode_kv_capacity_tokens``). It matches
    the simulated mean decode time (≈ 2.7 s on toolagent-like, ≈ 5 s on conversation at 2×)."""
    from ..roofline import cm_decode_step_time

    tr = _trace(trace)
    c = {**DEFAULT_CONFIG, **config}
    r = sim.ClusterConfig(**{k: v for k, v in c.items() if k in ("preset", "model", "node",
                                                                 "decode_kv_capacity_tokens")}).resolve()
    cap = float(r.decode_kv_capacity)
    batch = max(1, int(round(cap / float(np.mean(tr.input_len + tr.output_len)))))
    return float(np.mean(tr.output_len)) * float(cm_decode_step_time(r.cost, batch, cap))


def mean_decode_time(res: sim.SimResult) -> float:
    """Mean time (s) a completed request spent decoding in ``res`` (finish − decode admission)."""
    a = res.arrays
    done = a["outcome"] == sim.COMPLETED
    return float(np.nanmean((a["finish"] - a["decode_admit"])[done])) if done.any() else float("nan")


def run(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED, **config) -> sim.SimResult:
    """One simulation of ``trace`` replayed at ``speed`` on ``ClusterConfig(**DEFAULT_CONFIG, **config)``,
    memoised (a notebook cell, a dashboard and the CLI asking the same question share one run)."""
    tr = _trace(trace)
    return simulate_at_speed(tr, speed, _config(tr, **config))


def policy_runs(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED, policies=POLICIES,
                **config) -> dict:
    """``{admission policy: SimResult}`` on the same trace, speed and config (memoised; the runs not
    memoised yet go in parallel threads, :func:`~mooncake_lab.experiments.common.simulate_all`)."""
    return dict(zip(policies, simulate_all(policy_jobs(trace, speed, policies, **config))))


def policy_jobs(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED, policies=POLICIES,
                **config) -> list:
    """The ``(trace, speed, ClusterConfig)`` runs of :func:`policy_runs` (to compute ahead,
    :class:`~mooncake_lab.experiments.common.Prefetch`)."""
    tr = _trace(trace)
    return [(tr, speed, _config(tr, **config, admission=p)) for p in policies]


def _counts(res: sim.SimResult) -> dict:
    """Completed and rejected requests (total and by where) and the wasted prefill (s) of one run,
    from its outcome codes alone (cheap: a dashboard calls this per move)."""
    code = res.arrays["outcome"]
    n = np.bincount(code, minlength=max(sim.OUTCOMES) + 1)
    where = {"rejected_at_arrival": sim.REJECTED_AT_ARRIVAL, "rejected_after_prefill": sim.REJECTED_AFTER_PREFILL,
             "rejected_too_large": sim.REJECTED_TOO_LARGE}
    return {"completed": int(n[sim.COMPLETED]), "rejected": int(sum(n[c] for c in where.values())),
            **{k: int(n[c]) for k, c in where.items()},
            "wasted_prefill_s": float(res._wasted().sum())}  # noqa: SLF001 (SimResult's one formula)


def _row(res: sim.SimResult, dt: float) -> dict:
    s = res.summary()
    code = res.arrays["outcome"]  # per-request outcome codes
    rej = (code == sim.REJECTED_AT_ARRIVAL) | (code == sim.REJECTED_AFTER_PREFILL)
    done = code == sim.COMPLETED
    out_len = res.trace.output_len.astype(np.float64)
    need = res.trace.input_len.astype(np.float64) + out_len
    ts = res.timeseries(dt)
    w = ts[ts.index <= float(res.trace.arrival_s.max())]
    tail = np.nan_to_num(res.arrays["tbt_tail"], nan=0.0)
    return {**_counts(res), "goodput": int(round(s["slo_attainment"] * s["requests"])),
            "missed_tbt": int((done & (tail > res.config.tbt_slo_s)).sum()),
            "load_corr": res.load_correlation(dt), "prefill_load_mean": float(w.prefill_load.mean()),
            "decode_load_mean": float(w.decode_load.mean()),
            "decode_kv_fraction_mean": float(w.decode_kv_fraction.mean()),
            "rejected_kv_mean": float(need[rej].mean()) if rej.any() else float("nan"),
            "completed_kv_tokens": float(need[done].sum()),
            "completed_output_tokens": float(out_len[done].sum())}


def overload_comparison(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED,
                        policies=POLICIES, dt: float = 10.0, **config) -> pd.DataFrame:
    """One row per admission policy on ``trace`` replayed at ``speed``.

    Columns: completed, rejected (total, at_arrival, after_prefill, too_large), wasted_prefill_s
    (s of prefill spent on requests rejected after it), goodput (completed within both SLOs),
    load_corr (Pearson correlation of sampled prefill and decode load, ``dt`` s apart; < 0 =
    anti-phase), mean loads and decode KV fraction while requests arrive, ``rejected_kv_mean``
    (mean input + output tokens of a request rejected by the policy, too-large ones excluded),
    ``completed_kv_tokens`` / ``completed_output_tokens`` (totals over completed requests), and
    the paper's rejected count. ``config`` goes to :class:`~mooncake_lab.sim.ClusterConfig` on top
    of :data:`DEFAULT_CONFIG` (8P+8D).
    """
    rows = []
    for p, res in policy_runs(trace, speed, policies, **config).items():
        rows.append({"policy": p, **_row(res, dt), "paper_rejected": PAPER_TABLE3_REJECTED.get(p)})
    return pd.DataFrame(rows).set_index("policy")


def policy_counts(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED, policies=POLICIES,
                  **config) -> pd.DataFrame:
    """The count columns of :func:`overload_comparison` alone — completed, rejected (total,
    at_arrival, after_prefill, too_large), wasted_prefill_s — one row per policy; no load series
    (what a dashboard needs per move)."""
    runs = policy_runs(trace, speed, policies, **config)
    return pd.DataFrame([{"policy": p, **_counts(res)} for p, res in runs.items()]).set_index("policy")


def load_timeseries(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED,
                    policy: str = "early", dt: float = 10.0, **config) -> pd.DataFrame:
    """Prefill and decode load (dimensionless, :mod:`mooncake_lab.sim.admission`) sampled every ``dt``
    s while requests arrive (index ``time_s``), plus decode KV fraction and decode running count."""
    res = run(trace, speed, admission=policy, **config)
    ts = res.timeseries(dt)
    w = ts[ts.index <= float(res.trace.arrival_s.max())]
    return w[["prefill_load", "decode_load", "decode_kv_fraction", "decode_running"]].copy()


# -------------------------------------------------------------------------------- ordering
def rejection_ordering(rejected: dict | pd.Series) -> str:
    """Policies from most to fewest rejected, e.g. ``"baseline > early > predicted"`` (ties: ``=``)."""
    items = sorted(dict(rejected).items(), key=lambda kv: (-kv[1], kv[0]))
    if not items:
        raise ValueError("rejected: got no policies; allowed: a mapping policy → rejected count")
    out = items[0][0]
    for (_, prev), (p, v) in zip(items, items[1:]):
        out += (" = " if v == prev else " > ") + p
    return out


def paper_ordering_holds(rejected: dict | pd.Series) -> bool:
    """True when baseline rejects strictly more than early, and early strictly more than predicted
    (arXiv Table 3: 4,183 > 3,771 > 3,589)."""
    r = dict(rejected)
    return bool(r["baseline"] > r["early"] > r["predicted"])


def speed_sweep(trace: Trace | str = "toolagent-like", speeds=SWEEP_SPEEDS, policies=POLICIES,
                progress: bool = True, **config) -> pd.DataFrame:
    """Rejected, completed and wasted prefill per (replay speed, policy): one tidy row each.

    ``progress`` shows a tqdm bar (one step per speed; its policies run in parallel threads).
    Columns: speed, policy, rejected, rejected_share (of all requests), completed,
    rejected_after_prefill, wasted_prefill_s, rejected_kv_mean, load_corr.
    """
    from tqdm.auto import tqdm

    tr = _trace(trace)
    rows = []
    for s in tqdm([float(v) for v in speeds], desc=f"sweep {tr.name}", disable=not progress, leave=False):
        for p, res in policy_runs(tr, s, policies, **config).items():
            r = _row(res, 10.0)
            rows.append({"speed": s, "policy": p, "rejected": r["rejected"],
                         "rejected_share": r["rejected"] / len(tr), "completed": r["completed"],
                         "rejected_after_prefill": r["rejected_after_prefill"],
                         "wasted_prefill_s": r["wasted_prefill_s"], "rejected_kv_mean": r["rejected_kv_mean"],
                         "load_corr": r["load_corr"]})
    return pd.DataFrame(rows)


def td_sweep(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED, t_ds=TD_SWEEP,
             **config) -> pd.DataFrame:
    """How prediction-based rejection depends on its t_d: one row per t_d (s) — the derived
    :func:`decode_time_estimate` included, marked ``derived`` — with predicted's rejected, completed
    and goodput (completed within both SLOs), and early rejection's for comparison (which does not
    read t_d). Index: ``t_d_s``."""
    tr = _trace(trace)
    est = decode_time_estimate(tr, **config)
    early = _row(run(tr, speed, admission="early", **config), 10.0)
    rows = []
    for td in sorted({*map(float, t_ds), est}):
        r = _row(run(tr, speed, admission="predicted", decode_time_s=td, **config), 10.0)
        rows.append({"t_d_s": td, "derived": td == est, "rejected_predicted": r["rejected"],
                     "rejected_early": early["rejected"], "completed_predicted": r["completed"],
                     "completed_early": early["completed"], "goodput_predicted": r["goodput"],
                     "goodput_early": early["goodput"]})
    return pd.DataFrame(rows).set_index("t_d_s")


def crossing_speed(sweep: pd.DataFrame) -> float:
    """Where the baseline's rejected count first falls below early's, interpolated linearly between
    the two swept speeds around it (the lines' crossing in the sweep figure; NaN if none)."""
    piv = sweep.pivot(index="speed", columns="policy", values="rejected").sort_index()
    d = (piv["baseline"] - piv["early"]).to_numpy(dtype=float)
    v = piv.index.to_numpy(dtype=float)
    k = np.flatnonzero(d < 0)
    if not len(k):
        return float("nan")
    k = k[0]
    if k == 0:
        return float(v[0])
    return float(v[k - 1] + d[k - 1] / (d[k - 1] - d[k]) * (v[k] - v[k - 1]))


def describe_comparison(comp: pd.DataFrame, name: str) -> str:
    """Markdown of what :func:`overload_comparison` found (computed, so it never contradicts the table,
    on the released trace or on its stand-in): two short sentences, the rest in a box."""
    r, g = comp["rejected"], comp["goodput"]
    most = str(comp["completed"].idxmax())
    fewer = int(r["early"] - r["predicted"])
    dg = int(g["predicted"] - g["early"])
    b = comp.loc["baseline"]
    return (f"On `{name}`, prediction rejects {abs(fewer):,} {'fewer' if fewer >= 0 else 'more'} requests than early "
            f"rejection and serves {abs(dg):,} {'more' if dg >= 0 else 'fewer'} within both SLOs. "
            f"The {most} completes the most ({int(comp.loc[most, 'completed']):,} of {int(b['completed'] + b['rejected']):,}).\n\n"
            f"<details><summary>The counts</summary>\n\n"
            f"Rejected: predicted {int(r['predicted']):,}, early {int(r['early']):,}, baseline {int(r['baseline']):,} "
            f"({int(b['rejected_after_prefill']):,} of them after prefill, {b['wasted_prefill_s']:,.0f} s of prefill "
            f"wasted). Served within both SLOs: predicted {int(g['predicted']):,}, early {int(g['early']):,}. "
            f"Rejected, most → fewest: {rejection_ordering(r)}.\n\n</details>")


def describe_td_sweep(tds: pd.DataFrame, name: str) -> str:
    """Markdown of a :func:`td_sweep` (computed): two short sentences, the rest in a box."""
    d = tds[tds.derived].iloc[0]
    td = float(tds.index[tds.derived][0])
    wins = tds.index[tds.goodput_predicted >= tds.goodput_early]
    low = tds.iloc[0]
    fewer_all = bool((tds.rejected_predicted < tds.rejected_early).all())
    out = (f"On `{name}`, at the derived t_d = {td:.1f} s prediction rejects {int(d.rejected_predicted):,} "
           f"(early {int(d.rejected_early):,}) and serves {int(d.goodput_predicted):,} within both SLOs "
           f"(early {int(d.goodput_early):,}). ")
    if len(wins):
        out += (f"It serves at least as many as early only from t_d = {float(wins[0]):g} s"
                + (" on." if (tds.index >= wins[0]).sum() == len(wins) else ", and not at every larger t_d."))
    else:
        out += "It never serves as many within the SLOs as early rejection."
    box = (f"At t_d = {tds.index[0]:g} s prediction rejects {int(low.rejected_predicted):,} and serves "
           f"{int(low.goodput_predicted):,} within both SLOs. ")
    box += ("It rejects fewer than early at every t_d swept." if fewer_all else
            f"It rejects fewer than early at {int((tds.rejected_predicted < tds.rejected_early).sum())} of "
            f"{len(tds)} t_d values.")
    if len(wins):
        box += f" The first winning t_d is {float(wins[0]) / td:.1f}× the derived value."
    return out + f"\n\n<details><summary>More of the sweep</summary>\n\n{box}\n\n</details>"


def describe_correlations(comps: dict, prefill_load: float | None = None) -> str:
    """Load correlations of early vs predicted per trace (``{name: overload_comparison}``), computed: one
    sentence, and the mean prefill load under early rejection (of the first trace) in a second."""
    parts, weaker = [], []
    for name, comp in comps.items():
        e, p = float(comp.loc["early", "load_corr"]), float(comp.loc["predicted", "load_corr"])
        parts.append(f"{e:+.2f} on `{name}` ({p:+.2f} under prediction)")
        weaker.append(abs(p) < abs(e))
    out = "Correlation r of the sampled loads under early rejection: " + "; ".join(parts) + ". "
    out += ("Prediction weakens it on every trace." if all(weaker) else
            "Prediction weakens it on " + ", ".join(f"`{n}`" for n, w in zip(comps, weaker) if w) + " only."
            if any(weaker) else "Prediction does not weaken it.")
    if prefill_load is not None:
        out += f" The mean prefill load under early rejection is {prefill_load:.3f}: {prefill_load:.1%} of the TTFT SLO."
    return out


def sweep_regimes(sweep: pd.DataFrame) -> dict:
    """What the speed sweep shows, computed from it: the speeds where the paper's ordering holds
    (``holds``), those where the baseline rejects fewer than early (``flipped``), those where it rejects the
    fewest of all three (``fewest``), and the ordering at each speed (``orderings``)."""
    piv = sweep.pivot(index="speed", columns="policy", values="rejected").sort_index()
    rows = {float(s): r[[p for p in POLICIES if p in r.index]] for s, r in piv.iterrows()}
    return {"holds": [s for s, r in rows.items() if paper_ordering_holds(r)],
            "flipped": [s for s, r in rows.items() if r["baseline"] < r["early"]],
            "fewest": [s for s, r in rows.items() if r["baseline"] < min(r["early"], r["predicted"])],
            "orderings": {s: rejection_ordering(r) for s, r in rows.items()}}


def _speeds(v) -> str:
    v = [f"{float(x):g}×" for x in v]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " and " + v[-1] if v else "no swept speed"


def describe_sweep(sweep: pd.DataFrame) -> str:
    """Markdown of a :func:`speed_sweep` (computed, so it never contradicts the table): where the paper's
    ordering holds, where the baseline rejects fewer than early, and where it rejects the fewest (two sentences)."""
    r = sweep_regimes(sweep)
    out = f"The paper's ordering holds at {_speeds(r['holds'])}. "
    if r["flipped"]:
        out += f"The baseline rejects fewer than early rejection at {_speeds(r['flipped'])}"
        out += (f", and the fewest of all three at {_speeds(r['fewest'])}." if r["fewest"] else
                "; prediction always rejects the fewest.")
    else:
        out += "The baseline never rejects fewer than early rejection."
    return out   # the ordering at each speed: sweep_view (the lecture shows it in a box)


def summary_table(comp: pd.DataFrame, comp_conv: pd.DataFrame, sweep: pd.DataFrame, sem: pd.DataFrame,
                  splits: pd.DataFrame, traces: tuple = TRACES) -> str:
    """Markdown of the lecture's closing table, "what the paper says, what we get, and why", computed from its
    runs: ``comp`` / ``comp_conv`` (:func:`overload_comparison` on the two ``traces``), ``sweep``,
    ``sem`` (:func:`semantics_table`), ``splits`` (:func:`split_table`)."""
    tool, conv = (_trace(t) for t in traces)
    tool_name, conv_name = tool.name, conv.name
    r, gp = comp["rejected"], comp["goodput"]
    P = PAPER_TABLE3_REJECTED
    holds = sweep_regimes(sweep)["holds"]
    sem_names = list(sem.index.get_level_values(0).unique())
    idle = all(nothing_overloaded(sem.loc[(n, "paper")]) for n in sem_names)
    binds = [f"{k[0]} at {k[1]:g}×" for k, row in splits.iterrows() if row["after_prefill_baseline"] > 0]
    td = decode_time_estimate(tool)
    setup = _paper.TABLE3_SETUP
    rows = [
        ("rejected, baseline", f"{P['baseline']:,}", f"{r['baseline']:,}",
         "a late per-node fit check rejects mostly large requests; wasted prefill is free on an idle prefill pool (§7)"),
        ("rejected, early", f"{P['early']:,}", f"{r['early']:,}", "a size-blind decision on a stale decode load"),
        ("rejected, predicted", f"{P['predicted']:,}", f"{r['predicted']:,}",
         f"prediction (t_d = {td:.1f} s) removes part of the staleness: the paper's direction"),
        ("within both SLOs, predicted vs early", "not reported", f"{gp['predicted']:,} vs {gp['early']:,}",
         "prediction admits into a full decode pool, and TBT suffers (§5)"),
        ("ordering, most → fewest rejected", "baseline > early > predicted", rejection_ordering(r),
         f"the paper's holds at {_speeds(holds)}; it flips from {crossover_speed(sweep):g}× on (§7)"),
        ("load correlation r, early (Fig. 9–10)", "anti-phase (by eye)",
         f"{comp.loc['early', 'load_corr']:+.2f} ({tool_name}), {comp_conv.loc['early', 'load_corr']:+.2f} ({conv_name})",
         "the decode load seen at arrival is one prefill old (§6)"),
        ("rejected baseline / early / predicted, the paper's decode semantics",
         f"{P['baseline']:,} / {P['early']:,} / {P['predicted']:,}",
         "; ".join(f"{_counts_text(sem.loc[(n, 'paper')])} ({n})" for n in sem_names),
         "nothing is overloaded at 2×, so the policies cannot differ (§8)" if idle
         else "the decode pool never binds, so the policies reject alike (§8)"),
        ("decode-starved splits, the paper's semantics", "8P+8D only",
         f"the decode pool binds at {', '.join(binds)}" if binds else "the decode pool never binds",
         "fewer decode nodes make the decode pool bind (§8)"),
        ("set-up", f"≈ {setup['requests']:,} real requests at {setup['speed']:g}×, 8P+8D",
         f"{tool_name} ({len(tool):,} requests) at "
         f"{DEFAULT_SPEED:g}×, simulated 8P+8D", "the arXiv trace is not public; see the assumptions table (§3)"),
    ]
    return ("| | paper says | we get | why they differ |\n|---|---|---|---|\n"
            + "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows))


def crossover_speed(sweep: pd.DataFrame) -> float:
    """The lowest swept speed at which baseline rejects *fewer* requests than early (NaN if none)."""
    piv = sweep.pivot(index="speed", columns="policy", values="rejected").sort_index()
    flip = piv.index[piv["baseline"] < piv["early"]]
    return float(flip[0]) if len(flip) else float("nan")


def regime_table(trace: Trace | str = "toolagent-like", regimes: dict | None = None,
                 progress: bool = True) -> pd.DataFrame:
    """Rejected per policy in each named regime of :data:`REGIMES`, the ordering, and whether the
    paper's ordering (baseline > early > predicted) holds; plus the mean prefill and decode load
    under baseline (which pool is loaded) and baseline's wasted prefill."""
    from tqdm.auto import tqdm

    regimes = REGIMES if regimes is None else regimes
    rows = []
    for name, (speed, cfg) in tqdm(list(regimes.items()), desc="regimes", disable=not progress, leave=False):
        df = overload_comparison(trace, speed, **cfg)
        rej = df["rejected"]
        rows.append({"regime": name, "speed": speed, "preset": cfg.get("preset", "calibrated"),
                     "decode_kv_tokens": float(sim.ClusterConfig(**cfg).resolve().decode_kv_capacity),
                     **{f"rejected_{p}": int(rej[p]) for p in df.index},
                     "prefill_load_mean": float(df.loc["baseline", "prefill_load_mean"]),
                     "decode_load_mean": float(df.loc["baseline", "decode_load_mean"]),
                     "wasted_prefill_s": float(df.loc["baseline", "wasted_prefill_s"]),
                     "ordering": rejection_ordering(rej), "paper_ordering": paper_ordering_holds(rej)})
    return pd.DataFrame(rows).set_index("regime")


# ------------------------------------------------------------------------ decode semantics
def semantics_config(semantics: str = "lecture", **config) -> dict:
    """ClusterConfig overrides of decode semantics ``semantics`` (a key of :data:`DECODE_SEMANTICS`)
    with ``config`` under them: the semantics' keys win (``"paper"`` uses the real KV capacity
    whatever ``decode_kv_capacity_tokens`` says)."""
    from ..validate import option

    return {**config, **DECODE_SEMANTICS[option(semantics, "semantics", tuple(DECODE_SEMANTICS))]}


def _rejected_row(df: pd.DataFrame) -> dict:
    rej = df["rejected"]
    return {**{f"rejected_{p}": int(rej[p]) for p in df.index},
            **{f"after_prefill_{p}": int(df.loc[p, "rejected_after_prefill"]) for p in df.index},
            "prefill_load_mean": float(df.loc["baseline", "prefill_load_mean"]),
            "decode_load_mean": float(df.loc["baseline", "decode_load_mean"]),
            "ordering": rejection_ordering(rej), "paper_ordering": paper_ordering_holds(rej)}


def semantics_table(traces=TRACES, speed: float = DEFAULT_SPEED, semantics=tuple(DECODE_SEMANTICS)) -> pd.DataFrame:
    """Rejected per policy (total and after prefill) under each decode semantics of
    :data:`DECODE_SEMANTICS` on each trace at ``speed`` (8P+8D), the ordering, whether it is the
    paper's, and the mean prefill and decode load under baseline (which pool binds). Index: (trace,
    semantics); ``trace`` is the loaded trace's name (a stand-in says so)."""
    rows = []
    for t in traces:
        tr = _trace(t)
        for sem in semantics:
            rows.append({"trace": tr.name, "semantics": sem,
                         **_rejected_row(overload_comparison(tr, speed, **semantics_config(sem)))})
    return pd.DataFrame(rows).set_index(["trace", "semantics"])


#: Replay speeds of :func:`isolation_table`: a mild overload and the paper's 2×.
ISOLATION_SPEEDS = (1.0, DEFAULT_SPEED)
#: The paper's decode semantics with the lecture's choices added one at a time (name → ClusterConfig
#: overrides on top of DEFAULT_CONFIG): which of the five differences of the decode side (§8) decides Table 3's ordering.
ISOLATION = {
    "paper's": dict(PAPER_DECODE),
    "paper's + 40k-token decode nodes": {**PAPER_DECODE,
                                         "decode_kv_capacity_tokens": DEFAULT_CONFIG["decode_kv_capacity_tokens"]},
    "paper's + 40k-token nodes + memory load": {**PAPER_DECODE,
                                                "decode_kv_capacity_tokens": DEFAULT_CONFIG["decode_kv_capacity_tokens"],
                                                "decode_load_metric": "tbt_or_memory"},
    "lecture's": dict(LECTURE_SEMANTICS),
}


def isolation_table(trace: Trace | str = "toolagent-like", speeds=ISOLATION_SPEEDS) -> pd.DataFrame:
    """:func:`semantics_table`'s columns for each variant of :data:`ISOLATION` and replay speed (8P+8D), plus
    the decode preemptions under early rejection and goodput per policy. Index: (variant, speed)."""
    tr = _trace(trace)
    rows = []
    for name, kw in ISOLATION.items():
        for v in speeds:
            df = overload_comparison(tr, float(v), **kw)
            pre = int(run(tr, float(v), admission="early", **kw).arrays["preemptions"].sum())
            rows.append({"variant": name, "speed": float(v), **_rejected_row(df), "preemptions_early": pre,
                         **{f"goodput_{p}": int(df.loc[p, "goodput"]) for p in df.index}})
    out = pd.DataFrame(rows).set_index(["variant", "speed"])
    out.attrs.update(requests=len(tr), trace=tr.name)
    return out


def describe_isolation(table: pd.DataFrame) -> str:
    """Markdown of an :func:`isolation_table` (computed), in two short sentences: in which runs the paper's
    ordering appears (each run named as the table's row, in quotes, with its speed), and what the 40k-token
    nodes do under the TBT load alone."""
    holds = [f'"{k}" at {v:g}×' for (k, v), r in table.iterrows() if r["paper_ordering"]]
    out = (f"On `{table.attrs['trace']}`, Table 3's ordering appears in {len(holds)} of {len(table)} runs"
           + (f": {' and '.join(holds)}." if holds else "."))
    tbt40 = [(v, r) for (k, v), r in table.iterrows() if k == "paper's + 40k-token decode nodes"]
    if tbt40 and all(int(r[f"after_prefill_{p}"]) == 0 and r["rejected_baseline"] == r["rejected_early"]
                     == r["rejected_predicted"] for _, r in tbt40 for p in POLICIES):
        v, r = tbt40[-1]
        out += (f" With 40k-token nodes under the TBT load alone, no decode check fires. At {v:g}× every policy "
                f"rejects the same {int(r['rejected_early']):,} requests, and only {int(r['goodput_early']):,} of "
                f"{table.attrs['requests']:,} meet both SLOs.")
    return out


def split_table(trace: Trace | str = "conversation", splits=SPLITS, speeds=SPLIT_SPEEDS,
                semantics: str = "paper") -> pd.DataFrame:
    """:func:`semantics_table`'s columns for each P:D split (``(n_prefill, n_decode)``) and replay
    speed under decode semantics ``semantics`` (default: the paper's), plus goodput per policy
    (completed within both SLOs). Index: (split ``"14P+2D"``, speed)."""
    tr = _trace(trace)
    rows = []
    for n_p, n_d in splits:
        for s in speeds:
            df = overload_comparison(tr, float(s), **semantics_config(semantics, n_prefill=n_p, n_decode=n_d))
            rows.append({"split": f"{n_p}P+{n_d}D", "speed": float(s), **_rejected_row(df),
                         **{f"goodput_{p}": int(df.loc[p, "goodput"]) for p in df.index}})
    out = pd.DataFrame(rows).set_index(["split", "speed"])
    out.attrs["requests"] = len(tr)
    return out


def _counts_text(row) -> str:
    return " / ".join(f"{int(row[f'rejected_{p}']):,}" for p in POLICIES)


def nothing_overloaded(row, threshold: float = 1.0) -> bool:
    """No policy rejects anything and both mean loads (under baseline) stay below ``threshold``."""
    return (all(int(row[f"rejected_{p}"]) == 0 for p in POLICIES)
            and float(row["prefill_load_mean"]) < threshold and float(row["decode_load_mean"]) < threshold)


def describe_semantics(table: pd.DataFrame) -> str:
    """Markdown of a :func:`semantics_table` (computed): what the paper's decode semantics change, per trace."""
    names = list(table.index.get_level_values(0).unique())
    paper = {n: table.loc[(n, "paper")] for n in names}
    idle = [n for n in names if nothing_overloaded(paper[n])]
    same = [n for n in names if n not in idle and sum(int(paper[n][f"after_prefill_{p}"]) for p in POLICIES) == 0
            and len({int(paper[n][f"rejected_{p}"]) for p in POLICIES}) == 1]
    out = []
    if idle:
        loads = ", ".join(f"{paper[n]['prefill_load_mean']:.2f} and {paper[n]['decode_load_mean']:.2f} on `{n}`"
                          for n in idle)
        out.append(f"With the paper's decode semantics on preset `{DEFAULT_CONFIG['preset']}`, no policy rejects "
                   f"a single request on {' and '.join(f'`{n}`' for n in idle)}. Nothing is overloaded: the mean "
                   f"prefill and decode loads are {loads}.")
    if same:
        out.append(f"With the paper's decode semantics every policy rejects the same requests on "
                   f"{' and '.join(f'`{n}`' for n in same)}, all at arrival: the decode pool never binds.")
    rest = [n for n in names if n not in idle and n not in same]
    for n in rest:
        out.append(f"On `{n}` the paper's decode semantics give the ordering {paper[n]['ordering']}.")
    return " ".join(out)


def describe_splits(table: pd.DataFrame, name: str) -> str:
    """Markdown of a :func:`split_table` (computed): where the decode pool starts to bind, in two short
    sentences, with the first such row in a box."""
    binds = [(k, r) for k, r in table.iterrows() if r["after_prefill_baseline"] > 0]
    if not binds:
        return (f"On `{name}` no split of the table makes the baseline reject anything after prefill: "
                f"the decode pool never binds.")
    (split, speed), r = binds[0]
    paper = [f"{k[0]} at {k[1]:g}×" for k, row in table.iterrows() if row["paper_ordering"]]
    where = ", ".join(f"{k[0]} at {k[1]:g}×" for k, _ in binds)
    return (f"On `{name}` the decode pool binds (the baseline rejects after prefill) only at {where}. "
            + (f"The paper's ordering appears at {', '.join(paper)}." if paper else
               "The paper's full ordering appears in none of the rows.")
            + f"\n\n<details><summary>The first row where the decode pool binds</summary>\n\n"
            f"At {split}, {speed:g}× the mean decode load is {r['decode_load_mean']:.2f}. Rejected baseline / early / "
            f"predicted: {_counts_text(r)} ({r['ordering']}); the baseline rejects "
            f"{int(r['after_prefill_baseline']):,} after prefill. Served within both SLOs: "
            f"{int(r['goodput_baseline']):,} / {int(r['goodput_early']):,} / {int(r['goodput_predicted']):,} of "
            f"{int(table.attrs['requests']):,}.\n\n</details>")


# ------------------------------------------------------------------------- tables for people
#: How :func:`readable` writes a value of each kind: counts as integers with thousands separators, loads
#: to two decimals, shares as percentages, yes / no; any other kind is a format spec (``"+.2f"``).
_KINDS = {"int": lambda v: f"{int(round(float(v))):,}", "load": lambda v: f"{float(v):.2f}",
          "pct": lambda v: f"{100 * float(v):.0f}%", "yes": lambda v: "yes" if bool(v) else "no",
          "s": lambda v: f"{float(v):,.0f}", "k": lambda v: f"{float(v) / 1e3:,.1f}",
          "M": lambda v: f"{float(v) / 1e6:,.1f}", "text": str}


def _cell(v, kind: str) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "—"
    return _KINDS[kind](v) if kind in _KINDS else format(float(v), kind)


def readable(df: pd.DataFrame, columns: dict, index=None, index_name=None) -> pd.DataFrame:
    """``df`` for people: ``columns`` maps a column (or a function of a row) to ``(label, kind)`` — kind as in
    :data:`_KINDS` or a format spec; ``index``: a function of an index value giving its label (or one per
    level of a MultiIndex, ``None`` = as it is); ``index_name``: the index's heading (or one per level)."""
    cols = {}
    for col, (label, kind) in columns.items():
        vals = [col(r) for _, r in df.iterrows()] if callable(col) else list(df[col])
        cols[label] = [_cell(v, kind) for v in vals]
    idx = df.index
    if index is not None:
        if isinstance(idx, pd.MultiIndex):
            fs = index if isinstance(index, (list, tuple)) else [index] * idx.nlevels
            idx = pd.MultiIndex.from_tuples([tuple(f(x) if f else x for f, x in zip(fs, t)) for t in idx])
        else:
            idx = pd.Index([index(x) for x in idx])
    out = pd.DataFrame(cols, index=idx)
    if index_name is not None:
        if isinstance(out.index, pd.MultiIndex):
            out.index.names = list(index_name)
        else:
            out.index.name = index_name
    return out


def _speed(v) -> str:
    return f"{float(v):g}×"


def _three(prefix: str):
    return lambda r: " / ".join(f"{int(r[f'{prefix}_{p}']):,}" for p in POLICIES)


_ORDER = ("ordering (most rejected first)", "text")
_REJ3 = "rejected: baseline / early / predicted"
_GOOD3 = "within both SLOs: baseline / early / predicted"


def comparison_view(comp: pd.DataFrame, paper: bool = True) -> pd.DataFrame:
    """:func:`overload_comparison` for people: counts, wasted prefill (s), load correlation; the paper's
    rejected counts (Table 3) when ``paper``."""
    cols = {"completed": ("completed", "int"), "rejected": ("rejected", "int"),
            "rejected_at_arrival": ("rejected at arrival", "int"),
            "rejected_after_prefill": ("rejected after prefill", "int"),
            "rejected_too_large": ("too large", "int"), "wasted_prefill_s": ("wasted prefill (s)", "s"),
            "goodput": ("within both SLOs", "int"), "load_corr": ("load correlation r", "+.2f")}
    if paper:
        cols["paper_rejected"] = ("Table 3: rejected", "int")
    return readable(comp, cols, index_name="policy")


def key_view(comp: pd.DataFrame, paper: bool = True) -> pd.DataFrame:
    """The columns of :func:`comparison_view` the argument needs: rejected (and after prefill), within both
    SLOs, and the paper's rejected counts when ``paper``."""
    cols = {"rejected": ("rejected", "int"), "rejected_after_prefill": ("of them after prefill", "int"),
            "goodput": ("served within both SLOs", "int")}
    if paper:
        cols["paper_rejected"] = ("paper, Table 3: rejected", "int")
    return readable(comp, cols, index_name="policy")


def boxed(table: pd.DataFrame, summary: str):
    """``table`` (a view for people) inside a collapsed ``<details>`` box headed ``summary`` (an HTML output:
    the table one click away, as the lecture's boxes)."""
    from html import escape
    from IPython.display import HTML

    return HTML(f"<details><summary>{escape(summary)}</summary>\n\n{table.to_html()}\n\n</details>")


def regime_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`regime_table` for people (loads under the baseline)."""
    return readable(table, {"preset": ("preset", "text"), "decode_kv_tokens": ("decode KV per node (tokens)", "int"),
                            _three("rejected"): (_REJ3, "text"), "prefill_load_mean": ("mean prefill load", "load"),
                            "decode_load_mean": ("mean decode load", "load"),
                            "wasted_prefill_s": ("baseline's wasted prefill (s)", "s"), "ordering": _ORDER},
                    index_name="regime")


def td_view(tds: pd.DataFrame) -> pd.DataFrame:
    """:func:`td_sweep` for people: one row per t_d (s), the derived one marked."""
    derived = dict(zip(tds.index, tds.derived))
    return readable(tds, {"rejected_predicted": ("predicted: rejected", "int"),
                          "rejected_early": ("early: rejected", "int"),
                          "goodput_predicted": ("predicted: within both SLOs", "int"),
                          "goodput_early": ("early: within both SLOs", "int")},
                    index=lambda t: f"{t:.1f} (derived)" if derived[t] else f"{t:g}", index_name="t_d (s)")


def sweep_view(sweep: pd.DataFrame) -> pd.DataFrame:
    """:func:`speed_sweep`'s rejected counts per speed and policy, for people, with the ordering."""
    piv = sweep.pivot(index="speed", columns="policy", values="rejected").sort_index()
    return readable(piv, {**{p: (f"{p}: rejected", "int") for p in POLICIES if p in piv},
                          (lambda r: rejection_ordering(r[[p for p in POLICIES if p in r.index]])): _ORDER},
                    index=_speed, index_name="replay speed")


def size_view(comp: pd.DataFrame) -> pd.DataFrame:
    """Who is rejected and what is served, per policy (:func:`overload_comparison`), for people."""
    return readable(comp, {"completed": ("completed", "int"),
                           "rejected_kv_mean": ("mean size of a rejected request (k tokens)", "k"),
                           "completed_kv_tokens": ("KV of the completed (M tokens)", "M"),
                           "completed_output_tokens": ("output of the completed (M tokens)", "M"),
                           "decode_kv_fraction_mean": ("decode KV in use (mean)", "pct")}, index_name="policy")


def _rejected_view(table: pd.DataFrame, extra: dict, index, index_name) -> pd.DataFrame:
    return readable(table, {_three("rejected"): (_REJ3, "text"),
                            "after_prefill_baseline": ("baseline: after prefill", "int"),
                            "prefill_load_mean": ("mean prefill load", "load"),
                            "decode_load_mean": ("mean decode load", "load"), **extra, "ordering": _ORDER},
                    index=index, index_name=index_name)


def semantics_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`semantics_table` for people (loads under the baseline)."""
    return _rejected_view(table, {}, None, ("trace", "decode semantics"))


def split_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`split_table` for people."""
    return _rejected_view(table, {_three("goodput"): (_GOOD3, "text")}, [None, _speed], ("split", "replay speed"))


def isolation_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`isolation_table` for people."""
    return readable(table, {_three("rejected"): (_REJ3, "text"),
                            "after_prefill_baseline": ("baseline: after prefill", "int"),
                            "preemptions_early": ("decode preemptions, early", "int"),
                            _three("goodput"): (_GOOD3, "text"), "ordering": _ORDER},
                    index=[None, _speed], index_name=("decode side", "replay speed"))



# ---------------------------------------------------------------------------- KV capacity
def real_kv_capacity_tokens(preset: str = "modern") -> float:
    """KV tokens one decode node really holds (LLaMA2-70B on 8×A800: (HBM × 0.9 − weights) / 320 KiB),
    from the cost model (what ``decode_kv_capacity_tokens=None`` uses)."""
    return float(sim.ClusterConfig(preset=preset).resolve().decode_kv_capacity)


def requests_per_node(capacity_tokens: float, trace: Trace | str = "toolagent-like") -> float:
    """How many requests of the trace's mean size (input + output tokens) fit one decode node's KV."""
    tr = _trace(trace)
    if not (isinstance(capacity_tokens, (int, float)) and np.isfinite(capacity_tokens) and capacity_tokens > 0):
        raise ValueError(f"capacity_tokens must be a positive number of tokens, got {capacity_tokens!r}")
    return float(capacity_tokens) / float(np.mean(tr.input_len + tr.output_len))


# ---------------------------------------------------------------------------------- reproduce
@metric_group("overload")
def _metrics() -> list[Metric]:
    df = overload_comparison()
    src = (f"{_TABLE3}; ours: toolagent-like synthetic trace (23,608 requests) at {DEFAULT_SPEED}×, "
           f"8P+8D, preset 'modern', decode KV 40k tokens/node (a decode-bound overload), the lecture's decode semantics "
           f"(LECTURE_SEMANTICS, not the paper's: {', '.join(f'{k}={v!r}' for k, v in LECTURE_SEMANTICS.items())}), "
           "t_d derived (decode_time_estimate)")
    out = [Metric(f"overload.rejected.{p}", float(df.loc[p, "rejected"]), "requests", PAPER_TABLE3_REJECTED[p], src)
           for p in POLICIES]
    out += [Metric(f"overload.completed.{p}", float(df.loc[p, "completed"]), "requests", None, src)
            for p in POLICIES]
    out += [Metric(f"overload.wasted_prefill_s.{p}", float(df.loc[p, "wasted_prefill_s"]), "s", None, src)
            for p in POLICIES]
    out += [Metric(f"overload.load_corr.{p}", float(df.loc[p, "load_corr"]), "Pearson r", None,
                   src + "; arXiv Fig. 9–10 show anti-phase prefill/decode load under early rejection")
            for p in ("early", "predicted")]
    paper_df = overload_comparison(**semantics_config("paper"))
    rej = paper_df["rejected"]
    if int(rej.sum()) == 0:
        found = "the decode pool never binds there and no policy rejects a request: nothing is overloaded"
    elif int(paper_df["rejected_after_prefill"].sum()) == 0 and rej.nunique() == 1:
        found = ("the decode pool never binds there (none rejected after prefill), so every policy rejects the same "
                 "requests, at arrival on their predicted TTFT")
    else:
        found = f"ordering {rejection_ordering(rej)}"
    psrc = (f"{_TABLE3}; ours: toolagent-like synthetic trace at {DEFAULT_SPEED}×, 8P+8D, preset 'modern', the "
            f"paper's decode semantics (PAPER_DECODE: {', '.join(f'{k}={v!r}' for k, v in PAPER_DECODE.items())}); "
            + found)
    out += [Metric(f"overload.paper_decode.rejected.{p}", float(paper_df.loc[p, "rejected"]), "requests",
                   PAPER_TABLE3_REJECTED[p], psrc) for p in POLICIES]
    return out


@figure_group("overload")
def _figures() -> dict:
    from ..plots import overload as plots

    return {
        "l07_policy_results": plots.policy_results(overload_comparison(), PAPER_TABLE3_REJECTED),
        "l07_load_over_time": plots.load_over_time({p: load_timeseries(policy=p) for p in ("early", "predicted")}),
        "l07_speed_sweep": plots.rejection_sweep(speed_sweep(progress=False), DEFAULT_SPEED),
    }
