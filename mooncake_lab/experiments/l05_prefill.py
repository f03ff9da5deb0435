"""Lecture 05 — long-context prefill: CPP vs TP vs SP across nodes, chunk interleaving, layer-wise
KV store and the VRAM occupation cost S·T.

Default preset **"modern"** (BLIS defaults: MFU 0.65): the "calibrated" preset was fitted on
≤ 8k-token prompts with attention at 4–7% of peak and extrapolates very badly to 128k (a 128k
LLaMA2-70B prefill of 220 s instead of 25 s; see :mod:`mooncake_lab.roofline`).
The layer-wise store metrics (paper Fig. 7) reuse :func:`l02_storage.layerwise_store`, also with
"modern".
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .. import cpp
from ..hardware import get_node
from ..models import get_model
from ..paper import FIG7_SOURCE
from ..reproduce import Metric, figure_group, metric_group
from ..validate import int_array, integer, items, real
from . import l02_storage as l02

__all__ = ["DEFAULT_PRESET", "LENGTHS", "LONG_LENGTHS", "TTFT_SLO_S", "gantt", "schemes_vs_length",
           "cpp_vs_x", "interleave_demo", "layerwise_store", "vram_occupation", "metrics", "figures",
           "SCHEME_LABELS", "gantt_summary", "cpp_vs_x_table", "chunk_sweep_table", "ttft_table", "schemes_table",
           "interleave_table", "store_table", "vram_table", "metrics_table", "markdown_table", "in_box"]

#: Preset of the lecture (see the module docstring).
DEFAULT_PRESET = "modern"
#: Prompt lengths of the TTFT curves: 8k … 128k tokens.
LENGTHS = tuple(2 ** k for k in range(13, 18))
#: The 1M-token thought experiment: 8k … 1M tokens.
LONG_LENGTHS = tuple(2 ** k for k in range(13, 21))
#: arXiv real-workload TTFT SLO, seconds (mooncake_paper.md, "SLOs").
TTFT_SLO_S = 30.0
#: Chunk size of the lecture's CPP runs, tokens (the paper: "prefill_chunk ... typically > 1,000").
DEFAULT_CHUNK = 4096


def gantt(n_tokens: int = 65536, chunk: int = DEFAULT_CHUNK, x: int = 4, bandwidth_gbs: float | None = None,
          overlap: bool = True, model="llama2-70b", node="a800x8", preset=DEFAULT_PRESET) -> cpp.PipelineResult:
    """One request through an idle CPP group (``bandwidth_gbs`` GB/s between stages; default: the node's RDMA)."""
    bw = None if bandwidth_gbs is None else real(bandwidth_gbs, "bandwidth_gbs", lo=0, lo_open=True, hi=1e12) * 1e9
    return cpp.simulate_pipeline([0.0], [n_tokens], model=model, node=node, preset=preset, chunk=chunk, x=x,
                                 bandwidth=bw, overlap=overlap)


def schemes_vs_length(lengths: Iterable[int] = LENGTHS, x: int = 4, chunk: int = DEFAULT_CHUNK,
                      model="llama2-70b", node="a800x8", preset=DEFAULT_PRESET,
                      bandwidth_gbs: float | None = None, overlap: bool = True,
                      schemes: Iterable[str] = cpp.SCHEMES) -> pd.DataFrame:
    """TTFT, MFU and network traffic per scheme and prompt length (one request, idle nodes).

    Columns: scheme, x, n_tokens, ttft_s, mfu, net_bytes, net_gb, meets_slo.
    """
    lengths = items(lengths, "lengths", where="schemes_vs_length")
    schemes = items(schemes, "schemes", where="schemes_vs_length")
    bw = None if bandwidth_gbs is None else real(bandwidth_gbs, "bandwidth_gbs", lo=0, lo_open=True, hi=1e12) * 1e9
    lengths = int_array(lengths, "lengths", lo=1, hi=cpp.MAX_TOKENS, where="schemes_vs_length")
    rows = [cpp.scheme_summary(s, model, node, int(n), x, chunk, preset, bw, overlap)
            for s in schemes for n in lengths]
    df = pd.DataFrame(rows)
    df["net_gb"] = df["net_bytes"] / 1e9
    df["meets_slo"] = df["ttft_s"] <= TTFT_SLO_S
    return df


def cpp_vs_x(n_tokens: int = 131072, xs: Iterable[int] = (1, 2, 4, 8), chunk: int = DEFAULT_CHUNK,
             model="llama2-70b", node="a800x8", preset=DEFAULT_PRESET) -> pd.DataFrame:
    """CPP TTFT and speedup over one node vs group size. Columns: x, ttft_s, speedup, efficiency."""
    xs = items(xs, "xs", where="cpp_vs_x")
    one = cpp.one_node_ttft(model, node, n_tokens, preset=preset)
    rows = []
    for x in xs:
        t = cpp.cpp_ttft(model, node, n_tokens, x, chunk, preset=preset)
        rows.append({"x": int(x), "ttft_s": t, "speedup": one / t, "efficiency": one / t / x})
    return pd.DataFrame(rows)


def interleave_demo(long_tokens: int = 131072, short_tokens: Iterable[int] = (2000, 4000, 1000, 3000),
                    gap_s: float = 0.5, x: int = 4, chunk: int = DEFAULT_CHUNK, model="llama2-70b",
                    node="a800x8", preset=DEFAULT_PRESET) -> pd.DataFrame:
    """A ``long_tokens`` request at t = 0, then short ones every ``gap_s`` s, in one CPP group, with
    chunks ordered FIFO by request or interleaved. Columns: order, request, kind, arrival_s, n_new, ttft_s."""
    short_tokens = items(short_tokens, "short_tokens", where="interleave_demo")
    shorts = list(int_array(short_tokens, "short_tokens", lo=1, hi=cpp.MAX_TOKENS, where="interleave_demo"))
    gap_s = real(gap_s, "gap_s", lo=0, hi=1e6, where="interleave_demo")
    arrival = np.arange(len(shorts) + 1) * gap_s
    lens = [integer(long_tokens, "long_tokens", lo=1, hi=cpp.MAX_TOKENS, where="interleave_demo")] + shorts
    out = []
    for order in cpp.ORDERS:
        r = cpp.simulate_pipeline(arrival, lens, model=model, node=node, preset=preset, chunk=chunk, x=x, order=order)
        df = r.requests_frame()[["request", "arrival_s", "n_new", "ttft_s"]]
        df.insert(0, "order", order)
        df.insert(2, "kind", ["long"] + ["short"] * len(shorts))
        out.append(df)
    return pd.DataFrame(pd.concat(out, ignore_index=True))


def layerwise_store(lengths: Iterable[int] = LENGTHS, model="llama2-70b", node="a800x8",
                    preset=DEFAULT_PRESET) -> pd.DataFrame:
    """Paper Fig. 7: store the new KV to CPU DRAM, serialized vs layer-wise (:func:`l02_storage.layerwise_store`)."""
    lengths = items(lengths, "lengths", where="layerwise_store")
    return l02.layerwise_store(model, node, lengths, tier="dram", preset=preset)


def vram_occupation(lengths: Iterable[int] = LENGTHS, model="llama2-70b", node="a800x8",
                    preset=DEFAULT_PRESET) -> pd.DataFrame:
    """VRAM occupation cost S·T of one prefill's KV (:func:`cpp.kv_vram_profile`), both modes.

    Columns: n_tokens, kv_gb (S), serialized_gb_s, layerwise_gb_s, ratio.
    """
    lengths = items(lengths, "lengths", where="vram_occupation")
    m = get_model(model)
    rows = []
    for n in lengths:
        ser = cpp.kv_vram_profile(m, node, n, preset, layerwise=False)
        lw = cpp.kv_vram_profile(m, node, n, preset, layerwise=True)
        rows.append({"n_tokens": int(n), "kv_gb": n * m.kv_bytes_per_token() / 1e9,
                     "serialized_gb_s": ser["gb_s"], "layerwise_gb_s": lw["gb_s"],
                     "ratio": ser["gb_s"] / lw["gb_s"]})
    return pd.DataFrame(rows)


_SRC = "ours only: the paper gives no CPP timings; LLaMA2-70B, 8×A800 nodes, 'modern' preset, chunk 4,096, " \
       "RDMA 87 GB/s"


def metrics() -> list[Metric]:
    """All metrics of the lecture (registered below as four groups: cpp, tp, sp, layerwise)."""
    n = 131072
    out = [Metric(f"cpp.ttft_s.llama2_70b.n{n}.x{x}", cpp.cpp_ttft("llama2-70b", "a800x8", n, x, DEFAULT_CHUNK,
                                                                      preset=DEFAULT_PRESET), "s", None,
                  f"{_SRC}; x = {x} nodes" + (" (chunked prefill on one node)" if x == 1 else ""))
           for x in (1, 2, 4, 8)]
    out.append(Metric(f"tp.ttft_s.llama2_70b.n{n}.x4", cpp.tp_ttft("llama2-70b", "a800x8", n, 4,
                                                                    preset=DEFAULT_PRESET), "s", None,
                      "ours: TP across 4 nodes, 2 all-reduces per layer over RDMA (87 GB/s), 'modern'"))
    out.append(Metric(f"sp.ttft_s.llama2_70b.n{n}.x4", cpp.sp_ttft("llama2-70b", "a800x8", n, 4,
                                                                    preset=DEFAULT_PRESET), "s", None,
                      "ours: ring attention across 4 nodes, KV ring overlapped layer by layer, 'modern'"))
    store = layerwise_store([n]).iloc[0]
    f7, fit = fig7_comparison().set_index("n_tokens"), fig7_fit()
    lo = int(f7.index.min())
    k, h2d = n // 1024, get_node("a800x8").h2d_bw / 1e9
    # The paper column holds Fig. 7's bar at the same length: the latency the store adds to the prefill.
    out.append(Metric(f"layerwise.store_exposed_s.n{n}.serialized", float(store["exposed_serialized_s"]), "s",
                      float(f7.loc[n, "paper_serialized_s"]),
                      f"{FIG7_SOURCE}: its serialized bars grow with the KV as a store at ≈ {fit['gbs']:.0f} GB/s; "
                      f"ours: {k}k × 320 KiB over {h2d:.0f} GB/s host-to-device (FAST'25 Table 1), 'modern'"))
    out.append(Metric(f"layerwise.store_exposed_s.n{n}.layerwise", float(store["exposed_layerwise_s"]), "s",
                      float(f7.loc[n, "paper_layerwise_s"]),
                      f"{FIG7_SOURCE}: layer-wise adds a fixed ≈ {fit['layerwise_mean_s']:.1f} s at every length, "
                      f"so it hides {f7.loc[lo, 'paper_hidden']:.0%} of the store at {lo // 1024}k and "
                      f"{f7.loc[n, 'paper_hidden']:.0%} at {k}k; ours: one layer's store (1/{get_model('llama2-70b').n_layers}) "
                      "exposed, no fixed cost, 'modern'"))
    return out


def _group(prefix: str):
    return metric_group(prefix)(lambda: [m for m in metrics() if m.name.startswith(prefix + ".")])


for _prefix in ("cpp", "tp", "sp", "layerwise"):
    _group(_prefix)


@figure_group("prefill")
def figures() -> dict:
    """The lecture's headline figures, ``{file_stem: Figure}``."""
    from ..plots import prefill as plots
    from ..plots import storage as splots
    return {
        "l05_gantt": plots.gantt(gantt(32768, 4096, 4)),
        "l05_ttft_vs_length": plots.ttft_vs_length(schemes_vs_length(LONG_LENGTHS), slo_s=TTFT_SLO_S),
        "l05_mfu_traffic": plots.mfu_and_traffic(schemes_vs_length([131072])),
        "l05_interleave": plots.interleave(interleave_demo()),
        "l05_layerwise_store": splots.layerwise_store(layerwise_store()),
        "l05_vram_st": plots.vram_profile(cpp.kv_vram_profile(layerwise=False),
                                          cpp.kv_vram_profile(layerwise=True), n_tokens=131072),
    }


def fig7_comparison(model="llama2-70b", node="a800x8", preset=DEFAULT_PRESET) -> pd.DataFrame:
    """Paper Fig. 7 beside ours (:func:`l02_storage.fig7_comparison`, on this lecture's preset), plus
    kv_gb (the KV stored, GB) and paper_hidden (share of the serialized store that layer-wise hides in
    the paper)."""
    df = l02.fig7_comparison(model, node, preset=preset)
    df.insert(1, "kv_gb", df["n_tokens"] * get_model(model).kv_bytes_per_token() / 1e9)
    df["paper_hidden"] = 1.0 - df["paper_layerwise_s"] / df["paper_serialized_s"]
    return df


def fig7_fit(model="llama2-70b") -> dict:
    """A straight line through the paper's serialized bars (:func:`l02_storage.fig7_implied_store`):
    store ≈ ``fixed_s`` + KV bytes / ``gbs`` GB/s, and the mean of its layer-wise bars (s)."""
    f = l02.fig7_implied_store(model)
    return {"gbs": f["bandwidth_gbs"], "fixed_s": f["fixed_s"], "layerwise_mean_s": f["layerwise_mean_s"]}


def chunk_sweep(n_tokens: int = 32768, x: int = 4, chunks: Iterable[int] = (512, 1024, 2048, 4096, 8192, 16384),
                preset=DEFAULT_PRESET) -> pd.DataFrame:
    """TTFT (s) of one ``n_tokens`` prompt through an idle CPP group of ``x`` nodes per chunk size
    (the Gantt dashboard's experiment), with the number of chunks."""
    chunks = items(chunks, "chunks", where="chunk_sweep")
    rows = [{"chunk": int(c), "chunks": int(-(-int(n_tokens) // int(c))),
             "ttft_s": float(gantt(n_tokens, chunk=int(c), x=x, preset=preset).ttft[0])} for c in chunks]
    return pd.DataFrame(rows)


def fig7_note() -> str:
    """Markdown: the paper's Fig. 7 against ours, computed (:func:`fig7_comparison`, :func:`fig7_fit`): two short
    sentences, the details in a collapsible box."""
    df = fig7_comparison().set_index("n_tokens")
    fit = fig7_fit()
    lo, hi = df.index.min(), df.index.max()
    ours = 1.0 - df["ours_layerwise_s"] / df["ours_serialized_s"]
    return (f"In the paper, layer-wise store hides {df.loc[lo, 'paper_hidden']:.0%} of the store at {lo // 1024}k "
            f"and {df.loc[hi, 'paper_hidden']:.0%} at {hi // 1024}k. In ours it hides {ours.min():.0%} at every length."
            "\n\n<details><summary>The bars in numbers</summary>\n\n"
            f"Paper: serialized {df.loc[lo, 'paper_serialized_s']:.2f} s at {lo // 1024}k → "
            f"{df.loc[hi, 'paper_serialized_s']:.2f} s at {hi // 1024}k; layer-wise ≈ {fit['layerwise_mean_s']:.1f} s "
            f"at every length. A straight line through the serialized bars: "
            f"≈ {fit['fixed_s']:.2f} s + the KV bytes at {fit['gbs']:.0f} GB/s. Ours: serialized "
            f"{df.loc[lo, 'ours_serialized_s'] * 1e3:.0f} ms → {df.loc[hi, 'ours_serialized_s']:.3f} s "
            f"(the KV at 128 GB/s), layer-wise {df.loc[lo, 'ours_layerwise_s'] * 1e3:.2f} → "
            f"{df.loc[hi, 'ours_layerwise_s'] * 1e3:.1f} ms (one layer's store).\n\n</details>")


def chunk_note(n_tokens: int = 32768, x: int = 4) -> str:
    """Markdown: which chunk size gives the shortest TTFT in :func:`chunk_sweep`, computed."""
    df = chunk_sweep(n_tokens, x).set_index("chunk")
    best = int(df["ttft_s"].idxmin())
    return (f"{n_tokens:,} tokens on {x} nodes: the TTFT is shortest at {best:,}-token chunks "
            f"({df.loc[best, 'ttft_s']:.2f} s). The lecture's default, {DEFAULT_CHUNK:,}, gives "
            f"{df.loc[DEFAULT_CHUNK, 'ttft_s']:.2f} s.")


# ------------------------------------------------------------------ tables for people (the notebook's outputs)
#: How the lecture names each scheme in its tables (:data:`mooncake_lab.plots.prefill.SCHEME_STYLE`'s labels).
SCHEME_LABELS = {"one_node": "one node", "tp": "TP across nodes", "sp": "SP (ring attention)", "cpp": "CPP (Mooncake)"}
#: The same, short, for column headers.
SCHEME_SHORT = {"one_node": "one node", "tp": "TP", "sp": "SP", "cpp": "CPP"}


def _s(v: float) -> str:
    """A time or size for people: 2 decimals below 10, 1 below 100, none above (never scientific)."""
    v = float(v)
    if not np.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}" if abs(v) < 100 else f"{v:,.0f}"


def _ms(v: float) -> str:
    """Seconds shown as milliseconds for people."""
    return _s(1e3 * float(v))


def _tokens_index(values, name: str = "prompt (tokens)") -> pd.Index:
    return pd.Index([f"{int(n):,}" for n in values], name=name)


def gantt_summary(result: cpp.PipelineResult, preset=DEFAULT_PRESET, model="llama2-70b", node="a800x8") -> pd.DataFrame:
    """One request's CPP run (:func:`gantt`) for people: its prompt, chunks, nodes, TTFT, one node's TTFT
    and the speedup, one row each (text)."""
    n, x = int(result.n_new[0]), int(result.start.shape[1])
    ttft = float(result.ttft[0])
    one = cpp.one_node_ttft(model, node, n, preset=preset)
    rows = {"prompt (tokens)": f"{n:,}", "chunk (tokens)": f"{int(result.chunk_tokens.max()):,}",
            "chunks": f"{int(result.chunk_tokens.size):,}", "nodes X": f"{x}", "TTFT on X nodes (s)": _s(ttft),
            "TTFT on one node, unchunked (s)": _s(one), "speedup (×)": f"{one / ttft:.1f}"}
    return pd.DataFrame({"value": list(rows.values())}, index=pd.Index(list(rows), name="one request, idle nodes"))


def cpp_vs_x_table(n_tokens: int = 131072, **kw) -> pd.DataFrame:
    """:func:`cpp_vs_x` for people: one row per group size X."""
    df = cpp_vs_x(n_tokens, **kw)
    return pd.DataFrame({"TTFT (s)": [_s(v) for v in df["ttft_s"]],
                         "speedup (×)": [f"{v:.2f}" for v in df["speedup"]],
                         "speedup ÷ X (%)": [f"{100 * v:.0f}" for v in df["efficiency"]]},
                        index=pd.Index([f"{int(v)}" for v in df["x"]], name=f"nodes X ({int(n_tokens):,} tokens)"))


def chunk_sweep_table(n_tokens: int = 32768, x: int = 4, **kw) -> pd.DataFrame:
    """:func:`chunk_sweep` for people: one row per chunk size."""
    df = chunk_sweep(n_tokens, x, **kw)
    return pd.DataFrame({"chunks": [f"{int(v):,}" for v in df["chunks"]], "TTFT (s)": [_s(v) for v in df["ttft_s"]]},
                        index=_tokens_index(df["chunk"], "chunk (tokens)"))


def ttft_table(curves: pd.DataFrame) -> pd.DataFrame:
    """A :func:`schemes_vs_length` frame as TTFT (s) per prompt length (rows) and scheme (columns)."""
    t = curves.pivot(index="n_tokens", columns="scheme", values="ttft_s")
    t = t[[s for s in cpp.SCHEMES if s in t.columns]]
    multi = curves["scheme"] != "one_node"
    x = int(curves.loc[multi, "x"].max()) if multi.any() else 1
    return pd.DataFrame({f"{SCHEME_SHORT[s]} (s)": [_s(v) for v in t[s]] for s in t.columns},
                        index=_tokens_index(t.index, f"prompt (tokens) · TTFT on X = {x} nodes"))


def schemes_table(df: pd.DataFrame) -> pd.DataFrame:
    """A :func:`schemes_vs_length` frame of one prompt length for people: one row per scheme."""
    n = int(df["n_tokens"].iloc[0])
    return pd.DataFrame({"nodes": [f"{int(v)}" for v in df["x"]], "TTFT (s)": [_s(v) for v in df["ttft_s"]],
                         "MFU (%)": [f"{100 * v:.0f}" for v in df["mfu"]],
                         "sent over RDMA (GB)": [_s(v) for v in df["net_gb"]]},
                        index=pd.Index([SCHEME_LABELS[s] for s in df["scheme"]], name=f"scheme ({n:,} tokens)"))


def interleave_table(inter: pd.DataFrame) -> pd.DataFrame:
    """An :func:`interleave_demo` frame for people: one row per request, its TTFT under each order."""
    t = inter.pivot(index="request", columns="order", values="ttft_s")
    first = inter[inter["order"] == inter["order"].iloc[0]].set_index("request")
    label = [f"{k}: {int(n):,} tokens" for k, n in zip(first["kind"], first["n_new"])]
    return pd.DataFrame({"arrives (s)": [f"{v:g}" for v in first["arrival_s"]],
                         "TTFT, FIFO (s)": [_s(v) for v in t.loc[first.index, "fifo"]],
                         "TTFT, interleaved (s)": [_s(v) for v in t.loc[first.index, "interleave"]]},
                        index=pd.Index(label, name="request"))


def store_table(store: pd.DataFrame) -> pd.DataFrame:
    """A :func:`layerwise_store` frame for people: what the KV store adds to each prefill, both ways."""
    return pd.DataFrame({"prefill (s)": [_s(v) for v in store["prefill_s"]],
                         "store (ms)": [_ms(v) for v in store["store_s"]],
                         "serialized adds (ms)": [_ms(v) for v in store["exposed_serialized_s"]],
                         "layer-wise adds (ms)": [_ms(v) for v in store["exposed_layerwise_s"]],
                         "layer-wise hides (%)": [f"{100 * v:.1f}" for v in store["hidden_fraction"]]},
                        index=_tokens_index(store["n_tokens"]))


def vram_table(lengths: Iterable[int] = LENGTHS, **kw) -> pd.DataFrame:
    """:func:`vram_occupation` for people: S, S·T both ways and their ratio per prompt length."""
    df = vram_occupation(lengths, **kw)
    return pd.DataFrame({"S = KV (GB)": [_s(v) for v in df["kv_gb"]],
                         "S·T serialized (GB·s)": [_s(v) for v in df["serialized_gb_s"]],
                         "S·T layer-wise (MB·s)": [_s(1e3 * v) for v in df["layerwise_gb_s"]],
                         "ratio (×)": [f"{v:,.0f}" for v in df["ratio"]]},
                        index=_tokens_index(df["n_tokens"]))


def markdown_table(df: pd.DataFrame) -> str:
    """A table for people (one of the ``*_table`` frames, text cells) as a Markdown table, its index first."""
    head = [str(df.index.name or "")] + [str(c) for c in df.columns]
    rows = [[str(i)] + [str(v) for v in r] for i, r in zip(df.index, df.to_numpy())]
    line = lambda cells: "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(head), "|" + "---|" * len(head)] + [line(r) for r in rows])


def in_box(df: pd.DataFrame, summary: str):
    """``df`` as a Markdown table inside a collapsible ``<details>`` box headed ``summary`` (a notebook output:
    the number behind a figure, one click away)."""
    from IPython.display import Markdown
    return Markdown(f"<details><summary>{summary}</summary>\n\n{markdown_table(df)}\n\n</details>")


def metrics_table() -> pd.DataFrame:
    """The lecture's reproduce metrics (:func:`metrics`) for people: what each measures, our value and the
    paper's where it gives one (Fig. 7's bars at 128k; "—": no CPP timings in the paper)."""
    rows = {}
    for m in metrics():
        kind, _, rest = m.name.partition(".")
        x = rest.rsplit(".x", 1)[-1] if ".x" in rest else ""
        what = {"cpp": f"CPP on {x} node{'s' if x != '1' else ''}, TTFT",
                "tp": f"TP across {x} nodes, TTFT", "sp": f"SP on {x} nodes, TTFT"}.get(kind)
        if what is None:
            what = "KV store added, " + ("serialized" if m.name.endswith("serialized") else "layer-wise")
        fmt = (lambda v: f"{_ms(v)} ms" if m.unit == "s" and v < 1 else f"{_s(v)} {m.unit}")
        rows[what] = (fmt(m.ours), "—" if m.paper is None else f"{fmt(m.paper)} (Fig. 7)")
    return pd.DataFrame({"ours": [r[0] for r in rows.values()], "paper": [r[1] for r in rows.values()]},
                        index=pd.Index(list(rows), name="LLaMA2-70B, 131,072 tokens, 'modern'"))
