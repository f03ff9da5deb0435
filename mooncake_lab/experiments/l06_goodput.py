"""Lecture 06: decode, SLOs and goodput — continuous batching, prefill interference, effective capacity.

Set-up (the same for every experiment here): the released **conversation** trace (or its labelled
synthetic stand-in), 16 nodes of 8×A800 serving LLaMA2-70B, cost-model preset ``modern``:
``calibrated`` is fitted on ≤ 8k-token prompts of a 2023 stack whose prefill attention ran at 4–7%
of peak; on this trace (mean prompt 12k, p99 85k) it makes every long prefill — and every chunk
deep into a long prompt (0.47 s for 512 tokens after 30k) — so slow that *no* engine could meet a
100 ms TBT with chunking, for a reason that has nothing to do with the architecture.

Systems: **mooncake** = ``n_prefill`` P + (16 − ``n_prefill``) D (kvcentric); **coupled** = 16 vLLM-like
nodes without chunked prefill; **coupled_chunked** = the same with 512-token chunks (early vLLM's; vLLM V1's
budgets of 2,048 and 8,192 tokens a step: :data:`CHUNK_BUDGETS`, :func:`chunk_budget_capacity`). SLOs (FAST'25):
TTFT ≤ 30 s and TBT ≤ 100 / 200 / 300 ms, TBT = mean of a request's longest 10% token intervals.
**Attainment** = share of all requests that complete within both SLOs.

Two capacity metrics, not to be confused:

* FAST'25's **effective request capacity** (§5.1; its Fig. 1 "Request Capacity Ratio (%)"): the
  attainment at the trace's *own* load, per TBT threshold — :func:`request_capacity_ratio`, with the
  paper's baselines (vLLM plain, + prefix caching, + chunked prefill: :data:`BASELINES`).
* the course's **90 % capacity**: the highest request rate (req/s) at which attainment ≥ 90% —
  :func:`effective_capacity` (the function keeps its old name): attainment on a grid of replay speeds,
  the crossing of 90% interpolated linearly between grid points; at the top of the grid it is a lower bound.

The best P:D split (:func:`pd_sweep`) is measured again with one assumption changed at a time
(:data:`PD_ASSUMPTIONS`, :func:`pd_assumptions`): the TBT SLO, the sweep's top, the cost preset, the
earlier semantics, longer answers — to say which one decides it (:func:`describe_pd_assumptions`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dataclasses import fields, replace

from .. import paper as _paper
from .. import sim
from ..traces import REPLAY_SPEEDS, Trace
from ..validate import fail, integer, items, real
from ..reproduce import Metric, figure_group, metric_group
from .common import as_trace as _trace, simulate_all, simulate_at_speed

__all__ = ["DEMO_SPEED", "N_NODES", "PRESET", "SYSTEMS", "TBT_SLOS_MS", "FIG1_THRESHOLDS_MS", "TTFT_SLO_S", "TARGET", "SPEEDS", "SPLITS",
           "config_for", "run", "trace_rate", "attainment", "attainment_curve", "precompute_attainment",
           "effective_capacity",
           "capacity_table", "pd_sweep", "batching_timeseries", "batching_peaks", "tbt_vs_batch", "PAPER",
           "BASELINES", "request_capacity_ratio", "describe_ratio", "chunk_cost_table", "chunked_by_preset",
           "describe_capacity", "describe_pd_sweep", "paper_box", "FIG1_CLUSTERS", "fig1_paper_points", "best_split",
           "SEMANTICS_CONTROLS", "semantics_control", "describe_semantics", "scaled_answers", "MAX_OUTPUT_SCALE",
           "PD_ASSUMPTIONS", "pd_assumptions", "describe_pd_assumptions", "SYSTEM_LABELS", "CLUSTER_LABELS",
           "attainment_table", "chunk_cost_display", "chunked_by_preset_display", "ratio_display", "semantics_display",
           "capacity_display", "pd_display", "CHUNK_BUDGETS", "chunk_budget_capacity", "budget_label",
           "SHIFT_FACTOR", "SWITCH_RATIO", "SLOW_RELOAD_S", "shifted_trace", "role_clusters", "role_switching",
           "role_switching_display", "describe_role_switching"]

N_NODES = 16          # FAST'25 compares clusters of equal node count; arXiv: 10P+10D vs 20 vLLM
PRESET = "modern"     # see the module docstring
TTFT_SLO_S = 30.0     # FAST'25 / arXiv v3 §8: TTFT SLO 30 s
TBT_SLOS_MS = (100, 200, 300)  # FAST'25: TBT SLOs 100 / 200 / 300 ms
#: TBT thresholds (ms) of the Fig. 1-shaped curve (FAST'25 Fig. 1 plots the share against the threshold).
FIG1_THRESHOLDS_MS = (50, 75, 100, 150, 200, 300, 400, 500)
DEMO_SPEED = 2.0      # replay speed of sections 3–4 (the paper's overload runs use 2× too)
TARGET = 0.9          # share of requests that must meet both SLOs (our definition of "effective")
SYSTEMS = ("mooncake", "coupled", "coupled_chunked")
#: Replay speeds of the capacity sweep (× the trace's own arrival rate, 3.40 req/s for conversation).
SPEEDS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
#: Prefill nodes of the P:D sweep (the rest of the 16 decode).
SPLITS = (2, 4, 6, 8, 10, 12, 14)
#: Paper anchors (:mod:`mooncake_lab.paper`). NB the +59% … +498% are gains in FAST'25's request
#: capacity ratio (a share at the trace's own load), not in our 90 % capacity (a rate).
PAPER = {"capacity_gain_min": _paper.FIG1_GAIN[300], "capacity_gain_max": _paper.FIG1_GAIN[100],
         "vllm_tbt_share": (_paper.VLLM_TBT_SLO_MET_PCT / 100),
         "best_pd_ratio": _paper.BEST_PD_RATIO[0] / _paper.BEST_PD_RATIO[1]}
#: FAST'25's baselines (Figs 1, 6, 7: vLLM v0.5.1 plain, with prefix caching, with chunked prefill) and
#: ours, in this simulator: name → (system of :data:`SYSTEMS`, ClusterConfig overrides). "vLLM" = the
#: coupled engine; no prefix caching = ``cache_capacity_blocks=0``. The course's ``coupled`` /
#: ``coupled_chunked`` keep a per-node prefix cache.
BASELINES = {
    "mooncake": ("mooncake", {}),
    "vllm": ("coupled", {"cache_capacity_blocks": 0}),
    "vllm + prefix caching": ("coupled", {}),
    "vllm + chunked prefill": ("coupled_chunked", {"cache_capacity_blocks": 0}),
    "vllm + chunked + prefix caching": ("coupled_chunked", {}),
}

def config_for(system: str, n_prefill: int = 8, n_nodes: int = N_NODES, **overrides) -> sim.ClusterConfig:
    """The :class:`ClusterConfig` of ``system`` (one of :data:`SYSTEMS`) on ``n_nodes`` nodes."""
    if system not in SYSTEMS:
        raise ValueError(f"system: got {system!r}; allowed: {', '.join(SYSTEMS)}")
    if not (isinstance(n_prefill, (int, np.integer)) and 1 <= n_prefill < n_nodes):
        raise ValueError(f"n_prefill: got {n_prefill!r}; allowed: an integer in [1, {n_nodes - 1}]")
    base = dict(preset=PRESET, ttft_slo_s=TTFT_SLO_S)
    if system == "mooncake":
        base.update(n_prefill=int(n_prefill), n_decode=int(n_nodes - n_prefill))
    else:
        base.update(engine_mode="coupled", n_coupled=int(n_nodes), chunked_prefill=system == "coupled_chunked")
    base.update(overrides)
    return sim.ClusterConfig(**base)

def run(system: str = "mooncake", speed: float = 1.0, trace="conversation", n_prefill: int = 8,
        **overrides) -> sim.SimResult:
    """One memoised simulation of ``trace`` replayed at ``speed`` on ``system``."""
    return simulate_at_speed(trace, speed, config_for(system, n_prefill, **overrides))

def trace_rate(trace="conversation") -> float:
    """Mean arrival rate of ``trace`` at 1× (requests / s over its arrival span)."""
    tr = _trace(trace)
    span = float(tr.arrival_s.max() - tr.arrival_s.min())
    return len(tr) / span if span > 0 else float("nan")

def attainment(res: sim.SimResult, tbt_slo_ms: float, ttft_slo_s: float = TTFT_SLO_S, weight=None) -> float:
    """Share of all requests that completed with TTFT ≤ ``ttft_slo_s`` and TBT tail ≤ ``tbt_slo_ms``;
    with ``weight`` (one number per request, e.g. ``trace.input_len``): the share of the total weight."""
    a, tr = res.arrays, res.trace
    done = a["outcome"] == sim.COMPLETED
    ttft = a["prefill_end"] - tr.arrival_s
    tail = np.where(np.isnan(a["tbt_tail"]), 0.0, a["tbt_tail"])  # one output token: no interval
    ok = done & (ttft <= ttft_slo_s) & (tail <= tbt_slo_ms / 1e3)
    if weight is not None:
        w = np.asarray(weight, dtype=np.float64)
        return float(w[ok].sum() / w.sum()) if w.sum() > 0 else float("nan")
    return float(ok.mean()) if len(ok) else float("nan")

def attainment_curve(systems=SYSTEMS, speeds=SPEEDS, tbt_slos_ms=TBT_SLOS_MS, trace="conversation",
                     n_prefill: int = 8, progress: bool = True, **overrides) -> pd.DataFrame:
    """Tidy table: system, speed, rate_rps, tbt_slo_ms, attainment, ttft_ok, tbt_ok (one run per system × speed;
    ``overrides``: ClusterConfig fields passed to :func:`config_for`)."""
    from tqdm.auto import tqdm

    tr = _trace(trace)
    rate = trace_rate(tr)
    rows = []
    for s in tqdm(systems, desc="capacity sweep", disable=not progress, leave=False):
        p = n_prefill if s == "mooncake" else 0
        precompute_attainment((s,), (p,), speeds, tr, **overrides)
        for v in speeds:
            for x in tbt_slos_ms:
                rows.append(dict(system=s, n_prefill=p, speed=v, rate_rps=rate * v, tbt_slo_ms=x,
                                 **_slo_shares(tr, s, v, p, x, **overrides)))
    return pd.DataFrame(rows)

#: (id(trace), system, n_prefill, speed, config overrides, TBT SLO) → (trace, shares): a few numbers per run
_SHARES: dict = {}

def _slo_shares(tr, system: str, speed: float, n_prefill: int, tbt_slo_ms: float, res=None, **overrides) -> dict:
    """attainment, ttft_ok, tbt_ok of one run (``n_prefill`` 0 for the coupled systems; ``overrides``: of
    :func:`config_for`), memoised for the process: a dashboard revisiting a P:D split costs no run even
    after the run memo dropped it."""
    key = (id(tr), system, int(n_prefill), float(speed), tuple(sorted(overrides.items())), float(tbt_slo_ms))
    hit = _SHARES.get(key)
    if hit is None or hit[0] is not tr:
        if res is None:
            res = run(system, speed, tr, max(int(n_prefill), 1), **overrides)
        for x in {float(tbt_slo_ms), *map(float, TBT_SLOS_MS)}:  # every SLO of the lecture from one run
            _SHARES[key[:5] + (x,)] = (tr, dict(attainment=attainment(res, x),
                                                ttft_ok=attainment(res, np.inf),
                                                tbt_ok=attainment(res, x, ttft_slo_s=np.inf)))
        hit = _SHARES[key]
    return hit[1]

def precompute_attainment(systems=SYSTEMS, splits=(8,), speeds=SPEEDS, trace="conversation", **overrides) -> None:
    """Memoise the attainment of every (system, P:D split, speed) not memoised yet, the runs in
    parallel threads (:func:`~mooncake_lab.experiments.common.simulate_all`), 16 at a time.
    ``splits`` apply to mooncake (the coupled systems use all nodes); ``overrides``: of :func:`config_for`."""
    tr = _trace(trace)
    jobs = dict.fromkeys((s, p if s == "mooncake" else 0, float(v)) for s in systems for p in splits for v in speeds)
    x, ov = float(TBT_SLOS_MS[0]), tuple(sorted(overrides.items()))
    todo = [j for j in jobs if (_SHARES.get((id(tr), *j, ov, x)) or (None,))[0] is not tr]
    for k in range(0, len(todo), 16):  # 16 runs ≪ the run memo's 64: none is dropped before it is used
        chunk = todo[k:k + 16]
        runs = simulate_all([(tr, v, config_for(s, max(p, 1), **overrides)) for s, p, v in chunk])
        for (s, p, v), res in zip(chunk, runs):
            _slo_shares(tr, s, v, p, x, res=res, **overrides)

def effective_capacity(curve: pd.DataFrame, target: float = TARGET) -> float:
    """Highest rate (req/s) with attainment ≥ ``target`` on one system's curve (rows sorted by rate),
    the 90% crossing interpolated linearly between the last grid point above and the next below.
    0 if even the lowest rate misses; the top rate if none misses (a lower bound)."""
    c = curve.sort_values("rate_rps")
    r, y = c.rate_rps.to_numpy(), c.attainment.to_numpy()
    if len(r) == 0 or y[0] < target:
        return 0.0
    below = np.flatnonzero(y < target)
    if len(below) == 0:
        return float(r[-1])
    k = below[0]
    return float(r[k - 1] + (y[k - 1] - target) / (y[k - 1] - y[k]) * (r[k] - r[k - 1]))

def capacity_table(curve: pd.DataFrame | None = None) -> pd.DataFrame:
    """Effective capacity (req/s) per system × TBT SLO, and each system's ratio to mooncake."""
    curve = attainment_curve() if curve is None else curve
    rows = []
    for (s, x), g in curve.groupby(["system", "tbt_slo_ms"], sort=False):
        rows.append(dict(system=s, tbt_slo_ms=x, effective_capacity_rps=effective_capacity(g)))
    t = pd.DataFrame(rows).pivot(index="system", columns="tbt_slo_ms", values="effective_capacity_rps")
    return t.reindex([s for s in SYSTEMS if s in t.index])

