"""Lecture 02 — trading storage for computation: reload vs recompute, SSD crossover, Eq. 2, overlap.

Recompute times assume the prefill runs at ``mfu`` = 60% of peak (:data:`PREFILL_MFU`,
:func:`storage.seed_preset`), over a 4,096-token prefix unless told otherwise; the layer-wise
overlap experiment defaults to the "calibrated" preset (the lecture passes "ideal").

The ``*_table`` functions turn an experiment's frame into the table the lecture shows: labelled
columns with their units, counts as integers, floats rounded (strings, so nothing prints in
scientific notation); the experiment's own frame keeps the raw numbers.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .. import paper
from .. import storage as st
from ..hardware import SSD_DRIVE_READ_BW, TIER_NAMES, get_node
from ..models import _check_count, get_model
from ..reproduce import Metric, figure_group, metric_group
from ..validate import items, real
from ..roofline import kv_load_time, prefill_time

__all__ = ["reload_vs_recompute", "speedup_vs_bandwidth", "crossover_table", "eq2_table",
           "layerwise_overlap", "kv_footprint", "tier_bandwidths", "ssd_claims", "request_breakdown",
           "layerwise_store", "eq2_curves", "metrics", "figures",
           "footprint_table", "tier_table", "speedup_table", "crossover_view", "ssd_table", "request_table",
           "fig7_table", "fig7_implied_note", "overlap_table", "eq2_view", "eq2_vs_ours",
           "PREFILL_MFU", "REQUEST_TOKENS", "SEED_REQUEST_TOKENS", "FOOTPRINT_MODELS", "SSD_SWEEP_GBS", "PAPER_EQ2", "fig7_comparison",
           "fig7_implied_store"]

#: The share of peak FLOP/s every recompute time of the lecture assumes (60%).
PREFILL_MFU = st.SEED_MFU
#: The lecture's example request (§4): 8.7k tokens, half of them cached.
REQUEST_TOKENS = 8_700
#: The same request under its older name (kept for code that uses it).
SEED_REQUEST_TOKENS = REQUEST_TOKENS
#: FAST'25 Eq. 2's quoted break-even bandwidths, GB/s, for LLaMA3-70B at p = 8192 (FAST'25 §2.3,
#: text after Eq. 2: "6 GB/s" for 8×A800, "19 GB/s" for 8×H800); node → (prefix_len, GB/s).
PAPER_EQ2 = paper.EQ2_MIN_GBS
#: SSD bandwidths swept by the crossover figure: 1 … 1,000 GB/s (one slow drive … beyond PCIe).
SSD_SWEEP_GBS = np.geomspace(1.0, 1000.0, 121)
#: The models of the KV-footprint comparison (DESIGN §2, lecture 02): MHA, GQA ×2, MLA.
FOOTPRINT_MODELS = ("opt-13b", "llama2-70b", "llama3-70b", "deepseek-v3")

DEFAULT_MODELS = ("llama2-70b", "llama3-70b", "opt-13b", "llama2-7b", "deepseek-v3")


def reload_vs_recompute(models: Iterable[str] = DEFAULT_MODELS, node="a800x8", tiers=TIER_NAMES,
                        prefix_len: int = st.DEFAULT_PREFIX, mfu: float = st.SEED_MFU) -> pd.DataFrame:
    """One row per (model, tier): reload time, recompute time, speedup of reloading.

    Columns: model, attention, kv_bytes_per_token, gflop_per_token, tier, bandwidth_gbs,
    reload_s, recompute_s, speedup.
    """
    models = items(models, "models", where="reload_vs_recompute")
    tiers = items(tiers, "tiers", where="reload_vs_recompute")
    nd = get_node(node)
    rows = []
    for name in models:
        m = get_model(name)
        rec = st.recompute_time(m, nd, prefix_len, mfu)
        for tier in tiers:
            rel = st.reload_time(m, nd, tier, prefix_len)
            rows.append({"model": m.name, "attention": m.attention,
                         "kv_bytes_per_token": m.kv_bytes_per_token(),
                         "gflop_per_token": m.prefill_flops(prefix_len) / prefix_len / 1e9,
                         "tier": tier, "bandwidth_gbs": nd.tier(tier).bandwidth / 1e9,
                         "reload_s": rel, "recompute_s": rec, "speedup": rec / rel})
    return pd.DataFrame(rows)


def speedup_vs_bandwidth(models: Iterable[str] = ("llama2-70b", "opt-13b"), node="a800x8",
                         bandwidths_gbs=None, prefix_len: int = st.DEFAULT_PREFIX,
                         mfu: float = st.SEED_MFU) -> pd.DataFrame:
    """Reload speedup vs tier bandwidth (e.g. an SSD array). Columns: model, bandwidth_gbs, speedup."""
    models = items(models, "models", where="speedup_vs_bandwidth")
    if bandwidths_gbs is not None:
        bandwidths_gbs = items(bandwidths_gbs, "bandwidths_gbs", where="speedup_vs_bandwidth")
    bws = np.logspace(0, np.log10(200), 60) if bandwidths_gbs is None else np.asarray(bandwidths_gbs, float)
    nd = get_node(node)
    rows = []
    for name in models:
        m = get_model(name)
        for bw in bws:
            rows.append({"model": m.name, "bandwidth_gbs": float(bw),
                         "speedup": st.reload_speedup(m, nd, "ssd", prefix_len, mfu, bandwidth=bw * 1e9)})
    return pd.DataFrame(rows)


def crossover_table(models: Iterable[str] = DEFAULT_MODELS, node="a800x8",
                    prefix_len: int = st.DEFAULT_PREFIX, mfu: float = st.SEED_MFU) -> pd.DataFrame:
    """Bandwidth (GB/s) where reload = recompute (``breakeven_gbs``) and where it is 10× faster
    (``ten_x_gbs``), beside the node's SSD bandwidth."""
    models = items(models, "models", where="crossover_table")
    nd = get_node(node)
    rows = []
    for name in models:
        m = get_model(name)
        rows.append({"model": m.name, "attention": m.attention,
                     "breakeven_gbs": st.breakeven_bandwidth(m, nd, prefix_len, mfu) / 1e9,
                     "ten_x_gbs": st.breakeven_bandwidth(m, nd, prefix_len, mfu, speedup=10) / 1e9,
                     "node_ssd_gbs": nd.tier("ssd").bandwidth / 1e9})
    return pd.DataFrame(rows)


