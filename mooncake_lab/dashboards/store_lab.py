"""Dashboards of the Mooncake Store lab, on measured results (live or recorded): no store call per move.

``EvictionDashboard``: lease TTL and pool size → the store's hit ratio vs the course's exact LRU.
``FailureDashboard``: replica count and time since a memory node was killed → what reads return.
"""
from __future__ import annotations

import ipywidgets as widgets

from ..plots import store_lab as plots
from . import Dashboard

__all__ = ["EvictionDashboard", "FailureDashboard"]
_STYLE = {"description_width": "initial"}


def _results(res, where: str, needs: str) -> dict:
    """``res`` (the lab's results: :func:`experiments.lab_store.results`), checked for what the
    dashboard reads, or the recorded real run if None."""
    from ..experiments.lab_store import check_results, load_recorded

    return load_recorded() if res is None else check_results(res, (needs,), "", f"{where}(res=...)")


class EvictionDashboard(Dashboard):
    """Controls: ``lease`` (``default_kv_lease_ttl`` of the run), ``capacity`` (pool size, blocks)."""

    title = "Store lab · lease TTL and pool size → hit ratio, store vs exact LRU"

    def __init__(self, res: dict | None = None, lease=None, capacity=None):
        self.res = _results(res, "EvictionDashboard", "eviction")
        super().__init__(**{k: v for k, v in dict(lease=lease, capacity=capacity).items() if v is not None})

    def _build_controls(self) -> dict:
        leases = list(dict.fromkeys(r["lease"] for r in self.res["eviction"]))
        caps = sorted({r["capacity_blocks"] for r in self.res["eviction"]})
        return {"lease": widgets.ToggleButtons(options=leases, value=leases[0], description="lease TTL",
                                               style=_STYLE),
                "capacity": widgets.SelectionSlider(options=caps, value=caps[len(caps) // 2],
                                                    description="pool (blocks)", continuous_update=False,
                                                    style=_STYLE)}

    def _setup(self):
        self.view = plots.EvictionChart(live=True)
        return self.view.figure

    def _update(self):
        row = plots._eviction_row(self.res, self.value("lease"), self.value("capacity"))
        h = len(row["store_hits"]) // 2
        self.readout.value = (
            f"Before the shift: store {row['store_hit_first_half']:.3f} vs LRU {row['lru_hit_first_half']:.3f}; "
            f"after: store {row['store_hit_second_half']:.3f} vs LRU {row['lru_hit_second_half']:.3f} "
            f"({h:,} accesses each). Hard-pinned keys kept: {row['pins_kept']}/{row['pins']}.")
        self.view.update(row)


class FailureDashboard(Dashboard):
    """Controls: ``replicas`` (1 or 2), ``phase`` (before the kill / before client_ttl / after it)."""

    title = "Store lab · kill a memory node: what do reads return?"

    def __init__(self, res: dict | None = None, replicas=None, phase=None):
        self.res = _results(res, "FailureDashboard", "replication")
        super().__init__(**{k: v for k, v in dict(replicas=replicas, phase=phase).items() if v is not None})

    def _build_controls(self) -> dict:
        return {"replicas": widgets.ToggleButtons(options=[1, 2], value=2, description="replicas", style=_STYLE),
                "phase": widgets.Dropdown(options=list(plots._PHASES), value=plots._PHASES[1],
                                          description="node0", style=_STYLE,
                                          layout=widgets.Layout(width="360px"))}

    def _setup(self):
        self.view = plots.FailureChart(live=True)
        return self.view.figure

    def _update(self):
        rep = self.res["replication"]
        t = rep["timeline"][0]
        probed_dead, probed = len(t["two_first_on_killed"]), len(t["two_first_on_killed"] + t["two_first_on_survivor"])
        self.readout.value = (
            f"node0 was SIGKILLed; the master dropped it {rep['node_dropped_after_s']:.1f} s later "
            f"(client_ttl = {rep['client_ttl_s']:g} s). {rep['two_first_on_killed']} of the {rep['n_two']} "
            f"two-replica keys listed node0 first ({probed_dead} of the {probed} two-replica reads probed are of "
            f"those). Replicas per two-replica key afterwards: {rep['two_replicas_after']} (none was re-created).")
        self.view.update(self.res, int(self.value("replicas")), self.value("phase"))