#: Token budgets per step of the chunked coupled engine (tokens; ``ClusterConfig.prefill_chunk``): early
#: vLLM's 512 (the simulator's default, the lecture's ``coupled_chunked``), then vLLM V1's server defaults by
#: GPU, 2,048 and 8,192 (:data:`mooncake_lab.paper.VLLM_V1_BATCHED_TOKENS`).
CHUNK_BUDGETS = (sim.ClusterConfig().prefill_chunk, _paper.VLLM_V1_BATCHED_TOKENS["other"],
                 _paper.VLLM_V1_BATCHED_TOKENS["70GB+"])


def chunk_budget_capacity(budgets=CHUNK_BUDGETS, speeds=SPEEDS, tbt_slos_ms=TBT_SLOS_MS, trace="conversation",
                          progress: bool = False) -> pd.DataFrame:
    """90 % capacity (req/s) of coupled + chunked prefill at each token budget per step (``prefill_chunk``,
    tokens): one row per budget, one column per TBT SLO (ms). The default budget's row is
    :func:`capacity_table`'s ``coupled_chunked`` (the same runs); all runs memoised like
    :func:`attainment_curve`'s, so the table costs the new budgets' sweeps once per process."""
    from ..sim.config import MAX_CHUNK_TOKENS
    from tqdm.auto import tqdm

    w = "chunk_budget_capacity"
    budgets = tuple(integer(k, f"budgets[{i}]", lo=1, hi=MAX_CHUNK_TOKENS, where=w)
                    for i, k in enumerate(items(budgets, "budgets", where=w)))
    tr = _trace(trace)
    default = sim.ClusterConfig().prefill_chunk
    rows = {}
    for k in tqdm(budgets, desc="chunk budgets", disable=not progress, leave=False):
        kw = {} if k == default else {"prefill_chunk": k}  # the default's runs are the lecture's own
        cur = attainment_curve(("coupled_chunked",), speeds, tbt_slos_ms, tr, progress=False, **kw)
        rows[k] = capacity_table(cur).loc["coupled_chunked"]
    out = pd.DataFrame(rows).T
    out.index.name, out.columns.name = "prefill_chunk", "tbt_slo_ms"
    return out


def budget_label(budget: int) -> str:
    """How the lecture's tables name coupled + chunked prefill at a token budget: "…, 2,048 tokens a step"."""
    return f"{SYSTEM_LABELS['coupled_chunked']}, {int(budget):,} tokens a step"


def request_capacity_ratio(speed: float = 1.0, tbt_slos_ms=TBT_SLOS_MS, trace="conversation",
                           baselines=None) -> pd.DataFrame:
    """FAST'25's metric: % of requests meeting both SLOs (TTFT ≤ 30 s, TBT ≤ each threshold) with the
    trace replayed at ``speed`` × its own rate (1 = the paper's setting), one row per cluster of
    :data:`BASELINES` (16 nodes each), one column per TBT threshold (ms)."""
    tr = _trace(trace)
    baselines = BASELINES if baselines is None else baselines
    runs = simulate_all([(tr, speed, config_for(s, **kw)) for s, kw in baselines.values()])
    t = pd.DataFrame([[100.0 * attainment(r, x) for x in tbt_slos_ms] for r in runs],
                     index=pd.Index(list(baselines), name="cluster"), columns=pd.Index(list(tbt_slos_ms), name="tbt_slo_ms"))
    return t