def eq2_table(nodes: Iterable[str] = ("a800x8", "h800x8", "h100x8", "h20x8"), model="llama3-70b",
              prefix_lens: Iterable[int] = (1024, 2048, 4096, 8192, 16384, 32768, 131072)) -> pd.DataFrame:
    """FAST'25 Eq. 2 minimum bandwidth per node and prefix length. Columns: node, prefix_len, min_gbs."""
    nodes = items(nodes, "nodes", where="eq2_table")
    prefix_lens = items(prefix_lens, "prefix_lens", where="eq2_table")
    return pd.DataFrame([{"node": n, "prefix_len": p, "min_gbs": st.eq2_min_bandwidth(model, n, p) / 1e9}
                         for n in nodes for p in prefix_lens])


def layerwise_overlap(model="llama2-70b", node="a800x8", lengths: Iterable[int] = (8192, 16384, 32768,
                      65536, 131072), cached_fraction: float = 0.5, tier: str = "dram",
                      preset="calibrated") -> pd.DataFrame:
    """Prefill with a cached prefix loaded from ``tier``: serialized vs layer-wise overlapped.

    Columns: n_tokens, n_cached, load_s, compute_s, serialized_s, overlapped_s, hidden_fraction
    (share of the load time the overlap hides).
    """
    lengths = items(lengths, "lengths", where="layerwise_overlap")
    cached_fraction = real(cached_fraction, "cached_fraction", lo=0, hi=1, hi_open=True, where="layerwise_overlap")
    rows = []
    for n in lengths:
        c = int(round(n * cached_fraction))
        ser = st.prefill_with_prefix_load(model, node, n - c, c, tier, preset=preset, overlap=False)
        ovl = st.prefill_with_prefix_load(model, node, n - c, c, tier, preset=preset, overlap=True)
        hidden = (ser["total_s"] - ovl["total_s"]) / ser["load_s"] if ser["load_s"] > 0 else 0.0
        rows.append({"n_tokens": n, "n_cached": c, "load_s": ser["load_s"], "compute_s": ser["compute_s"],
                     "serialized_s": ser["total_s"], "overlapped_s": ovl["total_s"],
                     "hidden_fraction": hidden})
    return pd.DataFrame(rows)


