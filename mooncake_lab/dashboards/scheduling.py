"""Dashboards of lecture 04: the Conductor's policies on the real trace, and Algorithm 1 on one request.

* :class:`SchedulingDashboard` (the main one): replay speed, prefill instances, cache capacity,
  balancing threshold, estimator noise, network contention (shared NIC links, ``network_contention``
  passed explicitly), policy (and trace) → one simulation of the whole trace
  (≈ 30 ms on the conversation trace, memoised in :func:`~mooncake_lab.experiments.l04_scheduling.run`)
  → TTFT CDF and per-instance queues.
* :class:`AlgorithmOneDashboard`: the worked example's per-instance estimates under cache-aware and
  KVCache-centric scheduling, with the threshold, network bandwidth and prompt length as controls.

Both build their figure once (:class:`~mooncake_lab.plots.scheduling.PolicyView`,
:class:`~mooncake_lab.plots.scheduling.EstimateBars`) and update its artists on each move, with
sticky axis limits (a fixed scale to compare moves against; the background is rarely redrawn).
"""
from __future__ import annotations

from functools import partial

import ipywidgets as widgets

from .. import sim
from ..experiments import l04_scheduling as exp
from ..experiments.common import as_trace
from ..prefix_cache import prefault_pool
from ..plots import scheduling as plots
from . import Dashboard, sticky_decades, sticky_limit

__all__ = ["SchedulingDashboard", "AlgorithmOneDashboard", "TRACE_CHOICES", "BOUNDS"]

TRACE_CHOICES = exp.TRACES
#: Slider bounds (every value in them runs; tests sweep the corners).
BOUNDS = {
    "speed": (0.1, 2.0),            # × replay; 2× = the paper's overload experiment (arXiv Table 3)
    "n_prefill": (1, 32),
    "capacity_log10": (2.0, 4.5),   # 100 … 31,623 blocks per instance (16 GB … 5.3 TB of LLaMA2-70B KV)
    "threshold": (1.0, 16.0),
    "noise": (0.0, 1.0),            # relative s.d. of the Conductor's TTFT estimates
    "network_gbps_log10": (1.0, 3.0),   # 10 … 1,000 Gbps per node
    "example_blocks": (17, 120),
}
_EXAMPLE_POLICIES = ("cache_aware", "kvcentric")  # the two that estimate TTFTs (Algorithm 1)
_MAX_POINTS = 300  # time-series samples per instance drawn (keeps a redraw cheap at slow replay)


def _slider_style():
    return {"style": {"description_width": "initial"}, "continuous_update": False}