def describe_ratio(ratio: pd.DataFrame, name: str) -> str:
    """Markdown: Mooncake's gain in request capacity ratio over vLLM-like plain per TBT threshold, beside
    FAST'25's (computed): two short sentences at 100 ms, the other thresholds in a collapsible box."""
    ours = ", ".join(f"{x:g} ms: {ratio.loc['mooncake', x]:.1f}% vs {ratio.loc['vllm', x]:.1f}% "
                     f"({_gain(ratio.loc['mooncake', x], ratio.loc['vllm', x])})" for x in ratio.columns)
    paper = ", ".join(f"{x:g} ms: +{100 * g:.0f}%" for x, g in _paper.FIG1_GAIN.items())
    worst = ratio[100].drop("mooncake").idxmin() if 100 in ratio.columns else None
    x0 = 100 if 100 in ratio.columns else ratio.columns[0]
    m, v = ratio.loc["mooncake", x0], ratio.loc["vllm", x0]
    out = (f"On `{name}` at its own load, with TBT ≤ {x0:g} ms: Mooncake {m:.1f}%, vLLM-like {v:.1f}% ({_gain(m, v)}). "
           f"FAST'25 reports +{100 * _paper.FIG1_GAIN[100]:.0f}% "
           f"(≈ {_paper.FIG1_AT_100MS_PERCENT['mooncake']:.0f}% vs ≈ {_paper.FIG1_AT_100MS_PERCENT['vllm']:.0f}%)."
           "\n\n<details><summary>Every threshold, and the worst baseline</summary>\n\n"
           f"Ours, Mooncake vs vLLM-like (no prefix cache, no chunking): {ours}. FAST'25 (vLLM v0.5.1): {paper}; "
           f"chunked prefill was its worst variant at 100 ms (≈ {_paper.FIG1_AT_100MS_PERCENT['vllm_chunked']:.0f}%).")
    if worst is not None:
        out += f" Here the worst baseline at 100 ms is **{CLUSTER_LABELS.get(worst, worst)}**."
    return out + "\n\n</details>"

def _gain(a: float, b: float) -> str:
    return "unbounded" if b <= 0 else f"{100 * (a / b - 1):+.0f}%".replace("-", "−")

def chunk_cost_table(depths=(0, 12_000, 30_000, 85_000), chunk: int | None = None,
                     presets=("modern", "calibrated")) -> pd.DataFrame:
    """Time (ms) of one chunked-prefill chunk (``chunk`` prompt tokens, default the engine's 512)
    after ``depth`` tokens of the same prompt already in KV, per cost-model preset: what bounds a
    coupled + chunked engine's token interval (plus one decode step)."""
    from ..roofline import prefill_time

    k = sim.ClusterConfig().prefill_chunk if chunk is None else int(chunk)
    return pd.DataFrame({p: [1e3 * prefill_time("llama2-70b", "a800x8", k, d, preset=p) for d in depths]
                         for p in presets}, index=pd.Index(list(depths), name="tokens_already_in_kv"))

def chunked_by_preset(speed: float = 1.0, trace="conversation", presets=("modern", "calibrated"),
                      tbt_slo_ms: float = 100) -> pd.DataFrame:
    """% of requests meeting the TBT SLO (``tbt_slo_ms``; TTFT not counted) at ``speed`` for Mooncake and
    vLLM-like + chunked prefill (no prefix cache), per cost-model preset: how much of chunked
    prefill's good TBT is the cost model."""
    tr = _trace(trace)
    names = ("mooncake", "vllm + chunked prefill")
    jobs = [(tr, speed, config_for(BASELINES[n][0], preset=p, **BASELINES[n][1])) for p in presets for n in names]
    runs = iter(simulate_all(jobs))
    return pd.DataFrame({p: {n: 100.0 * attainment(next(runs), tbt_slo_ms, ttft_slo_s=np.inf) for n in names}
                         for p in presets})

def describe_capacity(cap: pd.DataFrame, name: str, tbt_slo_ms: float = 100) -> str:
    """Markdown: the 90 % capacities of the three systems at ``tbt_slo_ms`` and their ratios (computed)."""
    m, c, cc = (cap.loc[s, tbt_slo_ms] for s in SYSTEMS)
    return (f"On `{name}` at TBT ≤ {tbt_slo_ms:g} ms, Mooncake 8P+8D reaches {m:.2f} req/s: {_gain(m, c)} over "
            f"coupled ({c:.2f} req/s) and {_gain(m, cc)} against coupled + chunked ({cc:.2f} req/s).")

def describe_pd_sweep(pdr: pd.DataFrame, name: str) -> str:
    """Markdown: the best P:D split of a :func:`pd_sweep`, with "≥" when it sits at the top of the sweep."""
    best = best_split(pdr)
    lb = bool(best.lower_bound)
    return (f"On `{name}` the best split is **{int(best.n_prefill)}P:{int(best.n_decode)}D**: a 90 % capacity of "
            f"{'≥ ' if lb else ''}{best.effective_capacity_rps:.2f} req/s."
            + (" That is the top of the replay-speed sweep, so only a lower bound." if lb else ""))

#: Largest ``output_scale`` of :func:`pd_sweep` / :func:`scaled_answers`: 16 × the conversation trace's longest
#: answer (2,000 tokens) = 32k tokens, 16 × its mean (343) = 5.5k — far past any answer in the released traces.
MAX_OUTPUT_SCALE = 16.0
#: ClusterConfig fields :func:`config_for` sets itself (the system and its split): not overrides.
_SET_BY_CONFIG_FOR = ("n_prefill", "n_decode", "engine_mode", "n_coupled", "chunked_prefill")
_SCALED: dict = {}  # (id(trace), factor) → (trace, scaled trace): one object per variant, for the memos


def scaled_answers(trace="conversation", factor: float = 1.0) -> Trace:
    """``trace`` with every output length × ``factor`` (rounded, at least 1 token where it had one), the
    prompts, prefixes and arrivals unchanged; ``factor`` 1 = ``trace`` itself. The same object for the
    same (trace, factor), so the run memos find its runs."""
    f = real(factor, "output_scale", lo=0, hi=MAX_OUTPUT_SCALE, lo_open=True, where="scaled_answers")
    tr = _trace(trace)
    if f == 1:
        return tr
    hit = _SCALED.get((id(tr), f))
    if hit is None or hit[0] is not tr:
        out = np.where(tr.output_len > 0, np.maximum(1, np.rint(tr.output_len * f)), 0).astype(np.int64)
        hit = _SCALED[(id(tr), f)] = (tr, replace(tr, output_len=out, name=f"{tr.name} (answers ×{f:g})",
                                                  source=f"{tr.source}; output lengths × {f:g}"))
        while len(_SCALED) > 8:
            _SCALED.pop(next(iter(_SCALED)))
    return hit[1]


def _config_overrides(overrides: dict, where: str) -> dict:
    """``overrides`` if each names a ClusterConfig field :func:`config_for` does not set and the
    values make a valid config (its own checks name the field); else an InputError naming it."""
    allowed = [f.name for f in fields(sim.ClusterConfig) if f.name not in _SET_BY_CONFIG_FOR]
    for k, v in overrides.items():
        if k not in allowed:
            raise fail(k, v, "a keyword of pd_sweep or a ClusterConfig field: " + ", ".join(allowed), where)
    config_for("mooncake", **overrides)
    return overrides


def pd_sweep(splits=SPLITS, speeds=SPEEDS, tbt_slo_ms: float = 100, trace="conversation",
             progress: bool = True, *, output_scale: float = 1.0, **overrides) -> pd.DataFrame:
    """90 % capacity of Mooncake for each P:D split of the 16 nodes (one row per split); ``lower_bound``:
    attainment stayed ≥ 90% up to the top of ``speeds``, so the capacity is at least the top rate.

    The assumptions it measures under: ``speeds`` (replay speeds ×), ``tbt_slo_ms`` (the TBT SLO, ms),
    ``trace``, ``output_scale`` (every answer × this: :func:`scaled_answers`) and ``overrides``
    (ClusterConfig fields, e.g. ``preset="calibrated"`` or ``**sim.SIMPLE_SEMANTICS``)."""
    from tqdm.auto import tqdm

    w = "pd_sweep"
    splits = tuple(integer(p, f"splits[{i}]", lo=1, hi=N_NODES - 1, where=w)
                   for i, p in enumerate(items(splits, "splits", where=w)))
    speeds = tuple(real(v, f"speeds[{i}]", lo=REPLAY_SPEEDS[0], hi=REPLAY_SPEEDS[1], where=w)
                   for i, v in enumerate(items(speeds, "speeds", where=w)))
    tbt_slo_ms = real(tbt_slo_ms, "tbt_slo_ms", lo=0, lo_open=True, where=w)
    tr = scaled_answers(trace, real(output_scale, "output_scale", lo=0, hi=MAX_OUTPUT_SCALE, lo_open=True, where=w))
    overrides = _config_overrides(overrides, w)
    precompute_attainment(("mooncake",), splits, speeds, tr, **overrides)  # every split's runs in parallel
    rows = []
    for p in tqdm(splits, desc="P:D sweep", disable=not progress, leave=False):
        cur = attainment_curve(("mooncake",), speeds, (tbt_slo_ms,), tr, n_prefill=p, progress=False, **overrides)
        rows.append(dict(n_prefill=p, n_decode=N_NODES - p, ratio=p / (N_NODES - p),
                         effective_capacity_rps=effective_capacity(cur),
                         lower_bound=bool((cur.attainment >= TARGET).all())))
    return pd.DataFrame(rows)