def kv_footprint(models: Iterable[str] = FOOTPRINT_MODELS, prefix_len: int = st.DEFAULT_PREFIX) -> pd.DataFrame:
    """KV bytes each token leaves behind vs the FLOPs that recomputing it costs.

    Columns: model, attention, n_layers, n_kv_heads, kv_bytes_per_token, kv_kib_per_token,
    gflop_per_token (a ``prefix_len``-token prefill divided by ``prefix_len``), kv_bytes_per_gflop
    (bytes to move per GFLOP saved: lower favours reloading).
    """
    models = items(models, "models", where="kv_footprint")
    n = _check_count("prefix_len", prefix_len, minimum=1)
    rows = []
    for name in models:
        m = get_model(name)
        kv = m.kv_bytes_per_token()
        gflop = m.prefill_flops(n) / n / 1e9
        rows.append({"model": m.name, "attention": m.attention, "n_layers": m.n_layers,
                     "n_kv_heads": m.n_kv_heads if m.attention != "mla" else 0,
                     "kv_bytes_per_token": kv, "kv_kib_per_token": kv / 1024, "gflop_per_token": gflop,
                     "kv_bytes_per_gflop": kv / gflop})
    return pd.DataFrame(rows)


def tier_bandwidths(node="a800x8", tiers=("dram", "remote_dram", "ssd"), one_drive: bool = True) -> pd.DataFrame:
    """Bandwidth into HBM of each storage tier of ``node`` (GB/s), plus one NVMe drive if asked.

    Columns: tier, label, bandwidth_gbs, source.
    """
    tiers = items(tiers, "tiers", where="tier_bandwidths")
    nd = get_node(node)
    labels = {"hbm": "HBM", "dram": "local DRAM", "remote_dram": "remote DRAM (RDMA)", "ssd": "local SSD array"}
    rows = [{"tier": t, "label": labels[nd.tier(t).name], "bandwidth_gbs": nd.tier(t).bandwidth / 1e9,
             "source": nd.tier(t).source} for t in tiers]
    if one_drive:
        rows.append({"tier": "one_nvme", "label": "one NVMe drive", "bandwidth_gbs": SSD_DRIVE_READ_BW / 1e9,
                     "source": "Samsung PM1733 product specification: 7,000 MB/s sequential read"})
    return pd.DataFrame(rows)


def ssd_claims(node="a800x8", prefix_len: int = st.DEFAULT_PREFIX, mfu: float = st.SEED_MFU,
               ssd_gbs: Iterable[float] | None = None) -> tuple[dict, pd.DataFrame]:
    """Where the lecture's two SSD statements hold (§3).

    Claim A: reloading LLaMA2-70B from SSD is > 10× faster than recomputing (needs bandwidth ≥
    ``lo_gbs``). Claim B: reloading OPT-13B from SSD is slower than recomputing (needs bandwidth <
    ``hi_gbs``). Both hold only in the window ``[lo_gbs, hi_gbs)``.

    Returns ``(window, table)``: ``window`` = {"lo_gbs", "hi_gbs", "default_gbs", "one_drive_gbs"};
    ``table`` one row per SSD bandwidth assumed (default: one drive and the node's array) with
    columns assumption, bandwidth_gbs, llama2_70b_speedup, opt_13b_speedup, claim_a, claim_b.
    """
    if ssd_gbs is not None:
        ssd_gbs = items(ssd_gbs, "ssd_gbs", where="ssd_claims")
    nd = get_node(node)
    lo = st.breakeven_bandwidth("llama2-70b", nd, prefix_len, mfu, speedup=10) / 1e9
    hi = st.breakeven_bandwidth("opt-13b", nd, prefix_len, mfu) / 1e9
    default = nd.tier("ssd").bandwidth / 1e9
    one = SSD_DRIVE_READ_BW / 1e9
    window = {"lo_gbs": lo, "hi_gbs": hi, "default_gbs": default, "one_drive_gbs": one}
    if ssd_gbs is None:
        points = [(f"one NVMe drive ({one:g} GB/s)", one),
                  (f"{nd.ssd_drives} drives (default, {default:g} GB/s)", default)]
    else:
        points = [(f"{float(b):g} GB/s", float(b)) for b in ssd_gbs]
    rows = []
    for label, bw in points:
        a = st.reload_speedup("llama2-70b", nd, "ssd", prefix_len, mfu, bandwidth=bw * 1e9)
        b = st.reload_speedup("opt-13b", nd, "ssd", prefix_len, mfu, bandwidth=bw * 1e9)
        rows.append({"assumption": label, "bandwidth_gbs": bw, "llama2_70b_speedup": a, "opt_13b_speedup": b,
                     "claim_a": a > 10, "claim_b": b < 1})
    return window, pd.DataFrame(rows)


