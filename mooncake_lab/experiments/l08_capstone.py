"""Lecture 08: the capstone — Mooncake end to end vs a coupled cluster, mechanism by mechanism, and
what a heterogeneous (level-3) cluster would cost.

Set-up (as lecture 06): 16 nodes of 8×A800 serving LLaMA2-70B, preset ``modern``, SLOs TTFT ≤ 30 s
and TBT ≤ 100 / 200 / 300 ms (FAST'25), 90 % capacity (the course's metric, not FAST'25's effective
request capacity, which is a share at the trace's own load) = the highest request rate at
which ≥ 90% of requests meet both (:func:`~mooncake_lab.experiments.l06_goodput.effective_capacity`).
Traces: the released **conversation** trace and the **toolagent-like** synthetic trace.

Systems (:data:`SYSTEMS`): ``mooncake`` = 8P+8D with every mechanism of :data:`MECHANISMS` on
(:data:`FULL`); ``no_<mechanism>`` = the same with that one mechanism off; ``disaggregated`` =
8P+8D with all four off (plain P/D split, continuous-batching decode — which cannot be switched
off); ``coupled`` / ``coupled_chunked`` = 16 vLLM-like nodes without / with chunked prefill.

Share of the gain (:func:`gain_shares`): gain = capacity(mooncake) − capacity(coupled) =
[disaggregated − coupled] (the split itself) + Σ leave-one-out drops [mooncake − no_m]
+ interaction (what is left: mechanisms that help or hurt each other).

Heterogeneous cost (:func:`fleet_cost`) is analytic, not simulated (a :class:`ClusterConfig` has
one node type): each pool is sized for a target rate from per-node rates given by the cost model
(:func:`node_rates`), priced at :data:`PRICE_USD_PER_GPU_HOUR`, plus KV transfer at
``network_usd_per_gb``. Prices are stated assumptions with sources; change them.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import paper as _paper
from .. import sim
from ..reproduce import Metric, figure_group, metric_group
from ..traces import Trace
from . import l06_goodput as g
from .common import as_trace as _trace, simulate_all
from ..sim.routers import ROUTERS

__all__ = ["TRACES", "SPEEDS", "TBT_SLOS_MS", "CPP_GROUP_SIZE", "FULL", "MECHANISMS", "SYSTEMS", "LABELS",
           "PAPER", "overrides_of", "config_of", "run", "capacity_curve", "top_rate", "capacity_table", "capacity_gain",
           "gain_shares", "outcome_breakdown", "rejection_profile", "paper_comparison", "LEADERBOARD_SPEED",
           "policy_leaderboard", "LEADERBOARD_BASELINES",
           "PRICE_USD_PER_GPU_HOUR", "NETWORK_USD_PER_GB", "HEADROOM", "FLEETS", "decode_context_tokens",
           "node_rates", "fleet_cost", "hetero_table", "network_break_even_usd_per_gb", "HETERO_RATE_RPS",
           "SERVER_PRICE_M_YUAN", "describe_headline", "describe_rejection", "describe_shares", "describe_rates",
           "describe_hetero", "paper_box", "SEMANTICS_SPEEDS", "semantics_control", "ADMISSIONS",
           "admission_control", "describe_admission", "PART_NAMES", "ADMISSION_NAMES", "NODE_NAMES",
           "systems_table", "capacity_view", "counting_view", "rejection_view", "shares_view", "admission_view",
           "comparison_view", "rates_view", "costs_view", "leaderboard_view", "lowest_rate", "headline_view",
           "network_break_even_usd_per_tb", "box", "md_table", "ordering", "MAIN_SYSTEMS", "describe_alternative"]

TRACES = ("conversation", "toolagent-like")
#: Replay speeds (× the trace's own rate). Wider than lecture 06's: with early rejection Mooncake
#: keeps ≥ 90% of requests within the SLOs up to ≈ 5× the conversation trace's 3.40 req/s.
SPEEDS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
TBT_SLOS_MS = g.TBT_SLOS_MS   # FAST'25: 100 / 200 / 300 ms
#: Nodes per CPP prefill group. The paper gives no X for its end-to-end runs; X = 2 keeps four
#: independent prefill instances out of 8 nodes (lecture 05 shows the trade-off).
CPP_GROUP_SIZE = 2
#: Full Mooncake on top of lecture 06's 8P+8D (kvcentric already its default policy).
FULL = dict(prefill_policy="kvcentric", cpp_group_size=CPP_GROUP_SIZE, layerwise_kv_transfer=True,
            admission="predicted")
#: Each mechanism: (label, the ClusterConfig overrides that switch it off). ``early_rejection`` switches
#: all of full Mooncake's admission control off (``admission="predicted"``: its TTFT check at arrival and
#: its decode-load forecast); :func:`admission_control` says which of the two checks does the rejecting.
MECHANISMS = {
    "cpp": ("CPP prefill groups", dict(cpp_group_size=1)),                     # → single-node instances
    "kvcentric": ("KVCache-centric scheduling", dict(prefill_policy="load")),  # → load balancing
    "layerwise": ("layer-wise KV transfer", dict(layerwise_kv_transfer=False)),  # → sent after prefill
    "early_rejection": ("early rejection", dict(admission="none")),            # → admit everything
}
SYSTEMS = ("mooncake", *(f"no_{m}" for m in MECHANISMS), "disaggregated", "coupled", "coupled_chunked")
LABELS = {"mooncake": "Mooncake (all on)", **{f"no_{m}": f"Mooncake without {v[0]}" for m, v in MECHANISMS.items()},
          "disaggregated": "plain 8P+8D (all four off)", "coupled": "coupled (vLLM-like)",
          "coupled_chunked": "coupled + chunked prefill"}
#: Paper anchors (:mod:`mooncake_lab.paper`). The +59% … +498% are gains in FAST'25's request capacity
#: ratio (a share at the trace's own load, lecture 06), not in our 90 % capacity (a rate).
PAPER = {"capacity_gain_min": _paper.FIG1_GAIN[300], "capacity_gain_max": _paper.FIG1_GAIN[100],
         "more_requests": _paper.ARXIV_REAL_GAIN,          # arXiv: +75% requests, 10P+10D vs 20 vLLM
         "vllm_tbt_share": (_paper.VLLM_TBT_SLO_MET_PCT / 100)}    # arXiv: vLLM met the TBT SLO for 57%


_CURVES: dict = {}  # capacity_curve memo: key → (trace, table); a few kB each


# ------------------------------------------------------------------------------------------ runs
def overrides_of(system: str) -> tuple[str, dict]:
    """``(lecture 06 system, ClusterConfig overrides)`` of one of :data:`SYSTEMS`."""
    if system not in SYSTEMS:
        raise ValueError(f"system: got {system!r}; allowed: {', '.join(SYSTEMS)}")
    if system.startswith("coupled"):
        return system, {}
    if system == "mooncake":
        return "mooncake", dict(FULL)
    if system == "disaggregated":
        off = {k: v for _, o in MECHANISMS.values() for k, v in o.items()}
        return "mooncake", {**FULL, **off}
    return "mooncake", {**FULL, **MECHANISMS[system[3:]][1]}


def config_of(system: str, **extra) -> sim.ClusterConfig:
    """The :class:`ClusterConfig` of ``system`` (16 nodes, preset ``modern``), ``extra`` on top."""
    base, over = overrides_of(system)
    return g.config_for(base, 8, **{**over, **extra})


def run(system: str = "mooncake", speed: float = 1.0, trace: Trace | str = "conversation", **extra) -> sim.SimResult:
    """One memoised simulation of ``trace`` replayed at ``speed`` on ``system``."""
    base, over = overrides_of(system)
    return g.run(base, speed, trace, 8, **{**over, **extra})


def capacity_curve(systems=SYSTEMS, speeds=SPEEDS, tbt_slos_ms=TBT_SLOS_MS, trace: Trace | str = "conversation",
                   progress: bool = True, stop_below: bool = True, extra: dict | None = None) -> pd.DataFrame:
    """Tidy table, one row per system × speed × TBT SLO: rate_rps, attainment (share of requests
    meeting both SLOs) and attainment_tokens (share of prompt tokens in such requests). ``extra``:
    ClusterConfig overrides on top of every system's (e.g. ``admission=...``).

    ``stop_below``: a system's sweep stops after the first speed at which every attainment is below
    90% (:func:`~mooncake_lab.experiments.l06_goodput.effective_capacity` reads nothing past it;
    faster replays of an overloaded cluster only fail more), which saves about a third of the runs.
    Memoised per process (a copy is returned).
    """
    from tqdm.auto import tqdm

    tr = _trace(trace)
    speeds = sorted(float(v) for v in speeds)
    extra = dict(extra or {})
    key = (id(tr), tuple(systems), tuple(speeds), tuple(tbt_slos_ms), bool(stop_below), tuple(sorted(extra.items())))
    hit = _CURVES.get(key)
    if hit is not None and hit[0] is tr:
        return hit[1].copy()
    rate = g.trace_rate(tr)
    w = tr.input_len
    rows: dict = {s: [] for s in systems}
    active = list(systems)
    with tqdm(total=len(systems) * len(speeds), desc=f"capacity {tr.name}", disable=not progress, leave=False) as bar:
        for v in speeds:  # all systems still in the sweep at this speed run in parallel threads
            runs = simulate_all([(tr, v, config_of(s, **extra)) for s in active])
            still = []
            for s, res in zip(active, runs):
                new = [dict(trace=tr.name, system=s, speed=v, rate_rps=rate * v, tbt_slo_ms=x,
                            attainment=g.attainment(res, x), attainment_tokens=g.attainment(res, x, weight=w))
                       for x in tbt_slos_ms]
                rows[s] += new
                if not (stop_below and all(max(r["attainment"], r["attainment_tokens"]) < g.TARGET for r in new)):
                    still.append(s)
            bar.update(len(active))
            active = still
        bar.update(bar.total - bar.n)
    rows = [r for s in systems for r in rows[s]]
    df = pd.DataFrame(rows)
    _CURVES[key] = (tr, df)  # holding the trace keeps its id unique while the entry lives
    return df.copy()


def lowest_rate(trace: Trace | str = "conversation") -> float:
    """The lowest request rate the sweep tries (req/s): a capacity of 0 means "below this rate"."""
    return g.trace_rate(trace) * min(SPEEDS)


def top_rate(trace: Trace | str = "conversation") -> float:
    """The highest request rate the sweep tries (req/s): a capacity equal to it is only a lower bound."""
    return g.trace_rate(trace) * max(SPEEDS)


def capacity_table(curve: pd.DataFrame, weight: str = "requests") -> pd.DataFrame:
    """Effective capacity (req/s), system × TBT SLO, counting ``weight`` = ``"requests"`` (the paper's
    measure) or ``"tokens"`` (≥ 90% of prompt tokens must be served within the SLOs)."""
    if weight not in ("requests", "tokens"):
        raise ValueError(f"weight: got {weight!r}; allowed: 'requests', 'tokens'")
    col = "attainment" if weight == "requests" else "attainment_tokens"
    rows = [dict(system=s, tbt_slo_ms=x, cap=g.effective_capacity(c.assign(attainment=c[col])))
            for (s, x), c in curve.groupby(["system", "tbt_slo_ms"], sort=False)]
    t = pd.DataFrame(rows).pivot(index="system", columns="tbt_slo_ms", values="cap")
    return t.reindex([s for s in SYSTEMS if s in t.index])


def capacity_gain(cap: pd.DataFrame, tbt_slo_ms: float = 100, baseline: str = "coupled",
                  system: str = "mooncake") -> float:
    """Relative gain of ``system`` over ``baseline`` (0.59 = +59%); ``inf`` if the baseline never
    reaches 90% on the swept rates."""
    b, s = float(cap.loc[baseline, tbt_slo_ms]), float(cap.loc[system, tbt_slo_ms])
    return s / b - 1.0 if b > 0 else math.inf


def gain_shares(cap: pd.DataFrame, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """Where Mooncake's gain over the coupled cluster comes from (module docstring).

    One row per part — ``disaggregation`` (plain 8P+8D − coupled), each mechanism (mooncake − that
    mechanism off) and ``interaction`` (the rest) — with ``capacity_rps`` (of the run the part is
    measured against), ``gain_rps`` and ``share`` (of the whole gain; shares sum to 1, a part that
    costs capacity has a negative share).
    """
    c = cap[tbt_slo_ms]
    full, coupled = float(c["mooncake"]), float(c["coupled"])
    total = full - coupled
    rows = [dict(part="disaggregation", label="split into 8P+8D (load balancing, no extras)",
                 capacity_rps=float(c["disaggregated"]), gain_rps=float(c["disaggregated"]) - coupled)]
    for m, (label, _) in MECHANISMS.items():
        rows.append(dict(part=m, label=label, capacity_rps=float(c[f"no_{m}"]), gain_rps=full - float(c[f"no_{m}"])))
    rows.append(dict(part="interaction", label="interaction (mechanisms overlap or clash)", capacity_rps=np.nan,
                     gain_rps=total - sum(r["gain_rps"] for r in rows)))
    df = pd.DataFrame(rows).set_index("part")
    df["share"] = df.gain_rps / total if total > 0 else np.nan
    return df


# ----------------------------------------------------------------------------------- reading them
def outcome_breakdown(res: sim.SimResult, tbt_slo_ms: float = 100, ttft_slo_s: float = g.TTFT_SLO_S) -> dict:
    """Shares of all requests that met both SLOs, were rejected, missed the TTFT SLO, or met TTFT
    but missed the TBT SLO (the four sum to 1)."""
    a, tr = res.arrays, res.trace
    done = a["outcome"] == sim.COMPLETED
    ttft_ok = done & (a["prefill_end"] - tr.arrival_s <= ttft_slo_s)
    met = g.attainment(res, tbt_slo_ms, ttft_slo_s)
    n = len(tr)
    return {"met both": met, "rejected": float((~done).sum() / n), "missed TTFT": float((done & ~ttft_ok).sum() / n),
            "missed TBT": float(ttft_ok.sum() / n) - met}


def rejection_profile(trace: Trace | str = "conversation", speeds=(2.0, 5.0), system: str = "mooncake") -> pd.DataFrame:
    """What early rejection turns away, per replay speed: share of requests and of prompt tokens
    rejected, mean prompt (tokens) of rejected vs all requests."""
    tr = _trace(trace)
    rows = []
    for v in speeds:
        res = run(system, float(v), tr)
        rej = res.arrays["outcome"] != sim.COMPLETED
        inp = tr.input_len.astype(np.float64)
        rows.append(dict(speed=float(v), rate_rps=g.trace_rate(tr) * v, rejected_requests=float(rej.mean()),
                         rejected_tokens=float(inp[rej].sum() / inp.sum()),
                         mean_prompt_rejected=float(inp[rej].mean()) if rej.any() else np.nan,
                         mean_prompt_all=float(inp.mean())))
    return pd.DataFrame(rows).set_index("speed")


def paper_comparison(caps: dict, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """The paper's end-to-end claims beside ours. ``caps``: ``{trace: {"requests": capacity_table,
    "tokens": capacity_table}}``. Gains are relative (0.59 = +59%)."""
    rows = []
    for trace, t in caps.items():
        for w, cap in t.items():
            for base in ("coupled", "coupled_chunked"):
                rows.append(dict(trace=trace, counting=w, baseline=base, gain=capacity_gain(cap, tbt_slo_ms, base),
                                 gain_without_rejection=capacity_gain(cap, tbt_slo_ms, base, "no_early_rejection"),
                                 gain_text=_gain_text(cap, trace, tbt_slo_ms, base),
                                 gain_without_rejection_text=_gain_text(cap, trace, tbt_slo_ms, base, "no_early_rejection")))
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "unbounded" if not math.isfinite(x) else f"{100 * x:+.0f}%"


def _gain_text(cap: pd.DataFrame, trace, tbt_slo_ms: float = 100, baseline: str = "coupled",
               system: str = "mooncake") -> str:
    """A gain as the lecture prints it: "+469%", or "≥ +964%" where the baseline's capacity is 0, i.e.
    below the lowest swept rate (the gain is then at least ``system`` ÷ that rate − 1)."""
    gain = capacity_gain(cap, tbt_slo_ms, baseline, system)
    if math.isfinite(gain):
        return _pct(gain)
    return "≥ " + _pct(float(cap.loc[system, tbt_slo_ms]) / lowest_rate(trace) - 1)


def _cap_text(value: float, trace) -> str:
    """A 90 % capacity as a table cell: "18.1", or "< 3.3" where it is below the lowest swept rate."""
    return f"< {lowest_rate(trace):.1f}" if float(value) <= 0 else f"{float(value):.1f}"


def md_table(df: pd.DataFrame) -> str:
    """``df`` as a markdown table (index first; a MultiIndex joined by " · "), cells as the views round them."""
    def cell(v):
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return f"{int(v):,}"
        if isinstance(v, (float, np.floating)):
            return f"{float(v):,}" if np.isfinite(v) else "—"
        return str(v).replace("|", "\\|")
    names = [n or "" for n in df.index.names]
    head = [" · ".join(names) if any(names) else ""] + [str(c) for c in df.columns]
    rows = []
    for k, r in df.iterrows():
        k = " · ".join(map(str, k)) if isinstance(k, tuple) else str(k)
        rows.append("| " + " | ".join([k] + [cell(v) for v in r.to_numpy()]) + " |")
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows])


def box(summary: str, *parts):
    """A collapsed ``<details>`` box to display: markdown text, tables (as markdown) and figures (as PNG).
    Returns IPython's Markdown, or HTML when a figure is inside (markdown cannot hold the image)."""
    import base64
    import io

    from IPython.display import HTML, Markdown
    from matplotlib.figure import Figure

    if not any(isinstance(x, Figure) for x in parts):
        body = "\n\n".join(md_table(x) if isinstance(x, pd.DataFrame) else str(x) for x in parts)
        return Markdown(f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>")
    html = []
    for x in parts:
        if isinstance(x, Figure):
            buf = io.BytesIO()
            x.savefig(buf, format="png", bbox_inches="tight")
            import matplotlib.pyplot as plt
            plt.close(x)
            html.append(f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}" '
                        'style="max-width:100%">')
        elif isinstance(x, pd.DataFrame):
            html.append(x.to_html())
        else:
            html.append(f"<p>{x}</p>")
    return HTML(f"<details><summary>{summary}</summary>{''.join(html)}</details>")