#: The variants of :data:`PD_ASSUMPTIONS`: a faster sweep's speeds, a looser TBT SLO, longer answers (×).
PD_FAST_SPEEDS, PD_LOOSE_TBT_MS, PD_LONGER_ANSWERS = SPEEDS + (5.0, 6.0, 8.0), TBT_SLOS_MS[-1], 4.0
#: The candidates for what decides the best P:D split, one changed at a time from the lecture's set-up
#: (name → :func:`pd_sweep` keywords); the first is the lecture's own. Measured by :func:`pd_assumptions`.
PD_ASSUMPTIONS = {
    "the lecture's": {},
    f"TBT ≤ {PD_LOOSE_TBT_MS:g} ms": {"tbt_slo_ms": PD_LOOSE_TBT_MS},
    f"replay up to {max(PD_FAST_SPEEDS):g}×": {"speeds": PD_FAST_SPEEDS},
    "preset calibrated": {"preset": "calibrated"},
    "earlier semantics": dict(sim.SIMPLE_SEMANTICS),
    f"answers {PD_LONGER_ANSWERS:g}× longer": {"output_scale": PD_LONGER_ANSWERS},
}
#: What each of :data:`PD_ASSUMPTIONS` changes, and what it would mean if it decided the split (in words,
#: for :func:`describe_pd_assumptions`).
_PD_MEANING = dict(zip(PD_ASSUMPTIONS, (
    (f"`modern`, TBT ≤ {TBT_SLOS_MS[0]:g} ms, replay up to {max(SPEEDS):g}×, the paper's semantics, the trace's answers", ""),
    ("a looser TBT SLO", "the TBT SLO"),
    ("a sweep whose top is no longer reached", "the top of the replay-speed sweep"),
    ("the `calibrated` cost model", "the cost preset"),
    ("decode chosen when the KV is ready, output lengths known, an uncontended network, DRAM ↔ HBM loads free "
     "(`sim.SIMPLE_SEMANTICS`)",
     "the decode semantics"),
    ("every answer longer, the prompts unchanged", "how much of a request's work is decode (its answer against its prompt)"),
)))


def pd_assumptions(trace="conversation", progress: bool = True) -> dict:
    """:func:`pd_sweep` under each of :data:`PD_ASSUMPTIONS` (name → its table), all memoised."""
    from tqdm.auto import tqdm

    return {name: pd_sweep(trace=trace, progress=False, **kw)
            for name, kw in tqdm(PD_ASSUMPTIONS.items(), desc="P:D assumptions", disable=not progress, leave=False)}


def _split(row) -> str:
    return f"{int(row.n_prefill)}P:{int(row.n_decode)}D"


def _pd_decides(pds: dict) -> tuple[list, str]:
    """The assumptions of a :func:`pd_assumptions` result whose best split is nearest the paper's 1:1 (and
    nearer than the lecture's), and a sentence saying so (computed)."""
    target = N_NODES * _paper.BEST_PD_RATIO[0] / sum(_paper.BEST_PD_RATIO)
    far = {k: abs(best_split(t).n_prefill - target) for k, t in pds.items()}
    first = next(iter(pds))
    near = min(far.values())
    names = [k for k, d in far.items() if d == near and d < far[first]]
    paper = f"{_paper.BEST_PD_RATIO[0]}:{_paper.BEST_PD_RATIO[1]}"
    if not names:
        return [], f"none of these assumptions moves the best split nearer the paper's {paper}"
    which = " and ".join(f"**{k}** ({_PD_MEANING[k][0] if k in _PD_MEANING else k})" for k in names)
    text = (f"only {which} {'reaches' if near == 0 else 'comes nearest to'} the paper's {paper} "
            f"({_split(best_split(pds[names[0]]))})")
    if len(names) < len(pds) - 1:
        text += "; every other stays further from it"
    if len(names) == 1 and _PD_MEANING.get(names[0], ("", ""))[1]:
        text += f": what decides the split here is {_PD_MEANING[names[0]][1]}"
    return names, text


def describe_pd_assumptions(pds: dict, name: str) -> str:
    """Markdown: which assumption of :func:`pd_assumptions` decides the best split, in one sentence, and the best
    split under each in a collapsible box (every number computed)."""
    first = next(iter(pds))
    base = best_split(pds[first])
    parts = []
    for k, t in pds.items():
        b = best_split(t)
        same = ", the same" if k != first and int(b.n_prefill) == int(base.n_prefill) else ""
        parts.append(f"{k}: **{_split(b)}**{same} ({'≥ ' if b.lower_bound else ''}{b.effective_capacity_rps:.2f} req/s)")
    names, why = _pd_decides(pds)
    paper = f"{_paper.BEST_PD_RATIO[0]}:{_paper.BEST_PD_RATIO[1]}"
    if names:
        near = best_split(pds[names[0]])
        hit = bool(near.n_prefill * _paper.BEST_PD_RATIO[1] == near.n_decode * _paper.BEST_PD_RATIO[0])
        plural = len(names) > 1
        verb = ("reach" if plural else "reaches") if hit else ("come nearest to" if plural else "comes nearest to")
        short = (f"On `{name}`, only " + " and ".join(f"**{k}**" for k in names)
                 + f" {verb} the paper's {paper} ({_split(near)}).")
    else:
        short = f"On `{name}`, none of these assumptions moves the best split nearer the paper's {paper}."
    return (short + "\n\n<details><summary>The best split under each assumption</summary>\n\n"
            + "Best split — " + "; ".join(parts) + ". Of these, " + why + ".\n\n</details>")


#: Controls of :func:`semantics_control`: Mooncake 8P+8D with one of the paper's semantics swapped for the
#: coupled engine's (which reserves prompt + output at admission and moves no KV between nodes).
SEMANTICS_CONTROLS = {"paper's semantics (default)": {}, "output lengths known": {"output_lengths": "known"},
                      "uncontended network": {"network_contention": False},
                      "both (the coupled engine's)": {"output_lengths": "known", "network_contention": False}}


def semantics_control(speed: float = 1.0, trace="conversation", tbt_slo_ms: float = 100) -> pd.DataFrame:
    """Mooncake 8P+8D under each of :data:`SEMANTICS_CONTROLS` at ``speed``: % of requests meeting both
    SLOs (TBT ≤ ``tbt_slo_ms``), decode preemptions (requests), mean KV-stream wait for links (ms)."""
    tr = _trace(trace)
    runs = simulate_all([(tr, speed, config_for("mooncake", **kw)) for kw in SEMANTICS_CONTROLS.values()])
    return pd.DataFrame([dict(attainment_pct=100.0 * attainment(r, tbt_slo_ms),
                              preemptions=int(r.arrays["preemptions"].sum()),
                              stream_wait_ms=1e3 * float(np.nan_to_num(r.arrays["stream_wait"]).mean()))
                         for r in runs], index=pd.Index(list(SEMANTICS_CONTROLS), name="mooncake 8P+8D"))


#: The traces the paper's hybrid is shown on: each with its own share of short prompts.
INLINE_TRACES = ("conversation", "synthetic", "toolagent-like")


