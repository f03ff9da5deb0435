"""Dashboards of lecture 03 (cache part): hit ratio vs capacity, and global pool vs local caches.

Both read the trace through :func:`mooncake_lab.traces.cached_trace` (parsed once per process) and
the global-LRU curve through :func:`mooncake_lab.experiments.l03_cache.hit_curve` (one
stack-distance pass per trace, cached), so a slider move costs a ``searchsorted`` plus drawing —
or, for local caches, one LRU replay of the trace (≈ 20–30 ms on the conversation trace).
"""
from __future__ import annotations

import ipywidgets as widgets

from ..experiments import l03_cache as exp
from ..traces import as_trace
from ..plots import cache as plots
from . import Dashboard

__all__ = ["CapacityDashboard", "PoolDashboard", "TRACE_CHOICES", "FastRedraw"]

#: Traces offered by the dropdowns: two released traces (real, or their stand-ins) and a preset.
TRACE_CHOICES = ("conversation", "synthetic", "toolagent-like")

_BLOCKS_LOG10 = (2.0, 6.0)  # capacity sliders span 100 … 1,000,000 blocks (51 MB … 168 TB of LLaMA2-70B KV)


def _blocks(value: float) -> int:
    """A log slider's value as a whole number of blocks (≥ 1)."""
    return max(1, int(round(value)))


def _size_text(blocks: int, block_tokens: int = 512) -> str:
    tb = exp.blocks_to_dram_bytes(blocks) / exp.DRAM_BYTES_PER_TB
    return f"{blocks:,} blocks = {blocks * block_tokens / 1e6:,.2f}M tokens = {tb:,.2f} TB of LLaMA2-70B KV"


#: Kept for modules written against the old name; the base class now renders this way.
FastRedraw = Dashboard


class CapacityDashboard(Dashboard):
    """Global-LRU hit ratio vs capacity; the capacity slider is log-scaled in blocks.

    Controls: ``trace``, ``capacity`` (blocks, 100 … 1M), ``weight`` (token or block hit ratio).
    """

    title = "Lecture 03 · hit ratio vs cache capacity (one global LRU pool)"

    def __init__(self, trace: str = "conversation", capacity_blocks: int = exp.LOCAL_CAPACITY_BLOCKS,
                 traces=TRACE_CHOICES):
        self._init = (trace, capacity_blocks, tuple(traces))
        super().__init__()

    def _build_controls(self) -> dict:
        trace, cap, traces = self._init
        return {
            "trace": widgets.Dropdown(options=traces, value=trace, description="trace"),
            "capacity": widgets.FloatLogSlider(value=cap, base=10, min=_BLOCKS_LOG10[0], max=_BLOCKS_LOG10[1],
                                               step=0.05, description="capacity (blocks)", readout_format=",.0f",
                                               continuous_update=False, style={"description_width": "initial"},
                                               layout=widgets.Layout(width="420px")),
            "weight": widgets.ToggleButtons(options=("token", "block"), value="token", description="weight"),
        }

    def _draw(self):
        t = as_trace(self.value("trace"))
        cap = _blocks(self.value("capacity"))
        weight = self.value("weight")
        curve = exp.hit_ratio_vs_capacity(t, exp.curve_capacities())
        h = float(exp.hit_curve(t).hit_ratio([cap], weight)[0])
        self.readout.value = (f"{_size_text(cap, t.block_tokens)} → <b>{h:.1%}</b> {weight}-weighted hit ratio "
                              f"on <code>{t.name}</code>")
        return plots.hit_ratio_curve(curve, exp.paper_table1_points(), capacity=cap,
                                     block_bytes=exp.kv_block_bytes(), trace_name=t.name, weight=weight)


class PoolDashboard(Dashboard):
    """One global pool vs ``n`` local caches sharing the same total capacity, with a routing choice.

    Controls: ``trace``, ``capacity`` (total blocks, 1,000 … 1M), ``layout`` (which layout the
    right panel details), ``n_instances`` (1 … 32), ``routing`` (random, round_robin, session).
    """

    title = "Lecture 03 · global pool vs local caches of the same total DRAM"

    def __init__(self, trace: str = "conversation",
                 total_capacity_blocks: int = exp.N_LOCAL_INSTANCES * exp.LOCAL_CAPACITY_BLOCKS,
                 n_instances: int = exp.N_LOCAL_INSTANCES, routing: str = "random", traces=TRACE_CHOICES):
        self._init = (trace, total_capacity_blocks, n_instances, routing, tuple(traces))
        super().__init__()

    def _build_controls(self) -> dict:
        trace, cap, n, routing, traces = self._init
        return {
            "trace": widgets.Dropdown(options=traces, value=trace, description="trace"),
            "capacity": widgets.FloatLogSlider(value=cap, base=10, min=3.0, max=_BLOCKS_LOG10[1], step=0.05,
                                               description="total capacity (blocks)", readout_format=",.0f",
                                               continuous_update=False, style={"description_width": "initial"},
                                               layout=widgets.Layout(width="440px")),
            "layout": widgets.ToggleButtons(options=("local", "global"), value="local", description="detail"),
            "n_instances": widgets.IntSlider(value=n, min=1, max=32, description="instances",
                                             continuous_update=False),
            "routing": widgets.Dropdown(options=exp.ROUTINGS, value=routing, description="routing"),
        }

    def _draw(self):
        t = as_trace(self.value("trace"))
        total = _blocks(self.value("capacity"))
        n = self.value("n_instances")
        routing = self.value("routing")
        g = exp.pool_breakdown(t, total, layout="global")
        loc = exp.pool_breakdown(t, total, n, layout="local", routing=routing)
        self.readout.value = (f"total {_size_text(total, t.block_tokens)}; each of {n} local caches: "
                              f"{_size_text(total // n, t.block_tokens)}")
        paper = exp.PAPER_GLOBAL_VS_LOCAL if t.name == "conversation" else None
        return plots.pool_layout(g, loc, selected=self.value("layout"), routing=routing, paper_ratio=paper,
                                 trace_name=t.name, block_bytes=exp.kv_block_bytes())
