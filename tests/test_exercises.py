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


@pytest.mark.parametrize("answer, says", [(None, "Not answered yet"), (..., "Not answered yet"), ("", "Not answered yet"),
                                         ("forty-two", "Expected a number (in units), got 'forty-two'"),
                                         ([1, 2], "Expected a number (in units), got [1, 2]"),
                                         (math.nan, "nan is not a finite number"),
                                         (math.inf, "inf is not a finite number")])
def test_unanswered_or_garbage_never_raises(demo, answer, says):
    v = check("99.demo", answer)
    assert not v
    assert says in v.message, v.message     # says what is wrong with it, not just "wrong"


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


def test_explain_is_feedback_computed_for_the_answer():
    """``explain(answer, correct)`` gets the answer as checked and its text joins the verdict: after ``why``
    when right, before the hint when wrong (lecture 09's Question 1 works a rule through with its numbers)."""
    seen = []

    def explain(value, ok):
        seen.append((value, ok))
        return f"[{value!r} {'ok' if ok else 'no'}]"

    exercise(Exercise("99.explained", "Which instance?", answer=lambda: 1, rel_tol=0.0, unit="instance",
                      hint="the rule", why="because", explain=explain))
    exercise(Exercise("99.explained_choice", "compute or memory?", answer=lambda: "memory",
                      choices=("compute", "memory"), explain=explain))
    try:
        right, wrong = check("99.explained", 1), check("99.explained", "0")
        assert right and right.message.endswith("because [1.0 ok]")
        assert not wrong and "[0.0 no] Hint: the rule" in wrong.message
        assert "['compute' no]" in check("99.explained_choice", " Compute ").message
        assert seen == [(1.0, True), (0.0, False), ("compute", False)]
        assert "Not answered" in check("99.explained", ...).message and len(seen) == 3   # no answer, no call
    finally:
        _REGISTRY.pop("99.explained")
        _REGISTRY.pop("99.explained_choice")


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


# ---------------------------------------------------------------- answers of every kind (issue 12, 13)
import numpy as np  # noqa: E402
from decimal import Decimal  # noqa: E402
from fractions import Fraction  # noqa: E402

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from mooncake_lab.exercises import Verdict  # noqa: E402


@pytest.fixture
def demos():
    made = [exercise(Exercise("99.flag", "Is it compute-bound?", answer=lambda: False)),
            exercise(Exercise("99.count", "How many nodes?", answer=lambda: 4, unit="nodes", rel_tol=0.0)),
            exercise(Exercise("99.np_count", "How many?", answer=lambda: np.int64(7), rel_tol=0.0)),
            exercise(Exercise("99.secs", "How long?", answer=lambda: 2.28, unit="s", rel_tol=0.05)),
            exercise(Exercise("99.ms", "How long, in ms?", answer=lambda: 35.0, unit="ms", rel_tol=0.03)),
            exercise(Exercise("99.pflop", "How many PFLOP?", answer=lambda: 5.7, unit="PFLOP", rel_tol=0.02)),
            exercise(Exercise("99.bytes", "KV bytes per token?", answer=lambda: 327_680, unit="B", rel_tol=0.01)),
            exercise(Exercise("99.frac", "Hit ratio (a fraction)?", answer=lambda: 0.25, rel_tol=0.03)),
            exercise(Exercise("99.pct", "Gain in percent?", answer=lambda: 42.0, unit="%", rel_tol=0.03)),
            exercise(Exercise("99.route", "Which routing?", answer=lambda: "session",
                              choices=("random", "round_robin", "session"), synonyms={"sticky": "session"}))]
    yield {e.id: e for e in made}
    for e in made:
        _REGISTRY.pop(e.id)


def test_numpy_answers_count_like_python_ones(demos):
    assert check("99.flag", np.False_) and check("99.flag", False) and check("99.flag", "no")
    assert not check("99.flag", np.True_) and not check("99.flag", True)
    for number in (0, np.int64(0), 1, np.int64(1), 2, 0.0):    # a number is no answer to a true/false question
        v = check("99.flag", number)
        assert not v and "true/false question" in v.message and "not a number" in v.message, v.message
    assert check("99.count", np.int64(4)) and check("99.count", np.float64(4.0)) and check("99.count", 4)
    assert check("99.np_count", 7) and check("99.np_count", np.int32(7)) and not check("99.np_count", 8)
    assert check("99.secs", np.float32(2.3)) and check("99.secs", np.array([2.3])) and check("99.secs", np.array(2.3))
    assert check("99.secs", Decimal("2.3")) and check("99.secs", Fraction(23, 10))
    assert check("99.secs", "2.3") and check("99.secs", " 2.3 s ") and check("99.bytes", "327,680")
    assert not check("99.secs", True) and "number" in check("99.secs", True).message
    assert "unit" in check("99.secs", "2.3 GB").message