_TIER_SHORT = {"hbm": "HBM", "dram": "DRAM", "remote_dram": "remote DRAM", "ssd": "SSD"}


def request_breakdown(model="llama2-70b", node="a800x8", n_tokens: int = REQUEST_TOKENS,
                      hit_fraction: float = 0.5, tiers: Iterable[str] = ("dram", "remote_dram", "ssd"),
                      bandwidth_gbs: float | None = None, mfu: float = st.SEED_MFU) -> pd.DataFrame:
    """TTFT parts of one request whose first ``hit_fraction`` of tokens is cached in a tier.

    Rows: "recompute all" (prefill of every token), then per tier "serialized" (load the prefix,
    then compute the rest) and "layer-wise" (load layer i+1 while computing layer i). With
    ``bandwidth_gbs`` given, one tier called "custom" at that bandwidth replaces ``tiers`` (its rows:
    "reload from the tier, …").
    Prefill at ``mfu`` of peak (the lecture's 60%).

    Columns: scenario, tier, bandwidth_gbs, mode, n_cached, load_s, compute_s, total_s,
    exposed_load_s (total − compute: the load time the request actually waits for), speedup
    (recompute-all time / total).
    """
    tiers = items(tiers, "tiers", where="request_breakdown")
    m, nd = get_model(model), get_node(node)
    n = int(_check_count("n_tokens", n_tokens, minimum=2))
    if not (isinstance(hit_fraction, (int, float)) and 0.0 <= hit_fraction < 1.0):
        raise ValueError(f"hit_fraction must be a number in [0, 1), got {hit_fraction!r}")
    c = min(int(round(n * hit_fraction)), n - 1)
    preset = st.seed_preset(mfu)
    full = prefill_time(m, nd, n, 0, preset=preset)
    rows = [{"scenario": "recompute all", "tier": "none", "bandwidth_gbs": np.nan, "mode": "recompute",
             "n_cached": 0, "load_s": 0.0, "compute_s": full, "total_s": full, "exposed_load_s": 0.0,
             "speedup": 1.0}]
    if bandwidth_gbs is not None:
        bw = float(bandwidth_gbs)
        if not (np.isfinite(bw) and bw > 0):
            raise ValueError(f"bandwidth_gbs must be a finite number > 0, got {bandwidth_gbs!r}")
        points = [("custom", bw)]
    else:
        points = [(t, nd.tier(t).bandwidth / 1e9) for t in tiers]
    for tier, bw in points:
        for mode, overlap in (("serialized", False), ("layer-wise", True)):
            r = st.prefill_with_prefix_load(m, nd, n - c, c, "dram" if tier == "custom" else tier,
                                            preset=preset, overlap=overlap,
                                            bandwidth=bw * 1e9)
            # a custom tier is named without its bandwidth (a dashboard shows that in its title): row
            # labels that change with a slider would force a full redraw on every move
            name = "the tier" if tier == "custom" else _TIER_SHORT.get(tier, tier)
            rows.append({"scenario": f"reload from {name}, {mode}", "tier": tier, "bandwidth_gbs": bw, "mode": mode,
                         "n_cached": c, "load_s": r["load_s"], "compute_s": r["compute_s"],
                         "total_s": r["total_s"], "exposed_load_s": r["total_s"] - r["compute_s"],
                         "speedup": full / r["total_s"]})
    return pd.DataFrame(rows)


