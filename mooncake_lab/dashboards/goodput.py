"""Dashboards of lecture 06: SLO attainment vs rate (P:D split, TBT SLO, chunking) and continuous batching."""
from __future__ import annotations

import ipywidgets as widgets

from . import Dashboard

__all__ = ["GoodputDashboard", "BatchingDashboard"]


class GoodputDashboard(Dashboard):
    """SLO attainment vs request rate: Mooncake at a P:D split vs the coupled engine (chunked or not).

    Runs are memoised in :mod:`mooncake_lab.experiments.l06_goodput`; a new split costs one sweep of
    Mooncake runs (≈ 60 ms each), the coupled sweeps are computed once.
    """

    title = "Effective request capacity: disaggregated vs coupled (16 nodes)"

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

    def _draw(self):
        import pandas as pd

        from ..experiments import l06_goodput as g
        from ..plots.goodput import plot_capacity

        coupled = "coupled_chunked" if self.value("chunked") else "coupled"
        x = self.value("tbt_slo_ms")
        cur = pd.concat([g.attainment_curve(("mooncake",), tbt_slos_ms=(x,), n_prefill=self.value("n_prefill"),
                                            progress=False),
                         g.attainment_curve((coupled,), tbt_slos_ms=(x,), progress=False)])
        rate = g.trace_rate() * self.value("speed")
        fig = plot_capacity(cur, tbt_slo_ms=x, mark_rate=rate)
        caps = {s: g.effective_capacity(c) for s, c in cur.groupby("system", sort=False)}
        at = cur[cur.speed == self.value("speed")].set_index("system").attainment
        self.readout.value = (f"at {rate:.2f} req/s: Mooncake {at['mooncake']:.0%}, {coupled} {at[coupled]:.0%} "
                              f"meet both SLOs · effective capacity: Mooncake {caps['mooncake']:.2f} req/s, "
                              f"{coupled} {caps[coupled]:.2f} req/s")
        return fig


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

    def _draw(self):
        from ..experiments import l06_goodput as g
        from ..plots.goodput import plot_batching

        res = g.run("mooncake", self.value("speed"))
        t0 = float(self.value("start"))
        ts = g.batching_timeseries(res, self.value("instance"), dt=0.5, t0=t0, t1=t0 + 300.0)
        self.readout.value = (f"mean batch {ts.batch.mean():.1f}, max {ts.batch.max()}, "
                              f"mean step {ts.step_s.mean() * 1e3:.1f} ms over this 300 s window")
        return plot_batching(ts, title=f"Decode node {self.value('instance')} at {self.value('speed'):g}× "
                                       f"(8P+8D, {t0:.0f}–{t0 + 300:.0f} s)")
