"""Exercises with automatic checks: ``check("01.kv_bytes", answer)``.

Each lecture's exercises live in ``lectureNN.py`` and register themselves with :func:`exercise`.
Expected answers are computed from the package's models (never typed in), so a change to a
formula shows up here too. ``check`` never raises on a student's answer: it prints (and returns)
a friendly verdict.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["check", "exercise", "Exercise", "Verdict", "list_exercises"]


@dataclass(frozen=True)
class Exercise:
    """A question with a computed answer.

    ``answer`` is a zero-argument function giving the expected value (a number, a string or a
    bool); numbers are accepted within ``rel_tol`` (relative). ``unit`` is shown in feedback;
    ``hint`` is shown on a wrong answer; ``why`` after a right one.
    """

    id: str
    question: str
    answer: Callable[[], Any]
    unit: str = ""
    rel_tol: float = 0.05
    hint: str = ""
    why: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    exercise_id: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def _repr_markdown_(self) -> str:
        return ("✅ " if self.correct else "❌ ") + self.message

    def __repr__(self) -> str:
        return ("✅ " if self.correct else "❌ ") + self.message


_REGISTRY: dict[str, Exercise] = {}
_LECTURES = ["lecture00", "lecture01", "lecture02", "lecture03", "lecture04", "lecture05", "lecture06", "lecture07", "lecture08",
             "lab_store"]


def exercise(ex: Exercise) -> Exercise:
    """Register an exercise (ids are ``"NN.short_name"``)."""
    _REGISTRY[ex.id] = ex
    return ex


def _load() -> None:
    for name in _LECTURES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise


def list_exercises(lecture: str | None = None) -> list[Exercise]:
    """Registered exercises, optionally only those whose id starts with ``lecture`` (e.g. "01")."""
    _load()
    return [e for k, e in sorted(_REGISTRY.items()) if lecture is None or k.startswith(lecture)]


def _fmt(x: Any, unit: str) -> str:
    if isinstance(x, float):
        s = f"{x:,.4g}"
    else:
        s = str(x)
    return f"{s} {unit}".strip()


def _is_unanswered(answer: Any) -> bool:
    return answer is None or answer is Ellipsis or (isinstance(answer, str) and not answer.strip())


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for exercise ``exercise_id``; returns a :class:`Verdict` that displays itself."""
    _load()
    ex = _REGISTRY.get(exercise_id)
    if ex is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        return Verdict(exercise_id, False, f"Unknown exercise {exercise_id!r}. Known: {known}.")
    if _is_unanswered(answer):
        return Verdict(ex.id, False, f"Not answered yet — replace `...` with your answer. {ex.question}")
    expected = ex.answer()
    if isinstance(expected, bool) or ex.choices:
        ok = _same_choice(answer, expected)
    elif isinstance(expected, (int, float)):
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return Verdict(ex.id, False,
                           f"Expected a number (in {ex.unit or 'the units asked'}), got {answer!r}.")
        if not math.isfinite(value):
            return Verdict(ex.id, False, f"Your answer {answer!r} is not a finite number.")
        ok = math.isclose(value, float(expected), rel_tol=ex.rel_tol, abs_tol=1e-12)
    else:
        ok = _same_choice(answer, expected)
    if ok:
        msg = f"Right: {_fmt(expected, ex.unit)}." + (f" {ex.why}" if ex.why else "")
    else:
        msg = f"Not quite: you gave {_fmt(answer, ex.unit)}." + (f" Hint: {ex.hint}" if ex.hint else "")
        if isinstance(expected, (int, float)) and not isinstance(expected, bool):
            msg += f" (Accepted within ±{ex.rel_tol:.0%}.)"
    return Verdict(ex.id, ok, msg)


def _same_choice(answer: Any, expected: Any) -> bool:
    if isinstance(expected, bool):
        if isinstance(answer, str):
            return answer.strip().lower() in (("true", "yes") if expected else ("false", "no"))
        return bool(answer) == expected if isinstance(answer, (bool, int)) else False
    return str(answer).strip().lower() == str(expected).strip().lower()