def layerwise_store(model="llama2-70b", node="a800x8", lengths: Iterable[int] = (8192, 16384, 32768, 65536,
                    131072), tier: str = "dram", preset="ideal") -> pd.DataFrame:
    """Paper Fig. 7's experiment: prefill ``n`` tokens and store their KV to ``tier`` (CPU DRAM).

    Serialized: prefill, then store all KV. Layer-wise: store layer i's KV while computing layer
    i+1 (:func:`storage.layerwise_time`). The store moves the same bytes over the same PCIe link as
    a load (:func:`roofline.kv_load_time`; PCIe is full duplex, so device-to-host is taken equal to
    FAST'25 Table 1's 128 GB/s host-to-device). Default preset "ideal": the fastest prefill, so
    the *least* time to hide the store behind.

    Columns: n_tokens, prefill_s, store_s, serialized_s, layerwise_s, exposed_serialized_s,
    exposed_layerwise_s, hidden_fraction (share of the store time that layer-wise hides).
    """
    lengths = items(lengths, "lengths", where="layerwise_store")
    m, nd = get_model(model), get_node(node)
    rows = []
    for n in lengths:
        n = int(_check_count("n_tokens", n, minimum=1))
        pre = prefill_time(m, nd, n, 0, preset=preset)
        store = kv_load_time(m, nd, n, tier)
        ser = st.layerwise_time(store, pre, m.n_layers, overlap=False)
        lw = st.layerwise_time(store, pre, m.n_layers, overlap=True)
        rows.append({"n_tokens": n, "prefill_s": pre, "store_s": store, "serialized_s": ser, "layerwise_s": lw,
                     "exposed_serialized_s": ser - pre, "exposed_layerwise_s": lw - pre,
                     "hidden_fraction": (ser - lw) / store})
    df = pd.DataFrame(rows)
    df.attrs["preset"] = preset if isinstance(preset, str) else getattr(preset, "name", "custom")
    return df


def fig7_comparison(model="llama2-70b", node="a800x8", preset="ideal") -> pd.DataFrame:
    """Paper Fig. 7's bars beside ours: the store latency a prefill pays (time added to a prefill that
    stores nothing), serialized and layer-wise, at the figure's prompt lengths.

    Columns: n_tokens, paper_serialized_s, paper_layerwise_s (:data:`paper.FIG7_STORE_LATENCY_S`,
    read from the rendered figure), ours_serialized_s, ours_layerwise_s (:func:`layerwise_store`:
    128 GB/s, ideal preset, a two-stage pipeline with no per-layer cost).
    """
    f7 = paper.FIG7_STORE_LATENCY_S
    n = sorted(f7["serialized"])
    ours = layerwise_store(model, node, n, preset=preset)
    return pd.DataFrame({"n_tokens": n, "paper_serialized_s": [f7["serialized"][k] for k in n],
                         "paper_layerwise_s": [f7["layerwise"][k] for k in n],
                         "ours_serialized_s": ours["exposed_serialized_s"].to_numpy(),
                         "ours_layerwise_s": ours["exposed_layerwise_s"].to_numpy()})


def fig7_implied_store(model="llama2-70b") -> dict:
    """What Fig. 7's bars imply, by least squares on the serialized bars: ``serialized ≈ fixed_s +
    n × KV bytes / bandwidth``. Returns ``{"bandwidth_gbs", "fixed_s", "layerwise_mean_s",
    "per_layer_ms"}``: the effective device-to-host store bandwidth (GB/s), a fixed cost per request
    (s), the mean layer-wise bar (s) and that spread over the model's layers (ms per layer) — what a
    real layer-wise store pays per layer (launches, synchronisation) and our pipeline model leaves out.
    """
    m = get_model(model)
    f7 = paper.FIG7_STORE_LATENCY_S
    n = sorted(f7["serialized"])
    x = np.array(n, float) * m.kv_bytes_per_token()
    (fixed, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]),
                                         np.array([f7["serialized"][k] for k in n]), rcond=None)
    lw = float(np.mean(list(f7["layerwise"].values())))
    return {"bandwidth_gbs": float(1.0 / slope / 1e9), "fixed_s": float(fixed), "layerwise_mean_s": lw,
            "per_layer_ms": lw / m.n_layers * 1e3}


def eq2_curves(nodes: Iterable[str] = ("a800x8", "h800x8", "h20x8"), model="llama3-70b",
               p_min: int = 512, p_max: int = 131072, n_points: int = 41) -> pd.DataFrame:
    """FAST'25 Eq. 2 break-even bandwidth on a log grid of prefix lengths (see :func:`eq2_table`)."""
    nodes = items(nodes, "nodes", where="eq2_curves")
    lo = int(_check_count("p_min", p_min, minimum=1))
    hi = int(_check_count("p_max", p_max, minimum=lo))
    grid = np.unique(np.geomspace(lo, hi, int(n_points)).round().astype(int))
    return eq2_table(nodes, model, [int(p) for p in grid])


_ASKED = "the lecture's question (§2–3, prefill at 60% of peak)"


