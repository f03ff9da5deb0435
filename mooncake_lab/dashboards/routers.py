"""Dashboard of lecture 09: today's open-source KV-aware routers on the whole trace, one knob each.

:class:`RouterDashboard`: a router (the eight of :data:`~mooncake_lab.sim.routers.ROUTERS`, or
Mooncake's ``kvcentric`` Conductor for comparison), its main parameter (one slider per router, shown
only for the chosen one; :data:`KNOBS`), what it knows of the caches (true / its own belief), replay
speed, trace and architecture (lecture 09's :data:`~mooncake_lab.experiments.l09_routers.ARCHITECTURES`:
Mooncake's 8P+8D pools or 16 coupled nodes with chunked prefill) → one simulation of the whole trace
→ the TTFT CDF and the prompt tokens each instance computed and reused from its cache (the trade-off
every knob moves: cache hits against an even load), with a one-line summary.

A run costs 0.1–0.5 s on a busy 2-core machine, over the 150 ms budget, so after each move every
stop of the chosen router's slider, the neighbouring speeds, the other knowledge, architecture and
trace, and the other routers are computed ahead (:meth:`RouterDashboard._prefetch_jobs`; memoised
in :func:`~mooncake_lab.experiments.common.simulate_all`, the same memo as ``l09_routers.run``).
"""
from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from .. import sim
from ..experiments import l09_routers as l09
from ..sim.routers import ROUTERS, SYSTEM_DEFAULTS, RouterConfig
from ..traces import BLOCK_TOKENS
from . import Dashboard, on_this_machine, sticky_decades, sticky_limit

__all__ = ["RouterDashboard", "KNOBS", "POLICIES", "SPEEDS", "TRACES", "knob_default", "knob_overrides", "bar_total",
           "seconds"]

#: The routers, then Mooncake's Conductor (lecture 04) for comparison.
POLICIES = (*ROUTERS, "kvcentric")
TRACES = l09.TRACES
#: Replay speeds (×): lecture 04's 0.4 on the conversation trace (its prefill pool just saturated
#: without cache, ``l04_scheduling.REPLAY_SPEEDS``) and around it; 0.6 is overload for most routers.
SPEEDS = (0.2, 0.3, 0.4, 0.5, 0.6)
#: Stress level of every run: lecture 04's cluster (``l09_routers.STRESS``), at the speed chosen here.
STRESS = "lecture 04"
#: Knowledge control: the router's own default (``SYSTEM_DEFAULTS``), the true caches, or its belief.
KNOWLEDGE = (("system default", "default"), ("true caches", "true"), ("belief", "belief"))
#: Routers whose rule reads no cache (the knowledge control does not apply).
_NO_CACHE = ("prodstack_rr", "kvcentric")
_RC = RouterConfig()  # the sources' defaults (sim/routers.py), the knobs' starting stops

#: Router → (control name, label, stops, default, meaning). The default is the system's (its source
#: in :mod:`mooncake_lab.sim.routers`); every stop is a value RouterConfig accepts.
KNOBS = {
    # Dynamo's router_temperature T (config.rs@07a6c9ce default 0 = argmin of the cost): T > 0 samples
    # instances by exp(−normalised cost / T), trading overlap for spread. (The deprecated overlap
    # weight w — s = w, κ = 0 if w = 0 — only rescales the cost on the P/D prefill side, where the
    # decode term is off and ρ = 0: it changes nothing there, so the temperature is the knob here.)
    "dynamo": ("dynamo_temperature", "Dynamo temperature T", (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0),
               _RC.dynamo_temperature,
               "router_temperature: 0 = cheapest instance; larger = sample more evenly"),
    # SGLang cache_threshold (router_args.py@e46dcd87: 0.3): the match rate above which the longest
    # match wins; below it the least-loaded instance. 0 … 1 is its whole range.
    "sglang": ("sglang_cache_threshold", "SGLang cache threshold", tuple(round(0.1 * k, 1) for k in range(11)),
               _RC.sglang_cache_threshold, "match rate h/L above which the longest match wins (else least load)"),
    # llm-d prefix-cache-scorer weight (P/D profile 2, queue 1; coupled default 3, queue 2, KV 2): the
    # slider starts at the architecture's (knob_default); listed here is the P/D one.
    "llmd": ("llmd_prefix_weight", "llm-d prefix weight", (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0),
             _RC.resolve("llmd", True, 1, BLOCK_TOKENS).llmd_w_prefix,
             "prefix scorer weight against queue (1 P/D, 2 coupled) and KV (0 P/D, 2 coupled)"),
    # production-stack kv_aware_threshold (tokens, default 2000): the longest match is taken only when
    # it leaves at most this many tokens to compute; else the lowest-QPS instance.
    "prodstack_kv": ("prodstack_kv_threshold", "prod-stack KV threshold (tokens)",
                     (0, 500, 1000, 2000, 4000, 8000, 16000, 32000), _RC.prodstack_kv_threshold,
                     "match taken when the uncached rest ≤ threshold tokens; else lowest QPS"),
    # AIBrix IMBALANCE_ABS (running requests; code default 8): above it only the least loaded compete.
    "aibrix": ("aibrix_imbalance_abs", "AIBrix imbalance (requests)", (0, 1, 2, 4, 8, 16, 32, 64),
               _RC.aibrix_imbalance_abs,
               "max − min in-flight requests above which only the least loaded compete"),
    # Preble's window (s; 3 min in AIBrix's port): the windowed prefill load it balances on.
    "preble": ("preble_window_s", "Preble window (s)", (10.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0),
               SYSTEM_DEFAULTS["preble"][3],
               "seconds of recent prefill work counted as an instance's load"),
    # Mooncake's kvcache_balancing_threshold (lecture 04; ClusterConfig default 1.0).
    "kvcentric": ("kvcentric_threshold", "Mooncake balancing threshold",
                  (1.0, 1.25, 1.5, 2.0, 4.0, 8.0, 16.0), sim.ClusterConfig.kvcache_balancing_threshold,
                  "fetch the pool's best prefix when it is this many times the local one"),
}
_MAX_INSTANCES = max(sim.ClusterConfig(**a).n_prefill_instances for a in l09.ARCHITECTURES.values())  # bars
_CDF_POINTS = 400


