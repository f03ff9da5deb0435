"""Dashboards of lecture 06: SLO attainment vs rate (P:D split, TBT SLO, chunking) and continuous batching."""
from __future__ import annotations

import ipywidgets as widgets

from ..traces import as_trace
from . import Dashboard, nice_ceiling

__all__ = ["GoodputDashboard", "BatchingDashboard"]


class GoodputDashboard(Dashboard):
    """SLO attainment vs request rate: Mooncake at a P:D split vs the coupled engine (chunked or not).

    Attainment is memoised in :mod:`mooncake_lab.experiments.l06_goodput` for every split, speed and
    system when the dashboard is built (free after the lecture's P:D sweep); a move only redraws.
    """

    title = "90 % capacity: disaggregated vs coupled (16 nodes)"

    def _build_controls(self):
        from ..experiments import l06_goodput as g

        style = {"description_width": "initial"}
        return {
            "n_prefill": widgets.SelectionSlider(options=[(f"{p}P:{g.N_NODES - p}D", p) for p in g.SPLITS], value=8,
                                                 description="P:D split", continuous_update=False, style=style),
            "tbt_slo_ms": widgets.ToggleButtons(options=list(g.TBT_SLOS_MS), value=100, description="TBT SLO (ms)",
                                                style=style),
            "speed": widgets.SelectionSlider(options=list(g.SPEEDS), value=2.0, description="replay speed ×",
                                             continuous_update=False, style=style),
            "chunked": widgets.Checkbox(value=False, description="coupled uses chunked prefill"),
        }

    def _curve(self):
        import pandas as pd

        from ..experiments import l06_goodput as g

        x = self.value("tbt_slo_ms")
        return pd.concat([g.attainment_curve(("mooncake",), tbt_slos_ms=(x,), trace=self._trace,
                                             n_prefill=self.value("n_prefill"), progress=False),
                          g.attainment_curve((self._coupled(),), tbt_slos_ms=(x,), trace=self._trace,
                                             progress=False)])

    def _coupled(self) -> str:
        return "coupled_chunked" if self.value("chunked") else "coupled"

    def _setup(self):
        from ..experiments import l06_goodput as g
        from ..plots.goodput import CapacityPlot

        # Every split × speed of Mooncake and both coupled engines (72 runs, ≈ 6 s on an idle
        # 2-core machine; free after the lecture's P:D sweep): then no move waits for a simulation.
        self._trace = as_trace("conversation")  # resolved once (a name lookup touches the disk)
        g.precompute_attainment(g.SYSTEMS, g.SPLITS, trace=self._trace)
        self.view = CapacityPlot(n_systems=2, live=True)
        return self.view.figure

    def _update(self):
        from ..experiments import l06_goodput as g

        coupled, x = self._coupled(), self.value("tbt_slo_ms")
        cur = self._curve()
        rate = g.trace_rate(self._trace) * self.value("speed")
        self.view.update(cur, tbt_slo_ms=x, mark_rate=rate)
        caps = {s: ("≥ " if (c.attainment >= g.TARGET).all() else "") + f"{g.effective_capacity(c):.2f}"
                for s, c in cur.groupby("system", sort=False)}  # "≥": still ≥ 90% at the top of the sweep
        at = cur[cur.speed == self.value("speed")].set_index("system").attainment
        self.readout.value = (f"at {rate:.2f} req/s: Mooncake {at['mooncake']:.0%}, {coupled} {at[coupled]:.0%} "
                              f"meet both SLOs · 90 % capacity: Mooncake {caps['mooncake']} req/s, "
                              f"{coupled} {caps[coupled]} req/s")


class BatchingDashboard(Dashboard):
    """Batch size, total context and step time over time for one decode node of a Mooncake 8P+8D run."""

    title = "Continuous batching on one decode node"

    def _build_controls(self):
        from ..experiments import l06_goodput as g

        style = {"description_width": "initial"}
        return {
            "instance": widgets.IntSlider(value=0, min=0, max=7, description="decode node", continuous_update=False,
                                          style=style),
            "speed": widgets.SelectionSlider(options=list(g.SPEEDS), value=2.0, description="replay speed ×",
                                             continuous_update=False, style=style),
            "start": widgets.IntSlider(value=0, min=0, max=1500, step=100, description="window start (s)",
                                       continuous_update=False, style=style),
        }

    def _setup(self):
        from ..plots.goodput import BatchingPanels

        self.view = BatchingPanels(live=True)
        self._trace = as_trace("conversation")  # resolved once (a name lookup touches the disk)
        self._tops_speed = None
        return self.view.figure

    def _update(self):
        from ..experiments import l06_goodput as g

        res = g.run("mooncake", self.value("speed"), self._trace)
        t0 = float(self.value("start"))
        ts = g.batching_timeseries(res, self.value("instance"), dt=0.5, t0=t0, t1=t0 + 300.0)
        self.readout.value = (f"mean batch {ts.batch.mean():.1f}, max {ts.batch.max()}, "
                              f"mean step {ts.step_s.mean() * 1e3:.1f} ms over this 300 s window")
        if self.value("speed") != self._tops_speed:  # one scale per run: nodes and windows compare at a glance
            p = g.batching_peaks(res)
            self._tops = [nice_ceiling(1.05 * v) for v in (p["batch"], p["context_tokens"] / 1e3, p["step_s"] * 1e3)]
            self._tops_speed = self.value("speed")
        self.view.update(ts, title=f"Decode node {self.value('instance')} at {self.value('speed'):g}× "
                                   f"(8P+8D), window {t0:.0f}–{t0 + 300:.0f} s", tops=self._tops)