def test_huge_numbers_and_odd_ids_get_a_verdict_not_an_exception(demos):
    for answer in (10**400, -10**400, 10**30, Decimal("1e400"), Fraction(10**400, 3), 1 + 2j, np.array([1, 2]),
                   object(), b"2.3", {"a": 1}, [2.3], float("nan"), "nan", "inf", "2.3.4", "1e999"):
        v = check("99.secs", answer)
        assert isinstance(v, Verdict) and not v and v.message, answer
    assert "float" in check("99.secs", 10**400).message
    assert isinstance(check("00.prefill_32k", 10**400), Verdict)
    for bad_id in (["00.level"], {"id": 1}, None, 0, 1.5, ("00", "level"), b"00.level", float("nan")):
        v = check(bad_id, 2)
        assert isinstance(v, Verdict) and not v and "string" in v.message, bad_id
    assert check(" 00.level ", 2)


def test_exact_questions_do_not_say_within_zero_percent(demos):
    msg = check("99.count", 5).message
    assert "±0%" not in msg and "exact whole number" in msg
    assert "±0.1%" in check("03.blocks_per_tb", 1).message       # rel_tol 0.001 is not "±0%"


@pytest.mark.parametrize("ex_id,answer,named", [
    ("99.secs", 2280.0, "ms"),                  # ms for s
    ("99.ms", 0.035, "in s instead of ms"),     # s for ms
    ("99.pflop", 5.7e15, "in FLOP instead of PFLOP"),
    ("99.bytes", 320_000, "KiB"),               # 320 KB (decimal) for 320 KiB
    ("99.frac", 25.0, "a fraction (0.3), not a percentage"),
    ("99.pct", 0.42, "a percentage (30), not a fraction"),
    ("99.bytes", 327_680e3, "10³"),
])
def test_unit_slips_get_a_hint_naming_the_unit(demos, ex_id, answer, named):
    v = check(ex_id, answer)
    assert not v and named in v.message, v.message


def test_binary_prefix_hint_only_for_answers_in_bytes(demos):
    """1.024^k off is KB vs KiB only where the unit is bytes: a PFLOP answer 1.024² off (lecture 01's
    Eq. 1 estimate of an 8k prefill, 1.143 for 1.214 PFLOP) is a plain wrong answer, not a unit slip."""
    assert "binary" in check("99.bytes", 327_680 * 1.024 ** 2).message
    for k in (2, -2, 3):
        assert "binary" not in check("99.pflop", 5.7 * 1.024 ** k).message
    v = check("01.prefill_pflop_4k", 1.143)
    assert not v and "binary" not in v.message
    # the closest factor is named: an answer in GiB for GB is 1.024⁻³ off, not 1.024⁻² (both within 3%)
    from mooncake_lab.exercises import list_exercises
    want = next(e for e in list_exercises("05") if e.id == "05.boundary_gb").answer()
    msg = check("05.boundary_gb", want * 1.024 ** -3).message
    assert f"{1.024 ** -3:.4g} times" in msg and f"{1.024 ** -2:.4g} times" not in msg


def test_no_unit_hint_for_a_plain_wrong_answer(demos):
    assert "unit" not in check("99.secs", 3.1).message and "times the expected" not in check("99.secs", 3.1).message


def test_choice_questions_take_synonyms_and_list_the_allowed_answers(demos):
    assert check("99.route", "sticky") and check("99.route", "Session") and check("99.route", "'session'")
    for wrong in ("random", "Round Robin", "round-robin", "affinity", 3, None):
        v = check("99.route", wrong)
        assert not v
        if wrong is not None:
            assert all(c in v.message for c in ("'random'", "'round_robin'", "'session'")), v.message
    assert "is not one of the allowed answers" in check("99.route", "affinity").message


