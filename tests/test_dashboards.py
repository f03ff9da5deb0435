"""Every dashboard of the course, every control at both ends of its range.

Each move must redraw without error and show a valid PNG, and the image shown must equal a full
redraw of the figure as it is then (a dashboard that reuses a cached background — see
:mod:`mooncake_lab.dashboards` — must notice every change that needs a new one). Also: every
dashboard is in the latency benchmark, and controls that can run a simulation do not fire on drag.
"""
from __future__ import annotations

from pathlib import Path

import ipywidgets as widgets
import pytest

from mooncake_lab.dashboards import Dashboard, nice_ceiling, sticky_limit

from conftest import TRACE_SETUPS, all_dashboards

ROOT = Path(__file__).resolve().parents[1]


DASHBOARDS = all_dashboards()


def _ends(w) -> list:
    if isinstance(w, (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons, widgets.SelectionSlider)):
        opts = [o[1] if isinstance(o, tuple) else o for o in w.options]
        return [opts[-1], opts[0]]
    if isinstance(w, widgets.Checkbox):
        return [not w.value, w.value]
    if isinstance(w, widgets.FloatLogSlider):
        return [w.base ** w.max, w.base ** w.min]
    if hasattr(w, "min") and hasattr(w, "max"):
        return [w.max, w.min]
    return []


def test_there_are_dashboards():
    assert len(DASHBOARDS) >= 15, [c.__name__ for c in DASHBOARDS]


@pytest.mark.parametrize("cls", DASHBOARDS, ids=lambda c: c.__name__)
def test_every_control_at_both_ends_shows_a_current_picture(cls):
    d = cls()
    assert d.png.startswith(b"\x89PNG\r\n\x1a\n") and d.background_is_current()
    for name, w in d.controls.items():
        for v in _ends(w):
            n, old = d.n_draws, w.value
            w.value = v
            assert d.n_draws == n + (old != w.value), (name, v)
            assert d.png.startswith(b"\x89PNG\r\n\x1a\n"), (name, v)
            assert d.background_is_current(), f"{cls.__name__}: after {name} = {v!r} the image is stale"


def test_every_dashboard_is_benchmarked():
    text = (ROOT / "benchmarks" / "bench_dashboards.py").read_text()
    missing = [c.__name__ for c in DASHBOARDS if f'"{c.__name__}"' not in text]
    assert not missing, f"add to benchmarks/bench_dashboards.py: {missing}"


def test_nice_ceiling_and_sticky_limit_by_hand():
    assert [nice_ceiling(x) for x in (0.7, 1.0, 1.01, 13, 260, 9000)] == [0.8, 1.0, 1.2, 15, 300, 10000]
    assert sticky_limit(None, 90) == 100            # 90 × 1.1 = 99 → 100
    assert sticky_limit(100, 50) == 100             # fits and fills half: kept
    assert sticky_limit(100, 120) == 150            # does not fit: 132 → 150
    assert sticky_limit(100, 20) == 25              # fills 20% < 30%: shrinks, 22 → 25


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_png_decodes_to_the_canvas_pixels(alpha):
    import io

    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image

    from mooncake_lab.dashboards import _png

    fig = Figure(figsize=(3, 2))
    fig.patch.set_alpha(alpha)
    fig.subplots().plot([0, 1, 4], color="C1")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    got = np.asarray(Image.open(io.BytesIO(_png(canvas))))
    want = np.asarray(canvas.buffer_rgba())
    assert got.shape == ((200, 300, 3) if alpha == 1.0 else (200, 300, 4))
    assert (got == want[..., :got.shape[2]]).all()


def test_sticky_decades_by_hand():
    from mooncake_lab.dashboards import sticky_decades

    assert sticky_decades(None, 0.3, 40) == (0.1, 100.0)
    assert sticky_decades((0.1, 100.0), 0.5, 60) == (0.1, 100.0)     # still fits: kept
    assert sticky_decades((0.1, 100.0), 0.5, 600) == (0.1, 1000.0)   # grows a decade at the top


def _moves_after_prefetch():
    """(dashboard class, moves): after the runs computed ahead settle, none of these moves simulates
    (a move named with a leading ``*`` may: one Mooncake run, within the budget without help)."""
    from mooncake_lab.dashboards import cache, capstone, overload, scheduling, traces
    from mooncake_lab.experiments import l08_capstone

    speeds = [("speed", round(0.25 * k, 2)) for k in range(12, 0, -1)]
    return [(capstone.MechanismDashboard, [("speed", x) for x in reversed(l08_capstone.SPEEDS)]
             + [("trace", "toolagent-like"), ("*kvcentric", False), ("speed", 1.0), ("trace", "conversation")]),
            (overload.PolicyComparisonDashboard, speeds + [("trace", "toolagent-like"), ("speed", 3.0), ("decode", "paper"),
                                                           ("speed", 2.75), ("trace", "conversation")]),
            (overload.OverloadDashboard, [("policy", "baseline"), ("policy", "none"), ("trace", "toolagent-like"),
                                          ("decode", "paper"), ("policy", "early"), ("trace", "conversation")]),
            (traces.TraceDashboard, [("view", "popularity"), ("trace", "toolagent-like"), ("trace", "conversation")]),
            (cache.CapacityDashboard, [("eviction", "length_aware"), ("trace", "toolagent-like"), ("capacity", 10 ** 4.5),
                                       ("eviction", "lru"), ("trace", "conversation"), ("eviction", "lfu")]),
            (scheduling.SchedulingDashboard, [("*n_prefill", 32), ("trace", "toolagent-like"),
                                              ("*noise", 0.5), ("trace", "conversation"), ("contention", True),
                                              ("trace", "toolagent-like"), ("contention", False)])]


