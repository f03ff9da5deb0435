"""Bad values at every dashboard: a control refuses what it cannot hold, a constructor names what is allowed.

For every control of every dashboard (listed from ``mooncake_lab/dashboards/*``): NaN, None, ±inf,
values beyond the range, wrong types and unknown options are refused — the control keeps its value,
nothing is recomputed, the picture stays current and the dashboard's notice says what is allowed —
from code and from a browser (``set_state``). Every constructor keyword with such values raises a
``ValueError`` naming the dashboard, the keyword and what is allowed, before anything is computed.
"""
from __future__ import annotations

import contextlib
import html
import inspect
import io
import math
import random
from decimal import Decimal
from fractions import Fraction

import ipywidgets as widgets
import numpy as np
import pytest

from mooncake_lab.dashboards import Dashboard
from mooncake_lab.validate import InputError

from conftest import all_dashboards

_SELECTIONS = (widgets.Dropdown, widgets.ToggleButtons, widgets.RadioButtons, widgets.SelectionSlider)


DASHBOARDS = all_dashboards()
_ALWAYS_BAD = [math.nan, None, math.inf, -math.inf, "x", "", [1], {"a": 1}, (), object(), b"1", np.nan,
               10**400, -10**400, 1e308 * 10, "toolagent", np.array([1.0]), print]


def _options(w) -> list:
    return [o[1] if isinstance(o, tuple) else o for o in w.options]


def bad_values(w) -> list:
    """Values control ``w`` cannot hold: the ones no control holds, plus beyond its range or options."""
    bad = list(_ALWAYS_BAD)
    if isinstance(w, _SELECTIONS):
        opts = _options(w)
        bad += ["no such option", True, False]
        if all(isinstance(o, str) for o in opts):
            bad += [opts[0] + "_x", 0, 1.5, np.float64(2.0)]
        else:   # numeric options: numbers between and beyond them, their strings
            nums = sorted(float(o) for o in opts)
            bad += [nums[0] - 1, nums[-1] * 2 + 1, (nums[0] + nums[1]) / 2, str(opts[0]), np.float32("nan")]
    elif isinstance(w, widgets.Checkbox):
        bad += [1, 0, 2, "True", "yes", np.int64(1), 0.5]
    else:
        lo, hi = (w.base ** w.min, w.base ** w.max) if isinstance(w, widgets.FloatLogSlider) else (w.min, w.max)
        span = hi - lo
        bad += [hi + max(span, 1), lo - max(span, 1), hi * 10 + 1, -abs(hi) - 1, True, False, str(lo),
                np.float64(hi * 2 + 1), Decimal("NaN"), Fraction(int(hi) * 3 + 7, 1)]
        if isinstance(w, widgets.IntSlider):
            bad += [lo + 0.5, np.float64(lo + 0.25)]
        if lo > 0:
            bad += [0, 0.0, lo * 0.999]
    return bad


@pytest.fixture(autouse=True)
def _no_prefetch(monkeypatch):
    monkeypatch.setenv("MOONCAKE_LAB_PREFETCH", "0")


def _build(cls, **kw):
    with contextlib.redirect_stdout(io.StringIO()):   # outside a kernel, display() prints
        return cls(**kw)


@pytest.mark.parametrize("cls", DASHBOARDS, ids=lambda c: c.__name__)
def test_every_control_refuses_what_it_cannot_hold(cls):
    d = _build(cls)
    tried = 0
    for name, w in d.controls.items():
        for bad in bad_values(w):
            # (a browser sends a selection's index, not its value: only what it syncs)
            for via in ("code", "browser") if "value" in w.keys else ("code",):
                old, draws, refused = w.value, d.n_draws, getattr(d, "n_refused", 0)
                with contextlib.redirect_stdout(io.StringIO()):
                    if via == "code":
                        w.value = bad
                    else:
                        w.set_state({"value": bad})
                tried += 1
                what = f"{cls.__name__}.{name} = {bad!r} from {via}"
                assert w.value == old and type(w.value) is type(old), f"{what}: the control holds {w.value!r}"
                assert d.n_draws == draws, f"{what}: recomputed"
                assert d.n_refused == refused + 1, f"{what}: not refused"
                # the refusal itself names the control ("Cls.name: got …; allowed: …"): the notice's
                # closing "Kept name = …" is the dashboard's own and would hold whatever the check said
                text = html.unescape(d.notice.value)
                assert f"⚠ {cls.__name__}.{name}: got " in text and "; allowed: " in text, (what, text)
    assert d.background_is_current()
    # a good move afterwards works and clears the notice
    w = next(iter(d.controls.values()))
    other = next(v for v in _good_values(w) if v != w.value)
    with contextlib.redirect_stdout(io.StringIO()):
        w.value = other
    assert d.notice.value == "" and d.background_is_current()
    assert tried >= 20 * len(d.controls)


def _good_values(w, k: int = 6, seed: int = 0) -> list:
    """In-range values of ``w``, off its grid too (what code may set): ends, then random ones."""
    rng = random.Random(seed)
    if isinstance(w, _SELECTIONS):
        return _options(w)
    if isinstance(w, widgets.Checkbox):
        return [not w.value, w.value]
    if isinstance(w, widgets.FloatLogSlider):
        return [w.base ** w.max, w.base ** w.min] + [w.base ** rng.uniform(w.min, w.max) for _ in range(k)]
    if isinstance(w, widgets.IntSlider):
        return [w.max, w.min] + [rng.randint(w.min, w.max) for _ in range(k)]
    return [w.max, w.min] + [rng.uniform(w.min, w.max) for _ in range(k)]