def test_lecture03_routing_question_accepts_the_prose_word_sticky():
    assert check("03.best_routing", "sticky").correct == check("03.best_routing", "session").correct
    v = check("03.best_routing", "nonsense")
    assert "'random', 'round_robin', 'session'" in v.message


_ANSWERS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**300, max_value=10**500),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20), st.binary(max_size=8),
    st.decimals(allow_nan=True, allow_infinity=True), st.fractions(), st.complex_numbers(),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.builds(np.float64, st.floats()), st.builds(np.int64, st.integers(-2**63, 2**63 - 1)),
    st.builds(np.bool_, st.booleans()), st.just(...), st.just(np.array([[1.0]])), st.just(np.array([])),
    st.from_regex(r"\A-?\d{1,6}(\.\d{0,3})? ?(s|ms|GB|KiB|%|tokens|×)?\Z"))
_IDS = st.one_of(st.sampled_from(sorted(e.id for e in list_exercises())), st.text(max_size=12), st.none(),
                 st.integers(), st.lists(st.text(max_size=3), max_size=2), st.floats())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_IDS, _ANSWERS)
def test_check_never_raises_and_always_gives_a_verdict(exercise_id, answer):
    v = check(exercise_id, answer)
    assert isinstance(v, Verdict) and isinstance(v.message, str) and v.message
    assert isinstance(v.correct, bool) and repr(v)


@pytest.fixture
def unit_demos():
    made = [exercise(Exercise("99.ratio", "How many times faster?", answer=lambda: 2.18, unit="×", rel_tol=0.1)),
            exercise(Exercise("99.size", "Bytes read back?", answer=lambda: 2 * 2**20, unit="B", rel_tol=0.01)),
            exercise(Exercise("99.price", "Break-even price?", answer=lambda: 0.05, unit="USD/TB", rel_tol=0.03)),
            exercise(Exercise("99.time", "How long?", answer=lambda: 0.001, unit="s", rel_tol=0.03)),
            exercise(Exercise("99.slo", "What multiple of the SLO?", answer=lambda: 1.5, unit="× SLO", rel_tol=0.03)),
            exercise(Exercise("99.count", "How many tokens?", answer=lambda: 1, unit="tokens", rel_tol=0.0)),
            exercise(Exercise("99.lease", "Which lease?", answer=lambda: "1ms", choices=("1ms", "10s"))),
            exercise(Exercise("99.share", "Share of peak?", answer=lambda: 0.31, unit="(fraction of peak)")),
            exercise(Exercise("99.plain", "Busiest ÷ mean?", answer=lambda: 8.0, rel_tol=0.03)),
            exercise(Exercise("99.many", "Tokens in 1 TB?", answer=lambda: 3_051_758, unit="tokens", rel_tol=0.01))]
    yield
    for e in made:
        _REGISTRY.pop(e.id)


@pytest.mark.parametrize("ex_id, answer", [
    ("99.ratio", "2x"), ("99.ratio", "2X"), ("99.ratio", "2.2 ×"), ("99.ratio", "2 times"), ("99.ratio", 2),
    ("99.size", "2 MiB"), ("99.size", "2,097,152 B"), ("99.size", "2048 KiB"), ("99.size", "0.001953125 GiB"),
    ("99.price", "$0.05"), ("99.price", "US$0.05/TB"), ("99.price", "0.05 USD/TB"), ("99.price", "$0.05/TB"),
    ("99.price", "$0.05 per TB"), ("99.price", "0.05 $/TB"), ("99.price", "0.05 USD"),
    ("99.time", "1 ms"), ("99.time", "0.001 s"), ("99.time", "1000 µs"), ("99.slo", "1.5x SLO"), ("99.slo", "1.5×"),
    ("99.count", "1 token"), ("99.count", "1 tokens"), ("99.lease", "1 ms"), ("99.lease", "1-ms"),
    ("09.changed_sglang", "instance 1"), ("99.share", "31%"), ("99.share", "0.31"),
    ("99.plain", "8x"), ("99.plain", "8×"), ("99.plain", "8"),
    ("99.time", "≈ 1 ms"), ("99.time", "~1 ms"), ("99.time", "about 1 ms"), ("99.price", "≈ $0.05"),
    ("99.price", "5e-5 USD/GB"), ("99.count", "n = 1"), ("99.ratio", "×2.2"), ("99.ratio", "x 2.2"), ("99.plain", "×8"),
    ("99.many", "3.05M tokens"), ("99.ratio", "+118%"), ("99.time", "1 millisecond"),
    ("99.count", "1 tok"), ("99.size", "2,097,152 bytes"), ("99.many", "3.05M"), ("99.many", "3,050k"), ("99.many", "3.05 million tokens"), ("99.time", "t ≈ 1 ms"), ("99.price", "$0.00005/GB"),
])
def test_answers_in_the_unit_the_question_asks_as_a_reader_writes_it(unit_demos, ex_id, answer):
    """The prose writes 2×, 2 MiB, $0.05 and 1 ms: the checks take them as written (and convert a prefixed
    unit of the same kind), so a right answer is not refused for its spelling."""
    v = check(ex_id, answer)
    assert v, v.message