def _depends_on_local_traces(cls) -> bool:
    """Whether the dashboard's runs ahead depend on which traces are on this machine."""
    import inspect

    return "on_this_machine" in inspect.getsource(cls._prefetch_jobs)


def _prefetch_cases():
    """(cls, moves) of :func:`_moves_after_prefetch`; a dashboard whose runs ahead depend on the local
    traces is tried with the released traces and with none (tests/conftest.py ``trace_setup``), the
    others in the set-up this machine has (their runs ahead are the same either way)."""
    cases = []
    for cls, moves in _moves_after_prefetch():
        if _depends_on_local_traces(cls):
            cases += [pytest.param(cls, moves, s, id=f"{cls.__name__}-{s}") for s in TRACE_SETUPS]
        else:
            cases.append(pytest.param(cls, moves, None, id=cls.__name__))
    return cases


def test_trace_dependent_dashboards_are_tried_without_traces():
    assert {c.__name__ for c, _ in _moves_after_prefetch() if _depends_on_local_traces(c)} == \
        {"TraceDashboard", "CapacityDashboard"}


@pytest.mark.parametrize("cls,moves,trace_setup", _prefetch_cases(), indirect=["trace_setup"])
def test_runs_computed_ahead_make_the_next_moves_simulation_free(cls, moves, trace_setup, monkeypatch):
    import threading

    from mooncake_lab import prefix_cache, synthetic, traces
    from mooncake_lab.dashboards import on_this_machine
    from mooncake_lab.experiments import common, l03_cache

    monkeypatch.setenv("MOONCAKE_LAB_PREFETCH", "1")
    ran = []   # simulations, trace loads, per-trace tables — computed by the thread a move runs in

    def counting(f):
        def counted(*a, **k):
            if threading.current_thread() is threading.main_thread():
                ran.append(f.__name__)
            return f(*a, **k)
        return counted

    for module, name in ((common.sim, "simulate"), (traces, "load_trace_or_synthetic"), (synthetic, "synthetic_trace"),
                         (l03_cache, "block_popularity_table"), (l03_cache, "hit_ratio_vs_capacity"),
                         (prefix_cache, "simulate_cache")):
        monkeypatch.setattr(module, name, counting(getattr(module, name)))
    d = cls()
    for name, value in moves:
        assert d.prefetch.wait(300) and not d.prefetch.errors, d.prefetch.errors
        assert d.prefetch.n_done == len(d.prefetch.jobs)
        # Nothing ahead only when no other trace of the dropdown loads without a download.
        others_here = [t for t in d.controls["trace"].options if t != d.value("trace") and on_this_machine(t)]
        assert d.prefetch.jobs or not others_here, f"{cls.__name__}: nothing computed ahead, yet {others_here} are here"
        before = len(ran)
        d.controls[name.lstrip("*")].value = value
        assert d.background_is_current(), (name, value)
        assert len(ran) == before or name.startswith("*"), \
            f"{cls.__name__}: {name} = {value!r} ran {ran[before:]} in the foreground, not computed ahead"
    d.prefetch.cancel()


def test_scheduling_dashboard_touches_the_memory_of_its_largest_run_ahead(monkeypatch):
    """Its runs ahead begin by writing the pool's buffers for a run on the slider's most prefill instances,
    so the first move there pays no page faults (a first run at 24 instances after runs at 8: ≈ 140 ms,
    100 of them faulting in new memory)."""
    from mooncake_lab import prefix_cache
    from mooncake_lab.dashboards.scheduling import SchedulingDashboard
    from mooncake_lab.experiments.common import as_trace

    monkeypatch.setenv("MOONCAKE_LAB_PREFETCH", "1")
    monkeypatch.setattr(prefix_cache, "_POOL", [])
    d = SchedulingDashboard()
    assert d.prefetch.wait(300) and not d.prefetch.errors, d.prefetch.errors
    most = d.controls["n_prefill"].max * as_trace(d.value("trace")).n_blocks
    assert sum(e[1] >= most for e in prefix_cache._POOL) >= 2
    with prefix_cache.pooled_cache_state(d.controls["n_prefill"].max, as_trace(d.value("trace")).n_blocks, 10) as st:
        assert (st.last_use == -1).all()


def test_no_runs_ahead_when_switched_off(monkeypatch):
    from mooncake_lab.dashboards.capstone import MechanismDashboard

    monkeypatch.setenv("MOONCAKE_LAB_PREFETCH", "0")
    assert MechanismDashboard().prefetch is None