class SchedulingDashboard(Dashboard):
    """One policy on a whole trace (8 decode instances): TTFT CDF and per-instance prefill queues.

    Controls: ``trace``, ``policy``, ``speed`` (replay ×, 0.1–2), ``n_prefill`` (1–32),
    ``capacity`` (blocks per instance, log, 100–31,623), ``threshold`` (kvcentric balancing
    threshold, 1–16), ``noise`` (relative s.d. of TTFT estimates, 0–1), ``contention`` (prefill nodes'
    send / receive links and decode nodes' receive links shared by fetches and KV streams:
    ``ClusterConfig.network_contention``, on by default as there; the node's own NICs, 4 × 200 Gbps).
    """

    title = "Lecture 04 · the Conductor on the whole trace (one simulation per move)"

    _KEYWORDS = {"capacity": "capacity_blocks"}

    def __init__(self, trace: str = "conversation", policy: str = "kvcentric",
                 speed: float = exp.DEFAULT_REPLAY_SPEED, n_prefill: int = 8, capacity_blocks: int | None = None,
                 threshold: float = 1.0, noise: float = 0.0,
                 contention: bool = sim.ClusterConfig.network_contention):   # the simulator's default: shared
        if capacity_blocks is None:
            capacity_blocks = sim.ClusterConfig().resolve().cache_capacity_blocks
        super().__init__(trace=trace, policy=policy, speed=speed, n_prefill=n_prefill, capacity=capacity_blocks,
                         threshold=threshold, noise=noise, contention=contention)

    def _build_controls(self) -> dict:
        b = BOUNDS
        return {
            "trace": widgets.Dropdown(options=TRACE_CHOICES, description="trace"),
            "policy": widgets.Dropdown(options=exp.POLICIES, description="policy"),
            "speed": widgets.FloatSlider(min=b["speed"][0], max=b["speed"][1], step=0.05,
                                         description="replay speed (×)", readout_format=".2f", **_slider_style()),
            "n_prefill": widgets.IntSlider(min=b["n_prefill"][0], max=b["n_prefill"][1],
                                           description="prefill instances", **_slider_style()),
            "capacity": widgets.FloatLogSlider(base=10, min=b["capacity_log10"][0],
                                               max=b["capacity_log10"][1], step=0.05, readout_format=",.0f",
                                               description="cache per instance (blocks)", **_slider_style()),
            "threshold": widgets.FloatSlider(min=b["threshold"][0], max=b["threshold"][1], step=0.5,
                                             description="balancing threshold", **_slider_style()),
            "noise": widgets.FloatSlider(min=b["noise"][0], max=b["noise"][1], step=0.05,
                                         description="estimator noise (rel. s.d.)", **_slider_style()),
            "contention": widgets.Checkbox(description="network contention (shared links)",
                                           indent=False),
        }

    def _offered(self, trace: str, n_prefill: int, speed: float) -> float:
        return self._rho1[trace] * speed / n_prefill

    @staticmethod
    def _config(v: dict) -> dict:
        """ClusterConfig overrides of control values ``v``."""
        return dict(prefill_policy=v["policy"], n_prefill=int(v["n_prefill"]),
                    cache_capacity_blocks=max(1, int(round(v["capacity"]))),
                    kvcache_balancing_threshold=float(v["threshold"]), estimator_noise=float(v["noise"]),
                    network_contention=bool(v["contention"]))

    def _prefetch_jobs(self, v: dict) -> list:
        """The memory a run on the most prefill instances needs, touched once (the first move to 24 or 32
        instances then takes ≈ 45 ms, not ≈ 140: :func:`~mooncake_lab.prefix_cache.prefault_pool`); the other
        trace with the same settings, and this trace with contention toggled (a switch of trace or of the
        contention box then only redraws)."""
        flip = dict(v, contention=not v["contention"])
        most = self.controls["n_prefill"].max * as_trace(v["trace"]).n_blocks
        return ([partial(prefault_pool, most)]
                + [(v["trace"], v["speed"], sim.ClusterConfig(**self._config(flip)))]
                + [(t, v["speed"], sim.ClusterConfig(**self._config(v))) for t in TRACE_CHOICES if t != v["trace"]])

    @staticmethod
    def _links(res, v: dict) -> str:
        """Readout of the links (contention on): fetches that waited, mean fetch and stream waits."""
        if not v["contention"]:
            return ""
        df = res.requests
        w = df.loc[df["fetched_tokens"] > 0, "fetch_wait_s"]
        return (f" · shared links: {int((w > 0).sum()):,} of {len(w):,} fetches waited (mean "
                f"{1e3 * (w.mean() if len(w) else 0.0):.0f} ms), KV streams {1e3 * df['stream_wait_s'].mean():.0f} ms")

    def _setup(self):
        # offered prefill load per trace at 1× on one instance (linear in speed and 1/n): loading a
        # trace and this sum cost ≈ 0.1 s, paid here rather than on the first switch of trace
        self._rho1 = {t: exp.offered_prefill_load(t) * sim.ClusterConfig().n_prefill for t in TRACE_CHOICES}
        self.view = plots.PolicyView(live=True)
        self._limits = {"ttft": None, "minutes": None, "queue": None}
        return self.view.figure

    def _update(self):
        v = {k: w.value for k, w in self.controls.items()}
        res = exp.run(v["trace"], v["speed"], **self._config(v))
        s = res.summary()
        end = float(s["makespan_s"]) if s["makespan_s"] == s["makespan_s"] else res.trace.duration_s
        queues = exp.instance_queues(res, dt=max(10.0, end / _MAX_POINTS))
        rho = self._offered(v["trace"], int(v["n_prefill"]), float(v["speed"]))
        paper = exp.PAPER_FIG8_TTFT_S[v["policy"]]
        self.readout.value = (
            f"<code>{res.trace.name}</code> · offered prefill load without cache <b>{rho:.2f}×</b> the pool · "
            f"mean TTFT <b>{s['ttft_mean_s']:.3g} s</b> (p90 {s['ttft_p90_s']:.3g} s; paper, 8P+8D: "
            f"{paper:g} s) · TTFT ≤ 30 s: <b>{s['ttft_slo_attainment']:.1%}</b> · "
            f"hit ratio {s['hit_ratio']:.1%} (fetched {s['fetched_ratio']:.1%}){self._links(res, v)} · "
            f"simulated in {res.wall_s * 1e3:.0f} ms")
        lim = self._limits
        ttft, slo = plots.PolicyView.completed_ttfts(res), self.view.slo_s
        lim["ttft"] = sticky_decades(lim["ttft"], 0.1, max(float(ttft.max()) if len(ttft) else 0.0, 2 * slo))
        lim["minutes"] = sticky_limit(lim["minutes"], float(queues.index.max()) / 60.0, headroom=1.0)
        lim["queue"] = sticky_limit(lim["queue"], max(float(queues.to_numpy().max()), slo), headroom=1.3)
        self.view.update(res, queues, paper_mean=paper, ttft_max=lim["ttft"][1], minutes=lim["minutes"],
                         queue_max=lim["queue"], ttfts=ttft)