@pytest.mark.parametrize("ex_id, answer, says", [
    ("99.size", "2 MB", "decimal vs binary"),              # converted, and then 5% off: a real slip
    ("99.time", "1 GB", "'GB' is not s nor a unit that converts to it"),
    ("99.time", "1 ks", "'ks' is not s"),                   # no ks, Ms … for a time
    ("99.ratio", "2 s", "'s' is not ×"),
    ("99.price", "0.05 EUR/TB", "'EUR/TB' is not USD/TB"),
    ("99.price", "0.05 USD/GB", "10³ times the expected"),   # converted: 0.05 per GB is 50 per TB
    ("99.lease", "1 s", "not one of the allowed answers"),
    ("99.ratio", "3x", "you gave '3x'"),                    # the answer as typed, not re-printed
    ("99.time", "1M", "'M' is not s"),                      # a count's M is no unit of time
    ("99.many", "3M", "Not quite"),                         # 3,000,000 is 1.7% off: converted, then checked
])
def test_a_unit_that_is_not_the_questions_is_refused_saying_so(unit_demos, ex_id, answer, says):
    v = check(ex_id, answer)
    assert not v and says in v.message, v.message


def test_feedback_says_units_as_a_reader_does(unit_demos):
    assert check("99.ratio", 2.18).message.startswith("Right: 2.18×.")
    assert check("99.slo", 1.5).message.startswith("Right: 1.5× SLO.")
    assert check("99.count", 1).message.startswith("Right: 1 token.")
    assert check("09.changed_sglang", 1).message.startswith("Right: instance 1.")
    assert "you gave instance 2" in check("09.changed_sglang", 2).message
    assert "Expected an instance number" in check("09.changed_sglang", "first").message
    v = check("99.size", 2e6)
    assert "you gave 2,000,000 B" in v.message and "e+06" not in v.message


def test_a_number_may_carry_the_name_its_question_gives_it():
    ex = exercise(Exercise("99.code", "Which return code?", answer=lambda: -800, rel_tol=0.0,
                           synonyms={"TRANSFER_FAIL": -800, "OBJECT_NOT_FOUND": -704}))
    try:
        for right in ("−800 TRANSFER_FAIL", "-800 (TRANSFER_FAIL)", "TRANSFER_FAIL", "transfer_fail", -800, "−800"):
            assert check("99.code", right), right
        for wrong in ("OBJECT_NOT_FOUND", "−704 OBJECT_NOT_FOUND", "−704"):
            assert not check("99.code", wrong), wrong
        assert check("99.code", -800).message.startswith("Right: \u2212800.")   # a minus sign, not a hyphen
    finally:
        _REGISTRY.pop("99.code")


def test_binary_hint_never_states_a_ratio_the_answer_does_not_have(demos):
    """Within a wide tolerance an answer 3-7% off would reach a 1.024^k factor: it is a plain wrong answer,
    and the feedback never calls it '1.049 times' the expected value (issue 25's review of lecture 02)."""
    want = 327_680
    for off in (1.03, 1.06, 0.95, 0.97):
        msg = check("99.bytes", want * off).message
        assert "binary" not in msg, (off, msg)
    msg = check("99.bytes", want * 1.024 ** 2).message
    assert "binary" in msg and f"{1.024 ** 2:.4g} times" in msg