def inline_max_prompt(tbt_slo_ms: float = 100, batch: int = 0, context: int = 0) -> int:
    """The longest prompt (tokens) the hybrid can inline on the lecture's nodes: a decode step that runs its
    prefill must keep the TBT SLO, ``cm_prefill_time(L, 0) + cm_decode_step_time(batch + 1, context + L + 1)
    ≤ tbt_slo_ms`` (:mod:`mooncake_lab.sim.reference` rule 2c; ``batch``, ``context``: the decode node's
    running requests and their KV tokens, an idle node by default). 0 if no prompt fits."""
    from ..roofline import cm_decode_step_time, cm_prefill_time

    slo = real(tbt_slo_ms, "tbt_slo_ms", lo=0.0, lo_open=True, where="inline_max_prompt") / 1e3
    batch = integer(batch, "batch", lo=0, where="inline_max_prompt")
    context = integer(context, "context", lo=0, where="inline_max_prompt")
    c = config_for("mooncake").resolve().cost

    def fits(n: int) -> bool:
        return float(cm_prefill_time(c, n, 0)) + float(cm_decode_step_time(c, batch + 1, context + n + 1)) <= slo

    lo, hi = 0, 1 << 20  # fits(lo) or lo == 0; not fits(hi): a 2**20-token prefill takes minutes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def inline_effect(traces=INLINE_TRACES, speed: float = DEMO_SPEED, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """Mooncake 8P+8D at ``speed`` without and with the paper's hybrid (``inline_prefill``: a prefill that fits
    one chunk and keeps the TBT SLO runs inside a decode batch, arXiv v3 §5), one row per trace: share of
    requests inlined (%), mean TTFT (s), mean TBT tail (ms) and requests meeting both SLOs (%, TBT ≤
    ``tbt_slo_ms``), each without (``_off``) and with (``_on``) it; and the misses, in requests: completed
    with TTFT > the TTFT SLO (``ttft_miss``), with a TBT tail > ``tbt_slo_ms`` (``tbt_miss``), and those TBT
    misses whose prompt is longer than :func:`inline_max_prompt` (``tbt_miss_long``: the hybrid can never
    take them), not completed (``unserved``: rejected as too large); ``requests``: the trace's size."""
    speed = real(speed, "speed", lo=0.0, lo_open=True, hi=100.0, where="inline_effect")
    longest = inline_max_prompt(tbt_slo_ms)
    rows = {}
    for name in items(traces, "traces", where="inline_effect"):
        tr = _trace(name)
        off, on = simulate_all([(tr, speed, config_for("mooncake", inline_prefill=x)) for x in (False, True)])
        row = {"inlined_pct": 100.0 * float(((on.arrays["prefill_inst"] < 0)
                                             & (on.arrays["outcome"] == sim.COMPLETED)).mean()),
               "requests": len(tr)}
        for key, r in (("off", off), ("on", on)):
            s = r.summary()
            a = r.arrays
            done = a["outcome"] == sim.COMPLETED
            tbt_miss = done & (np.nan_to_num(a["tbt_tail"]) > tbt_slo_ms / 1e3)
            row[f"ttft_mean_s_{key}"] = s["ttft_mean_s"]
            row[f"tbt_tail_ms_{key}"] = 1e3 * float(np.nanmean(a["tbt_tail"]))
            row[f"attainment_pct_{key}"] = 100.0 * attainment(r, tbt_slo_ms)
            row[f"ttft_miss_{key}"] = int((done & (a["prefill_end"] - tr.arrival_s > TTFT_SLO_S)).sum())
            row[f"tbt_miss_{key}"] = int(tbt_miss.sum())
            row[f"tbt_miss_long_{key}"] = int((tbt_miss & (tr.input_len > longest)).sum())
            row[f"unserved_{key}"] = int((~done).sum())
        rows[tr.name] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("trace")


def inline_display(t: pd.DataFrame) -> pd.DataFrame:
    """:func:`inline_effect` for the page: rounded, units in the column names."""
    out = pd.DataFrame(index=t.index)
    out["inlined (%)"] = t.inlined_pct.map("{:.0f}".format)
    for col, unit, fmt in (("ttft_mean_s", "mean TTFT (s)", "{:.2f}"), ("tbt_tail_ms", "mean TBT tail (ms)", "{:.1f}"),
                           ("attainment_pct", "both SLOs (%)", "{:.1f}")):
        out[f"{unit}, pool only"] = t[f"{col}_off"].map(fmt.format)
        out[f"{unit}, hybrid"] = t[f"{col}_on"].map(fmt.format)
    return out


def describe_inline(t: pd.DataFrame, tbt_slo_ms: float = 100) -> str:
    """Markdown: one sentence per trace (how many requests the hybrid inlines, what it does to the mean TTFT
    and the TBT tail), then why the share meeting both SLOs moves so little on the trace with the most
    inlined: which SLO its misses miss, and how many of them the hybrid could take at all (computed)."""
    parts = []
    for name, r in t.iterrows():
        change = f"{r.ttft_mean_s_on / r.ttft_mean_s_off - 1:+.0%}".replace("-", "−")
        parts.append(f"{name}: {r.inlined_pct:.0f}% inlined, mean TTFT {r.ttft_mean_s_off:.2f} → "
                     f"{r.ttft_mean_s_on:.2f} s ({change}), mean TBT tail {r.tbt_tail_ms_off:.1f} → "
                     f"{r.tbt_tail_ms_on:.1f} ms")
    out = "; ".join(parts) + "."
    name = t.inlined_pct.idxmax()
    r = t.loc[name]
    n = {k: int(r[k]) for k in ("requests", "ttft_miss_off", "ttft_miss_on", "tbt_miss_off", "tbt_miss_on",
                                "tbt_miss_long_on", "unserved_off", "unserved_on")}
    if not n["ttft_miss_off"] + n["tbt_miss_off"] + n["unserved_off"]:
        return out
    counts = f"TBT {n['tbt_miss_off']:,} → {n['tbt_miss_on']:,}"
    if n["ttft_miss_off"] or n["ttft_miss_on"]:
        counts += f", TTFT {n['ttft_miss_off']:,} → {n['ttft_miss_on']:,}"
    if n["unserved_off"] or n["unserved_on"]:
        counts += f", not served {n['unserved_off']:,} → {n['unserved_on']:,}"
    only_tbt = not (n["ttft_miss_off"] or n["ttft_miss_on"] or n["unserved_off"] or n["unserved_on"])
    long_ = ("all" if n["tbt_miss_long_on"] == n["tbt_miss_on"] else
             f"{n['tbt_miss_long_on']:,} of the {n['tbt_miss_on']:,}")
    return (out + f"\n\nOn {name} the hybrid inlines the most, and the share meeting both SLOs moves "
            f"{r.attainment_pct_off:.1f} → {r.attainment_pct_on:.1f}%. Its misses, of {n['requests']:,} requests: "
            f"{counts}" + (" (all are TBT misses)" if only_tbt else "") + ". With the hybrid, "
            f"{long_} of the TBT misses have a prompt longer than the {inline_max_prompt(tbt_slo_ms):,} tokens it can "
            f"inline. The hybrid takes load off the prefill pool, which shortens TTFTs; it does little for these "
            f"requests' token intervals.")


#: §8, roles that switch (FAST'25 §5.5): the answers grow × this from the trace's middle arrival on, the
#: change that moves §6's best split (its "longer answers" assumption).
SHIFT_FACTOR = 4.0
#: The load ratio ρ at which a node moves (``ClusterConfig.role_switch_ratio``; the paper gives none).
SWITCH_RATIO = 2.0
#: A slow reload (s): an engine restarted in the other role. An assumption, not a measurement: neither
#: paper times a switch; the simulator's default is the weights' load from DRAM (≈ 1.1 s).
SLOW_RELOAD_S = 60.0
_SHIFTED: dict = {}


def shifted_trace(trace="conversation", factor: float = SHIFT_FACTOR) -> tuple[Trace, float]:
    """``(trace with the answers of every request from its median arrival on × factor, that arrival (s))``:
    the same prompts and arrivals; the first half unchanged. The same object per (trace, factor)."""
    f = real(factor, "factor", lo=0, hi=MAX_OUTPUT_SCALE, lo_open=True, where="shifted_trace")
    tr = _trace(trace)
    hit = _SHIFTED.get((id(tr), f))
    if hit is None or hit[0] is not tr:
        t0 = float(np.median(tr.arrival_s)) if len(tr) else 0.0
        late = tr.arrival_s >= t0
        out = np.where(late & (tr.output_len > 0), np.maximum(1, np.rint(tr.output_len * f)),
                       tr.output_len).astype(np.int64)
        hit = _SHIFTED[(id(tr), f)] = (tr, replace(tr, output_len=out, name=f"{tr.name} (answers ×{f:g} from "
                                                   f"{t0:,.0f} s)", source=f"{tr.source}; outputs × {f:g} from "
                                                   f"the median arrival"), t0)
        while len(_SHIFTED) > 4:
            _SHIFTED.pop(next(iter(_SHIFTED)))
    return hit[1], hit[2]


def role_clusters(start: int) -> dict:
    """§8's clusters, name → (prefill nodes, ClusterConfig overrides): ``start`` P fixed (§6's best split for
    the trace as it is), the paper's 8P:8D fixed, and ``start`` P switching roles with the default reload and
    with :data:`SLOW_RELOAD_S`."""
    s = integer(start, "start", lo=1, hi=N_NODES - 1, where="role_clusters")
    sw = dict(role_switch_ratio=SWITCH_RATIO)
    h = N_NODES // 2
    return {f"{s}P:{N_NODES - s}D": (s, {}), f"{h}P:{h}D": (h, {}),
            f"{s}P:{N_NODES - s}D, switching": (s, sw),
            f"{s}P:{N_NODES - s}D, switching, {SLOW_RELOAD_S:g} s reload": (s, {**sw, "role_switch_s": SLOW_RELOAD_S})}


