"""Slider-move latency of every dashboard: control change → figure rendered to PNG (ms).

Budget (DESIGN §5): ≤ 150 ms per move on the full trace. Prints the median and worst over up to
four moves of each control from the dashboard's defaults, spread over its range up to its far end
(the control is put back before the next one is timed); not an assertion. Each move
is timed after the runs the dashboard computes ahead in the background (if any) are done — a
student who looks at each picture for a few seconds; the time they take after the build is printed.
Run: ``python benchmarks/bench_dashboards.py [NAME ...]`` (only the dashboards whose class names are given;
``MOONCAKE_LAB_PREFETCH=0``: without the runs ahead).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import statistics
import time

import ipywidgets as widgets

DASHBOARDS = [
    ("roofline", "RooflineDashboard"), ("roofline", "PresetDashboard"),
    ("storage", "ReloadDashboard"), ("storage", "Eq2Dashboard"),
    ("traces", "TraceDashboard"), ("cache", "CapacityDashboard"), ("cache", "PoolDashboard"),
    ("scheduling", "SchedulingDashboard"), ("scheduling", "AlgorithmOneDashboard"),
    ("prefill", "GanttDashboard"), ("prefill", "SchemesDashboard"),
    ("goodput", "GoodputDashboard"), ("goodput", "BatchingDashboard"), ("goodput", "PDAssumptionsDashboard"),
    ("overload", "OverloadDashboard"), ("overload", "PolicyComparisonDashboard"),
    ("capstone", "MechanismDashboard"), ("routers", "RouterDashboard"),
    ("store_lab", "EvictionDashboard"), ("store_lab", "FailureDashboard"),
]


def _router_of_knob(name: str) -> dict:
    """RouterDashboard: a router's slider is timed with that router chosen (else it changes nothing)."""
    from mooncake_lab.dashboards.routers import KNOBS

    return {"router": r for r, k in KNOBS.items() if k[0] == name}


#: Dashboard → (control name → controls set, untimed, before that control's moves; put back after).
SETUP = {"RouterDashboard": _router_of_knob}

#: Seconds between moves (env ``BENCH_PAUSE_S``), as a student looks at each picture.
PAUSE_S = float(os.environ.get("BENCH_PAUSE_S", "0"))


def _other_values(w, k=4):
    """Up to ``k`` valid values for control ``w`` other than its current one, spread over its whole
    range and including its far end (where simulations cost most: the fastest replay, the most
    instances)."""
    if isinstance(w, (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons, widgets.SelectionSlider)):
        opts = [o[1] if isinstance(o, tuple) else o for o in w.options]
        others = [o for o in opts if o != w.value]
        if len(others) <= k:
            return others
        return [others[round(i * (len(others) - 1) / (k - 1))] for i in range(k)]
    if isinstance(w, widgets.Checkbox):
        return [not w.value, w.value]
    if hasattr(w, "min") and hasattr(w, "max"):
        lo, hi, step = w.min, w.max, getattr(w, "step", None) or 1
        # on the slider's grid, as a browser sends them (a log slider's step is in the exponent)
        grid = [min(hi, lo + round((hi - lo) * f / step) * step) for f in (0.25, 0.5, 0.75, 1.0)[:k]]
        if isinstance(w, widgets.FloatLogSlider):
            return [w.base ** g for g in grid]
        return [type(w.value)(round(g, 10)) for g in grid]
    return []


def _reference_run_ms() -> float:
    """Best of 5 of one simulation (conversation, 8P+8D, kvcentric, 0.4x): this machine's speed right
    now. A shared VM swings ≈ 1.8x (26 … 47 ms seen): compare dashboards measured at similar values."""
    from mooncake_lab.experiments import l04_scheduling as exp
    from mooncake_lab.experiments.common import as_trace
    from mooncake_lab import sim

    tr, cfg = as_trace("conversation").replay(exp.DEFAULT_REPLAY_SPEED), sim.ClusterConfig()
    return min(sim.simulate(tr, cfg).wall_s for _ in range(6)) * 1e3


def main(only=()) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores (times scale with it); "
          f"reference run {_reference_run_ms():.0f} ms (see _reference_run_ms)")
    print(f"{'dashboard':<34}{'control':<22}{'median ms':>10}{'worst ms':>10}{'full redraws':>14}")
    over, total = [], 0
    for mod_name, cls_name in DASHBOARDS:
        if only and cls_name not in only:
            continue
        try:
            cls = getattr(importlib.import_module(f"mooncake_lab.dashboards.{mod_name}"), cls_name)
        except (ImportError, AttributeError):
            continue
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel, display() prints
            dash = cls()
        if dash.prefetch is not None:   # runs computed ahead while a student looks (see dashboards/)
            dash.prefetch.wait()
            print(f"{cls_name}: {len(dash.prefetch.jobs)} runs computed ahead in the background, done "
                  f"{time.perf_counter() - t0:.1f} s after the build began")
        # each control from the dashboard's defaults (put back, untimed, after its moves); the trace
        # switch last
        for name, w in sorted(dash.controls.items(), key=lambda kv: kv[0] == "trace"):
            setup = SETUP.get(cls_name, lambda _: {})(name)
            saved = {k: dash.controls[k].value for k in setup}
            with contextlib.redirect_stdout(io.StringIO()):
                for k, x in setup.items():
                    dash.controls[k].value = x
            times, full0, start = [], dash.n_full_draws, w.value
            for v in _other_values(w):
                if dash.prefetch is not None:
                    dash.prefetch.wait()
                time.sleep(PAUSE_S)
                with contextlib.redirect_stdout(io.StringIO()):
                    t0 = time.perf_counter()
                    w.value = v
                    times.append((time.perf_counter() - t0) * 1e3)
            full = f"{dash.n_full_draws - full0}/{len(times)}"
            if name != "trace":
                with contextlib.redirect_stdout(io.StringIO()):
                    w.value = start
                    for k, x in saved.items():
                        dash.controls[k].value = x
            if times:
                med = statistics.median(times)
                print(f"{cls_name:<34}{name:<22}{med:>10.0f}{max(times):>10.0f}{full:>14}")
                total += 1
                if med > 150:
                    over.append(f"{cls_name}.{name}")
    print(f"{total - len(over)} of {total} controls within the 150 ms budget (median); over: {', '.join(over) or 'none'}")
    print(f"reference run at the end: {_reference_run_ms():.0f} ms")


if __name__ == "__main__":
    import sys

    unknown = sorted(set(sys.argv[1:]) - {c for _, c in DASHBOARDS})
    if unknown:
        sys.exit(f"bench_dashboards: unknown dashboard(s) {', '.join(unknown)}; allowed: "
                 + ", ".join(c for _, c in DASHBOARDS))
    main(tuple(sys.argv[1:]))