def knob_default(policy: str, arch: str = "disaggregated"):
    """Where ``policy``'s slider starts on ``arch``: the system's default resolved for that architecture
    (llm-d's prefix weight is 2 in its P/D profile, 3 in its default profile; the others are the same
    on both)."""
    if policy == "llmd":
        return _RC.resolve("llmd", arch == "disaggregated", 1, BLOCK_TOKENS).llmd_w_prefix
    return KNOBS[policy][3]


def knob_overrides(policy: str, value, knowledge: str = "default") -> tuple:
    """``(router, overrides)`` for :func:`~mooncake_lab.experiments.l09_routers.cluster` of ``policy``
    with its knob at ``value`` and ``knowledge`` (``"default"``: the system's, spelled out so the
    memo key is that of the explicit choice): a :class:`RouterConfig` (None for ``kvcentric``) and
    ClusterConfig overrides. Routers without a knob (round robin, production-stack's prefix) take none."""
    if policy == "kvcentric":
        return None, {"kvcache_balancing_threshold": float(value)}
    kn = SYSTEM_DEFAULTS[policy][0] if knowledge == "default" or policy in _NO_CACHE else knowledge
    kw = {"knowledge": kn}
    if policy in KNOBS:
        name = KNOBS[policy][0]
        if name == "preble_window_s":
            kw["window_s"] = float(value)
        elif name in ("prodstack_kv_threshold", "aibrix_imbalance_abs"):
            kw[name] = int(value)
        else:
            kw[name] = float(value)
    return RouterConfig(**kw), {}


def bar_total(millions: float) -> str:
    """A bar's label: its prompt tokens in millions ("0" for none; two decimals below 0.1 M, so a small
    total does not read as zero)."""
    if millions == 0:
        return "0"
    return f"{millions:.2f}" if millions < 0.1 else f"{millions:.1f}"


def seconds(x: float) -> str:
    """A time as the readout prints it: three significant digits, whole seconds with thousands commas from
    100 s up ("32,321 s", never "3.23e+04 s")."""
    return f"{x:,.0f} s" if abs(x) >= 100 else f"{x:.3g} s"


def _slider_style():
    return {"style": {"description_width": "initial"}, "continuous_update": False}


