"""Dashboards of lecture 05: a CPP Gantt chart, and TTFT vs prompt length for one node / TP / SP / CPP.

Both are closed-form or one small pipeline simulation per move (≤ 256 chunks × 8 stages), and
build their figure once (:class:`~mooncake_lab.plots.prefill.Gantt`,
:class:`~mooncake_lab.plots.prefill.TTFTVsLength`); a move updates the bars or curves.
"""
from __future__ import annotations

import ipywidgets as widgets

from .. import cpp
from ..experiments import l05_prefill as exp
from ..plots import prefill as plots
from . import Dashboard, sticky_decades, sticky_limit

__all__ = ["GanttDashboard", "SchemesDashboard", "PRESET_OPTIONS"]

#: Presets offered: "modern" first (the lecture's default; "calibrated" extrapolates badly past 8k).
PRESET_OPTIONS = ("modern", "ideal", "calibrated")
_STYLE = {"description_width": "initial"}
_PROMPT_LOG2 = (12.0, 17.0)     # 4,096 … 131,072 tokens
_CHUNK_LOG2 = (9.0, 14.0)       # 512 … 16,384 tokens
_BW_LOG10 = (0.0, 2.6)          # 1 … 400 GB/s between stages


def _bw_slider():
    return widgets.FloatLogSlider(base=10, min=_BW_LOG10[0], max=_BW_LOG10[1], step=0.05,
                                  description="network (GB/s)", readout_format=",.3g", continuous_update=False,
                                  style=_STYLE)


class GanttDashboard(Dashboard):
    """Chunks of one prompt flowing through a CPP group.

    Controls: ``prompt_tokens`` (log, 4k … 128k), ``chunk`` (log, 512 … 16k), ``x`` (nodes, 1 … 8),
    ``bandwidth`` (GB/s between stages, log, 1 … 400), ``overlap`` (send while computing), ``preset``.
    """

    title = "Lecture 05 · chunked pipeline parallelism, chunk by chunk"

    _KEYWORDS = {"bandwidth": "bandwidth_gbs"}

    def __init__(self, prompt_tokens: int = 32768, chunk: int = 4096, x: int = 4, bandwidth_gbs: float = 87.0,
                 overlap: bool = True, preset: str = "modern"):
        super().__init__(prompt_tokens=prompt_tokens, chunk=chunk, x=x, bandwidth=bandwidth_gbs, overlap=overlap,
                         preset=preset)

    def _build_controls(self) -> dict:
        return {
            "prompt_tokens": widgets.FloatLogSlider(base=2, min=_PROMPT_LOG2[0], max=_PROMPT_LOG2[1],
                                                    step=0.5, description="prompt (tokens)", readout_format=",.0f",
                                                    continuous_update=False, style=_STYLE),
            "chunk": widgets.FloatLogSlider(base=2, min=_CHUNK_LOG2[0], max=_CHUNK_LOG2[1], step=1,
                                            description="chunk (tokens)", readout_format=",.0f",
                                            continuous_update=False, style=_STYLE),
            "x": widgets.IntSlider(min=1, max=8, description="nodes X", continuous_update=False),
            "bandwidth": _bw_slider(),
            "overlap": widgets.Checkbox(description="overlap sends with compute"),
            "preset": widgets.Dropdown(options=PRESET_OPTIONS, description="preset"),
        }

    def _setup(self):
        self.view = plots.Gantt(live=True)
        self._xmax = None
        return self.view.figure

    def _update(self):
        n = int(round(self.value("prompt_tokens")))
        chunk = int(round(self.value("chunk")))
        x, preset = int(self.value("x")), self.value("preset")
        bw = float(self.value("bandwidth"))
        r = exp.gantt(n, chunk, x, bw, bool(self.value("overlap")), preset=preset)
        one = cpp.one_node_ttft(n_tokens=n, preset=preset)
        ttft = float(r.ttft[0])
        busy = float((r.end - r.start).sum())
        c = cpp.n_chunks(n, chunk)
        nodes = f"{x} node" + ("s" if x > 1 else "")
        self.readout.value = (f"TTFT <b>{ttft:.2f} s</b>: {c:,} chunk{'s' if c > 1 else ''} on {nodes}. One node, "
                              f"unchunked: {one:.2f} s, so the speedup is <b>{one / ttft:.2f}×</b>. "
                              f"GPUs busy {busy / (x * ttft):.0%} of the time (the rest: pipeline bubbles "
                              f"and waiting for the network).")
        self._xmax = sticky_limit(self._xmax, float(r.end.max()), headroom=1.02)
        self.view.update(r, xmax=self._xmax)


class SchemesDashboard(Dashboard):
    """TTFT vs prompt length (8k … 1M) for one node, TP, SP and CPP on X nodes.

    Controls: ``x`` (nodes, 2 … 16), ``bandwidth`` (GB/s per node, log, 1 … 400), ``chunk`` (log,
    512 … 16k), ``preset``.
    """

    title = "Lecture 05 · one node vs TP vs SP vs CPP"

    _KEYWORDS = {"bandwidth": "bandwidth_gbs"}

    def __init__(self, x: int = 4, bandwidth_gbs: float = 87.0, chunk: int = 4096, preset: str = "modern"):
        super().__init__(x=x, bandwidth=bandwidth_gbs, chunk=chunk, preset=preset)

    def _build_controls(self) -> dict:
        return {
            "x": widgets.IntSlider(min=2, max=16, description="nodes X", continuous_update=False),
            "bandwidth": _bw_slider(),
            "chunk": widgets.FloatLogSlider(base=2, min=_CHUNK_LOG2[0], max=_CHUNK_LOG2[1], step=1,
                                            description="CPP chunk (tokens)", readout_format=",.0f",
                                            continuous_update=False, style=_STYLE),
            "preset": widgets.Dropdown(options=PRESET_OPTIONS, description="preset"),
        }

    def _setup(self):
        self.view = plots.TTFTVsLength(slo_s=exp.TTFT_SLO_S, live=True)
        self._ylim = None
        return self.view.figure

    def _update(self):
        x, preset = int(self.value("x")), self.value("preset")
        bw, chunk = float(self.value("bandwidth")), int(round(self.value("chunk")))
        df = exp.schemes_vs_length(exp.LONG_LENGTHS, x, chunk, preset=preset, bandwidth_gbs=bw)
        longest = df[df["meets_slo"]].groupby("scheme")["n_tokens"].max()
        parts = [f"{plots.SCHEME_STYLE[s][0]}: {int(longest[s]):,}" if s in longest else
                 f"{plots.SCHEME_STYLE[s][0]}: none" for s in cpp.SCHEMES]
        self.readout.value = f"Longest prompt within the {exp.TTFT_SLO_S:g} s SLO — " + "; ".join(parts) + " tokens."
        self._ylim = sticky_decades(self._ylim, *self.view.y_range(df))
        self.view.update(df, title=f"TTFT vs prompt length, X = {x} nodes, {bw:,.3g} GB/s, preset '{preset}'",
                         ylim=self._ylim)