def _name(trace) -> str:
    """A trace's name as the prose says it: "conversation", "toolagent-like" (no "synthetic:" prefix)."""
    return _trace(trace).name.split(":")[-1]


def describe_headline(caps: dict, tbt_slo_ms: float = 100) -> str:
    """Markdown, one short sentence per trace: Mooncake's 90 % capacity and its gain over the two coupled
    baselines (computed)."""
    parts = []
    for t, cap in caps.items():
        gain, chunked = capacity_gain(cap, tbt_slo_ms), _gain_text(cap, t, tbt_slo_ms, "coupled_chunked")
        head = f"On {_name(t)}, Mooncake's 90 % capacity is {cap.loc['mooncake', tbt_slo_ms]:.1f} req/s"
        parts.append(f"{head}: {_pct(gain)} over the coupled cluster and {chunked} over coupled + chunked."
                     if math.isfinite(gain) else
                     f"{head}: {chunked} over coupled + chunked. The coupled cluster misses 90 % even at "
                     f"{lowest_rate(t):.1f} req/s, the slowest replay, so the gain over it is "
                     f"{_gain_text(cap, t, tbt_slo_ms)}.")
    return " ".join(parts)


#: The systems of the lecture's short tables: Mooncake, its best rival, and the two coupled clusters.
MAIN_SYSTEMS = ("mooncake", "no_early_rejection", "coupled_chunked", "coupled")


