"""Dashboards of lecture 03 (cache part): hit ratio vs capacity, and global pool vs local caches.

Both read the trace through :func:`mooncake_lab.traces.cached_trace` (parsed once per process) and
the global-LRU curve through :func:`mooncake_lab.experiments.l03_cache.hit_curve` (one
stack-distance pass per trace, cached), so a slider move costs a ``searchsorted`` plus drawing —
or, for local caches, one LRU replay of the trace (≈ 20–30 ms on the conversation trace). LFU and
LengthAware curves replay the trace once per capacity the slider can stop at (a few seconds a
curve), computed ahead in the background; a capacity move then reads the curve.
"""
from __future__ import annotations

import threading
from functools import partial

import ipywidgets as widgets

from ..experiments import l03_cache as exp
from ..traces import as_trace
from ..plots import cache as plots
from ..validate import fail, option
from . import Dashboard, on_this_machine, sticky_limit

__all__ = ["CapacityDashboard", "PoolDashboard", "TRACE_CHOICES", "FastRedraw"]

#: Traces offered by the dropdowns: two released traces (real, or their stand-ins) and a preset.
TRACE_CHOICES = ("conversation", "synthetic", "toolagent-like")

_BLOCKS_LOG10 = (2.0, 6.0)  # capacity sliders span 100 … 1,000,000 blocks (51 MB … 168 TB of LLaMA2-70B KV)
_CAPACITY_STEP = 0.05       # the capacity slider's step (log10 of blocks): 81 stops


def trace_options(traces, where: str) -> tuple:
    """``traces`` (a dashboard's ``traces=`` argument) checked: a non-empty list of distinct trace
    names, each a released trace or a synthetic preset."""
    from .. import synthetic, trace_data

    known = tuple(trace_data.TRACE_FILES) + tuple(synthetic.PRESETS)
    allowed = "a non-empty list of distinct trace names, each one of " + ", ".join(map(repr, known))
    if isinstance(traces, (str, bytes)) or not isinstance(traces, (list, tuple)) or not traces:
        raise fail(f"{where}(traces=...)", traces, allowed)
    names = tuple(option(t, f"{where}(traces=...)", known) for t in traces)
    if len(set(names)) != len(names):
        raise fail(f"{where}(traces=...)", traces, allowed)
    return names


def _blocks(value: float) -> int:
    """A log slider's value as a whole number of blocks (≥ 1)."""
    return max(1, int(round(value)))


def _size_text(blocks: int, block_tokens: int = 512) -> str:
    tb = exp.blocks_to_dram_bytes(blocks) / exp.DRAM_BYTES_PER_TB
    return f"{blocks:,} blocks = {blocks * block_tokens / 1e6:,.2f}M tokens = {tb:,.2f} TB of LLaMA2-70B KV"


#: Kept for modules written against the old name; the base class now renders this way.
FastRedraw = Dashboard


def _capacity_stops() -> tuple:
    """The capacities (whole blocks) the capacity slider can stop at: 10^(2 + 0.05 k), k = 0 … 80."""
    n = int(round((_BLOCKS_LOG10[1] - _BLOCKS_LOG10[0]) / _CAPACITY_STEP))
    return tuple(sorted({_blocks(10 ** (_BLOCKS_LOG10[0] + k * _CAPACITY_STEP)) for k in range(n + 1)}))