def role_switching(start: int, trace="conversation", speed: float = DEMO_SPEED, tbt_slo_ms: float = 100) -> dict:
    """§8's runs on :func:`shifted_trace` at ``speed``: ``{"table": one row per :func:`role_clusters` cluster
    (share meeting both SLOs before the answers grow, after, overall; switches; when the first one after the
    shift had its node serving, s after the shift), "runs": {name: SimResult}, "shift_s": when the answers grow
    (s, replayed), "stable": switches the same switching rule makes on the trace as it is}."""
    tr, t0 = shifted_trace(trace)
    clusters = role_clusters(start)
    runs = dict(zip(clusters, simulate_all([(tr, speed, config_for("mooncake", p, **kw))
                                            for p, kw in clusters.values()])))
    shift = t0 / speed
    rows = []
    for name, res in runs.items():
        a = res.requests
        ok = ((a.outcome == "completed") & (a.ttft_s <= TTFT_SLO_S)
              & (a.tbt_tail_s.fillna(0.0) <= tbt_slo_ms / 1e3)).to_numpy()
        late = (a.arrival_s >= shift).to_numpy()
        sw = res.role_switches
        after = sw[sw.decided_s >= shift]
        rows.append(dict(cluster=name, before_pct=100 * ok[~late].mean(), after_pct=100 * ok[late].mean(),
                         overall_pct=100 * ok.mean(), switches=len(sw),
                         first_after_s=float(after.serving_from_s.iloc[0] - shift) if len(after) else np.nan))
    p0, kw0 = list(clusters.values())[2]
    stable = simulate_at_speed(trace, speed, config_for("mooncake", p0, **kw0))
    return {"table": pd.DataFrame(rows).set_index("cluster"), "runs": runs, "shift_s": shift,
            "stable": len(stable.role_switches)}


def role_switching_display(rs: dict) -> pd.DataFrame:
    """:func:`role_switching`'s table for reading: shares in % (one decimal), switches as integers."""
    t = rs["table"]
    return pd.DataFrame({"both SLOs met, first half (%)": t.before_pct.round(1),
                         "after the answers grow (%)": t.after_pct.round(1),
                         "overall (%)": t.overall_pct.round(1), "role switches": t.switches.astype(int)})


def describe_role_switching(rs: dict) -> str:
    """Markdown: what switching bought over the fixed start split, and what the paper's 8P:8D does."""
    t = rs["table"]
    names = list(t.index)
    fixed, half, sw, slow = (t.loc[k] for k in names)
    first = ("" if np.isnan(sw.first_after_s) else
             f" Its first node served decode {sw.first_after_s:,.0f} s after the answers grew.")
    return (f"After the answers grow, a fixed **{names[0]}** meets both SLOs for {fixed.after_pct:.1f}% of requests. "
            f"Switching from it moves {int(sw.switches)} node{'s' if sw.switches != 1 else ''} and brings that to "
            f"{sw.after_pct:.1f}%.{first} With a {SLOW_RELOAD_S:g} s reload it gets {slow.after_pct:.1f}%. "
            f"A fixed **{names[1]}**, the paper's ratio, meets {half.after_pct:.1f}% without moving a node. On the trace "
            f"as it is, the same rule moves {rs['stable']} node{'s' if rs['stable'] != 1 else ''}.")


def describe_semantics(ctl: pd.DataFrame, box: bool = True) -> str:
    """Markdown: whether giving Mooncake the coupled engine's semantics (:func:`semantics_control`) moves
    its share meeting the SLOs (computed). ``box``: one sentence, the rest in a collapsible box; else all of it
    on one line (for a table cell)."""
    base, both = ctl.iloc[0], ctl.loc["both (the coupled engine's)"]
    same = f"{both.attainment_pct:.1f}" == f"{base.attainment_pct:.1f}"
    result = ("Given both of the coupled engine's rules, Mooncake meets the SLOs for "
              + (f"the same {base.attainment_pct:.1f}%: " if same else f"{both.attainment_pct:.1f}% instead of "
                 f"{base.attainment_pct:.1f}%: ")
              + ("these rules do not decide the comparison." if abs(both.attainment_pct - base.attainment_pct) < 1
                 else "these rules move the comparison."))
    detail = (f"Our vLLM-like engine reserves each request's prompt + output at admission — it knows output "
              f"lengths, which a real vLLM does not — and moves no KV between nodes. Mooncake's decode sees only the "
              f"prompt (its KV grows: {base.preemptions:,.0f} preemptions here) and shares the links (mean KV-stream "
              f"wait {base.stream_wait_ms:.1f} ms).")
    if not box:
        return detail + " " + result
    return result + "\n\n<details><summary>What the two rules are</summary>\n\n" + detail + "\n\n</details>"


def paper_box(ratio: pd.DataFrame, cap: pd.DataFrame, pdr: pd.DataFrame, coupled_2x: sim.SimResult,
              name: str, semantics: pd.DataFrame | None = None, assumptions: dict | None = None,
              roles: dict | None = None) -> str:
    """The lecture's "paper says / we get / why" table as markdown, every number computed (on the
    released trace or on its stand-in) or quoted from :mod:`mooncake_lab.paper`; ``semantics``: a
    :func:`semantics_control`, ``assumptions``: a :func:`pd_assumptions` (the "why" of the best P:D), ``roles``:
    a :func:`role_switching` (§8's row)."""
    g = _paper.FIG1_GAIN
    xs = list(ratio.columns)
    ours_ratio = " / ".join(_gain(ratio.loc["mooncake", x], ratio.loc["vllm", x]) for x in xs)
    order = ratio[100].drop("mooncake").sort_values()
    best = best_split(pdr)
    tbt_ok = 100.0 * attainment(coupled_2x, 100, ttft_slo_s=np.inf)
    pd_why = ("not measured here (pass `assumptions=pd_assumptions()`)" if assumptions is None
              else "measured one assumption at a time: " + _pd_decides(assumptions)[1])
    rows = [
        ("Mooncake vs vLLM, **request capacity ratio** (FAST'25's metric: share meeting both SLOs at the "
         "trace's own load)", " / ".join(f"+{100 * g[x]:.0f}%" for x in g) + " at " + " / ".join(map(str, g)) + " ms",
         f"{ours_ratio} at " + " / ".join(f"{x:g}" for x in xs) + f" ms ({ratio.loc['mooncake', 100]:.1f}% vs "
         f"{ratio.loc['vllm', 100]:.1f}% at 100 ms)",
         f"at its own load the trace loads our 16 simulated nodes lightly: every cluster serves ≥ "
         f"{ratio[100].min():.1f}% within 100 ms; the paper's vLLM met 100 ms for only ≈ "
         f"{_paper.FIG1_AT_100MS_PERCENT['vllm']:.0f}% — on the same A800s; the paper does not say why, and our cost model leaves out an engine's own overheads (scheduling, sampling)"
         + ("" if semantics is None else ". " + describe_semantics(semantics, box=False))),
        ("vLLM + chunked prefill at TBT ≤ 100 ms", f"the worst vLLM variant (≈ {_paper.FIG1_AT_100MS_PERCENT['vllm_chunked']:.0f}%)",
         f"{ratio.loc['vllm + chunked prefill', 100]:.1f}%; baselines worst → best: "
         + ", ".join(CLUSTER_LABELS.get(k, k) for k in order.index),
         "**contradicts the paper**: our chunk iteration is idealised (≤ 512 tokens + the decode step, no "
         "preemption or swapping: it knows each output length at admission) and `modern` makes a deep chunk cheap; under `calibrated` its TBT fails (§4)"),
        ("Mooncake vs coupled, **90 % capacity** (ours: highest rate with ≥ 90% meeting both SLOs)",
         "— (not reported; do not compare with the row above)",
         f"vs coupled {_gain(cap.loc['mooncake', 100], cap.loc['coupled', 100])}, vs coupled + chunked "
         f"{_gain(cap.loc['mooncake', 100], cap.loc['coupled_chunked', 100])} at 100 ms (8P+8D)",
         "our baselines keep a per-node prefix cache; a rate, not a share"),
        ("vLLM meets the TBT SLO", f"arXiv: {_paper.VLLM_TBT_SLO_MET_PCT:.0f}% of requests",
         f"coupled, no chunking, 2×: {tbt_ok:.1f}%",
         f"2× is §3–4's stress, chosen by us: the arXiv run does not report its load; at the trace's own load "
         f"(1×) our vLLM-like cluster meets both SLOs for {ratio.loc['vllm', 100]:.1f}% (first row). We replay the "
         "trace on a cost model, not real GPUs"),
        ("best P:D", f"≈ {_paper.BEST_PD_RATIO[0]}:{_paper.BEST_PD_RATIO[1]}",
         f"{int(best.n_prefill)}P:{int(best.n_decode)}D ({'≥ ' if best.lower_bound else ''}"
         f"{best.effective_capacity_rps:.2f} req/s)",
         pd_why),
    ]
    if roles is not None:
        t = roles["table"]
        fixed, half, sw = (t.iloc[k] for k in range(3))
        rows.append(("roles that switch (§5.5)", "roles fixed; a node switches only on a large load shift; no rule or "
                     "cost given", f"answers ×{SHIFT_FACTOR:g} halfway: {t.index[0]} fixed {fixed.after_pct:.1f}%, "
                     f"switching {sw.after_pct:.1f}% ({int(sw.switches)} moves), {t.index[1]} fixed "
                     f"{half.after_pct:.1f}%; {roles['stable']} moves on the trace as it is",
                     "the rule and its costs are the course's (§8); like the paper, a well-chosen fixed split needs "
                     "no switch on stable traffic"))
    head = (f"<details><summary>The paper beside our numbers, on {name}</summary>\n\n"
            "| | paper | ours | why they differ |\n|---|---|---|---|\n")
    return head + "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows) + "\n\n</details>"