@metric_group("storage")
def metrics() -> list[Metric]:
    nd = get_node("a800x8")
    sp = lambda model, tier: st.reload_speedup(model, nd, tier)  # noqa: E731
    f7 = fig7_comparison("llama2-70b", nd).set_index("n_tokens")
    return [
        Metric("storage.reload_speedup.llama2_70b.dram", sp("llama2-70b", "dram"), "×", None,
               f"{_ASKED}: more than 10×? 4,096-token prefix, 128 GB/s host-to-device"),
        Metric("storage.reload_speedup.llama2_70b.ssd", sp("llama2-70b", "ssd"), "×", None,
               f"{_ASKED}: more than 10×? SSD = 8 × 7 GB/s NVMe"),
        Metric("storage.reload_speedup.llama2_70b.remote_dram", sp("llama2-70b", "remote_dram"), "×", None,
               f"{_ASKED}: more than 10×? RDMA 4 × 200 Gbps"),
        Metric("storage.reload_speedup.opt_13b.ssd", sp("opt-13b", "ssd"), "×", None,
               f"{_ASKED}: slower than recomputing (< 1×)? break-even "
               f"{st.breakeven_bandwidth('opt-13b', nd) / 1e9:.0f} GB/s vs our 56 GB/s SSD"),
        Metric("storage.eq2_min_bandwidth_gbs.a800x8.p8192",
               st.eq2_min_bandwidth("llama3-70b", "a800x8", 8192) / 1e9, "GB/s", PAPER_EQ2["a800x8"][1],
               "FAST'25 Eq. 2 (LLaMA3-70B, 8×A800, p = 8192): 6 GB/s"),
        Metric("storage.eq2_min_bandwidth_gbs.h800x8.p8192",
               st.eq2_min_bandwidth("llama3-70b", "h800x8", 8192) / 1e9, "GB/s", PAPER_EQ2["h800x8"][1],
               "FAST'25 Eq. 2 (LLaMA3-70B, 8×H800, p = 8192): 19 GB/s"),
        *[Metric(f"storage.fig7_store_s.{mode}.n{n}", float(f7.loc[n, f"ours_{mode}_s"]), "s",
                 float(f7.loc[n, f"paper_{mode}_s"]),
                 f"{paper.FIG7_SOURCE}: store latency added to the prefill; ours at 128 GB/s, no per-layer cost")
          for n in (8192, 131072) for mode in ("serialized", "layerwise")],
    ]


@figure_group("storage")
def figures() -> dict:
    """The lecture's headline figures, ``{file_stem: Figure}``."""
    from ..plots import storage as plots
    window, _ = ssd_claims()
    return {
        "l02_kv_footprint": plots.kv_footprint(kv_footprint()),
        "l02_tier_speedup": plots.tier_speedup(reload_vs_recompute(FOOTPRINT_MODELS)),
        "l02_ssd_crossover": plots.ssd_crossover(speedup_vs_bandwidth(bandwidths_gbs=SSD_SWEEP_GBS), window),
        "l02_half_cached_request": plots.ttft_components(request_breakdown()),
        "l02_eq2_breakeven": plots.eq2_breakeven(eq2_curves(), tier_bandwidths(), paper=PAPER_EQ2),
        "l02_layerwise_store": plots.layerwise_store(layerwise_store(), fig7_comparison()),
    }


# --- the tables the lecture shows ----------------------------------------------------------------
def _num(x, sig: int = 3) -> str:
    """``x`` for a reader: thousands grouped, about ``sig`` significant digits without trailing zeros
    ("56", "2.04", "0.84"), never "e+06"; "—" for NaN."""
    x = float(x)
    if not np.isfinite(x):
        return "—"
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 10 ** (sig - 1):
        return f"{x:,.0f}"
    decimals = sig - 1 - int(np.floor(np.log10(ax)))
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _col(values, sig: int = 3, cap: int = 3) -> list[str]:
    """A column of numbers for reading, all with the same decimals: whole numbers as integers
    ("128", "7"); otherwise enough decimals for ``sig`` significant digits of the smallest non-zero
    value (at most ``cap``), thousands grouped, an exact 0 as "0", NaN as "—"."""
    xs = [float(v) for v in values]
    finite = [x for x in xs if np.isfinite(x)]
    if all(x == round(x) for x in finite):
        decimals = 0
    else:
        small = min((abs(x) for x in finite if x != 0), default=1.0)
        decimals = int(min(cap, max(0, sig - 1 - int(np.floor(np.log10(small))))))
    return ["—" if not np.isfinite(x) else "0" if x == 0 else f"{x:,.{decimals}f}" for x in xs]


