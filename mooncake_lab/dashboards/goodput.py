"""Dashboards of lecture 06: SLO attainment vs rate (P:D split, TBT SLO, chunking) and continuous batching."""
from __future__ import annotations

import ipywidgets as widgets

from ..traces import as_trace
from . import Dashboard, nice_ceiling

__all__ = ["GoodputDashboard", "BatchingDashboard", "PDAssumptionsDashboard"]


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
        name = g.SYSTEM_LABELS.get(coupled, coupled)
        self.readout.value = (f"At {rate:.2f} req/s: Mooncake {at['mooncake']:.0%}, {name} {at[coupled]:.0%} "
                              f"meet both SLOs · 90 % capacity: Mooncake {caps['mooncake']} req/s, "
                              f"{name} {caps[coupled]} req/s")


class PDAssumptionsDashboard(Dashboard):
    """Mooncake's 90 % capacity per P:D split under one assumption of
    :data:`~mooncake_lab.experiments.l06_goodput.PD_ASSUMPTIONS` (the lecture's, or one changed).

    Every assumption's sweep is computed when the dashboard is built (:func:`~...l06_goodput.pd_assumptions`,
    memoised: free after the lecture's cell); a move only redraws, on one y scale for all of them."""

    title = "What decides the best P:D split? (16 nodes, conversation trace)"

    def _build_controls(self):
        from ..experiments import l06_goodput as g

        return {"assumption": widgets.ToggleButtons(options=list(g.PD_ASSUMPTIONS), description="assumption",
                                                    style={"description_width": "initial", "button_width": "auto"})}

    def _setup(self):
        from ..experiments import l06_goodput as g
        from ..plots.goodput import PDSweepPlot

        self._trace = as_trace("conversation")  # resolved once (a name lookup touches the disk)
        self._pds = g.pd_assumptions(self._trace, progress=False)
        first = next(iter(self._pds.values()))
        self._top = nice_ceiling(1.12 * max(float(t.effective_capacity_rps.max()) for t in self._pds.values()))
        self.view = PDSweepPlot([f"{p}P:{d}D" for p, d in zip(first.n_prefill, first.n_decode)], live=True)
        return self.view.figure

    def _update(self):
        from ..experiments import l06_goodput as g

        name = self.value("assumption")
        t, best = self._pds[name], g.best_split(self._pds[name])
        self.view.update(t, highlight=int(best.n_prefill), top=self._top,
                         tbt_slo_ms=g.PD_ASSUMPTIONS[name].get("tbt_slo_ms", g.TBT_SLOS_MS[0]))
        half = t.loc[t.n_prefill == g.N_NODES // 2, "effective_capacity_rps"]
        share = (f" · {g.N_NODES // 2}P:{g.N_NODES // 2}D reaches {float(half.iloc[0]) / best.effective_capacity_rps:.0%} of it"
                 if len(half) and best.effective_capacity_rps > 0 else "")
        self.readout.value = (f"{name}: best split {int(best.n_prefill)}P:{int(best.n_decode)}D, "
                              f"{'≥ ' if best.lower_bound else ''}{best.effective_capacity_rps:.2f} req/s{share}")


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