class CapacityDashboard(Dashboard):
    """Hit ratio of one global cache vs capacity; the capacity slider is log-scaled in blocks.

    Controls: ``trace``, ``capacity`` (blocks, 100 … 1M), ``weight`` (token or block hit ratio),
    ``eviction`` (LRU, LFU or LengthAware: arXiv v3 Table 1's policies, :mod:`mooncake_lab.prefix_cache`).
    LRU's curve is exact at every capacity (stack distances); LFU's and LengthAware's are replayed at
    each of the slider's 81 stops (a capacity set from code between stops is replayed once).
    """

    title = "Lecture 03 · hit ratio vs cache capacity (one global pool)"

    _KEYWORDS = {"capacity": "capacity_blocks"}

    def __init__(self, trace: str = "conversation", capacity_blocks: int = exp.LOCAL_CAPACITY_BLOCKS,
                 eviction: str = "lru", traces=TRACE_CHOICES):
        self._traces = trace_options(traces, type(self).__name__)
        super().__init__(trace=trace, capacity=capacity_blocks, eviction=eviction)

    def _build_controls(self) -> dict:
        return {
            "trace": widgets.Dropdown(options=self._traces, description="trace"),
            "capacity": widgets.FloatLogSlider(base=10, min=_BLOCKS_LOG10[0], max=_BLOCKS_LOG10[1],
                                               step=_CAPACITY_STEP, description="capacity (blocks)", readout_format=",.0f",
                                               continuous_update=False, style={"description_width": "initial"},
                                               layout=widgets.Layout(width="420px")),
            "weight": widgets.ToggleButtons(options=("token", "block"), value="token", description="weight"),
            "eviction": widgets.ToggleButtons(options=[(exp.POLICY_LABELS[p], p) for p in exp.EVICTION_POLICIES],
                                              value="lru", description="eviction"),
        }

    def _setup(self):
        self.view = plots.HitRatioChart(exp.paper_table1_points(), exp.kv_block_bytes(), live=True)
        self._curves: dict = {}    # (trace, policy) → eviction_curve frame
        self._locks: dict = {}     # (trace, policy) → Lock: a move waits for a curve being computed ahead
        self._points: dict = {}    # (trace, policy, capacity) → (token, block) hit ratio between stops
        return self.view.figure

    def _static_key(self):
        return self.view.static_state

    def _prefetch_jobs(self, v: dict) -> list:
        """The curves one move away — this trace under the other policies (LFU, LengthAware: a few
        seconds each), then the other traces on this machine under this policy (LRU: ≈ 0.1 s each) —
        each with its hit ratio at the current capacity when that is between the slider's stops."""
        others = [t for t in self.controls["trace"].options if t != v["trace"] and on_this_machine(t)]
        cap = _blocks(v["capacity"])
        return [partial(self._hit_at, t, p, cap) for t, p in
                [(v["trace"], p) for p in exp.EVICTION_POLICIES if p != v["eviction"]]
                + [(t, v["eviction"]) for t in others]]

    def _curve_of(self, name: str, policy: str = "lru"):
        """Hit ratio vs capacity of trace ``name`` under eviction ``policy``, computed once (a move
        that needs a curve being computed ahead waits for it rather than computing it again)."""
        t = as_trace(name)
        key = (t, policy)
        with self._locks.setdefault(key, threading.Lock()):
            if key not in self._curves:
                caps = exp.curve_capacities() if policy == "lru" else list(_capacity_stops()) + [float("inf")]
                self._curves[key] = exp.eviction_curve(t, policy, caps)
                if policy == "lru":
                    exp.hit_curve(t)   # memoised there: the readout's point
        return self._curves[key]

    def _hit_at(self, name: str, policy: str, cap: int) -> tuple:
        """(token, block) hit ratio of one global ``policy`` cache of ``cap`` blocks on trace ``name``
        (its curve computed on the way): LRU from the stack distances; LFU / LengthAware from the
        curve at a slider stop, else one replay (memoised)."""
        curve, t = self._curve_of(name, policy), as_trace(name)
        if policy == "lru":
            return tuple(float(exp.hit_curve(t).hit_ratio([cap], w)[0]) for w in ("token", "block"))
        at = curve[curve["capacity_blocks"] == cap]
        if len(at):
            return float(at["hit_ratio"].iloc[0]), float(at["block_hit_ratio"].iloc[0])
        key = (t, policy, cap)
        with self._locks.setdefault(key, threading.Lock()):
            if key not in self._points:
                row = exp.eviction_curve(t, policy, [cap])
                self._points[key] = (float(row["hit_ratio"].iloc[0]), float(row["block_hit_ratio"].iloc[0]))
        return self._points[key]

    def _update(self):
        t = as_trace(self.value("trace"))
        cap = _blocks(self.value("capacity"))
        weight, policy = self.value("weight"), self.value("eviction")
        curve = self._curve_of(self.value("trace"), policy)
        h = self._hit_at(self.value("trace"), policy, cap)[0 if weight == "token" else 1]
        self.readout.value = (f"{_size_text(cap, t.block_tokens)} → <b>{h:.1%}</b> {weight}-weighted hit ratio "
                              f"of one global {exp.POLICY_LABELS[policy]} cache on <code>{t.name}</code>")
        # a hit ratio is a fraction: one 0…1 scale for every trace and weighting
        self.view.update(curve, capacity=cap, trace_name=t.name, weight=weight, ylim=(0, 1), policy=policy,
                         paper=exp.paper_table1_points(policy), hit=h)