def batching_timeseries(res: sim.SimResult, instance: int = 0, dt: float = 1.0, t0: float = 0.0,
                        t1: float | None = None) -> pd.DataFrame:
    """Batch size, total context (tokens) and step time (s) of one decode instance, sampled every ``dt`` s.

    Batch = requests admitted and not finished; a request's context = input + tokens generated so
    far, interpolated linearly between its admission and its finish (exact on average); step time =
    :func:`~mooncake_lab.roofline.cm_decode_step_time` of that batch and context.
    """
    from ..roofline import cm_decode_step_time

    cfg = res.config
    n_inst = _n_decoders(res)
    if not (isinstance(instance, (int, np.integer)) and 0 <= instance < n_inst):
        raise ValueError(f"instance: got {instance!r}; allowed: an integer in [0, {n_inst - 1}]")
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: got {dt!r}; allowed: a number of seconds > 0")
    adm, fin, L, out = _decoding(res, instance)
    end = float(np.nanmax(fin)) if len(fin) else dt
    t = np.arange(t0, (end if t1 is None else t1) + dt, dt)
    inside = (adm <= t[-1]) & (fin > t[0])  # the others are never active in the window
    adm, fin, L, out = adm[inside], fin[inside], L[inside], out[inside]
    act = (adm[None, :] <= t[:, None]) & (t[:, None] < fin[None, :])
    frac = np.clip((t[:, None] - adm[None, :]) / np.maximum(fin - adm, 1e-12)[None, :], 0, 1)
    ctx = np.where(act, L[None, :] + 1 + frac * (out[None, :] - 1), 0.0).sum(axis=1)
    b = act.sum(axis=1)
    c = cfg.resolve().cost
    step = np.array([cm_decode_step_time(c, int(bb), float(cc)) if bb > 0 else np.nan for bb, cc in zip(b, ctx)])
    return pd.DataFrame({"batch": b, "context_tokens": ctx, "step_s": step}, index=pd.Index(t, name="time_s"))

def _n_decoders(res: sim.SimResult) -> int:
    return res.config.n_coupled if res.config.coupled else res.config.n_decode

def _decoding(res: sim.SimResult, instance: int):
    """Requests that decoded on ``instance`` (completed, > 1 output token): admission and finish
    times (s), input and output lengths (tokens)."""
    a, tr = res.arrays, res.trace
    on = np.flatnonzero((a["decode_inst"] == instance) & (a["outcome"] == sim.COMPLETED) & (tr.output_len > 1))
    return a["decode_admit"][on], a["finish"][on], tr.input_len[on].astype(float), tr.output_len[on].astype(float)

def batching_peaks(res: sim.SimResult) -> dict:
    """Upper bounds of :func:`batching_timeseries` over every decode instance and the whole run:
    ``batch`` (the most requests decoding at once, exact), ``context_tokens`` (the most input +
    output tokens of requests decoding at once: their KV when finished) and ``step_s`` (the step
    time of both, s; it grows with each) — one scale for plots of any instance and window."""
    from ..roofline import cm_decode_step_time

    b_max, k_max = 0, 0.0
    for d in range(_n_decoders(res)):
        adm, fin, L, out = _decoding(res, d)
        t = np.concatenate([fin, adm])
        n = np.concatenate([-np.ones(len(fin)), np.ones(len(adm))])
        order = np.lexsort((n, t))  # equal times: finishes first (active means admit ≤ t < finish)
        b_max = max(b_max, int(np.cumsum(n[order]).max(initial=0)))
        k_max = max(k_max, float(np.cumsum((n * np.concatenate([L + out, L + out]))[order]).max(initial=0)))
    step = cm_decode_step_time(res.config.resolve().cost, b_max, k_max) if b_max else float("nan")
    return {"batch": b_max, "context_tokens": k_max, "step_s": step}

def tbt_vs_batch(batches=(1, 2, 4, 8, 16, 32, 64, 128), contexts=(2_000, 12_000, 32_000),
                 preset: str = PRESET) -> pd.DataFrame:
    """Decode step time (s) vs batch for a few per-sequence contexts, and whether the batch's KV fits
    one node (capacity = (8×80 GiB × 0.9 − weights) / 320 KiB per token)."""
    from ..roofline import cost_model, decode_step_time

    cap = cost_model("llama2-70b", "a800x8", preset).kv_capacity_tokens
    rows = [dict(batch=b, context_per_seq=x, step_s=decode_step_time("llama2-70b", "a800x8", b, b * x, preset),
                 fits=b * x <= cap, kv_capacity_tokens=cap) for x in contexts for b in batches]
    return pd.DataFrame(rows)

# ------------------------------------------------------------------------------------ reproduce
@metric_group("goodput")
def _metrics():
    cap = capacity_table(attainment_curve(tbt_slos_ms=(100,), progress=False))
    src = ("90 % capacity (the course's metric) = highest request rate (req/s) at which ≥ 90% of requests meet "
           "TTFT ≤ 30 s and TBT (mean of the longest 10% intervals) ≤ 100 ms; conversation trace, 16 nodes "
           "of 8×A800, LLaMA2-70B, preset modern; mooncake = 8P+8D kvcentric; sweep over replay speed "
           f"{SPEEDS}, 90% crossing interpolated. Not the paper's metric: FAST'25's +59%…+498% are gains in the "
           "share of requests meeting the SLOs at the trace's own load (request_capacity_ratio)")
    out = []
    for s in SYSTEMS:
        out.append(Metric(f"goodput.effective_capacity_rps.{s}.tbt100ms", float(cap.loc[s, 100]), "req/s",
                          None, src))
    budgets = chunk_budget_capacity(CHUNK_BUDGETS[1:], tbt_slos_ms=(100,))
    for k in budgets.index:
        out.append(Metric(f"goodput.effective_capacity_rps.coupled_chunked_{k}.tbt100ms", float(budgets.loc[k, 100]),
                          "req/s", None, src + f"; coupled + chunked prefill at {k:,} tokens a step (vLLM V1's "
                          "server budgets by GPU, vllm/engine/arg_utils.py EngineArgs.get_batch_defaults), not 512"))
    return out

#: The clusters of FAST'25 Fig. 1 (its four curves) in :data:`BASELINES`, with the key of their value in
#: :data:`mooncake_lab.paper.FIG1_AT_100MS_PERCENT` (None: the paper's figure is not transcribed).
FIG1_CLUSTERS = {"mooncake": "mooncake", "vllm": "vllm", "vllm + prefix caching": None,
                 "vllm + chunked prefill": "vllm_chunked"}


def fig1_paper_points() -> dict:
    """``{cluster of BASELINES: %}``: FAST'25 Fig. 1 at a 100 ms TBT threshold, read from the rendered figure
    (:data:`mooncake_lab.paper.FIG1_AT_100MS_PERCENT`), for the clusters it has a reading of."""
    return {c: _paper.FIG1_AT_100MS_PERCENT[k] for c, k in FIG1_CLUSTERS.items() if k is not None}


def best_split(pdr: pd.DataFrame) -> pd.Series:
    """The row of a :func:`pd_sweep` with the highest 90 % capacity (the first of equal ones)."""
    return pdr.loc[pdr.effective_capacity_rps.idxmax()]


@metric_group("fast25_fig1_capacity")
def _fig1_metrics():
    ratio = request_capacity_ratio(baselines={k: BASELINES[k] for k in FIG1_CLUSTERS})
    src = (f"{_paper.FIG1_SOURCE}; ours: request_capacity_ratio — % of requests meeting TTFT ≤ {TTFT_SLO_S:g} s and "
           "TBT ≤ the threshold with the conversation trace at its own rate (1×), 16 nodes of 8×A800, LLaMA2-70B, "
           "preset modern; mooncake = 8P+8D kvcentric; vllm = coupled engine (which reserves prompt + output at "
           "admission: it knows output lengths, a real vLLM does not; Mooncake's decode sees the prompt only)")
    out = []
    for name, key in FIG1_CLUSTERS.items():
        slug = name.replace(" + ", "_").replace(" ", "_")
        for x in ratio.columns:
            paper = _paper.FIG1_AT_100MS_PERCENT[key] if key is not None and x == 100 else None
            out.append(Metric(f"fast25_fig1_capacity.request_capacity_ratio.{slug}.tbt{x}ms", float(ratio.loc[name, x]),
                              "% of requests", paper, src))
    for x in ratio.columns:
        m, v = ratio.loc["mooncake", x], ratio.loc["vllm", x]
        if v > 0:
            out.append(Metric(f"fast25_fig1_capacity.gain_vs_vllm.tbt{x}ms", float(m / v - 1), "× − 1",
                              _paper.FIG1_GAIN.get(x), src + "; gain = Mooncake's ratio / vLLM's − 1"))
    return out


