"""Lecture 03 (trace part): what the released Mooncake traces look like, and how close our
synthetic stand-ins come to them.

Every function takes a :class:`~mooncake_lab.traces.Trace` or a trace name (loaded with
:func:`~mooncake_lab.traces.load_trace_or_synthetic`, so a missing file falls back to the
calibrated synthetic stand-in with a warning) and returns a tidy DataFrame. Times in seconds,
lengths in tokens, ratios as fractions 0..1. Block popularity and cache hit curves are in
:mod:`mooncake_lab.experiments.l03_cache` / :mod:`mooncake_lab.prefix_cache`.
"""
from __future__ import annotations

from .. import paper

import numpy as np
import pandas as pd

from .. import prefix_cache as pc
from ..reproduce import Metric, figure_group, metric_group
from ..synthetic import TARGETS, synthetic_trace
from ..traces import Trace, as_trace, cached_trace

__all__ = ["trace_summary", "arrivals_per_minute", "length_cdf", "timestamp_gaps", "preset_calibration",
           "PAPER_TABLE2", "trace_metrics", "summary_table", "gap_table", "gap_box"]

#: FAST'25 Table 2: requests, average input and
#: output length (tokens) and cache ratio (fraction) of the released traces.
PAPER_TABLE2 = paper.FAST25_TABLE2
_T2 = "FAST'25 Table 2"


# The real trace if available, else its calibrated synthetic stand-in (named "synthetic:<preset>");
# parsed once per process and shared with notebooks, dashboards and the other l03 module.
_load = cached_trace
_trace = as_trace


def _preset(preset: str, seed: int = 0) -> Trace:
    return cached_trace(preset) if seed == 0 else synthetic_trace(preset, seed=seed)


def trace_summary(traces=("conversation", "synthetic", "toolagent-like")) -> pd.DataFrame:
    """One row per trace: :meth:`Trace.describe` plus distinct timestamps and the source."""
    rows = []
    for t in map(_trace, traces):
        d = t.describe().to_dict()
        d["distinct_timestamps"] = int(len(np.unique(t.arrival_s)))
        rows.append({"trace": t.name, **d, "source": t.source})
    df = pd.DataFrame(rows)
    counts = ["requests", "unique_blocks", "distinct_timestamps", "max_input", "max_output", "median_input",
              "median_output"]
    for c in counts:  # whole numbers print as 12,031, not 12,031.0
        if c in df and (df[c] == df[c].round()).all():
            df[c] = df[c].astype(int)
    return df


def summary_table(traces=("conversation", "synthetic", "toolagent-like"), full: bool = False) -> pd.DataFrame:
    """:func:`trace_summary` for reading: one row per trace, counts as integers, lengths in tokens.
    The lecture shows four columns (requests, mean and p99 prompt, mean answer); ``full=True`` all."""
    from .l02_storage import _count
    from .l03_cache import trace_label

    df = trace_summary(traces)
    if not full:
        return pd.DataFrame({
            "requests": [_count(v) for v in df["requests"]],
            "mean prompt (tokens)": [_count(v) for v in df["mean_input"]],
            "p99 prompt (tokens)": [_count(v) for v in df["p99_input"]],
            "mean answer (tokens)": [_count(v) for v in df["mean_output"]],
        }, index=pd.Index([trace_label(n) for n in df["trace"]], name="trace"))
    return pd.DataFrame({
        "requests": [_count(v) for v in df["requests"]],
        "duration (s)": [_count(v) for v in df["duration_s"]],
        "requests per s": [f"{v:.1f}" for v in df["rate_per_s"]],
        "mean prompt (tokens)": [_count(v) for v in df["mean_input"]],
        "median prompt (tokens)": [_count(v) for v in df["median_input"]],
        "p99 prompt (tokens)": [_count(v) for v in df["p99_input"]],
        "mean answer (tokens)": [_count(v) for v in df["mean_output"]],
        "distinct blocks": [_count(v) for v in df["unique_blocks"]],
        "distinct arrival times": [_count(v) for v in df["distinct_timestamps"]],
    }, index=pd.Index([trace_label(n) for n in df["trace"]], name="trace"))