class AlgorithmOneDashboard(Dashboard):
    """Algorithm 1 on the worked example (3 instances): estimated TTFT per instance, per policy.

    Controls: ``threshold`` (kvcentric balancing threshold, 1–16), ``network_gbps`` (RDMA per node,
    log, 10–1,000 Gbps), ``example_blocks`` (the request's prompt, 17–120 blocks of 512 tokens).
    """

    title = "Lecture 04 · Algorithm 1 on one request: estimated TTFT per prefill instance"

    def __init__(self, threshold: float = 1.0, network_gbps: float = 800.0, example_blocks: int = 20):
        super().__init__(threshold=threshold, network_gbps=network_gbps, example_blocks=example_blocks)

    def _build_controls(self) -> dict:
        b = BOUNDS
        return {
            "threshold": widgets.FloatSlider(min=b["threshold"][0], max=b["threshold"][1], step=0.5,
                                             description="balancing threshold", **_slider_style()),
            "network_gbps": widgets.FloatLogSlider(base=10, min=b["network_gbps_log10"][0],
                                                   max=b["network_gbps_log10"][1], step=0.05, readout_format=",.0f",
                                                   description="RDMA per node (Gbps)", **_slider_style()),
            "example_blocks": widgets.IntSlider(min=b["example_blocks"][0], max=b["example_blocks"][1],
                                                description="prompt (blocks)", **_slider_style()),
        }

    def _setup(self):
        self.view = plots.EstimateBars(_EXAMPLE_POLICIES, live=True)
        self._xmax = None
        return self.view.figure

    def _update(self):
        v = {k: w.value for k, w in self.controls.items()}
        kw = dict(threshold=float(v["threshold"]), example_blocks=int(v["example_blocks"]),
                  network_gbps=float(v["network_gbps"]))
        tables = {p: exp.estimate_table(policy=p, **kw) for p in _EXAMPLE_POLICIES}
        got = exp.worked_example(policies=_EXAMPLE_POLICIES, **kw)
        k = got.loc["kvcentric"]
        self.readout.value = (
            f"Simulator: cache-aware → instance {int(got.loc['cache_aware', 'prefill_instance'])} "
            f"(TTFT {got.loc['cache_aware', 'ttft_s']:.2f} s, computes {int(got.loc['cache_aware', 'computed_tokens']):,} "
            f"tokens) · KVCache-centric → instance {int(k['prefill_instance'])} (TTFT {k['ttft_s']:.2f} s, "
            f"fetches {int(k['fetched_tokens']):,} tokens in {k['fetch_s'] * 1e3:.0f} ms, computes "
            f"{int(k['computed_tokens']):,})")
        if k["fetched_tokens"] > 0 and k["ttft_s"] > got.loc["cache_aware", "ttft_s"]:
            # Algorithm 1 decides to fetch by the prefix ratio, not by comparing times (lecture 04, section 2)
            self.readout.value += " · <b>the fetch made it slower</b>: the prefix ratio, not the times, decided it"
        longest = max(float(t[f"{p}_s"].max()) for p, t in tables.items())
        self._xmax = sticky_limit(self._xmax, longest * 1.6, headroom=1.25)  # 1.6: room for the notes
        self.view.update(tables, xmax=self._xmax, threshold=float(v["threshold"]))
