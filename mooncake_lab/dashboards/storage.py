"""Dashboards of lecture 02: reload vs recompute (TTFT parts), and FAST'25 Eq. 2's break-even bandwidth.

Both are closed-form (no simulation): a slider move costs a few cost-model calls plus drawing.
"""
from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np

from .. import storage as st
from ..experiments import l02_storage as exp
from ..hardware import get_node
from ..models import get_model
from ..plots import storage as plots
from . import Dashboard, node_arg, sticky_limit

__all__ = ["ReloadDashboard", "Eq2Dashboard", "RELOAD_MODELS", "EQ2_NODES"]

#: Models offered by the reload dashboard: MHA, GQA ×2, MLA, and a small MHA model.
RELOAD_MODELS = ("llama2-70b", "llama3-70b", "opt-13b", "deepseek-v3", "llama2-7b")
#: Nodes offered by the Eq. 2 dashboard (one per GPU type; the paper's two examples first).
EQ2_NODES = ("a800x8", "h800x8", "a100x8", "h100x8", "h20x8")
_EQ2_MODELS = ("llama3-70b", "llama2-70b", "opt-13b", "deepseek-v3")

_BW_LOG10 = (0.0, math.log10(2000.0))     # tier bandwidth slider: 1 … 2,000 GB/s
_PROMPT_LOG2 = (10.0, 17.0)               # prompt slider: 1,024 … 131,072 tokens
_PREFIX_LOG2 = (9.0, 17.0)                # Eq. 2 prefix slider: 512 … 131,072 tokens
_STYLE = {"description_width": "initial"}


def _options(names) -> list[tuple[str, str]]:
    return [(get_model(n).name, n) for n in names]


def _model_key(model, names):
    """The dropdown key among ``names`` of ``model`` in any spelling get_model knows ("LLaMA2-70B"),
    else ``model`` itself (the dropdown's check then names the options)."""
    try:
        m = get_model(model) if isinstance(model, str) else None
    except ValueError:
        return model
    return next((n for n in names if get_model(n) is m), model)


class ReloadDashboard(Dashboard):
    """TTFT of one request whose cached prefix is reloaded from a tier of the chosen bandwidth.

    Controls: ``bandwidth`` (GB/s, log, 1 … 2,000), ``model``, ``hit_fraction`` (cached share of
    the prompt, 0 … 0.95), ``prompt_tokens`` (log, 1,024 … 131,072), ``mfu`` (prefill share of peak,
    0.2 … 1; the lecture assumes 0.6). Bars: recompute all; reload + compute the rest,
    serialized and layer-wise.
    """

    title = "Lecture 02 · reload the cached prefix, or recompute it?"

    _KEYWORDS = {"bandwidth": "bandwidth_gbs"}

    def __init__(self, model: str = "llama2-70b", node="a800x8", bandwidth_gbs: float = 56.0,
                 hit_fraction: float = 0.5, prompt_tokens: int = exp.REQUEST_TOKENS, mfu: float = st.SEED_MFU):
        self.node = node_arg(node, "ReloadDashboard")
        super().__init__(bandwidth=bandwidth_gbs, model=_model_key(model, RELOAD_MODELS), hit_fraction=hit_fraction,
                         prompt_tokens=prompt_tokens, mfu=mfu)

    def _build_controls(self) -> dict:
        return {
            "bandwidth": widgets.FloatLogSlider(base=10, min=_BW_LOG10[0], max=_BW_LOG10[1], step=0.02,
                                                description="tier bandwidth (GB/s)", readout_format=",.3g",
                                                continuous_update=False, style=_STYLE,
                                                layout=widgets.Layout(width="420px")),
            "model": widgets.Dropdown(options=_options(RELOAD_MODELS), description="model"),
            "hit_fraction": widgets.FloatSlider(min=0.0, max=0.95, step=0.05, description="cached share",
                                                readout_format=".0%", continuous_update=False, style=_STYLE),
            "prompt_tokens": widgets.FloatLogSlider(base=2, min=_PROMPT_LOG2[0], max=_PROMPT_LOG2[1],
                                                    step=0.1, description="prompt (tokens)", readout_format=",.0f",
                                                    continuous_update=False, style=_STYLE,
                                                    layout=widgets.Layout(width="380px")),
            "mfu": widgets.FloatSlider(min=0.2, max=1.0, step=0.05, description="prefill MFU",
                                       readout_format=".0%", continuous_update=False, style=_STYLE),
        }

    def _breakdown(self):
        m = get_model(self.value("model"))
        n = max(2, int(round(self.value("prompt_tokens"))))
        return m, n, exp.request_breakdown(m, self.node, n, float(self.value("hit_fraction")),
                                           bandwidth_gbs=float(self.value("bandwidth")), mfu=float(self.value("mfu")))

    def _setup(self):
        self.view = plots.TTFTComponents(self._breakdown()[2]["scenario"], live=True)
        self._xmax = None
        return self.view.figure

    def _static_key(self):
        return self.view.static_state     # the bar labels name the bandwidth: a move redraws them

    def _update(self):
        bw = float(self.value("bandwidth"))
        m, n, df = self._breakdown()
        tiers = exp.tier_bandwidths(self.node)
        ref = ", ".join(f"{r.label} {r.bandwidth_gbs:g}" for r in tiers.itertuples())
        c = int(df["n_cached"].max())
        if c > 0:
            cross = st.breakeven_bandwidth(m, self.node, c, mfu=float(self.value("mfu"))) / 1e9
            verdict = (f"Reloading these {c:,} tokens beats recomputing them above <b>{cross:,.1f} GB/s</b>; "
                       f"layer-wise TTFT speedup here: <b>{df['speedup'].iloc[-1]:.2f}×</b>.")
        else:
            verdict = "Nothing is cached: every token is recomputed."
        self.readout.value = (f"{m.name}: {m.kv_bytes_per_token() / 1024:,.0f} KiB of KV per token. {verdict} "
                              f"Tier bandwidths (GB/s): {ref}.")
        right = float((df["total_s"] + (df["load_s"] - df["exposed_load_s"]).clip(lower=0)).max()) * 1.25
        self._xmax = sticky_limit(self._xmax, right)
        self.view.update(df, title=f"{m.name}, {n:,}-token prompt, {c:,} cached, tier at {bw:,.3g} GB/s",
                         xmax=self._xmax)


