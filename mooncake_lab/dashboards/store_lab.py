"""Dashboards of the Mooncake Store lab, on measured results (live or recorded): no store call per move.

``EvictionDashboard``: lease TTL and pool size → the store's hit ratio vs the course's exact LRU.
``FailureDashboard``: replica count and time since a memory node was killed → what the reads of every key
of that kind returned (the lab's notebook shows the same reads as a per-key table, :func:`~mooncake_lab.experiments.lab_store.key_table`).
"""
from __future__ import annotations

import ipywidgets as widgets

from ..plots import store_lab as plots
from . import Dashboard

__all__ = ["EvictionDashboard", "FailureDashboard", "failure_readout"]
_STYLE = {"description_width": "initial"}


def _results(res, where: str, needs: str) -> dict:
    """``res`` (the lab's results: :func:`experiments.lab_store.results`), checked for what the
    dashboard reads, or the recorded real run if None."""
    from ..experiments.lab_store import check_results, load_recorded

    return load_recorded() if res is None else check_results(res, (needs,), "", f"{where}(res=...)")


class EvictionDashboard(Dashboard):
    """Controls: ``lease`` (``default_kv_lease_ttl`` of the run), ``capacity`` (pool size, in values)."""

    title = "Store lab · lease TTL and pool size → hit ratio, store vs exact LRU"

    def __init__(self, res: dict | None = None, lease=None, capacity=None):
        self.res = _results(res, "EvictionDashboard", "eviction")
        super().__init__(**{k: v for k, v in dict(lease=lease, capacity=capacity).items() if v is not None})

    def _build_controls(self) -> dict:
        leases = list(dict.fromkeys(r["lease"] for r in self.res["eviction"]))
        caps = sorted({r["capacity_blocks"] for r in self.res["eviction"]})
        from ..experiments.lab_store import lease_label

        return {"lease": widgets.ToggleButtons(options=[(lease_label(x), x) for x in leases], value=leases[0],
                                               description="lease TTL",
                                               style=_STYLE),
                "capacity": widgets.SelectionSlider(options=caps, value=caps[len(caps) // 2],
                                                    description="pool (values)", continuous_update=False,
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
        replicas, phase = int(self.value("replicas")), self.value("phase")
        self.readout.value = failure_readout(self.res, replicas, phase)
        self.view.update(self.res, replicas, phase)


def failure_readout(res: dict, replicas: int, phase: str) -> str:
    """What the reads of the keys with ``replicas`` replicas returned in ``phase``, in a sentence or two."""
    rep = res["replication"]
    out = plots.failure_outcomes(res, replicas, phase)
    n = out["n"]
    counts = [(round(out["served"] * n), "served"), (round(out[plots.OUTCOMES[1]] * n), "failed with \u2212800"),
              (round(out[plots.OUTCOMES[2]] * n), "not found (\u2212704)"), (round(out["other"] * n), "other codes")]
    said = ", ".join(f"{k} {what}" for k, what in counts if k) or "none read"
    kind = f"{n} key{'s' if n != 1 else ''} with {replicas} replica{'s' if replicas != 1 else ''}"
    text = f"{phase.capitalize()}: of {kind}, {said}."
    if phase == plots._PHASES[1] and replicas == 2:
        text += (f" {rep['two_first_on_killed']} of the {n} list node0 first, and the client does not fail over "
                 "to the second replica.")
    elif phase == plots._PHASES[1]:
        text += " The master still lists node0, so the read goes to the dead node."
    elif phase == plots._PHASES[2]:
        left = sorted({r["replicas_after"] for r in rep.get("keys", []) if r["replicas"] == replicas})
        text += (f" The master dropped node0 {rep['node_dropped_after_s']:.1f} s after the kill "
                 f"(client_ttl = {rep['client_ttl_s']:g} s)")
        text += (f"; replicas left per key: {', '.join(map(str, left))}." if left and replicas == 2 else ".")
    return text
