"""Lecture 07: overload-oriented scheduling — baseline vs early vs prediction-based rejection (arXiv §7).

:func:`overload_comparison` runs the simulator once per admission policy on the same overloaded
trace. The paper's run (arXiv v3 Table 3: 8P+8D, ~23k real requests at 2× replay) used a trace
that is not public in that form; ours is the **toolagent-like synthetic trace** (23,608 requests,
``synthetic_trace(preset="toolagent-like")``), with the released conversation trace as a second
column in the notebook.

Regime. The paper's overload is decode-bound (hence a decode-side check that wastes prefills). Our
default cost model is not: with the ``calibrated`` preset the prefill pool saturates first (2.06×
its capacity at 2× on toolagent) and a LLaMA2-70B decode node holds 1.34 M tokens of KV, so at 2×
the decode KV peaks at 13% and all three policies reject the same requests (TTFT checks only:
2,195 each). To recreate a decode-bound 2× overload we use the ``modern`` preset (prefill at 0.58
of capacity at 2×) and cap decode KV at 40,000 tokens per node (DEFAULT_CONFIG; both sliders).
"""
from __future__ import annotations

import pandas as pd

from .. import sim
from ..reproduce import Metric, metric_group
from ..traces import Trace, cached_trace

__all__ = ["overload_comparison", "PAPER_TABLE3_REJECTED", "DEFAULT_CONFIG", "DEFAULT_SPEED", "POLICIES"]

#: arXiv v3 Table 3: rejected requests, 8P+8D, ~23k real requests replayed at 2× (reference/mooncake_paper.md).
PAPER_TABLE3_REJECTED = {"baseline": 4183, "early": 3771, "predicted": 3589}
_TABLE3 = "arXiv v3 Table 3 (8P+8D, ~23k real requests, 2× replay)"
POLICIES = ("baseline", "early", "predicted")
DEFAULT_SPEED = 2.0  # arXiv v3 §8.2: the trace replayed at 2× speed
#: A decode-bound overload at 2× (module docstring): fast prefill (``modern``), 40k-token decode KV.
DEFAULT_CONFIG = dict(preset="modern", decode_kv_capacity_tokens=40_000.0)


def overload_comparison(trace: Trace | str = "toolagent-like", speed: float = DEFAULT_SPEED,
                        policies=POLICIES, dt: float = 10.0, **config) -> pd.DataFrame:
    """One row per admission policy on ``trace`` replayed at ``speed``.

    Columns: completed, rejected (total, at_arrival, after_prefill, too_large), wasted_prefill_s
    (s of prefill spent on requests rejected after it), goodput (completed within both SLOs),
    load_corr (Pearson correlation of sampled prefill and decode load, ``dt`` s apart; < 0 =
    anti-phase), mean loads, and the paper's rejected count. ``config`` goes to
    :class:`~mooncake_lab.sim.ClusterConfig` on top of :data:`DEFAULT_CONFIG` (8P+8D).
    """
    tr = cached_trace(trace) if isinstance(trace, str) else trace  # "toolagent-like" = synthetic_trace(preset=…)
    tr = tr.replay(speed) if speed != 1 else tr
    cfg = {**DEFAULT_CONFIG, **config}
    rows = []
    for p in policies:
        res = sim.simulate(tr, sim.ClusterConfig(admission=p, **cfg))
        s = res.summary()
        ts = res.timeseries(dt)
        rows.append({"policy": p, "completed": s["completed"], "rejected": s["rejected"],
                     "rejected_at_arrival": s["rejected_at_arrival"],
                     "rejected_after_prefill": s["rejected_after_prefill"],
                     "rejected_too_large": s["rejected_too_large"], "wasted_prefill_s": s["wasted_prefill_s"],
                     "goodput": int(round(s["slo_attainment"] * s["requests"])),
                     "load_corr": res.load_correlation(dt), "prefill_load_mean": float(ts.prefill_load.mean()),
                     "decode_load_mean": float(ts.decode_load.mean()),
                     "paper_rejected": PAPER_TABLE3_REJECTED.get(p)})
    return pd.DataFrame(rows).set_index("policy")


@metric_group("overload")
def _metrics() -> list[Metric]:
    df = overload_comparison()
    src = (f"{_TABLE3}; ours: toolagent-like synthetic trace (23,608 requests) at {DEFAULT_SPEED}×, "
           f"8P+8D, preset 'modern', decode KV 40k tokens/node (a decode-bound overload)")
    out = [Metric(f"overload.rejected.{p}", float(df.loc[p, "rejected"]), "requests", PAPER_TABLE3_REJECTED[p], src)
           for p in POLICIES]
    out += [Metric(f"overload.completed.{p}", float(df.loc[p, "completed"]), "requests", None, src)
            for p in POLICIES]
    out += [Metric(f"overload.wasted_prefill_s.{p}", float(df.loc[p, "wasted_prefill_s"]), "s", None, src)
            for p in POLICIES]
    out += [Metric(f"overload.load_corr.{p}", float(df.loc[p, "load_corr"]), "Pearson r", None,
                   src + "; arXiv Fig. 9–10 show anti-phase prefill/decode load under early rejection")
            for p in ("early", "predicted")]
    return out