def _count(x) -> str:
    return f"{int(round(float(x))):,}"


_ATTENTION = {"mha": "MHA", "gqa": "GQA", "mla": "MLA"}


def footprint_table(footprint: pd.DataFrame) -> pd.DataFrame:
    """:func:`kv_footprint` for reading: one row per model, labelled columns with units."""
    f = footprint
    return pd.DataFrame({"attention": [_ATTENTION.get(a, a) for a in f["attention"]],
                         "layers": [_count(v) for v in f["n_layers"]],
                         "KV heads": ["— (latent)" if a == "mla" else _count(v) for a, v in zip(f["attention"], f["n_kv_heads"])],
                         "KV per token (B)": [_count(v) for v in f["kv_bytes_per_token"]],
                         "KV per token (KiB)": _col(f["kv_kib_per_token"], cap=1),
                         "GFLOP per token": _col(f["gflop_per_token"], cap=1),
                         "KV bytes per GFLOP saved": [_count(v) for v in f["kv_bytes_per_gflop"]]},
                        index=pd.Index(f["model"], name="model"))


def tier_table(node="a800x8") -> pd.DataFrame:
    """:func:`tier_bandwidths` for reading: bandwidth into HBM per tier (sources: the lecture's assumptions table)."""
    tb = tier_bandwidths(node)
    return pd.DataFrame({"bandwidth into HBM (GB/s)": _col(tb["bandwidth_gbs"])},
                        index=pd.Index(tb["label"], name="tier"))


_TIER_COLUMNS = {"hbm": "HBM", "dram": "DRAM", "remote_dram": "remote DRAM", "ssd": "SSD array"}


def speedup_table(per_tier: pd.DataFrame) -> pd.DataFrame:
    """:func:`reload_vs_recompute` as model × tier: how many times faster reloading is than recomputing (×)."""
    sp = per_tier.pivot(index="model", columns="tier", values="speedup")
    sp = sp[[t for t in _TIER_COLUMNS if t in sp.columns]]
    out = sp.apply(lambda c: pd.Series(_col(c, cap=2), index=c.index)).rename(
        columns=lambda t: f"from {_TIER_COLUMNS[t]} (×)")
    out.columns.name = "reload speedup"
    return out.reindex([get_model(m).name for m in per_tier["model"].unique()])


def crossover_view(node="a800x8", **kw) -> pd.DataFrame:
    """:func:`crossover_table` for reading: the bandwidths where reloading ties and where it is 10× faster."""
    ct = crossover_table(node=node, **kw)
    return pd.DataFrame({"attention": [_ATTENTION.get(a, a) for a in ct["attention"]],
                         "break-even (GB/s)": _col(ct["breakeven_gbs"]),
                         "10× faster (GB/s)": _col(ct["ten_x_gbs"]),
                         "this node's SSD array (GB/s)": _col(ct["node_ssd_gbs"])},
                        index=pd.Index(ct["model"], name="model"))


def ssd_table(node="a800x8", **kw) -> pd.DataFrame:
    """:func:`ssd_claims`' table for reading: both models' speedups and the two statements, per SSD."""
    _, t = ssd_claims(node, **kw)
    verdict = {True: "holds", False: "fails"}
    return pd.DataFrame({"LLaMA2-70B speedup (×)": _col(t["llama2_70b_speedup"], cap=2),
                         "OPT-13B speedup (×)": _col(t["opt_13b_speedup"], cap=2),
                         "A: LLaMA2-70B > 10×": [verdict[bool(v)] for v in t["claim_a"]],
                         "B: OPT-13B < 1×": [verdict[bool(v)] for v in t["claim_b"]]},
                        index=pd.Index(t["assumption"], name="SSD"))


def request_table(breakdown: pd.DataFrame) -> pd.DataFrame:
    """:func:`request_breakdown` for reading: the parts of the time to first token, per way to produce it."""
    b = breakdown
    return pd.DataFrame({"load (ms)": _col(1e3 * b["load_s"], cap=1),
                         "compute (s)": _col(b["compute_s"]),
                         "TTFT (s)": _col(b["total_s"]),
                         "load not hidden (ms)": _col(1e3 * b["exposed_load_s"], cap=2),
                         "speedup (×)": _col(b["speedup"], cap=2)},
                        index=pd.Index(b["scenario"], name="first token by"))


