"""Dashboard of lecture 08: switch Mooncake's mechanisms on and off, see what happens to the requests."""
from __future__ import annotations

import ipywidgets as widgets

from . import Dashboard

__all__ = ["MechanismDashboard"]

_YOURS = "8P+8D, your switches"


class MechanismDashboard(Dashboard):
    """Outcome shares (met both SLOs / rejected / missed TTFT / missed TBT) of an 8P+8D cluster with
    the chosen mechanisms, beside the coupled cluster with and without chunked prefill, at one
    replay speed. Three simulations per move (memoised), the figure built once. A coupled cluster at
    high speed takes up to 0.2 s a run, so after each move the other trace and every other speed
    are computed ahead in the background (≈ 1.5–4 s; see :mod:`mooncake_lab.dashboards`)."""

    title = "Mooncake, mechanism by mechanism (16 nodes)"

    def _build_controls(self):
        from ..experiments import l08_capstone as c

        style = {"description_width": "initial"}
        ctl = {m: widgets.Checkbox(value=True, description=label, style=style)
               for m, (label, _) in c.MECHANISMS.items()}
        ctl["trace"] = widgets.Dropdown(options=list(c.TRACES), value="conversation", description="trace")
        ctl["speed"] = widgets.SelectionSlider(options=list(c.SPEEDS), value=4.0, description="replay speed ×",
                                               continuous_update=False, style=style)
        ctl["tbt_slo_ms"] = widgets.ToggleButtons(options=list(c.TBT_SLOS_MS), value=100,
                                                  description="TBT SLO (ms)", style=style)
        return ctl

    def _setup(self):
        from ..experiments import l08_capstone as c
        from ..plots.capstone import OutcomeBars

        self.view = OutcomeBars([_YOURS, c.LABELS["coupled"], c.LABELS["coupled_chunked"]], live=True)
        return self.view.figure

    def _prefetch_jobs(self, v: dict) -> list:
        """The other trace at this speed, then every speed nearest first: yours (these switches) and
        both coupled clusters."""
        from ..experiments import l08_capstone as c

        mine = c.config_of("mooncake", **self._switched_off(v))
        systems = (mine, c.config_of("coupled"), c.config_of("coupled_chunked"))
        states = [(t, v["speed"]) for t in c.TRACES if t != v["trace"]]
        states += [(v["trace"], x) for x in sorted(c.SPEEDS, key=lambda x: abs(x - v["speed"])) if x != v["speed"]]
        return [(t, float(x), cfg) for t, x in states for cfg in systems]

    @staticmethod
    def _switched_off(v: dict) -> dict:
        """ClusterConfig overrides of the mechanisms switched off in control values ``v``."""
        from ..experiments import l08_capstone as c

        return {k: x for m, (_, over) in c.MECHANISMS.items() if not v[m] for k, x in over.items()}

    def _update(self):
        from ..experiments import l06_goodput as g
        from ..experiments import l08_capstone as c
        from ..experiments.common import simulate_all

        trace, speed, x = self.value("trace"), float(self.value("speed")), self.value("tbt_slo_ms")
        off = [m for m in c.MECHANISMS if not self.value(m)]
        extra = self._switched_off({k: w.value for k, w in self.controls.items()})
        mine, coupled, chunked = simulate_all([(trace, speed, c.config_of("mooncake", **extra)),
                                               (trace, speed, c.config_of("coupled")),
                                               (trace, speed, c.config_of("coupled_chunked"))])
        shares = {_YOURS: c.outcome_breakdown(mine, x), c.LABELS["coupled"]: c.outcome_breakdown(coupled, x),
                  c.LABELS["coupled_chunked"]: c.outcome_breakdown(chunked, x)}
        rate = g.trace_rate(trace) * speed
        tok = g.attainment(mine, x, weight=mine.trace.input_len)
        self.view.update(shares, caption=f"{trace} at {speed:g}× ({rate:.1f} req/s), TBT ≤ {x} ms")
        self.readout.value = (f"8P+8D {self.describe_switches(off)}: {shares[_YOURS]['met both']:.0%} of requests "
                              f"({tok:.0%} of prompt tokens) within both SLOs at {rate:.1f} req/s. Coupled cluster: "
                              f"{shares[c.LABELS['coupled']]['met both']:.0%}; with chunked prefill: "
                              f"{shares[c.LABELS['coupled_chunked']]['met both']:.0%}.")

    @staticmethod
    def describe_switches(off) -> str:
        """The mechanisms switched off (keys of ``MECHANISMS``), in words: "with every mechanism on",
        "without CPP prefill groups and layer-wise KV transfer"."""
        from ..experiments import l08_capstone as c

        names = [c.MECHANISMS[m][0] for m in off]
        if not names:
            return "with every mechanism on"
        return "without " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1])
