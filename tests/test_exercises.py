"""check(...) gives right/wrong with feedback and never crashes on a student's answer."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from mooncake_lab import check
from mooncake_lab.exercises import Exercise, _REGISTRY, exercise, list_exercises

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo():
    ex = exercise(Exercise("99.demo", "What is 6 × 7?", answer=lambda: 42.0, unit="units",
                           rel_tol=0.01, hint="multiply", why="six sevens"))
    yield ex
    _REGISTRY.pop("99.demo")


def test_right_and_wrong(demo):
    assert check("99.demo", 42)
    assert check("99.demo", 42.3)          # within 1 %
    v = check("99.demo", 40)
    assert not v and "multiply" in v.message


@pytest.mark.parametrize("answer", [None, ..., "", "forty-two", [1, 2], math.nan, math.inf])
def test_unanswered_or_garbage_never_raises(demo, answer):
    v = check("99.demo", answer)
    assert not v
    assert v.message


def test_unknown_exercise_lists_known(demo):
    v = check("99.nope", 1)
    assert not v and "99.demo" in v.message


def test_every_registered_exercise_accepts_its_own_answer():
    exercises = list_exercises()
    for ex in exercises:
        assert check(ex.id, ex.answer()), f"{ex.id} rejects its own expected answer"
        assert not check(ex.id, None)


def test_choice_exercises():
    exercise(Exercise("99.choice", "compute or memory?", answer=lambda: "memory", choices=("compute", "memory")))
    try:
        assert check("99.choice", " Memory ")
        assert not check("99.choice", "compute")
    finally:
        _REGISTRY.pop("99.choice")


def _wrong(ex, right):
    """An answer that must be rejected: another choice, the opposite truth, or a number far off."""
    if isinstance(right, bool):
        return not right
    if ex.choices:
        return next(c for c in ex.choices if str(c).lower() != str(right).lower())
    if isinstance(right, str):
        return "certainly not " + right
    return right * 1.5 + 1


LECTURES = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("lecture", LECTURES)
def test_each_lecture_has_checked_exercises_that_tell_right_from_wrong(lecture):
    exs = list_exercises(f"{lecture}.")
    assert len(exs) >= 3, f"lecture {lecture} has {len(exs)} exercises; each lecture needs at least 3"
    for ex in exs:
        right = ex.answer()
        assert check(ex.id, right), ex.id
        assert not check(ex.id, _wrong(ex, right)), ex.id
        assert not check(ex.id, ...), ex.id