class RouterDashboard(Dashboard):
    """One router on a whole trace: TTFT CDF and prompt tokens per instance (computed / from cache).

    Controls: ``router`` (:data:`POLICIES`), ``knowledge`` (system default / true caches / belief),
    ``speed`` (replay ×, :data:`SPEEDS`), ``trace``, ``arch`` (``disaggregated`` 8P+8D or ``coupled``
    16 nodes, chunked prefill), and one slider per router (:data:`KNOBS`; the chosen router's shown).
    """

    title = "Lecture 09 · KV-aware routers on the whole trace (one simulation per move)"

    def __init__(self, router: str = "dynamo", knowledge: str = "default", speed: float = 0.4,
                 trace: str = "conversation", arch: str = "disaggregated", **knobs):
        self._arch = arch   # the architecture the llm-d slider's start follows (knob_default)
        if "llmd_prefix_weight" not in knobs and isinstance(arch, str) and arch in l09.ARCHITECTURES:
            knobs["llmd_prefix_weight"] = knob_default("llmd", arch)
        super().__init__(router=router, knowledge=knowledge, speed=speed, trace=trace, arch=arch, **knobs)

    @staticmethod
    def _follow_arch(v: dict, arch: str) -> dict:
        """Control values ``v`` moved to ``arch``: a slider left at its start on ``v["arch"]`` starts at
        ``arch``'s (llm-d's prefix weight); one the user moved keeps its value."""
        out = {**v, "arch": arch}
        for p in KNOBS:
            name = KNOBS[p][0]
            if p != "kvcentric" and v[name] == knob_default(p, v["arch"]):
                out[name] = knob_default(p, arch)
        return out

    def _build_controls(self) -> dict:
        ctl = {
            "router": widgets.Dropdown(options=list(POLICIES), value="dynamo", description="router"),
            "knowledge": widgets.ToggleButtons(options=list(KNOWLEDGE), value="default",
                                               description="cache knowledge", style={"description_width": "initial"}),
            "speed": widgets.SelectionSlider(options=list(SPEEDS), value=0.4, description="replay speed (×)",
                                             **_slider_style()),
            "trace": widgets.Dropdown(options=list(TRACES), value="conversation", description="trace"),
            "arch": widgets.Dropdown(options=[("disaggregated 8P+8D", "disaggregated"),
                                              ("coupled 16, chunked", "coupled")],
                                     value="disaggregated", description="architecture"),
        }
        for _, (name, label, stops, default, _) in KNOBS.items():
            ctl[name] = widgets.SelectionSlider(options=list(stops), value=default, description=label,
                                                **_slider_style())
        return ctl

    # -- runs --------------------------------------------------------------------------------
    @staticmethod
    def _job(v: dict, **changes) -> tuple:
        """``(trace, speed, ClusterConfig)`` of control values ``v`` with ``changes``."""
        if "arch" in changes and changes["arch"] != v["arch"]:
            v = RouterDashboard._follow_arch(v, changes["arch"])
        v = {**v, **changes}
        p = v["router"]
        router, over = knob_overrides(p, v[KNOBS[p][0]] if p in KNOBS else None, v["knowledge"])
        return v["trace"], float(v["speed"]), l09.cluster(p, v["arch"], STRESS, router, **over)

    def _prefetch_jobs(self, v: dict) -> list:
        """Every stop of the chosen router's slider (nearest first), the other speeds (nearest first),
        knowledge values, architecture and trace (if on this machine: nothing is downloaded ahead),
        then the other routers at their sliders' values."""
        p = v["router"]
        jobs = []
        if p in KNOBS:
            name, stops = KNOBS[p][0], KNOBS[p][2]
            i = stops.index(v[name])
            jobs += [self._job(v, **{name: s}) for s in sorted(stops, key=lambda s: abs(stops.index(s) - i))]
        jobs += [self._job(v, speed=s) for s in sorted(SPEEDS, key=lambda s: abs(s - v["speed"]))]
        if p not in _NO_CACHE:
            jobs += [self._job(v, knowledge=k) for _, k in KNOWLEDGE]
        jobs += [self._job(v, arch=a) for a in l09.ARCHITECTURES]
        jobs += [self._job(v, trace=t) for t in TRACES if t == v["trace"] or on_this_machine(t)]   # no download
        jobs += [self._job(v, router=r) for r in POLICIES]
        seen, out = set(), []
        for j in jobs:   # the current state first in some of them: drop repeats
            key = (j[0], j[1], repr(j[2]))
            if key not in seen:
                seen.add(key)
                out.append(j)
        return out

    # -- figure ------------------------------------------------------------------------------
    def _setup(self):
        from matplotlib.ticker import MaxNLocator

        from ..plots import PALETTE, SLO_COLOR, new_figure

        fig, (a1, a2) = new_figure(1, 2, width=10.0, height=3.6)
        fig.set_dpi(85)
        self.a1, self.a2 = a1, a2
        self.cdf = a1.plot([], [], color=PALETTE[0])[0]
        self.mean_line = a1.axvline(1.0, color=PALETTE[0], ls="-.", lw=1.2)
        self.slo_s = float(sim.ClusterConfig.ttft_slo_s)
        a1.axvline(self.slo_s, color=SLO_COLOR, ls="--", lw=1.2)
        a1.set_xscale("log")
        a1.set_ylim(0, 1.02)
        a1.set_xlabel("TTFT (s, log scale)")
        a1.set_ylabel("fraction of requests")
        a1.set_title(f"TTFT CDF (dash-dot: mean; dashed: {self.slo_s:g} s SLO)")
        x = np.arange(_MAX_INSTANCES)
        self.computed = a2.bar(x, np.zeros(_MAX_INSTANCES), color=PALETTE[3], label="computed")
        self.cached = a2.bar(x, np.zeros(_MAX_INSTANCES), color=PALETTE[2], label="reused from cache")
        # each bar's total (millions of prompt tokens) above it, "0" on an instance that got nothing: a
        # zero-length bar is then read as zero, not as a missing instance
        self.totals = [a2.text(i, 0.0, "", ha="center", va="bottom", fontsize=7) for i in x]
        a2.set_xlabel("instance (prefill node / coupled node)")
        a2.set_ylabel("prompt tokens (millions)")
        a2.set_title("prompt tokens per instance (millions)")
        a2.legend(loc="upper right", fontsize=8)
        self.caption = a1.text(0.98, 0.04, "", transform=a1.transAxes, ha="right", va="bottom", fontsize=9)
        # 8 or 16 instances, and a token scale that jumps when a knob piles the work on a few: both axes
        # of the bars are drawn per move (few ticks, under the bars), not a new background
        a2.xaxis.set_major_locator(MaxNLocator(8, integer=True))
        a2.yaxis.set_major_locator(MaxNLocator(5))
        a2.set_axisbelow(True)
        self.dynamic(self.cdf, self.mean_line, self.caption, a2.xaxis, a2.yaxis, *self.computed, *self.cached,
                     *self.totals)
        self._limits = {"ttft": None, "tokens": None}
        return fig

    def _update(self):
        from ..experiments.common import simulate_all

        v = {k: w.value for k, w in self.controls.items()}
        if v["arch"] != self._arch:   # a slider left at its start follows the architecture (knob_default)
            moved = self._follow_arch({**v, "arch": self._arch}, v["arch"])
            self._restoring = True    # set without a second redraw
            try:
                for name in (KNOBS[p][0] for p in KNOBS):
                    self.controls[name].value = moved[name]
            finally:
                self._restoring = False
            self._arch, v = v["arch"], moved
        p = v["router"]
        for r, (name, *_rest) in KNOBS.items():   # only the chosen router's slider is shown
            self.controls[name].layout.display = None if r == p else "none"
        self.controls["knowledge"].disabled = p in _NO_CACHE
        res = simulate_all([self._job(v)])[0]
        s = res.summary()
        a = res.arrays
        n = res.config.n_prefill_instances
        ok = a["prefill_inst"] >= 0
        comp = np.bincount(a["prefill_inst"][ok], weights=a["computed_tok"][ok], minlength=n) / 1e6
        hit = np.bincount(a["prefill_inst"][ok], weights=a["cached_tok"][ok], minlength=n) / 1e6
        df = res.requests
        t = np.sort(df.loc[df["outcome"] == "completed", "ttft_s"].to_numpy())
        if len(t):
            qs = np.linspace(0.0, 1.0, min(len(t), _CDF_POINTS))
            self.cdf.set_data(np.maximum(np.quantile(t, qs), 1e-2), qs * len(t) / len(df))
            self.mean_line.set_xdata([float(t.mean())] * 2)
        self.cdf.set_visible(bool(len(t)))
        self.mean_line.set_visible(bool(len(t)))
        lim = self._limits
        lim["ttft"] = sticky_decades(lim["ttft"], 0.1, max(float(t.max()) if len(t) else 0.0, 2 * self.slo_s))
        self.a1.set_xlim(*lim["ttft"])
        lim["tokens"] = sticky_limit(lim["tokens"], float((comp + hit).max()) if n else 1.0, headroom=1.25)
        self.a2.set_ylim(0, lim["tokens"])
        self.a2.set_xlim(-0.6, n - 0.4)
        for i, (bc, bh, tx) in enumerate(zip(self.computed, self.cached, self.totals)):
            on = i < n
            bc.set_visible(on)
            bh.set_visible(on)
            tx.set_visible(on)
            if on:
                bc.set_height(comp[i])
                bh.set_y(comp[i])
                bh.set_height(hit[i])
                tx.set_position((i, comp[i] + hit[i]))
                tx.set_text(bar_total(comp[i] + hit[i]))
        knob = f"{KNOBS[p][1]} = {v[KNOBS[p][0]]:g}" if p in KNOBS else "no parameter"
        router, _ = knob_overrides(p, v[KNOBS[p][0]] if p in KNOBS else None, v["knowledge"])
        kn = "" if p in _NO_CACHE else (", belief" if router.knowledge == "belief" else ", true caches")
        self.caption.set_text(f"{p}: {knob}{kn}")
        imb = l09.load_imbalance(res)
        self.readout.value = (
            f"<code>{res.trace.name}</code> · {p} ({knob}{kn}) · mean TTFT "
            f"<b>{seconds(s['ttft_mean_s'])}</b>, p99 {seconds(s['ttft_p99_s'])} · SLO attainment "
            f"<b>{s['slo_attainment']:.1%}</b> · hit ratio <b>{s['hit_ratio']:.1%}</b> · load imbalance "
            f"(busiest / mean computed tokens) <b>{imb:.2f}</b> · simulated in {res.wall_s * 1e3:.0f} ms")