def fig7_table(store: pd.DataFrame, fig7: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7 beside ours, per prompt length: our prefill, and the time the store adds (ms), serialized
    and layer-wise, ours and the paper's (``store`` from :func:`layerwise_store`, ``fig7`` from
    :func:`fig7_comparison`, both at the figure's lengths)."""
    st_ = store.set_index("n_tokens")
    f7 = fig7.set_index("n_tokens")
    cols = pd.MultiIndex.from_tuples([("prefill", "ours (s)"),
                                      ("serialized store adds", "ours (ms)"), ("serialized store adds", "paper (ms)"),
                                      ("layer-wise store adds", "ours (ms)"), ("layer-wise store adds", "paper (ms)")])
    data = [_col(st_.loc[f7.index, "prefill_s"], cap=2), _col(1e3 * f7["ours_serialized_s"], cap=1),
            _col(1e3 * f7["paper_serialized_s"]), _col(1e3 * f7["ours_layerwise_s"], cap=2),
            _col(1e3 * f7["paper_layerwise_s"])]
    return pd.DataFrame(dict(zip(cols, data)), index=pd.Index([_count(n) for n in f7.index], name="prompt (tokens)"))


def fig7_implied_note(model="llama2-70b") -> str:
    """One sentence: what a straight line through Fig. 7's serialized bars implies (:func:`fig7_implied_store`)."""
    f = fig7_implied_store(model)
    return (f"Fig. 7's serialized bars fit {f['fixed_s'] * 1e3:.0f} ms + KV bytes / {f['bandwidth_gbs']:.0f} GB/s; "
            f"its layer-wise bars average {f['layerwise_mean_s'] * 1e3:.0f} ms, "
            f"{f['per_layer_ms']:.1f} ms per layer of {get_model(model).name}.")


def overlap_table(overlap: pd.DataFrame) -> pd.DataFrame:
    """:func:`layerwise_overlap` for reading: loading a cached prefix, serialized vs layer-wise, per prompt."""
    o = overlap
    return pd.DataFrame({"cached (tokens)": [_count(v) for v in o["n_cached"]],
                         "load (ms)": _col(1e3 * o["load_s"], cap=1),
                         "compute (s)": _col(o["compute_s"], cap=2),
                         "TTFT serialized (s)": _col(o["serialized_s"], cap=2),
                         "TTFT layer-wise (s)": _col(o["overlapped_s"], cap=2),
                         "load hidden (%)": _col(100 * o["hidden_fraction"], cap=1)},
                        index=pd.Index([_count(n) for n in o["n_tokens"]], name="prompt (tokens)"))


def _node_label(node) -> str:
    nd = get_node(node)
    return f"{nd.n_gpus} × {nd.gpu.name.split('-')[0]}"


def eq2_view(eq2: pd.DataFrame) -> pd.DataFrame:
    """:func:`eq2_table` as prefix length × node: FAST'25 Eq. 2's break-even bandwidth (GB/s)."""
    pv = eq2.pivot(index="prefix_len", columns="node", values="min_gbs")
    pv = pv[list(dict.fromkeys(eq2["node"]))]
    out = pv.apply(lambda c: pd.Series(_col(c, cap=2), index=c.index)).rename(columns=_node_label)
    out.index = pd.Index([_count(p) for p in pv.index], name="prefix p (tokens)")
    out.columns.name = "Eq. 2 break-even (GB/s)"
    return out


def eq2_vs_ours(nodes: Iterable[str] = ("a800x8", "h800x8"), model="llama3-70b", prefix_len: int = 8192) -> pd.DataFrame:
    """Eq. 2 beside our break-even (:func:`storage.breakeven_bandwidth`) at 100% and at 60% of peak, GB/s."""
    nodes = items(nodes, "nodes", where="eq2_vs_ours")
    pct = f"{PREFILL_MFU:.0%}"
    cols = {"Eq. 2 (GB/s)": [st.eq2_min_bandwidth(model, n, prefix_len) / 1e9 for n in nodes],
            "ours at 100% of peak (GB/s)": [st.breakeven_bandwidth(model, n, prefix_len, mfu=1.0) / 1e9 for n in nodes],
            f"ours at {pct} of peak (GB/s)": [st.breakeven_bandwidth(model, n, prefix_len) / 1e9 for n in nodes]}
    return pd.DataFrame({k: _col(v, cap=2) for k, v in cols.items()},
                        index=pd.Index([_node_label(n) for n in nodes], name="node"))