def test_values_the_control_holds_are_taken_in_any_numeric_type():
    from mooncake_lab.dashboards import control_value

    s = widgets.FloatSlider(min=0.25, max=3.0)
    assert control_value(s, np.float32(0.5), "speed") == 0.5 and control_value(s, 3, "speed") == 3.0
    i = widgets.IntSlider(min=1, max=8)
    assert control_value(i, np.int64(4), "x") == 4 and control_value(i, 4.0, "x") == 4
    sel = widgets.SelectionSlider(options=[0.5, 1.0, 2.0])
    assert control_value(sel, 2, "speed") == 2.0 and control_value(sel, np.float64(1), "speed") == 1.0
    log = widgets.FloatLogSlider(base=10, min=4, max=6.2)
    assert control_value(log, 10 ** 6.2, "kv") == 10 ** 6.2 and control_value(log, 1e4, "kv") == 1e4
    with pytest.raises(InputError, match=r"kv: got 10000000.0; allowed: a finite number in \[10000, 1.58489e\+06\]"):
        control_value(log, 1e7, "kv")
    with pytest.raises(InputError, match="speed: got 0.7; allowed: one of 0.5, 1.0, 2.0"):
        control_value(sel, 0.7, "speed")


# Cheap dashboards (closed-form or one small run a move): random in-range values, off the grid too,
# must draw a current picture — the sliders cannot reach a value that breaks them.
_CHEAP = [c for c in DASHBOARDS if c.__name__ in {
    "RooflineDashboard", "PresetDashboard", "ReloadDashboard", "Eq2Dashboard", "GanttDashboard",
    "SchemesDashboard", "AlgorithmOneDashboard", "TraceDashboard", "CapacityDashboard"}]


@pytest.mark.parametrize("cls", _CHEAP, ids=lambda c: c.__name__)
def test_every_value_a_control_can_hold_draws(cls):
    d = _build(cls)
    for name, w in d.controls.items():
        for v in _good_values(w, k=4, seed=hash(name) % 1000):
            with contextlib.redirect_stdout(io.StringIO()):
                w.value = v
            assert getattr(d, "n_refused", 0) == 0, d.notice.value
            assert d.background_is_current(), f"{cls.__name__}: {name} = {v!r}"


def _keyword_controls(cls) -> dict:
    """Constructor keyword → the control it sets (None: an argument that is not a control)."""
    inverse = {kw: c for c, kw in getattr(cls, "_KEYWORDS", {}).items()}
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    return {p.name: inverse.get(p.name, p.name) for p in params}


_STRUCTURAL_BAD = {   # arguments that are not controls: what they must refuse
    "traces": ["conversation", (), [], ("nope",), ("conversation", "conversation"), None, 3, [None]],
    "node": ["nope", None, 3, "", ["a800x8"]],
    "model": ["nope", None, 3, "", ["llama2-70b"]],
    "res": [3, "recorded", {}, [], {"eviction": 1}.keys()],   # the store lab's results (None: the recorded run)
}


@pytest.mark.parametrize("cls", [c for c in DASHBOARDS if _keyword_controls(c)], ids=lambda c: c.__name__)
def test_every_constructor_keyword_names_what_is_allowed_before_computing(cls, monkeypatch):
    template = _build(cls)       # its controls say what each keyword allows
    drawn = []
    monkeypatch.setattr(Dashboard, "redraw", lambda self: drawn.append(self))
    tried = 0
    for kw, control in _keyword_controls(cls).items():
        w = template.controls.get(control)
        bad = bad_values(w) if w is not None else _STRUCTURAL_BAD[kw]
        for value in bad:
            if value is None and inspect.signature(cls.__init__).parameters[kw].default is None:
                continue   # documented: None means the default
            with pytest.raises(ValueError) as err:
                cls(**{kw: value})
            tried += 1
            msg = str(err.value)
            assert msg.startswith(f"{cls.__name__}({kw}=...): got "), msg
            assert "allowed: " in msg, msg
            assert not drawn, f"{cls.__name__}({kw}={value!r}) computed before refusing"
    assert tried >= 10


def test_overload_dashboard_names_the_traces_it_offers():
    from mooncake_lab.dashboards.overload import OverloadDashboard

    with pytest.raises(ValueError, match=r"OverloadDashboard\(trace=...\): got 'toolagent'; allowed: one of "
                                         r"'toolagent-like', 'conversation'"):
        OverloadDashboard(trace="toolagent")
    with pytest.raises(ValueError, match=r"OverloadDashboard\(speed=...\): got 10; allowed: a finite number in "
                                         r"\[0.25, 3\]"):
        OverloadDashboard(speed=10)   # was clamped to 3 silently


def test_a_failing_computation_puts_the_control_back(monkeypatch):
    from mooncake_lab.dashboards.storage import Eq2Dashboard

    d = _build(Eq2Dashboard)
    original = Eq2Dashboard._update

    def update(self):
        if self.value("node") == "h20x8":
            raise RuntimeError("boom")
        original(self)

    monkeypatch.setattr(Eq2Dashboard, "_update", update)
    w = d.controls["node"]
    with pytest.raises(RuntimeError, match="boom"), contextlib.redirect_stdout(io.StringIO()):
        w.value = "h20x8"
    assert w.value == "a800x8" and "boom" in d.notice.value and d.background_is_current()


def test_validate_option_matches_numbers_by_value_and_strings_exactly():
    from mooncake_lab.validate import option

    assert option(2, "speed", (0.5, 2.0)) == 2.0 and type(option(np.int64(2), "s", (0.5, 2.0))) is float
    assert option("early", "policy", ("baseline", "early")) == "early"
    for bad in (True, np.nan, "2.0", None, "Early", 10**400, [2.0]):
        with pytest.raises(InputError, match=r"^x: got .*; allowed: one of 0\.5, 2\.0, 'early'$"):
            option(bad, "x", (0.5, 2.0, "early"))
