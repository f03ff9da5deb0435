"""Exercises with automatic checks: ``check("01.kv_bytes", answer)``.

Each lecture's exercises live in ``lectureNN.py`` and register themselves with :func:`exercise`.
Expected answers are computed from the package's models (never typed in), so a change to a
formula shows up here too. ``check`` never raises on a student's answer: it prints (and returns)
a friendly verdict.
"""
from __future__ import annotations

import importlib
import math
import numbers
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

import numpy as np

from ..validate import describe

__all__ = ["check", "exercise", "Exercise", "Verdict", "list_exercises"]


@dataclass(frozen=True)
class Exercise:
    """A question with a computed answer.

    ``answer`` is a zero-argument function giving the expected value (a number, a string or a
    bool); numbers are accepted within ``rel_tol`` (relative) or ``abs_tol`` (in ``unit``: a time read off
    a view to half a second). ``unit`` is shown in feedback;
    ``hint`` is shown on a wrong answer; ``why`` after a right one. A choice question lists its
    ``choices`` (shown on a wrong answer); ``synonyms`` maps other words the lecture uses for a
    choice to it (``{"sticky": "session"}``). Choices compare case-insensitively, blanks and hyphens
    as underscores. ``explain``, if given, is called as ``explain(answer, correct)`` with the answer as
    checked (a number as a float, a choice as the allowed word, a truth value as a bool) and returns
    feedback computed for that answer (e.g. a rule's terms with their numbers), shown after ``why`` on a
    right answer and before ``hint`` on a wrong one.
    """

    id: str
    question: str
    answer: Callable[[], Any]
    unit: str = ""
    rel_tol: float = 0.05
    abs_tol: float = 0.0
    hint: str = ""
    why: str = ""
    choices: tuple[str, ...] = ()
    synonyms: dict = field(default_factory=dict)
    explain: Callable[[Any, bool], str] | None = None


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
_LECTURES = ["lecture00", "lecture01", "lecture02", "lecture03", "lecture04", "lecture05", "lecture06", "lecture07", "lecture08", "lecture09",
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
    if isinstance(x, float):   # 2,000,000 and 12,346, not 2e+06 and 1.235e+04
        s = f"{x:,.0f}" if 1e4 <= abs(x) < 1e15 or (x.is_integer() and abs(x) < 1e15) else f"{x:,.4g}"
    elif isinstance(x, int) and not isinstance(x, bool):
        s = describe(x) if abs(x) >= 10**15 else f"{x:,}"
    elif isinstance(x, str):
        s = x if len(x) <= 60 else x[:59] + "…"
    else:
        s = describe(x)
    return _with_unit(s, unit, x)


#: Units that are counted things: "1 token", "2 tokens" (the singular for exactly one).
_COUNTED = {"tokens": "token", "requests": "request", "blocks": "block", "nodes": "node", "sequences": "sequence",
            "instances": "instance"}


def _with_unit(s: str, unit: str, x: Any = None) -> str:
    """``s`` (a number as printed) with ``unit`` as a reader says it: "instance 1" (an instance is named by
    its number), "1 token" / "2 tokens", "0.05 USD/TB", "2.3 s"."""
    if s.startswith("-") and isinstance(x, numbers.Real):   # −800, as the lectures print it
        s = "\u2212" + s[1:]
    if unit == "instance":
        return f"instance {s}"
    if unit in _COUNTED and isinstance(x, numbers.Real) and not isinstance(x, bool) and x == 1:
        unit = _COUNTED[unit]
    if unit.startswith("×") or unit == "%":          # 2.18×, 1.5× SLO, 468.5%
        return f"{s}{unit}"
    return f"{s} {unit}".strip()


def _is_unanswered(answer: Any) -> bool:
    return answer is None or answer is Ellipsis or (isinstance(answer, str) and not answer.strip())


def _plain(x: Any) -> Any:
    """numpy scalars (and 0-d or one-element arrays, pandas objects of one value) as Python ones."""
    if isinstance(x, (str, bytes)):
        return x
    if hasattr(x, "__array__") or isinstance(x, np.generic):
        try:
            a = np.asarray(x)
        except Exception:  # noqa: BLE001
            return x
        if a.size == 1 and a.dtype.kind in "biuf":
            return a.reshape(()).item()
    return x


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for exercise ``exercise_id``; returns a :class:`Verdict` that displays itself.

    Never raises: an unknown id, an id that is not a string, or an answer of the wrong kind gets a
    verdict saying so. Numbers may be any real type (``np.float64``, ``np.int64``, ``Decimal``,
    ``Fraction``, a huge ``int``), a one-element array, or a string as the feedback prints numbers, such as
    ``"5.7"``, ``"327,680"`` (or a thin space between the groups), ``"−800"`` (U+2212) or ``"5.7 s"``, with the
    question's unit as a reader writes it (``"2x"`` or ``"2 ×"`` for ×, ``"$0.05"`` for USD, ``"instance 3"``)
    or one that converts to it (``"1 ms"`` for an answer in s, ``"2 MiB"`` for one in B). A whole-number answer
    (an instance, a count: ``rel_tol`` 0 and an int expected) must be whole (1 or 1.0, not 1.0000000000001).
    True/False questions take ``np.bool_`` and yes/no too, not 0 or 1.
    """
    try:
        return _check(exercise_id, answer)
    except Exception as err:  # noqa: BLE001 - a verdict, never a traceback, in a student's notebook
        return Verdict(str(exercise_id) if isinstance(exercise_id, str) else describe(exercise_id), False,
                       f"Could not check this answer ({type(err).__name__}: {str(err)[:200]}).")


def _check(exercise_id: Any, answer: Any) -> Verdict:
    _load()
    known = ", ".join(sorted(_REGISTRY)) or "none"
    if not isinstance(exercise_id, str):
        return Verdict(describe(exercise_id), False,
                       f"The exercise id must be a string such as '01.kv_bytes', got {describe(exercise_id)}. "
                       f"Known: {known}.")
    ex = _REGISTRY.get(exercise_id) or _REGISTRY.get(exercise_id.strip())
    if ex is None:
        return Verdict(exercise_id, False, f"Unknown exercise {describe(exercise_id)}. Known: {known}.")
    if _is_unanswered(answer):
        return Verdict(ex.id, False, f"Not answered yet — replace `...` with your answer. {ex.question}")
    expected = _plain(ex.answer())
    if isinstance(expected, bool):
        return _check_bool(ex, _plain(answer), expected)
    if ex.choices or isinstance(expected, str):
        return _check_choice(ex, answer, expected)
    return _check_number(ex, _plain(answer), expected)


def _explained(ex: Exercise, value: Any, ok: bool) -> str:
    """`` " " + ex.explain(value, ok)`` (feedback computed for this answer), or "" without one."""
    if ex.explain is None:
        return ""
    text = ex.explain(value, ok)
    return f" {text}" if text else ""


def _verdict(ex: Exercise, ok: bool, expected: Any, given: str, extra: str = "", value: Any = None) -> Verdict:
    if ok:
        return Verdict(ex.id, True, f"Right: {_fmt(expected, ex.unit)}." + (f" {ex.why}" if ex.why else "")
                       + _explained(ex, value, True))
    msg = f"Not quite: you gave {given}." + (f" {extra}" if extra else "") + _explained(ex, value, False) \
        + (f" Hint: {ex.hint}" if ex.hint else "")
    return Verdict(ex.id, False, msg)


def _check_bool(ex: Exercise, answer: Any, expected: bool) -> Verdict:
    words = {"true": True, "yes": True, "false": False, "no": False}
    if isinstance(answer, (bool, np.bool_)):
        value = bool(answer)
    elif isinstance(answer, str) and answer.strip().lower() in words:
        value = words[answer.strip().lower()]
    elif isinstance(answer, numbers.Number):
        return Verdict(ex.id, False, f"This is a true/false question: answer True or False (or yes / no), not a "
                                     f"number (got {describe(answer)}).")
    else:
        return Verdict(ex.id, False, f"Expected True or False (or yes / no), got {describe(answer)}.")
    return _verdict(ex, value == expected, expected, repr(value), value=value)


def _norm_choice(x: str) -> str:
    """Lower case, quotes and surrounding blanks dropped, inner blanks and hyphens as underscores; a number
    and its unit read as one word ("1 ms" is "1ms")."""
    x = re.sub(r"(\d)[\s_\-]+(?=[^\W\d_])", r"\1", x.strip().strip("'\"`").strip().lower())
    return re.sub(r"[\s\-]+", "_", x)


def _check_choice(ex: Exercise, answer: Any, expected: Any) -> Verdict:
    choices = tuple(ex.choices) or (str(expected),)
    listed = ", ".join(repr(c) for c in choices)
    if not isinstance(answer, str):
        return Verdict(ex.id, False, f"Expected one of {listed} (a string), got {describe(answer)}.")
    table = {_norm_choice(str(c)): str(c) for c in choices}
    table.update({_norm_choice(k): str(v) for k, v in ex.synonyms.items()})
    picked = table.get(_norm_choice(answer))
    if picked is None:
        return Verdict(ex.id, False, f"{_fmt(answer, '')!r} is not one of the allowed answers: {listed}."
                       + (f" Hint: {ex.hint}" if ex.hint else ""))
    ok = _norm_choice(picked) == _norm_choice(str(expected))
    return _verdict(ex, ok, expected, repr(picked) if picked != answer.strip() else repr(answer),
                    f"Allowed answers: {listed}.", value=picked)


#: A number as the feedback prints it: a leading "-" or "−" (U+2212 MINUS SIGN; an en dash "–" is not a minus),
#: digits grouped by three with one separator throughout ("," as printed, "_", a thin or narrow no-break space
#: as typeset) or ungrouped, a decimal point, an exponent; then the unit, if any.
_NUMBER = re.compile(r"^\s*([-+\u2212]?(?:(?:\d{1,3}(?P<sep>[,_\u2009\u202f])\d{3}(?:(?P=sep)\d{3})*|\d+)(?:\.\d*)?"
                     r"|\.\d+)(?:[eE][-+\u2212]?\d+)?)(?P<tail>.*)$", re.DOTALL)   # tail: linear, stripped below
_DASHES = "\u2013\u2014\u2012\u2010\u2011"   # en dash, em dash, figure dash, hyphens: not minus signs


def _number(answer: Any, unit: str) -> tuple[Any, float | None, str]:
    """(the answer as an exact number — as given, or a Decimal parsed from a string —, as a float, "") or
    (None, None, why it is not a number for this question)."""
    want = "an instance number" if unit == "instance" else f"a number (in {unit})" if unit else "a number"
    shown = _fmt(answer, "") if isinstance(answer, str) else describe(answer)
    if isinstance(answer, bool):
        return None, None, f"Expected {want}, got {answer!r}."
    if isinstance(answer, str):
        given, dollars = answer, False
        answer = re.sub(r"^\s*(?:≈|~|about|approx\.?|around|roughly)\s*", "", answer, flags=re.I)   # "≈ 1,926 s"
        answer = re.sub(r"^\s*[A-Za-z][\w·]{0,11}\s*[=≈]\s*(?=[-+\u2212\d.$])", "", answer)   # "X = 4", "b ≈ 237"
        plus = re.fullmatch(r"\s*\+\s*(\d+(?:\.\d*)?)\s*%\s*", answer) if unit.startswith("×") else None
        if plus:                                  # "+172%" for 2.72×: a gain as the prose writes it
            answer = f"{1 + float(plus.group(1)) / 100!r}×"
        if unit.startswith("×") or not unit:     # "×3.38", as the notes write a ratio
            answer = re.sub(r"^\s*[×x]\s*(?=[\d.])", "", answer) + ("×" if re.match(r"^\s*[×x]\s*[\d.]", answer) else "")
        if unit == "instance":                         # "instance 3", as the feedback says it
            answer = re.sub(r"^\s*instances?\s+", "", answer, flags=re.I)
        if unit.startswith(("USD", "$")) and re.match(r"^\s*(US)?\$", answer):   # "$0.05", "US$0.05/TB"
            answer, dollars = re.sub(r"^\s*(US)?\$\s*", "", answer), True
        m = _NUMBER.match(answer)
        text, tail = answer.strip(), m.group("tail").strip() if m else ""
        if not m or re.match(r"[\d,._\u2009\u202f]", tail):
            why = (f" {text[0]!r} is a dash, not a minus sign: write -{text[1:].strip()}." if text[:1] in _DASHES else
                   " Group digits by three (327,680) or not at all, and write decimals with a point (0.5)."
                   if m else "")
            return None, None, f"Expected {want}, got {_fmt(answer, '')!r}." + why
        scale = _unit_scale(tail, unit, dollars)
        if scale is None:
            if not unit:
                return None, None, f"Give a plain number, without a unit of its own: got {_fmt(given, '')!r}."
            return None, None, (f"Give the number in {unit}: {_fmt(tail, '')!r} is not {unit}"
                                + (" nor a unit that converts to it (such as ms for s, or MB and KiB for B)"
                                   if _split_unit(unit) else "") + f"; got {_fmt(given, '')!r}.")
        answer = Decimal(re.sub(r"[,_\u2009\u202f]", "", m.group(1)).replace("\u2212", "-")) * scale
    exact = answer
    if not isinstance(answer, numbers.Real):
        try:     # Decimal and other number types that convert
            answer = float(answer) if isinstance(answer, numbers.Number) else answer
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            pass
        if not isinstance(answer, numbers.Real):
            return None, None, f"Expected {want}, got {shown}."
    try:
        value = float(answer)
    except OverflowError:
        return None, None, f"Your answer {shown} is beyond the range of a float (≈ 1.8e308)."
    except (ValueError, TypeError):
        return None, None, f"Expected {want}, got {shown}."
    if not math.isfinite(value):
        return None, None, f"Your answer {shown} is not a finite number."
    return exact, value, ""


_UNIT_PREFIX = {"": Decimal(1), "k": Decimal(10) ** 3, "K": Decimal(10) ** 3, "M": Decimal(10) ** 6,
                "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "m": Decimal(10) ** -3,
                "µ": Decimal(10) ** -6, "μ": Decimal(10) ** -6, "u": Decimal(10) ** -6, "n": Decimal(10) ** -9,
                "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40}
_UNIT_BASES = ("FLOP/s", "FLOP", "B/s", "bps", "B", "s")


def _split_unit(unit: str) -> tuple[str, str] | None:
    """``unit`` as (prefix, base): "ms" → ("m", "s"), "MiB" → ("Mi", "B"); None if it is no prefixed unit
    (binary prefixes only for bytes; a time has no k, M … above the second)."""
    for base in _UNIT_BASES:
        if unit.endswith(base) and unit[: -len(base)] in _UNIT_PREFIX:
            prefix = unit[: -len(base)]
            if prefix.endswith("i") and not base.startswith("B"):
                return None
            if base == "s" and _UNIT_PREFIX[prefix] > 1:
                return None
            return prefix, base
    return None


#: Units as a reader may spell them out or shorten them.
_SPELLED = {"seconds": "s", "second": "s", "sec": "s", "secs": "s", "milliseconds": "ms", "millisecond": "ms",
            "microseconds": "µs", "microsecond": "µs", "us": "µs", "bytes": "B", "byte": "B", "seqs": "sequences",
            "seq": "sequences", "toks": "tokens", "tok": "tokens", "reqs": "requests", "req": "requests"}


def _unit_scale(tail: str, unit: str, dollars: bool = False) -> Decimal | None:
    """The factor that turns a number followed by ``tail`` into ``unit`` (1 when ``tail`` is the unit
    itself, as a reader writes it: "2x" for ×, "1 token" for tokens, "/TB" after "$" for USD/TB; 1000 for
    "s" when ``unit`` is ms), or None when ``tail`` is not a unit of this answer."""
    t, u = tail.replace(" ", ""), unit.replace(" ", "")
    t = _SPELLED.get(t.lower(), t)
    if not t or t.lower() == u.lower():
        return Decimal(1)
    if u.startswith("×") and re.fullmatch(r"(×|x|times)(" + re.escape(u[1:]) + ")?", t, flags=re.I):   # 1.5× SLO, 1.5×
        return Decimal(1)
    if t.lower() == _COUNTED.get(u, "\0") or (u == "instance" and t.lower() == "instances"):
        return Decimal(1)
    if u.upper().startswith("USD"):   # USD/TB: "$0.05", "$0.05/TB", "0.05 $/TB", "0.05 USD", "$0.05 per TB"
        t = re.sub(r"^\$", "USD", re.sub(r"(?i)per", "/", t))
        if t.upper() in (u.upper(), "USD") or (dollars and t.lower() == u[3:].lower()):
            return Decimal(1)
        per_t = re.fullmatch(r"(?:USD)?/(.+)", t, flags=re.I)     # USD/GB for USD/TB: a per-size price
        per_u = _split_unit(u.split("/", 1)[1]) if "/" in u else None
        have = _split_unit(per_t.group(1)) if per_t else None
        if per_u and have and have[1] == per_u[1]:
            return _UNIT_PREFIX[per_u[0]] / _UNIT_PREFIX[have[0]]
    big = re.fullmatch(r"(k|K|M|G|thousand|million|billion)(.*)", t)   # "3.05M tokens", "3M", "12k"
    if big and (not u or u in _COUNTED or u == "instance") and big.group(2).lower() in ("", u.lower(), _COUNTED.get(u, "\0")):
        return {"k": Decimal(10) ** 3, "K": Decimal(10) ** 3, "thousand": Decimal(10) ** 3, "M": Decimal(10) ** 6,
                "million": Decimal(10) ** 6, "G": Decimal(10) ** 9, "billion": Decimal(10) ** 9}[big.group(1)]
    if not u and t.lower() in ("x", "×", "times"):    # a plain ratio, written "8×"
        return Decimal(1)
    if t == "%" and (not u or u.startswith("(fraction")):   # "31%" for a fraction: 0.31
        return Decimal("0.01")
    have, want = _split_unit(t), _split_unit(u)
    if have and want and have[1] == want[1]:
        return _UNIT_PREFIX[have[0]] / _UNIT_PREFIX[want[0]]
    return None


def _is_whole(x: Any) -> bool:
    """Whether a finite number is a whole one, exactly (Decimal("1.0000000000000000001") is not)."""
    if isinstance(x, Decimal):
        return x == x.to_integral_value()
    if isinstance(x, numbers.Rational):
        return x.denominator == 1
    return float(x).is_integer()


#: Unit slips: (answer ÷ expected, what it looks like).
_SLIPS = [(1e3, "10³ times"), (1e-3, "10⁻³ times"), (1e6, "10⁶ times"), (1e-6, "10⁻⁶ times"),
          (1e9, "10⁹ times"), (1e-9, "10⁻⁹ times"), (1e12, "10¹² times"), (1e-12, "10⁻¹² times"),
          (1e15, "10¹⁵ times"), (1e-15, "10⁻¹⁵ times"), (100.0, "100 times"), (0.01, "1/100 of")]
_BINARY = [(1.024 ** k, f"{1.024 ** k:.4g} times") for k in (1, 2, 3, 4, -1, -2, -3, -4)]


def _unit_slip(value: float, expected: float, ex: Exercise) -> str:
    """A hint naming the unit when ``value`` is ``expected`` off by a power of ten, by 100 (% vs
    fraction) or, for an answer in bytes, by 1.024^k (KB vs KiB); else ""."""
    if expected == 0 or value == 0 or (value < 0) != (expected < 0):
        return ""
    r, tol = value / expected, max(ex.rel_tol, 0.005)
    unit = ex.unit.strip()
    in_bytes = unit.endswith(("B", "B/s", "byte", "bytes"))   # only byte units have binary prefixes
    # A binary slip is exact (1.024^k), and its factors lie only 2.4% apart: it is named only where the
    # answer sits within 0.2% of one, never because a wide tolerance reaches it.
    near = [(abs(r / factor - 1), factor, text) for factor, text in _SLIPS if math.isclose(r, factor, rel_tol=tol)]
    near += [(abs(r / factor - 1), factor, text) for factor, text in (_BINARY if in_bytes else [])
             if math.isclose(r, factor, rel_tol=0.002)]
    if not near:
        return ""
    _, factor, text = min(near)   # the closest (1.024⁻³ for GiB vs GB, not 1.024⁻² within a 3% tolerance)
    where = f"the answer is in {unit}" if unit else "check the unit asked for"
    if factor in (100.0, 0.01):
        if unit == "%":
            what = "a percentage (30), not a fraction (0.3)"
        else:
            what = "a fraction (0.3), not a percentage (30)" if factor == 100.0 else \
                "a percentage only where asked (the value, not a fraction of it)"
        return f"Your answer is {text} the expected value: give {what}; {where}."
    if (factor, text) in _BINARY:
        return (f"Your answer is {r:.4g} times the expected value: decimal vs binary units? 1 KB = 1000 B but "
                f"1 KiB = 1024 B (MiB = 1024², GiB = 1024³); {where}.")
    e = round(math.log10(factor))
    other = _prefixed(unit, e)
    if other:
        return f"Your answer is {text} the expected value: did you give it in {other} instead of {unit}?"
    return f"Your answer is {text} the expected value — a unit slip (×10^{e})? {where[0].upper() + where[1:]}."


_PREFIX = {"": 0, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "m": -3, "µ": -6, "u": -6, "n": -9}
_BASES = ("B/s", "FLOP/s", "FLOP", "B", "s")


def _prefixed(unit: str, e: int) -> str:
    """The unit a value ``10**e`` times too large was given in (``"s"``, 3 → ``"ms"``), or ""."""
    for base in _BASES:
        p = unit[: -len(base)] if unit.endswith(base) else None
        if p is not None and p in _PREFIX:
            q = _PREFIX[p] - e
            names = {v: k for k, v in reversed(list(_PREFIX.items()))}
            fits = q in names and (q <= 0 if base == "s" else q >= 0)   # ms, µs; kB … PB
            return names[q] + base if fits else ""
    return ""


def _tolerance(ex: Exercise, expected: float) -> str:
    if ex.abs_tol > 0:
        return f"(Accepted within ±{ex.abs_tol:g} {ex.unit}.)" if ex.unit else f"(Accepted within ±{ex.abs_tol:g}.)"
    if ex.rel_tol <= 0:
        return "(An exact whole number is expected.)" if float(expected).is_integer() else \
            "(The exact value is expected.)"
    return f"(Accepted within ±{ex.rel_tol * 100:.3g}%.)"


def _unlabelled(ex: Exercise, answer: Any) -> Any:
    """For a number question whose ``synonyms`` name numbers (``{"TRANSFER_FAIL": -800}``): the answer
    without a name it carries ("−800 TRANSFER_FAIL" → "−800"), or the number a bare name stands for."""
    if not isinstance(answer, str):
        return answer
    for label, value in ex.synonyms.items():
        m = re.fullmatch(r"\s*(.*?)[\s(]*" + re.escape(str(label)) + r"\)?\s*", answer, flags=re.I)
        if m:
            return m.group(1) if m.group(1) else value
    return answer


def _check_number(ex: Exercise, answer: Any, expected: Any) -> Verdict:
    answer = _unlabelled(ex, answer)
    exact, value, problem = _number(answer, ex.unit)
    if value is None:
        return Verdict(ex.id, False, problem)
    exp = float(expected)
    given = (repr(answer.strip()) if isinstance(answer, str) else   # as typed: '2 MB', not 2,000,000 B
             _fmt(answer if isinstance(answer, (int, float)) and not isinstance(answer, bool) else value, ex.unit))
    whole = ex.rel_tol <= 0 and ex.abs_tol <= 0 and isinstance(expected, numbers.Integral)   # an instance, a count
    if whole and not _is_whole(exact):
        what = "An instance number" if ex.unit == "instance" else "This answer"
        shown = answer.strip() if isinstance(answer, str) else repr(value)
        return Verdict(ex.id, False, f"{what} is a whole number: you gave {shown}."   # explain: e.g. the range
                       + (_explained(ex, value, False) if not value.is_integer() else ""))
    if whole:
        ok = int(exact) == expected     # exact: no rounding through float
    else:
        ok = math.isclose(value, exp, rel_tol=ex.rel_tol, abs_tol=max(ex.abs_tol, 1e-12))
    extra = " ".join(x for x in (_unit_slip(value, exp, ex) if not ok else "", _tolerance(ex, exp)) if x)
    if ok:
        return _verdict(ex, True, expected, given, value=value)
    msg = f"Not quite: you gave {given}." + _explained(ex, value, False) + (f" Hint: {ex.hint}" if ex.hint else "") \
        + f" {extra}"
    return Verdict(ex.id, False, msg)