class PoolDashboard(Dashboard):
    """One global pool vs ``n`` local caches sharing the same total capacity, with a routing choice.

    Controls: ``trace``, ``capacity`` (total blocks, 1,000 … 1M), ``layout`` (which layout the
    right panel details), ``n_instances`` (1 … 32), ``routing`` (random, round_robin, session).
    """

    title = "Lecture 03 · global pool vs local caches of the same total DRAM"

    _KEYWORDS = {"capacity": "total_capacity_blocks"}

    def __init__(self, trace: str = "conversation",
                 total_capacity_blocks: int = exp.N_LOCAL_INSTANCES * exp.LOCAL_CAPACITY_BLOCKS,
                 n_instances: int = exp.N_LOCAL_INSTANCES, routing: str = "random", traces=TRACE_CHOICES):
        self._traces = trace_options(traces, type(self).__name__)
        super().__init__(trace=trace, capacity=total_capacity_blocks, n_instances=n_instances, routing=routing)

    def _build_controls(self) -> dict:
        return {
            "trace": widgets.Dropdown(options=self._traces, description="trace"),
            "capacity": widgets.FloatLogSlider(base=10, min=3.0, max=_BLOCKS_LOG10[1], step=0.05,
                                               description="total capacity (blocks)", readout_format=",.0f",
                                               continuous_update=False, style={"description_width": "initial"},
                                               layout=widgets.Layout(width="440px")),
            "layout": widgets.ToggleButtons(options=("local", "global"), value="local", description="detail"),
            "n_instances": widgets.IntSlider(min=1, max=32, description="instances", continuous_update=False),
            "routing": widgets.Dropdown(options=exp.ROUTINGS, description="routing"),
        }

    def _setup(self):
        self.view = plots.PoolLayoutChart(self.controls["n_instances"].max, live=True)
        self._runs: dict = {}           # (trace, layout, total, n, routing) → pool_breakdown frame
        self._ylim = self._slots = None
        return self.view.figure

    def _breakdown(self, t, layout: str, total: int, n: int = 1, routing: str = "random"):
        """``pool_breakdown``, memoised per setting (one LRU replay of the trace each: 20–110 ms)."""
        key = (t, layout, total, n, routing)
        if key not in self._runs:
            self._runs[key] = exp.pool_breakdown(t, total, n, layout=layout, routing=routing)
        return self._runs[key]

    def _update(self):
        t = as_trace(self.value("trace"))
        total = _blocks(self.value("capacity"))
        n = self.value("n_instances")
        routing = self.value("routing")
        g = self._breakdown(t, "global", total)
        loc = self._breakdown(t, "local", total, n, routing)
        self.readout.value = (f"total {_size_text(total, t.block_tokens)}; each of {n} local caches: "
                              f"{_size_text(total // n, t.block_tokens)}")
        paper = exp.PAPER_GLOBAL_VS_LOCAL if t.name == "conversation" else None
        # Axes that change only when they must: the left y top with headroom for the labels; the
        # right one fixed (the global pool's one instance takes all the load: 1.0, + room for the
        # legend); x room for the next power of two of instances.
        gh = float(g["hit_tokens"].sum() / g["input_tokens"].sum())
        lh = float(loc["hit_tokens"].sum() / loc["input_tokens"].sum())
        self._ylim = sticky_limit(self._ylim, max(0.5, gh, lh), headroom=1.3)
        self._slots = max(4, 2 ** (n - 1).bit_length())
        self.view.update(g, loc, selected=self.value("layout"), routing=routing, paper_ratio=paper,
                         trace_name=t.name, block_bytes=exp.kv_block_bytes(), ylims=(self._ylim, 1.35),
                         n_slots=self._slots)