def _pd_metrics(prefix: str, pdr: pd.DataFrame, src: str) -> list:
    """reproduce metrics of one :func:`pd_sweep`: its best split beside the paper's ≈ 1:1."""
    best = best_split(pdr)
    one = pdr.loc[pdr.n_prefill == N_NODES // 2, "effective_capacity_rps"]
    out = [Metric(f"{prefix}.best_pd_ratio", float(best.ratio), "P / D", _paper.BEST_PD_RATIO[0] / _paper.BEST_PD_RATIO[1], src),
           Metric(f"{prefix}.best_n_prefill", float(best.n_prefill), "prefill nodes of 16",
                  N_NODES * _paper.BEST_PD_RATIO[0] / sum(_paper.BEST_PD_RATIO), src),
           Metric(f"{prefix}.best_is_lower_bound", float(bool(best.lower_bound)), "1 = best at the top of the sweep",
                  None, src),
           Metric(f"{prefix}.best_capacity_rps", float(best.effective_capacity_rps), "req/s", None, src)]
    if len(one):
        out.append(Metric(f"{prefix}.capacity_1to1_over_best", float(one.iloc[0] / best.effective_capacity_rps),
                          "fraction", None, src + "; 8P:8D's capacity ÷ the best split's"))
    return out


#: The variant of :data:`PD_ASSUMPTIONS` that decides the best split on the released conversation trace
#: (lecture 06 §6; tests/test_lecture06.py checks it is the one nearest 1:1): its reproduce metrics.
PD_DECISIVE = f"answers {PD_LONGER_ANSWERS:g}× longer"


@metric_group("fast25_fig15_pd")
def _fig15_metrics():
    src = (f"{_paper.BEST_PD_SOURCE}; ours: pd_sweep — the 90 % capacity (TBT ≤ 100 ms) of Mooncake for each "
           f"P:D split {SPLITS} of {N_NODES} nodes, conversation trace, preset modern, replay speeds {SPEEDS}; "
           "not the paper's metric (it does not give its own here)")
    kw = PD_ASSUMPTIONS[PD_DECISIVE]
    return (_pd_metrics("fast25_fig15_pd", pd_sweep(progress=False), src)
            + _pd_metrics(f"fast25_fig15_pd.answers_x{kw['output_scale']:g}", pd_sweep(progress=False, **kw),
                          src + f"; every output length × {kw['output_scale']:g} (scaled_answers), prompts unchanged: "
                          "the assumption that decides the split (lecture 06 §6)"))


@figure_group("goodput")
def _figures():
    from ..plots.goodput import plot_capacity, plot_capacity_ratio, plot_pd_sweep

    curve = attainment_curve(progress=False)
    return {"l06_capacity": plot_capacity(curve, tbt_slo_ms=100), "l06_pd_sweep": plot_pd_sweep(pd_sweep(progress=False)),
            "l06_capacity_ratio": plot_capacity_ratio(request_capacity_ratio(1.0, FIG1_THRESHOLDS_MS),
                                                      fig1_paper_points())}


# ------------------------------------------------------------------ tables for people (the notebook's outputs)
#: How the lecture names the systems of :data:`SYSTEMS` and the clusters of :data:`BASELINES` in its tables.
SYSTEM_LABELS = {"mooncake": "Mooncake 8P+8D", "coupled": "coupled (vLLM-like)",
                 "coupled_chunked": "coupled + chunked prefill"}
CLUSTER_LABELS = {"mooncake": "Mooncake 8P+8D", "vllm": "vLLM-like", "vllm + prefix caching": "vLLM-like + prefix caching",
                  "vllm + chunked prefill": "vLLM-like + chunked prefill",
                  "vllm + chunked + prefix caching": "vLLM-like + chunked + prefix caching"}


def _labels(names, table: dict) -> list:
    return [table.get(n, n) for n in names]


def attainment_table(runs: dict, tbt_slo_ms: float = 100, speed: float = DEMO_SPEED) -> pd.DataFrame:
    """``{system: SimResult}`` for people: the share of requests meeting both SLOs, one row per system."""
    return pd.DataFrame({f"meet both SLOs (TBT ≤ {tbt_slo_ms:g} ms) at {speed:g}× (%)":
                         [f"{100 * attainment(r, tbt_slo_ms):.1f}" for r in runs.values()]},
                        index=pd.Index(_labels(runs, SYSTEM_LABELS), name="system"))


def chunk_cost_display(**kw) -> pd.DataFrame:
    """:func:`chunk_cost_table` for people: ms of one chunk per depth (rows) and cost preset (columns)."""
    t = chunk_cost_table(**kw)
    k = kw.get("chunk") or sim.ClusterConfig().prefill_chunk
    return pd.DataFrame({f"one {int(k)}-token chunk, {p} (ms)": [f"{v:,.1f}" for v in t[p]] for p in t.columns},
                        index=pd.Index([f"{int(d):,}" for d in t.index], name="prompt tokens already in KV"))


def chunked_by_preset_display(speed: float = 1.0, tbt_slo_ms: float = 100, **kw) -> pd.DataFrame:
    """:func:`chunked_by_preset` for people: % meeting the TBT SLO per cluster (rows) and preset (columns)."""
    t = chunked_by_preset(speed, tbt_slo_ms=tbt_slo_ms, **kw)
    return pd.DataFrame({f"{p} (%)": [f"{v:.1f}" for v in t[p]] for p in t.columns},
                        index=pd.Index(_labels(t.index, CLUSTER_LABELS),
                                       name=f"meet TBT ≤ {tbt_slo_ms:g} ms at {speed:g}×"))


def ratio_display(ratios: dict) -> pd.DataFrame:
    """``{speed: request_capacity_ratio(speed)}`` for people: % meeting both SLOs per replay speed and cluster
    (rows) and TBT threshold (columns)."""
    rows, index = [], []
    for v, t in ratios.items():
        for c in t.index:
            index.append((f"{v:g}×", CLUSTER_LABELS.get(c, c)))
            rows.append([f"{t.loc[c, x]:.1f}" for x in t.columns])
    cols = [f"TBT ≤ {x:g} ms (%)" for x in next(iter(ratios.values())).columns]
    return pd.DataFrame(rows, columns=cols, index=pd.MultiIndex.from_tuples(index, names=["replay speed", "cluster"]))


def semantics_display(ctl: pd.DataFrame, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """A :func:`semantics_control` table for people."""
    return pd.DataFrame({f"meet both SLOs, TBT ≤ {tbt_slo_ms:g} ms (%)": [f"{v:.2f}" for v in ctl["attainment_pct"]],
                         "preemptions": [f"{int(v):,}" for v in ctl["preemptions"]],
                         "mean KV-stream wait (ms)": [f"{v:.1f}" for v in ctl["stream_wait_ms"]]},
                        index=pd.Index(list(ctl.index), name="Mooncake 8P+8D with"))


def capacity_display(cap: pd.DataFrame, trace="conversation", speeds=SPEEDS, budgets: pd.DataFrame | None = None
                     ) -> pd.DataFrame:
    """A :func:`capacity_table` for people: 90 % capacity (req/s) per system and TBT SLO; "≥" marks a capacity
    at the top of the replay-speed sweep (a lower bound). ``budgets``: a :func:`chunk_budget_capacity` table;
    the chunked row then names its budget, and a row per other budget follows it."""
    top = trace_rate(trace) * max(speeds)
    default = sim.ClusterConfig().prefill_chunk
    labels, rows = [], []
    for s in cap.index:
        labels.append(SYSTEM_LABELS.get(s, s))
        rows.append(cap.loc[s, list(cap.columns)])
        if s == "coupled_chunked" and budgets is not None:
            labels[-1] = budget_label(default)
            for k in budgets.index:
                if k != default:
                    labels.append(budget_label(k))
                    rows.append(budgets.loc[k, list(cap.columns)])
    return pd.DataFrame({f"TBT ≤ {x:g} ms": [("≥ " if np.isclose(r[x], top) else "") + f"{r[x]:.2f}" for r in rows]
                         for x in cap.columns},
                        index=pd.Index(labels, name="90 % capacity (req/s)"))


def pd_display(pdr: pd.DataFrame) -> pd.DataFrame:
    """A :func:`pd_sweep` table for people: one row per P:D split; "≥" marks a lower bound."""
    return pd.DataFrame({"prefill ÷ decode nodes": [f"{v:.2f}" for v in pdr["ratio"]],
                         "90 % capacity (req/s)": [("≥ " if lb else "") + f"{v:.2f}"
                                                   for v, lb in zip(pdr["effective_capacity_rps"], pdr["lower_bound"])]},
                        index=pd.Index([_split(r) for r in pdr.itertuples()], name="P:D split"))