def arrivals_per_minute(trace="conversation", bin_s: float = 60.0) -> pd.DataFrame:
    """Requests arriving in each ``bin_s``-second bin: columns bin, start_s, requests, rate_per_s."""
    t = _trace(trace)
    if not (isinstance(bin_s, (int, float)) and bin_s > 0):
        raise ValueError(f"bin_s must be a positive number of seconds, got {bin_s!r}")
    if len(t) == 0:
        return pd.DataFrame({"bin": [], "start_s": [], "requests": [], "rate_per_s": []})
    rel = t.arrival_s - t.arrival_s[0]
    counts = np.bincount((rel // bin_s).astype(np.int64))
    return pd.DataFrame({"bin": np.arange(len(counts)), "start_s": t.arrival_s[0] + bin_s * np.arange(len(counts)),
                         "requests": counts, "rate_per_s": counts / bin_s})


def length_cdf(trace="conversation", which=("input", "output")) -> pd.DataFrame:
    """Empirical CDFs of lengths: columns kind ("input"/"output"), tokens, cdf (share of requests ≤ tokens)."""
    t = _trace(trace)
    which = (which,) if isinstance(which, str) else tuple(which)
    frames = []
    for k in which:
        if k not in ("input", "output"):
            raise ValueError(f"which must name 'input' and/or 'output', got {k!r}")
        v = getattr(t, f"{k}_len")
        vals, counts = np.unique(v, return_counts=True)
        frames.append(pd.DataFrame({"kind": k, "tokens": vals, "cdf": np.cumsum(counts) / len(v)}))
    return pd.concat(frames, ignore_index=True)


def timestamp_gaps(trace="conversation") -> pd.DataFrame:
    """Gaps between consecutive *distinct* arrival times (ms resolution): columns gap_s, count, share.

    The conversation trace's timestamps are bucketed: 1,180 distinct values ~3.000 s apart, each
    shared by ~10 requests (MANIFEST.md); the synthetic trace's are Poisson (many distinct gaps).
    """
    t = _trace(trace)
    distinct = np.unique(np.round(t.arrival_s * 1000.0))
    gaps_ms = np.diff(distinct)
    vals, counts = np.unique(gaps_ms, return_counts=True)
    return pd.DataFrame({"gap_s": vals / 1000.0, "count": counts,
                         "share": counts / max(len(gaps_ms), 1)})


def gap_table(gaps: pd.DataFrame, n: int = 3) -> pd.DataFrame:
    """The ``n`` most common gaps of :func:`timestamp_gaps`, for reading: gap (s) as the index, count, share (%)."""
    from .l02_storage import _count

    top = gaps.nlargest(n, "count")
    return pd.DataFrame({"times seen": [_count(c) for c in top["count"]],
                         "share of all gaps (%)": [f"{100 * v:.1f}" for v in top["share"]]},
                        index=pd.Index([f"{g:.3f}" for g in top["gap_s"]], name="gap between arrival times (s)"))


def gap_box(gaps: pd.DataFrame, n: int = 3) -> str:
    """:func:`gap_table` as a markdown table inside a collapsible box."""
    from .l03_cache import details, markdown_table

    return details("The most common gaps between arrival times", markdown_table(gap_table(gaps, n)))


def preset_calibration(seed: int = 0) -> pd.DataFrame:
    """Each synthetic preset's statistics vs its targets: preset, statistic, target, ours, rel_error."""
    rows = []
    for preset, target in TARGETS.items():
        t = _preset(preset, seed)
        ours = {"requests": len(t), "duration_s": t.duration_s, "mean_input": float(t.input_len.mean()),
                "mean_output": float(t.output_len.mean()), "cache_ratio": pc.infinite_cache_hit_ratio(t),
                "median_input": float(np.median(t.input_len)),
                "p99_input": float(np.percentile(t.input_len, 99))}
        for k, v in target.items():
            rows.append({"preset": preset, "statistic": k, "target": float(v), "ours": float(ours[k]),
                         "rel_error": ours[k] / v - 1.0})
    return pd.DataFrame(rows)


def _four(prefix: str, t: Trace, paper: dict, note: str) -> list[Metric]:
    src = f"{note}{_T2}; ours: {t.name} ({t.source})"
    return [
        Metric(f"{prefix}.requests", float(len(t)), "requests", paper["requests"], src),
        Metric(f"{prefix}.mean_input", float(t.input_len.mean()), "tokens", paper["mean_input"], src),
        Metric(f"{prefix}.mean_output", float(t.output_len.mean()), "tokens", paper["mean_output"], src),
        Metric(f"{prefix}.cache_ratio_inf", pc.infinite_cache_hit_ratio(t), "fraction", paper["cache_ratio"],
               src + "; token-weighted hit ratio of an infinite prefix cache (paper: 'cache ratio')"),
    ]


@metric_group("trace")
def trace_metrics() -> list[Metric]:
    """Requests, mean lengths and infinite-cache ratio of each trace vs FAST'25 Table 2."""
    out: list[Metric] = []
    for name in ("conversation", "synthetic"):
        t = _load(name)
        note = "" if t.name == name else "SYNTHETIC STAND-IN (the real trace is unavailable here): "
        out += _four(f"trace.{name}", t, PAPER_TABLE2[name], note)
    out += _four("trace.toolagent_like", _preset("toolagent-like"), PAPER_TABLE2["toolagent"],
                 "calibrated preset (the real toolagent trace is not shipped): ")
    return out


@figure_group("trace")
def trace_figures() -> dict:
    """Headline figures of lecture 03's trace part (conversation trace, or its stand-in)."""
    from ..plots import traces as plots
    from .l03_cache import block_popularity_table

    t = _load("conversation")
    return {
        "l03_arrivals_per_minute": plots.arrivals(arrivals_per_minute(t), t.name),
        "l03_length_cdfs": plots.length_cdfs(length_cdf(t), t.name),
        "l03_timestamp_gaps": plots.timestamp_gaps(timestamp_gaps(t), t.name),
        "l03_block_popularity": plots.block_popularity(block_popularity_table(t), t.name),
    }