def headline_view(caps: dict, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """§2's short table: 90 % capacity (req/s) of Mooncake and the two coupled clusters, one column per
    trace; a capacity below the lowest swept rate reads "< 3.3"."""
    systems = ("mooncake", "coupled_chunked", "coupled")
    out = pd.DataFrame({f"{_name(t)} (req/s)": [_cap_text(cap.loc[s, tbt_slo_ms], t) for s in systems]
                        for t, cap in caps.items()}, index=pd.Index([LABELS[s] for s in systems], name="system"))
    return out


def ordering(caps: dict, tbt_slo_ms: float = 100) -> dict:
    """Who wins, ours against FAST'25 Fig. 1 at 100 ms: ``mooncake_first`` (ours, on every trace, and the
    paper's), ``chunked_above_plain`` (ours on every trace, and the paper's: False, chunked vLLM was the
    worst there)."""
    p = _paper.FIG1_AT_100MS_PERCENT
    return {"mooncake_first": all(cap.loc["mooncake", tbt_slo_ms] > cap.loc[["coupled", "coupled_chunked"], tbt_slo_ms].max()
                                  for cap in caps.values()),
            "paper_mooncake_first": p["mooncake"] > max(p["vllm"], p["vllm_chunked"]),
            "chunked_above_plain": all(cap.loc["coupled_chunked", tbt_slo_ms] > cap.loc["coupled", tbt_slo_ms]
                                       for cap in caps.values()),
            "paper_chunked_above_plain": p["vllm_chunked"] > p["vllm"]}


def describe_rejection(profile: pd.DataFrame, caps: dict, tokcaps: dict, tbt_slo_ms: float = 100) -> str:
    """Markdown: what rejection turns away (a :func:`rejection_profile` row at its highest speed with
    rejections) and what counting prompt tokens does to each system's capacity (computed)."""
    p = profile[profile.rejected_requests > 0]
    out = []
    if len(p):
        r = p.iloc[len(p) // 2] if len(p) > 2 else p.iloc[-1]
        out.append(f"At {r.name:g}×, Mooncake rejects {100 * r.rejected_requests:.1f}% of the requests but "
                   f"{100 * r.rejected_tokens:.1f}% of the prompt tokens. The rejected prompts average "
                   f"{r.mean_prompt_rejected:,.0f} tokens, {r.mean_prompt_rejected / r.mean_prompt_all:.1f}× the mean "
                   f"prompt ({r.mean_prompt_all:,.0f}).")
    for t in caps:
        req, tok = caps[t][tbt_slo_ms], tokcaps[t][tbt_slo_ms]
        drop = 1 - tok / req
        plain = [s for s in drop.index if config_of(s).admission == "none"]  # the systems that admit all
        others = drop[plain].replace([np.inf, -np.inf], np.nan).dropna()
        text = f"Counting tokens on {_name(t)}, Mooncake's 90 % capacity falls by {100 * drop['mooncake']:.0f}%"
        if len(others):
            w = others.idxmax()
            text += (f"; a system that admits every request loses at most {100 * others.max():.0f}% "
                     f"({LABELS[w]}: {req[w]:.2f} → {tok[w]:.2f} req/s)")
        out.append(text + ".")
    return " ".join(out)


#: The parts of the gain as the prose names them (:func:`gain_shares`' index → words).
PART_NAMES = {"disaggregation": "P/D split", "cpp": "CPP groups", "kvcentric": "KVCache-centric scheduling",
              "layerwise": "layer-wise transfer", "early_rejection": "early rejection", "interaction": "interaction"}


def describe_shares(caps: dict) -> str:
    """Markdown: the parts of the gain ranked, per trace (at 100 ms, or 300 ms where coupled is 0)."""
    out = []
    for t, cap in caps.items():
        ok = [x for x in cap.columns if cap.loc["coupled", x] > 0]
        if not ok:
            continue
        x = ok[0] if ok[0] == cap.columns[0] else ok[-1]  # 100 ms, else the loosest SLO (as the waterfalls)
        sh = gain_shares(cap, x).share.drop("interaction").sort_values(ascending=False)
        out.append(f"On {_name(t)} (TBT ≤ {x:g} ms): " + ", ".join(f"{PART_NAMES[k]} {100 * v:+.0f}%" for k, v in sh.items())
                   + ".")
    cap = next(iter(caps.values()))
    x = cap.columns[0]
    cpp = ""
    if cap.loc["no_cpp", x] > cap.loc["mooncake", x]:
        cpp = (f" CPP's share is negative: without CPP Mooncake reaches {cap.loc['no_cpp', x]:.1f} req/s, with it "
               f"{cap.loc['mooncake', x]:.1f} (why: below).")
    return "Shares of the gain, largest first. " + " ".join(out) + cpp


def describe_rates(trace: Trace | str = "conversation", node: str = "a800x8") -> str:
    """Markdown: the analytic prefill bound of 8 prefill nodes beside the simulated capacity without
    rejection, and why they differ (computed)."""
    r = node_rates(trace, node)
    n = config_of("mooncake").n_prefill
    cap = capacity_table(capacity_curve(("no_early_rejection",), trace=trace, progress=False)).loc[
        "no_early_rejection", 100]
    bound = n * r["prefill_rps"]
    why = ("The analytic rate keeps the prefill pool busy all the time, which a queue within the TTFT SLO cannot."
           if bound >= cap else "The simulated pool did better than the analytic rate.")
    return (f"Check against the simulator: {n} A800 prefill nodes × {r['prefill_rps']:.2f} req/s ≈ {bound:.1f} req/s, "
            f"against the {cap:.1f} req/s Mooncake reached without rejection in section 2 "
            f"({100 * (bound / cap - 1):+.0f}%). {why}")


def describe_hetero(costs: pd.DataFrame, break_even_usd_per_tb: float, rate_rps: float | None = None) -> str:
    """Markdown: the heterogeneous fleet's saving on one fabric, and what the network costs across zones
    (``break_even_usd_per_tb``: :func:`network_break_even_usd_per_tb`; ``rate_rps``: the rate the fleets were
    sized for, default :data:`HETERO_RATE_RPS`). Prices are written
    "145.6 USD/h", never with "$": JupyterLab typesets the text between two "$" as LaTeX."""
    rate_rps = HETERO_RATE_RPS if rate_rps is None else rate_rps
    one = costs[costs.network == costs.network.iloc[0]].set_index("fleet")
    het, homo = one.loc["H800 P + H20 D", "usd_per_hour"], one.loc[["H800 + H800", "H20 + H20"], "usd_per_hour"].min()
    far = costs[costs.network != costs.network.iloc[0]].set_index("fleet")
    out = (f"At {rate_rps:g} req/s on one RDMA fabric, H800 prefill + H20 decode costs {het:,.1f} USD/h, against "
           f"{homo:,.1f} USD/h for the cheaper homogeneous fleet ({100 * (1 - het / homo):.0f}% less). It stays "
           f"cheaper while moving KV costs less than {break_even_usd_per_tb:.3f} USD per TB.")
    if len(far):
        net = far.loc["H800 P + H20 D", "network_usd_per_hour"]
        out += (f" {far.network.iloc[0].capitalize()}, the KV transfers alone cost {net:,.0f} USD/h: "
                f"{net / het:.0f}× the GPUs.")
    return out


def describe_alternative(costs: pd.DataFrame) -> str:
    """Markdown: under other assumptions (a :func:`hetero_table` with one network price), the cheapest fleet
    and what H800 prefill + H20 decode costs beside it (computed)."""
    t = costs.set_index("fleet")
    best = t.usd_per_hour.idxmin()
    het = t.loc["H800 P + H20 D", "usd_per_hour"]
    if best == "H800 P + H20 D":
        return f"{t.network.iloc[0].capitalize()}: H800 prefill + H20 decode is still the cheapest ({het:,.0f} USD/h)."
    return (f"{t.network.iloc[0].capitalize()}: {best} is the cheapest ({t.loc[best, 'usd_per_hour']:,.0f} USD/h); "
            f"H800 prefill + H20 decode costs {het:,.0f} USD/h.")


#: Replay speeds of :func:`semantics_control` (× the trace's rate): around full Mooncake's 90 % capacity.
SEMANTICS_SPEEDS = (2.0, 4.0, 5.0, 6.0)


def semantics_control(trace: Trace | str = "conversation", speeds=SEMANTICS_SPEEDS, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """Full Mooncake at each of ``speeds`` under the paper's semantics and under the coupled engine's
    (lecture 06's :data:`~mooncake_lab.experiments.l06_goodput.SEMANTICS_CONTROLS`: output lengths known,
    no link contention): % meeting both SLOs (TBT ≤ ``tbt_slo_ms``) under each, decode preemptions
    (requests) and the mean and largest KV-stream wait for shared links (ms) under the paper's."""
    rules = g.SEMANTICS_CONTROLS["both (the coupled engine's)"]
    rows = []
    for v in speeds:
        r, k = run("mooncake", v, trace), run("mooncake", v, trace, **rules)
        w = np.nan_to_num(r.arrays["stream_wait"])
        rows.append(dict(speed=float(v), attainment_pct=100.0 * g.attainment(r, tbt_slo_ms),
                         attainment_pct_coupled_rules=100.0 * g.attainment(k, tbt_slo_ms),
                         preemptions=int(r.arrays["preemptions"].sum()),
                         stream_wait_mean_ms=1e3 * float(w.mean()), stream_wait_max_ms=1e3 * float(w.max())))
    return pd.DataFrame(rows).set_index("speed")


#: Admission policies of :func:`admission_control` (full Mooncake with each; ``none`` = ``no_early_rejection``).
ADMISSIONS = ("none", "baseline", "early", "predicted")


def admission_control(trace: Trace | str = "conversation", speed: float = 5.0, tbt_slo_ms: float = 100) -> pd.DataFrame:
    """Which check of the admission rejects: full Mooncake with each of :data:`ADMISSIONS` (t_d = the
    ClusterConfig default ``decode_time_s``): its 90 % capacity (req/s, TBT ≤ ``tbt_slo_ms``, over
    :data:`SPEEDS`) and, at ``speed``, the requests rejected at arrival because the prefill load
    (predicted TTFT / TTFT SLO) exceeds the threshold θ — the TTFT check every policy but ``none``
    makes (arXiv v3 Algorithm 1) — at arrival on the decode load alone, and after prefill."""
    tr = _trace(trace)
    rows = []
    for adm in ADMISSIONS:
        curve = capacity_curve(("mooncake",), tbt_slos_ms=(tbt_slo_ms,), trace=tr, progress=False,
                               extra=dict(admission=adm))
        r = run("mooncake", float(speed), tr, admission=adm)
        a, theta = r.arrays, r.config.admission_threshold
        at = a["outcome"] == sim.REJECTED_AT_ARRIVAL
        by_prefill = at & (a["prefill_load"] > theta)
        rows.append(dict(admission=adm, capacity_rps=float(capacity_table(curve).loc["mooncake", tbt_slo_ms]), rejected=int((a["outcome"] != sim.COMPLETED).sum()),
                         by_prefill_load=int(by_prefill.sum()), by_decode_load_only=int((at & ~by_prefill).sum()),
                         after_prefill=int((a["outcome"] == sim.REJECTED_AFTER_PREFILL).sum()),
                         too_large=int((a["outcome"] == sim.REJECTED_TOO_LARGE).sum())))
    out = pd.DataFrame(rows).set_index("admission")
    out.attrs.update(speed=float(speed), tbt_slo_ms=float(tbt_slo_ms), trace=tr.name,
                     decode_time_s=float(config_of("mooncake").decode_time_s))
    return out


def describe_admission(tab: pd.DataFrame) -> str:
    """Markdown: which check of an :func:`admission_control` table rejects, and so what the ablation's
    share called "early rejection" (``early_rejection``) measures (computed)."""
    at, rej = tab.attrs, tab.drop("none")
    if rej.capacity_rps.nunique() == 1 and rej.rejected.nunique() == 1 and \
            int(rej.by_decode_load_only.sum() + rej.after_prefill.sum()) == 0:
        n = int(rej.rejected.iloc[0])
        return (f"Lecture 07's three admission policies all check the predicted TTFT at arrival. The policy "
                f"*baseline* also rejects after prefill if decode is overloaded. The policy *early* also checks the "
                f"decode load now. The policy *predicted* checks the decode load forecast with t_d = "
                f"{at['decode_time_s']:g} s, the time each request is assumed to decode. At {at['speed']:g}× all "
                f"three reject the same {n:,} requests, every one on the TTFT check they share. The decode pool never "
                "nears its SLO. So the ablation's early-rejection share is the share of rejecting on the predicted TTFT.")
    return "The policies differ here: the decode-side checks reject some requests (the table above)."


def _semantics_row(ctl: pd.DataFrame) -> tuple:
    """paper_box's row on the semantics choices, from a :func:`semantics_control` table (computed)."""
    moved = float((ctl.attainment_pct_coupled_rules - ctl.attainment_pct).abs().max())
    speeds = ", ".join(f"{v:g}" for v in ctl.index)
    return ("rules: output lengths, shared links",
            "a real vLLM does not know output lengths (arXiv v3 §7.4); the network is shared (v3 §4)",
            f"our coupled baselines reserve prompt + output at admission (they know output lengths) and move no KV; "
            f"Mooncake at {speeds}×: {int(ctl.preemptions.sum()):,} decode preemptions, KV streams wait "
            f"{ctl.stream_wait_mean_ms.max():.1f} ms on average (at most {ctl.stream_wait_max_ms.max():.0f} ms) for "
            f"the links; given the baselines' rules its share meeting the SLOs moves by ≤ {moved:.1f} points",
            "these choices do **not** decide the comparison" if moved < 1 else "**these choices move the comparison**")


def paper_box(comp: pd.DataFrame, caps: dict, tbt_slo_ms: float = 100, semantics: pd.DataFrame | None = None) -> str:
    """The lecture's "paper / ours / reproduced?" table as markdown, every number computed (on the
    released traces or their stand-ins) or quoted from :mod:`mooncake_lab.paper`: four short rows in the
    main line, the gains counted both ways and the rules' check in a box."""
    def gains(baseline, counting="requests", col="gain_text"):
        d = comp[(comp.baseline == baseline) & (comp.counting == counting)]
        return ", ".join(f"{v} ({_name(t)})" for t, v in zip(d.trace, d[col]))
    g100, p100 = _paper.FIG1_GAIN, _paper.FIG1_AT_100MS_PERCENT
    ratio = g.request_capacity_ratio(1.0, baselines={k: g.BASELINES[k] for k in ("mooncake", "vllm")})
    ours = [100 * (ratio.loc["mooncake", x] / ratio.loc["vllm", x] - 1) for x in ratio.columns]
    o = ordering(caps, tbt_slo_ms)
    c100 = {s: ", ".join(f"{cap.loc[s, tbt_slo_ms]:.1f}" if cap.loc[s, tbt_slo_ms] > 0 else f"< {lowest_rate(t):.1f}"
                         for t, cap in caps.items()) for s in ("mooncake", "coupled_chunked", "coupled")}
    names = " / ".join(_name(t) for t in caps)
    rows = [
        ("Mooncake serves the most",
         f"yes: ≈ {p100['mooncake']:.0f}% of requests within the SLOs, vLLM ≈ {p100['vllm']:.0f}%, chunked "
         f"≈ {p100['vllm_chunked']:.0f}%",
         f"yes: {c100['mooncake']} req/s against {c100['coupled_chunked']} (chunked) and {c100['coupled']} ({names})",
         "**yes**" if o["mooncake_first"] == o["paper_mooncake_first"] else "**no**"),
        ("chunked prefill beats plain",
         "no: vLLM + chunked prefill was the worst at 100 ms" if not o["paper_chunked_above_plain"] else "yes",
         "yes, on both traces" if o["chunked_above_plain"] else "no",
         "**contradicts the paper** (why: the box)" if o["chunked_above_plain"] != o["paper_chunked_above_plain"]
         else "**yes**"),
        ("gain in FAST'25's request capacity ratio (share within the SLOs at the trace's own load)",
         " / ".join(f"+{100 * v:.0f}%" for v in g100.values()) + " at " + " / ".join(map(str, g100)) + " ms",
         " / ".join(f"{v:+.0f}%" for v in ours) + " at " + " / ".join(f"{x:g}" for x in ratio.columns) + " ms",
         "**no**: smaller gains" if all(v / 100 < g100.get(x, np.inf) for v, x in zip(ours, ratio.columns))
         else "partly"),
        ("\"75% more requests\"", "arXiv: 10P+10D vs 20 vLLM instances, real trace",
         "not run (other trace, simulated GPUs)", "**no** (we cannot)"),
    ]
    main = ("| claim | paper | ours (TBT ≤ 100 ms) | reproduced? |\n|---|---|---|---|\n"
            + "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows))
    more = [
        f"**Chunked prefill.** Our chunked coupled engine is idealised and knows output lengths (lecture 06). "
        f"Without early rejection, Mooncake's gain over it is {gains('coupled_chunked', col='gain_without_rejection_text')}.",
        f"**The paper's metric, on our runs.** Conversation trace at 1×, Mooncake against a coupled cluster without "
        f"prefix caching (as the paper's plain vLLM v0.5.1), lecture 06's `request_capacity_ratio`. The trace loads "
        f"our simulated nodes lightly at 1× (lecture 06).",
        f"**Our 90 % capacity gains.** Over coupled: requests {gains('coupled')}; prompt tokens "
        f"{gains('coupled', 'tokens')}. Over coupled + chunked: requests {gains('coupled_chunked')}; prompt tokens "
        f"{gains('coupled_chunked', 'tokens')}. A different metric: do **not** set these beside +59% … +498%.",
        f"**75% more requests.** vLLM met the TBT SLO for {_paper.VLLM_TBT_SLO_MET_PCT:.0f}% there. Best P:D: "
        f"≈ {_paper.BEST_PD_RATIO[0]}:{_paper.BEST_PD_RATIO[1]} in FAST'25; we run 8P+8D (lecture 06 sweeps the split).",
    ]
    if semantics is not None:
        a, b, c, d = _semantics_row(semantics)
        more.append(f"**{a.capitalize()}.** Paper: {b}. Ours: {c}. So {d}.")
    return main + "\n\n<details><summary>The rows in full, and the rules the baselines get</summary>\n\n" + \
        "\n\n".join(more) + "\n\n</details>"


# ----------------------------------------------------------------------- student policies
#: Replay speed of the policy leaderboard: 4× the conversation trace (13.6 req/s), where the Conductor's
#: choice matters (with early rejection: load balancing keeps < 90% of requests within the SLOs, kvcentric 96%).
LEADERBOARD_SPEED = 4.0
#: The leaderboard's built-in rows: the Conductor's four policies (kind "built-in") and the eight
#: routers of today's open-source stacks (kind "router"; lecture 09, :data:`mooncake_lab.sim.routers.ROUTERS`),
#: each with its system's defaults, placing the request on the prefill pool (decode: as its system does).
LEADERBOARD_BASELINES = (*sim.BASELINES, *ROUTERS)


def policy_leaderboard(policies, trace: Trace | str = "conversation", speed: float = LEADERBOARD_SPEED,
                       sort_by: str = sim.LEADERBOARD_SORT_BY, baselines=LEADERBOARD_BASELINES,
                       **config) -> pd.DataFrame:
    """:func:`mooncake_lab.sim.leaderboard` of ``policies`` (a function ``policy(req, view) -> int``, a
    list or a dict name → function) against ``baselines`` (default :data:`LEADERBOARD_BASELINES`: the
    four built-in policies and the eight routers), on ``trace`` replayed at ``speed``, on full Mooncake
    with single-node prefill instances (8 to choose from); ``config`` overrides :class:`ClusterConfig`
    fields. Same order as ``sim.leaderboard``: SLO attainment (at TBT ≤ 100 ms), best first, then mean
    TTFT; equal rows share a rank."""
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed: got {speed!r}; allowed: a replay factor > 0 (×)")
    cfg = config_of("mooncake", **{"cpp_group_size": 1, **config})
    tr = _trace(trace)
    board = sim.leaderboard(tr.replay(float(speed)), policies, config=cfg, baselines=baselines, sort_by=sort_by)
    board.attrs["requests"] = len(tr)   # what "completed" is out of
    return board


# ----------------------------------------------------------------------- heterogeneous cost
#: Rental price per GPU-hour (USD). ASSUMPTIONS to change, not market data:
#: 8-GPU server prices Reuters reported (Feb 2024), million yuan: H20 1.4, H800 ≈ 2 at launch.
SERVER_PRICE_M_YUAN = {"h20x8": 1.4, "h800x8": 2.0}
PRICE_USD_PER_GPU_HOUR = {
    "h800x8": 2.0,  # DeepSeek-V3 technical report (arXiv 2412.19437) §1: "assuming the rental price of the
                    # H800 GPU is $2 per GPU hour"
    "h20x8": 2.0 * SERVER_PRICE_M_YUAN["h20x8"] / SERVER_PRICE_M_YUAN["h800x8"],  # ASSUMPTION: $2 × the
                    # ratio of the 8-GPU server prices (SERVER_PRICE_M_YUAN) = $1.40
    "a800x8": 1.4,  # ASSUMPTION: priced like the H20 (an older, slower part; no public rental price found)
}
#: Price of moving KV between the prefill and the decode pool, USD per GB (1e9 B):
NETWORK_USD_PER_GB = {
    "over one RDMA fabric": 0.0,  # both pools on one cluster network: the NICs are in the node price
    "across cloud zones": 0.02,  # AWS EC2 data transfer across Availability Zones: $0.01/GB in each direction
}
#: The "private link" price §6 tries, USD per GB (= 1 USD per TB): far above the break-even, far below AWS.
PRIVATE_LINK_USD_PER_GB = 0.001
#: Request rate (req/s) the lecture sizes fleets for.
HETERO_RATE_RPS = 20.0
#: Mean load a pool is sized for (ASSUMPTION: lecture 04 showed queues explode as load nears 1).
HEADROOM = 0.8
#: Fleets compared: name → (prefill node, decode node).
FLEETS = {"H800 + H800": ("h800x8", "h800x8"), "H20 + H20": ("h20x8", "h20x8"),
          "H800 P + H20 D": ("h800x8", "h20x8"), "H20 P + H800 D": ("h20x8", "h800x8")}


def decode_context_tokens(trace: Trace | str = "conversation") -> float:
    """Mean KV tokens one decode slot holds, averaged over time: a request holds ``input + k`` tokens
    at its k-th step, so over its ``out`` steps ``input + out/2`` on average, and it occupies a slot
    for ``out`` steps — E[out·(input + out/2)] / E[out] (tokens)."""
    tr = _trace(trace)
    out, inp = tr.output_len.astype(np.float64), tr.input_len.astype(np.float64)
    return float((out * (inp + out / 2)).sum() / out.sum())


def _reused_tokens(tr: Trace) -> np.ndarray:
    """Prompt tokens each request reuses (cached locally or fetched) in full Mooncake at 1×."""
    a = run("mooncake", 1.0, tr).arrays
    return np.clip(a["cached_tok"], 0, None) + np.clip(a["fetched_tok"], 0, None)


def node_rates(trace: Trace | str = "conversation", node: str = "a800x8", tbt_slo_ms: float = 100,
               ttft_slo_s: float = g.TTFT_SLO_S, preset: str = g.PRESET, model: str = "llama2-70b") -> dict:
    """Requests per second one ``node`` sustains as a prefill node and as a decode node on ``trace``.

    prefill_rps = 1 / mean prefill time (each request's uncached tokens after its reused prefix, the
    reuse of full Mooncake at 1×); decode_rps = (largest batch whose step ≤ TBT SLO and whose KV fits,
    at :func:`decode_context_tokens` per slot) / step time / mean output tokens. Also: ``too_slow``,
    the share of requests whose prefill alone exceeds the TTFT SLO on this node.
    """
    from ..roofline import cm_decode_step_time, cm_prefill_time, cost_model

    tr = _trace(trace)
    cm = cost_model(model, node, preset)
    c = cm.as_array()
    reused = _reused_tokens(tr)
    pt = np.array([cm_prefill_time(c, int(n - k), int(k)) for n, k in zip(tr.input_len, reused)])
    ctx = decode_context_tokens(tr)
    slo = tbt_slo_ms / 1e3
    b = 0
    while (b + 1) * ctx <= cm.kv_capacity_tokens and cm_decode_step_time(c, b + 1, (b + 1) * ctx) <= slo:
        b += 1
    step = cm_decode_step_time(c, max(b, 1), max(b, 1) * ctx)
    return dict(node=str(node), prefill_s_mean=float(pt.mean()), prefill_rps=float(1.0 / pt.mean()),
                too_slow=float((pt > ttft_slo_s).mean()), decode_batch=int(b), decode_step_s=float(step),
                decode_rps=float(b / step / tr.output_len.mean()) if b else 0.0,
                kv_gb_per_request=float(tr.input_len.mean() * cm.kv_bytes_per_token / 1e9))


def fleet_cost(rate_rps: float, prefill_node: str = "h800x8", decode_node: str = "h20x8",
               trace: Trace | str = "conversation", network_usd_per_gb: float = 0.0, prices: dict | None = None,
               headroom: float = HEADROOM, tbt_slo_ms: float = 100) -> dict:
    """Nodes and USD for serving ``rate_rps`` req/s of ``trace`` with a prefill pool of ``prefill_node``
    and a decode pool of ``decode_node``, each pool loaded to ``headroom`` on average.

    n_pool = ceil(rate / (headroom × per-node rate)); GPU cost = nodes × GPUs × price per GPU-hour;
    network cost = rate × 3600 × KV GB per request × ``network_usd_per_gb`` (each prompt's KV crosses
    from prefill to decode once). Returns nodes, USD per hour, USD per million requests.
    """
    from ..hardware import get_node

    if not (isinstance(rate_rps, (int, float)) and math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps: got {rate_rps!r}; allowed: a request rate > 0 (req/s)")
    if not (isinstance(network_usd_per_gb, (int, float)) and math.isfinite(network_usd_per_gb)
            and network_usd_per_gb >= 0):
        raise ValueError(f"network_usd_per_gb: got {network_usd_per_gb!r}; allowed: a price ≥ 0 (USD per GB)")
    if not (isinstance(headroom, (int, float)) and 0 < headroom <= 1):
        raise ValueError(f"headroom: got {headroom!r}; allowed: a load in (0, 1]")
    prices = PRICE_USD_PER_GPU_HOUR if prices is None else prices
    for nd in (prefill_node, decode_node):
        if nd not in prices:
            raise ValueError(f"prices: no USD per GPU-hour for node {nd!r}; given for: {', '.join(prices)}")
    p = node_rates(trace, prefill_node, tbt_slo_ms)
    d = node_rates(trace, decode_node, tbt_slo_ms)
    if d["decode_rps"] <= 0:
        raise ValueError(f"decode_node: {decode_node!r} cannot decode one request within a {tbt_slo_ms} ms TBT")
    n_p = math.ceil(rate_rps / (headroom * p["prefill_rps"]) - 1e-9)
    n_d = math.ceil(rate_rps / (headroom * d["decode_rps"]) - 1e-9)
    usd_p = n_p * get_node(prefill_node).n_gpus * prices[prefill_node]
    usd_d = n_d * get_node(decode_node).n_gpus * prices[decode_node]
    usd_net = rate_rps * 3600.0 * p["kv_gb_per_request"] * network_usd_per_gb
    per_m = 1e6 / (rate_rps * 3600.0)
    return dict(prefill_node=prefill_node, decode_node=decode_node, n_prefill=n_p, n_decode=n_d,
                prefill_usd_per_hour=usd_p, decode_usd_per_hour=usd_d, network_usd_per_hour=usd_net,
                usd_per_hour=usd_p + usd_d + usd_net, usd_per_million_requests=(usd_p + usd_d + usd_net) * per_m,
                prefill_too_slow=p["too_slow"])


def hetero_table(rate_rps: float = 20.0, trace: Trace | str = "conversation", networks: dict | None = None,
                 fleets: dict | None = None, **kw) -> pd.DataFrame:
    """:func:`fleet_cost` for every fleet × network price (one row each; ``kw`` goes to fleet_cost)."""
    networks = NETWORK_USD_PER_GB if networks is None else networks
    fleets = FLEETS if fleets is None else fleets
    rows = []
    for net, usd_gb in networks.items():
        for name, (pn, dn) in fleets.items():
            # one fabric: a homogeneous fleet's transfers never leave its cluster
            price = usd_gb if pn != dn else 0.0
            rows.append(dict(fleet=name, network=net, **fleet_cost(rate_rps, pn, dn, trace, price, **kw)))
    return pd.DataFrame(rows)


def network_break_even_usd_per_gb(rate_rps: float = 20.0, trace: Trace | str = "conversation",
                                  hetero: tuple = ("h800x8", "h20x8"), **kw) -> float:
    """Price of moving KV at which the heterogeneous fleet costs as much as the cheaper homogeneous fleet of
    its two node types (0 if it is not cheaper even with free transfers), in USD per GB — the lecture
    speaks in USD per TB: :func:`network_break_even_usd_per_tb` (× 1,000)."""
    pn, dn = hetero
    het = fleet_cost(rate_rps, pn, dn, trace, 0.0, **kw)
    homo = min(fleet_cost(rate_rps, n, n, trace, 0.0, **kw)["usd_per_hour"] for n in (pn, dn))
    saving = homo - het["usd_per_hour"]
    gb_per_hour = rate_rps * 3600.0 * node_rates(trace, pn)["kv_gb_per_request"]
    return max(0.0, saving / gb_per_hour)


def network_break_even_usd_per_tb(rate_rps: float = 20.0, trace: Trace | str = "conversation",
                                  hetero: tuple = ("h800x8", "h20x8"), **kw) -> float:
    """The break-even network price in USD per TB (1 TB = 1,000 GB), the unit the lecture, its glossary
    and Question 4 use: :func:`network_break_even_usd_per_gb` × 1,000."""
    return 1e3 * network_break_even_usd_per_gb(rate_rps, trace, hetero, **kw)


# ------------------------------------------------------------------------------ tables for people
#: Admission policies as the tables name them.
ADMISSION_NAMES = {"none": "none (admit all)", "baseline": "baseline", "early": "early", "predicted": "predicted"}
#: Node types as the tables name them.
NODE_NAMES = {"a800x8": "8×A800", "h800x8": "8×H800", "h20x8": "8×H20"}


def _percent(x: float) -> str:
    """A relative gain as a table cell: "+469%", "unbounded" where the baseline never reaches 90 %."""
    return _pct(x)


def _counts(values) -> list[str]:
    """Whole numbers as a table shows them to people: "1,015", "11,613" (never "1015.0")."""
    return [f"{int(round(float(v))):,}" for v in values]


def systems_table() -> pd.DataFrame:
    """The systems of the lecture, one row each, in words: cluster, how prefill is routed, how KV reaches
    decode, what admission does. Coupled nodes have no global pool (their "kvcentric" routes like
    cache-aware) and move no KV."""
    rows = {}
    for s in SYSTEMS:
        cfg = config_of(s)
        coupled = s.startswith("coupled")
        rows[LABELS[s]] = {
            "nodes": cfg.label,
            "prefill routing": ("own cache, no global pool" if coupled else
                                "KVCache-centric" if cfg.prefill_policy == "kvcentric" else "least queued work"),
            "KV to decode": ("stays on the node" if coupled else
                             "layer by layer" if cfg.layerwise_kv_transfer else "after the prefill"),
            "admission": "early rejection" if cfg.admission == "predicted" else "admit all"}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "system"
    return out


def capacity_view(caps: dict) -> pd.DataFrame:
    """90 % capacity (req/s, one decimal) per trace and system, one column per TBT SLO."""
    out = pd.concat({_name(t): cap.apply(lambda col: col.map(lambda v: _cap_text(v, t))).rename(index=LABELS)
                     for t, cap in caps.items()}, names=["trace", "system"])
    out.columns = [f"TBT ≤ {x:g} ms (req/s)" for x in out.columns]
    return out


def counting_view(caps: dict, tokcaps: dict, tbt_slo_ms: float = 100, systems=MAIN_SYSTEMS) -> pd.DataFrame:
    """90 % capacity (req/s) counting requests and counting prompt tokens, per trace and system (``systems``:
    :data:`MAIN_SYSTEMS` by default, ``None`` for all); below the lowest swept rate reads "< 3.3"."""
    systems = SYSTEMS if systems is None else systems
    out = pd.concat({_name(t): pd.DataFrame({"counting requests (req/s)": [_cap_text(caps[t].loc[s, tbt_slo_ms], t)
                                                                           for s in systems],
                                             "counting prompt tokens (req/s)": [_cap_text(tokcaps[t].loc[s, tbt_slo_ms], t)
                                                                                for s in systems]},
                                            index=[LABELS[s] for s in systems])
                     for t in caps}, names=["trace", "system"])
    return out


def rejection_view(profile: pd.DataFrame) -> pd.DataFrame:
    """A :func:`rejection_profile` for people: one row per replay speed, percentages and whole tokens."""
    rows = {}
    for v, r in profile.iterrows():
        rows[f"{v:g}×"] = {"rate (req/s)": round(float(r.rate_rps), 1),
                           "requests rejected (%)": round(100 * float(r.rejected_requests), 1),
                           "prompt tokens rejected (%)": round(100 * float(r.rejected_tokens), 1),
                           "mean prompt, rejected (tokens)": ("none rejected" if not np.isfinite(r.mean_prompt_rejected)
                                                              else f"{r.mean_prompt_rejected:,.0f}")}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "replay speed"
    return out


def shares_view(shares: pd.DataFrame) -> pd.DataFrame:
    """A :func:`gain_shares` table for people: one row per part, named in words."""
    how = {"disaggregation": "plain 8P+8D − coupled", "interaction": "the rest of the whole gain"}
    out = pd.DataFrame({"measured as": [how.get(p, "Mooncake − Mooncake without it") for p in shares.index],
                        "gain (req/s)": shares.gain_rps.round(1).to_numpy(),
                        "share of the gain (%)": (100 * shares.share).round(0).astype("Int64").to_numpy()},
                       index=pd.Index([PART_NAMES[p] for p in shares.index], name="part"))
    return out


def admission_view(tab: pd.DataFrame) -> pd.DataFrame:
    """An :func:`admission_control` table for people: capacity (req/s) and the rejections at its speed, by check."""
    v = tab.attrs.get("speed", 5.0)
    out = pd.DataFrame({"90 % capacity (req/s)": tab.capacity_rps.round(1),
                        f"rejected at {v:g}×": _counts(tab.rejected),
                        "of which on the prefill load": _counts(tab.by_prefill_load),
                        "on the decode load only": _counts(tab.by_decode_load_only),
                        "after prefill (baseline's decode check)": _counts(tab.after_prefill),
                        "too large for the KV memory": _counts(tab.too_large)}, index=tab.index)
    out.index = [ADMISSION_NAMES[k] for k in tab.index]
    out.index.name = "admission"
    return out


def comparison_view(comp: pd.DataFrame) -> pd.DataFrame:
    """A :func:`paper_comparison` table for people: Mooncake's gain (and its gain without rejection) in %."""
    out = comp.assign(baseline=comp.baseline.map(LABELS), trace=comp.trace.map(_name),
                      counting=comp.counting.map({"requests": "requests", "tokens": "prompt tokens"}))
    out = out.set_index(["trace", "counting", "baseline"])
    return pd.DataFrame({"Mooncake's gain": out.gain.map(_percent),
                         "gain without early rejection": out.gain_without_rejection.map(_percent)})


def rates_view(rates, full: bool = True) -> pd.DataFrame:
    """:func:`node_rates` of several nodes for people (``rates``: a list of their dicts); ``full=False``:
    only the three columns the lecture's argument reads (prefill and decode rates, prefills over 30 s)."""
    rows = {}
    for r in rates:
        rows[NODE_NAMES.get(r["node"], r["node"])] = {
            "prefill (req/s per node)": round(r["prefill_rps"], 2),
            "prefills over 30 s (%)": round(100 * r["too_slow"], 1), "decode (req/s per node)": round(r["decode_rps"], 1),
            **({"decode batch (requests)": int(r["decode_batch"]), "decode step (ms)": round(1e3 * r["decode_step_s"], 1),
                "KV per request (GB)": round(r["kv_gb_per_request"], 1)} if full else {})}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "node"
    return out


def costs_view(costs: pd.DataFrame) -> pd.DataFrame:
    """A :func:`hetero_table` for people: nodes as integers, USD per hour and per million requests in whole
    dollars ("2,222", never "2222.0"), one row per network price × fleet."""
    out = costs.set_index(["network", "fleet"])
    return pd.DataFrame({"prefill nodes": out.n_prefill.astype(int), "decode nodes": out.n_decode.astype(int),
                         "USD per hour": _counts(out.usd_per_hour),
                         "USD per million requests": _counts(out.usd_per_million_requests)}, index=out.index)


def leaderboard_view(board: pd.DataFrame, full: bool = False) -> pd.DataFrame:
    """A :func:`policy_leaderboard` for people: rank, kind, the share within both SLOs in %, mean TTFT in s;
    ``full=True`` adds p99 TTFT, the shares of prompt tokens found in the instance's own cache and fetched from
    another's, and the completed requests out of all (``board`` itself keeps every column)."""
    cols = {"rank": board["rank"].astype(int), "kind": board.kind,
            "within both SLOs (%)": (100 * board.slo_attainment).round(1),
            "mean TTFT (s)": board.ttft_mean_s.round(2)}
    if full:
        n = board.attrs.get("requests")
        cols.update({"p99 TTFT (s)": board.ttft_p99_s.round(2),
                     "prompt tokens in own cache (%)": (100 * board.hit_ratio).round(1),
                     "prompt tokens fetched (%)": (100 * board.fetched_ratio).round(1),
                     (f"completed (of {n:,})" if n else "completed"): _counts(board.completed)})
    out = pd.DataFrame(cols, index=board.index)
    out.index.name = "policy"
    return out


# ----------------------------------------------------------------------------------- reproduce
def _caps(trace: str) -> dict:
    curve = capacity_curve(trace=trace, progress=False)
    return {"requests": capacity_table(curve), "tokens": capacity_table(curve, "tokens")}


@metric_group("capstone")
def _metrics() -> list[Metric]:
    src = ("90 % capacity (the course's metric: highest rate with ≥ 90% of requests meet TTFT ≤ 30 s and TBT ≤ X ms), {tr} trace, 16 nodes "
           "of 8×A800, LLaMA2-70B, preset modern; mooncake = 8P+8D, CPP groups of 2, kvcentric, layer-wise KV "
           "transfer, prediction-based early rejection; replay speeds " + f"{SPEEDS}")
    paper = ("not comparable: FAST'25's +59% … +498% are gains in the share of requests meeting the SLOs at "
             "the trace's own load (lecture 06's request_capacity_ratio); arXiv: +75% requests (10P+10D vs 20 vLLM)")
    out, gains = [], []
    for trace in TRACES:
        caps = _caps(trace)
        cap = caps["requests"]
        gains += [capacity_gain(cap, x) for x in TBT_SLOS_MS]
        key = "" if trace == "conversation" else "toolagent_like."
        for s in ("mooncake", "disaggregated", "coupled", "coupled_chunked"):
            for x in TBT_SLOS_MS:
                out.append(Metric(f"capstone.{key}effective_capacity_rps.{s}.tbt{x}ms", float(cap.loc[s, x]), "req/s",
                                  None, src.format(tr=trace)))
        for x in TBT_SLOS_MS:
            gain = capacity_gain(cap, x)
            if math.isfinite(gain):
                out.append(Metric(f"capstone.{key}capacity_gain.tbt{x}ms", gain, "× − 1 vs coupled", None,
                                  src.format(tr=trace) + "; " + paper))
        here = src.format(tr=trace)
        out.append(Metric(f"capstone.{key}capacity_gain_vs_chunked.tbt100ms",
                          capacity_gain(cap, 100, "coupled_chunked"), "× − 1", None,
                          here + "; baseline: coupled with 512-token chunked prefill"))
        if math.isfinite(capacity_gain(caps["tokens"], 100)):
            out.append(Metric(f"capstone.{key}capacity_gain_tokens.tbt100ms", capacity_gain(caps["tokens"], 100),
                              "× − 1 vs coupled", None, here + "; ≥ 90% of prompt tokens instead of requests"))
        if math.isfinite(capacity_gain(cap, 100)):
            for part, r in gain_shares(cap, 100).iterrows():
                # the early_rejection part switches all admission off (MECHANISMS)
                name, note = part, ("; the part measured by admission='none' (all admission checks off)"
                                    if part == "early_rejection" else "")
                out.append(Metric(f"capstone.{key}share.{name}.tbt100ms", float(r.share), "fraction of the gain", None,
                                  src.format(tr=trace) + "; leave-one-out, interaction = remainder" + note))
    finite = [x for x in gains if math.isfinite(x)]
    rsrc = (f"the range of Mooncake's gain over the coupled cluster (no chunking) across the traces {TRACES} and TBT "
            f"SLOs {TBT_SLOS_MS} ms ({len(gains) - len(finite)} unbounded: the coupled cluster never reaches 90%); "
            "not comparable with FAST'25's +59% … +498%, gains in the share of requests meeting the SLOs at the "
            "trace's own load (lecture 06's request_capacity_ratio)")
    out.append(Metric("capstone.capacity_gain_range.min", min(finite), "× − 1", None, rsrc))
    out.append(Metric("capstone.capacity_gain_range.max", max(finite), "× − 1", None, rsrc))
    t = hetero_table()
    hsrc = ("conversation trace at 20 req/s, pools sized for 80% load from the cost model (modern); prices "
            "ASSUMED: H800 $2/GPU-h (DeepSeek-V3 report), H20 $1.4/GPU-h (Reuters server-price ratio); network "
            "$0.02/GB across cloud zones (AWS)")
    for _, r in t.iterrows():
        name = r.fleet.lower().replace(" + ", "_").replace(" ", "")  # e.g. "h800p_h20d"
        net = "fabric" if r.network == "over one RDMA fabric" else "cross_zone"
        out.append(Metric(f"capstone.hetero.usd_per_million_requests.{name}.{net}", float(r.usd_per_million_requests),
                          "USD / 1M requests", None, hsrc))
    out.append(Metric("capstone.hetero.network_break_even_usd_per_tb", network_break_even_usd_per_tb(),
                      "USD / TB", None, hsrc + "; KV-transfer price at which H800P+H20D stops saving money"))
    return out


@figure_group("capstone")
def _figures() -> dict:
    from ..plots import capstone as plots
    from ..plots.goodput import plot_capacity

    curve = capacity_curve(progress=False)
    cap = capacity_table(curve)
    return {"l08_capacity": plot_capacity(curve[curve.system.isin(["mooncake", "coupled", "coupled_chunked"])], 100),
            "l08_gain_waterfall": plots.gain_waterfall(
                gain_shares(cap, 100), float(cap.loc["coupled", 100]),
                title="Where Mooncake's gain comes from (conversation, TBT ≤ 100 ms)"),
            "l08_hetero_cost": plots.fleet_costs(hetero_table(), rate_rps=HETERO_RATE_RPS)}