class Eq2Dashboard(Dashboard):
    """FAST'25 Eq. 2 break-even bandwidth vs prefix length, with the chosen point highlighted.

    Controls: ``prefix_len`` (tokens, log, 512 … 131,072), ``node`` (GPU type of the 8-GPU node),
    ``model`` (whose d and KV bytes enter Eq. 2).
    """

    title = "Lecture 02 · FAST'25 Eq. 2: how much bandwidth does prefix reuse need?"

    def __init__(self, prefix_len: int = 8192, node: str = "a800x8", model: str = "llama3-70b"):
        super().__init__(prefix_len=prefix_len, node=node, model=_model_key(model, _EQ2_MODELS))

    def _build_controls(self) -> dict:
        return {
            "prefix_len": widgets.FloatLogSlider(base=2, min=_PREFIX_LOG2[0], max=_PREFIX_LOG2[1], step=0.25,
                                                 description="prefix p (tokens)", readout_format=",.0f",
                                                 continuous_update=False, style=_STYLE,
                                                 layout=widgets.Layout(width="400px")),
            "node": widgets.Dropdown(options=EQ2_NODES, description="node"),
            "model": widgets.Dropdown(options=_options(_EQ2_MODELS), description="model"),
        }

    def _setup(self):
        # Eq. 2 depends on the node only through its peak FLOP/s: one curve per distinct peak (A800 and
        # A100 share one), all always drawn (the chosen node's thicker), on one scale for every model
        # and node, so a move changes lines, not axes (≈ 20 ms of Eq. 2 tables, once).
        groups: dict = {}
        for n in EQ2_NODES:
            groups.setdefault(get_node(n).peak_flops, []).append(n)
        self._curve_of = {n: ns[0] for ns in groups.values() for n in ns}
        labels = {ns[0]: "8 × " + " / ".join(n.split("x")[0].upper() for n in ns) for ns in groups.values()}
        self.view = plots.Eq2Chart(list(labels), exp.PAPER_EQ2, labels=labels, live=True)
        self._curves = {m: exp.eq2_curves(list(labels), get_model(m)) for m in _EQ2_MODELS}
        ys = np.concatenate([c["min_gbs"].to_numpy() for c in self._curves.values()]
                            + [exp.tier_bandwidths(n)["bandwidth_gbs"].to_numpy() for n in EQ2_NODES])
        self._ylim = (ys.min() / 1.3, ys.max() * 1.3)
        return self.view.figure

    def _static_key(self):
        return self.view.static_state

    def _update(self):
        p = max(1, int(round(self.value("prefix_len"))))
        node, m = self.value("node"), get_model(self.value("model"))
        g = st.eq2_min_bandwidth(m, node, p) / 1e9
        tiers = exp.tier_bandwidths(node)
        ok = [r.label for r in tiers.itertuples() if r.bandwidth_gbs >= g]
        self.readout.value = (f"Eq. 2 on 8 × {node.split('x')[0].upper()} at p = {p:,}: reuse wins above "
                              f"<b>{g:,.2f} GB/s</b>. Tiers fast enough: {', '.join(ok) if ok else 'none'}.")
        self.view.update(self._curves[self.value("model")], tiers, highlight=(self._curve_of[node], p, g),
                         model_name=m.name,
                         show_paper=m.name == "LLaMA3-70B", ylim=self._ylim)
