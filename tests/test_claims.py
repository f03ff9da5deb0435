"""The claims check (mooncake_lab/claims): every number the course states is recomputed.

For each lecture: each registered claim's text appears where it says, its numbers equal what the package
computes (trace-independent claims with no trace available at all, "released" claims on the released
traces, "stand-in" claims on the offline synthetic stand-in), no claim's value is a bare literal, each
declared non-claim occurs where it says, and — for the lectures whose claims table is complete — no number
in the markdown or exercise strings is left unclaimed. Then the API's refusals of bad input.
"""
from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np
import pytest

from mooncake_lab import claims as C
from mooncake_lab.exercises import list_exercises
from mooncake_lab.validate import InputError

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _notebook(lecture: str) -> Path:
    (path,) = NOTEBOOKS.glob(f"{lecture}_*.ipynb")
    return path


def _places(lecture: str) -> dict[str, str]:
    lec = _notebook(lecture)
    out = {"notebook": C.markdown_of(lec), "solutions": C.solutions_of(NOTEBOOKS / "solutions" / lec.name, lec)}
    for ex in list_exercises(lecture):
        out[ex.id] = C.exercise_text(ex)
    return out


ALL = C.claims()
NON = C.non_claims()


@pytest.mark.parametrize("c", ALL, ids=[c.id for c in ALL])
def test_claim_text_appears_where_it_says(c):
    places = _places(c.lecture)
    assert c.where in places, f"{c.id}: unknown place {c.where!r} (the notebook or one of {sorted(places)})"
    assert c.text in places[c.where], f"{c.id}: {c.text!r} not found in {c.where} of lecture {c.lecture}"


@pytest.mark.parametrize("n", NON, ids=[n.id for n in NON])
def test_non_claim_text_appears_where_it_says(n):
    places = _places(n.lecture)
    assert n.where in places, f"{n.id}: unknown place {n.where!r} (the notebook or one of {sorted(places)})"
    assert n.text in places[n.where], f"{n.id}: {n.text!r} not found in {n.where} of lecture {n.lecture}"


def _is_literal(fn) -> bool:
    """True if ``fn`` can only return constants: its code (and nested code) reads no global, attribute or
    free variable (``lambda: 1024``, ``lambda: [2, 8]``): such a claim could never fail."""
    code = getattr(fn, "__code__", None)
    if code is None or getattr(fn, "__closure__", None):
        return False
    todo = [code]
    while todo:
        co = todo.pop()
        if co.co_names or co.co_freevars:
            return False
        todo += [k for k in co.co_consts if isinstance(k, types.CodeType)]
    return True


def test_no_claim_value_is_a_bare_literal():
    bare = [c.id for c in ALL if _is_literal(c.value)]
    assert not bare, (f"{len(bare)} claim(s) whose value() is a literal typed from the text (compute it from the "
                      f"code, or declare a number that states no quantity with not_a_claim): {bare}")


def test_the_literal_check_tells_literals_from_computations():
    assert all(map(_is_literal, [lambda: 1024, lambda: [2, 8], lambda: (512, 80), lambda: 4 - 1]))
    assert not any(map(_is_literal, [lambda: C.LECTURES, lambda: len("ab"), len, (lambda k: lambda: k)(3)]))


@pytest.mark.parametrize("c", [c for c in ALL if c.trace in (None, "stand-in")], ids=lambda c: c.id)
def test_claim_is_true_with_no_trace_anywhere(c, isolated_trace_lookup):
    """Trace-independent claims, and claims about the stand-in (what a fresh offline clone shows)."""
    assert C.mismatch(c) is None, C.mismatch(c)


@pytest.mark.parametrize("c", [c for c in ALL if c.trace == "released"], ids=lambda c: c.id)
def test_claim_about_the_released_trace_is_true(c, real_trace_dir, offline_traces):
    assert C.mismatch(c) is None, C.mismatch(c)


@pytest.mark.parametrize("lecture", C.LECTURES)
def test_every_number_is_claimed(lecture):
    mine = C.claims(lecture) + C.non_claims(lecture)
    missing = {where: C.unclaimed(text, [c.text for c in mine if c.where == where])
               for where, text in _places(lecture).items()}
    missing = {k: v for k, v in missing.items() if v}
    n = sum(map(len, missing.values()))
    if lecture not in C.COMPLETE:
        pytest.skip(f"lecture {lecture}'s claims table is not complete yet: {n} numbers unclaimed")
    assert not missing, f"{n} unclaimed numbers in lecture {lecture}: {missing}"


def test_number_parser_reads_what_a_student_reads():
    assert C.numbers_in("12,031 requests, 2.7 s, 82–94%, 10⁻³, −5 °C, 2.039e12 B/s") == [
        12031, 2.7, 82, 94, 0.001, -5, 2.039e12]
    refs = "Fig. 8, Figs 1, 6 and 7, §7.2, §5.1–5.2, lectures 04–08, Q5, arXiv 2407.00079 v3, `n=8`, LLaMA2-70B, H800"
    assert C.unclaimed(refs, []) == []
    assert len(C.unclaimed("8 prefill nodes at 2× speed", [])) == 2
    assert C.unclaimed("8 prefill nodes at 2× speed", ["8 prefill nodes at 2×"]) == []


def test_solutions_place_is_what_the_worked_answers_add(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    shared = "# Lecture\n\nA node holds 1.47 M tokens."
    lec, sol = tmp_path / "lec.ipynb", tmp_path / "sol.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell(shared), new_code_cell("x = 1  # not a line")]), lec)
    nbformat.write(new_notebook(cells=[
        new_markdown_cell(shared), new_markdown_cell("*Worked answer.* ≈ 172 requests"),
        new_code_cell("  # 1.34 M tokens\ny = 2 * 3\n#12,000 → 122"), new_code_cell("z = 4")]), sol)
    text = C.solutions_of(sol, lec)
    assert text == "*Worked answer.* ≈ 172 requests\n\n# 1.34 M tokens\n#12,000 → 122"
    assert len(C.unclaimed(text, ["≈ 172 requests", "1.34 M tokens"])) == 2  # 12,000 and 122
    assert C.unclaimed(text, ["≈ 172 requests", "1.34 M tokens", "12,000 → 122"]) == []


def test_mismatch_uses_the_printed_precision():
    c = C.Claim("99.x", "takes ≈ 2.7 s", lambda: 2.68)
    assert C.mismatch(c) is None
    assert C.mismatch(C.Claim("99.x", "2.039e12 B/s", lambda: 2.0394e12)) is None
    assert C.mismatch(C.Claim("99.x", "2.039e12 B/s", lambda: 2.041e12)) is not None
    assert "computed 2.8" in C.mismatch(C.Claim("99.x", "takes ≈ 2.7 s", lambda: 2.8))
    assert C.mismatch(C.Claim("99.x", "≈ 140 GFLOP", lambda: 137.4, rel_tol=0.05)) is None
    assert "2 number(s)" in C.mismatch(C.Claim("99.x", "8P+8D", lambda: 8))
    assert C.mismatch(C.Claim("99.x", "Eq. 1 says 1.14", lambda: 1.14)) is None  # "Eq. 1" is a reference


# ----------------------------------------------------------------------------------------------
# the API refuses bad input, naming the field and the claim
# ----------------------------------------------------------------------------------------------
def _c(value=lambda: 2.7, text="takes ≈ 2.7 s", **kw):
    return C.Claim("99.x", text, value, **kw)


@pytest.mark.parametrize("tol", [math.inf, math.nan, 1, 1.5, -0.01, "0.1", True])
def test_rel_tol_is_a_finite_number_in_0_1(tol):
    with pytest.raises(InputError, match=r"claim 99\.x\.rel_tol: got"):
        _c(rel_tol=tol)
    assert C.mismatch(_c(value=lambda: 2.8, rel_tol=0.05)) is None and _c(rel_tol=0).rel_tol == 0


def test_claim_fields_are_checked():
    with pytest.raises(InputError, match=r"claim\.id: got '4\.x'"):
        C.Claim("4.x", "2.7 s", lambda: 2.7)
    with pytest.raises(InputError, match=r"claim 99\.x\.trace: got 'real'"):
        _c(trace="real")
    with pytest.raises(InputError, match=r"claim 99\.x\.value: got 2\.7"):
        _c(value=2.7)
    with pytest.raises(InputError, match=r"claim 99\.x\.text: got 'see Fig\. 8'"):
        _c(text="see Fig. 8")


@pytest.mark.parametrize("result, kind", [
    (None, "None"), ({"a": 1}, "a dict"), (np.zeros((2, 2)), r"a 2-D array of shape \(2, 2\)"),
    ((x for x in [2.7]), "a generator"), ("2.7", "a str"), (True, "a bool")])
def test_value_of_another_kind_is_refused_naming_the_claim(result, kind):
    with pytest.raises(InputError, match=rf"claim 99\.x: value\(\) returned {kind}[ ;].*allowed: a number or a list"):
        C.mismatch(_c(value=lambda: result))


def test_value_elements_must_be_numbers_and_arrays_are_read():
    with pytest.raises(InputError, match=r"claim 99\.x: value\(\)\[1\] is None"):
        C.mismatch(_c(value=lambda: [2.7, None], text="2.7 s and 3 s"))
    assert C.values(_c(value=lambda: np.array([2.7, 3]))) == [2.7, 3.0]
    assert C.mismatch(_c(value=lambda: np.float64(2.7))) is None and C.mismatch(_c(value=lambda: np.array(2.7))) is None


def test_an_error_inside_value_names_the_claim_and_is_chained():
    with pytest.raises(C.ClaimError, match=r"claim 99\.x: value\(\) raised ZeroDivisionError") as info:
        C.mismatch(_c(value=lambda: 1 / 0))
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_claims_of_a_lecture_by_str_or_int_and_unknown_refused():
    nine = C.claims("09")
    assert nine and C.claims(9) == nine and C.claims("9") == nine and C.non_claims(9) == C.non_claims("09")
    for bad in ("10", 10, "lab", "009", 9.0, True, "４"):
        with pytest.raises(InputError, match=r"claims\.lecture: got .*allowed: None or one of 00, 01"):
            C.claims(bad)


def test_unclaimed_refuses_one_str_for_the_snippets():
    with pytest.raises(InputError, match=r"unclaimed\.texts: got '12 s'; allowed: a list of snippets"):
        C.unclaimed("it takes 12 s", "12 s")
    with pytest.raises(InputError, match=r"unclaimed\.texts\[1\]: got ''"):
        C.unclaimed("it takes 12 s", ["12 s", ""])
    assert C.unclaimed("it takes 12 s", ["12 s"]) == [] and C.unclaimed("it takes 12 s", (t for t in ["12 s"])) == []


def test_restate_of_an_unknown_id_names_it_and_near_matches():
    with pytest.raises(InputError, match=r"restate\.id: got '04\.pk_formla'; .*near matches: 04\.pk_formula"):
        C.restate("solutions", "04.pk_formla")


def test_malformed_grouped_number_is_refused_not_split():
    for text in ("1,00,000 requests", "tokens 1,2 and 3"):
        with pytest.raises(InputError, match=r"number_spans\.text\[\d+\]: got '1,(00,000|2)'"):
            C.numbers_in(text)
    assert C.numbers_in("1,000,000 and 100000") == [1e6, 1e5]
    assert len(C.unclaimed("`f(1,2)` then 5 s", [])) == 1  # inside code it is left alone


def test_non_claims_are_checked_and_kept_apart_from_claims():
    with pytest.raises(InputError, match=r"not_a_claim 99\.x\.why: got 'two\\nlines'"):
        C.NotAClaim("99.x", "turn 2", "two\nlines")
    with pytest.raises(InputError, match=r"not_a_claim 99\.x\.text: got 'Fig\. 8'"):
        C.NotAClaim("99.x", "Fig. 8", "a reference")   # NOT_CLAIMS skips it already
    with pytest.raises(InputError, match=r"'01\.kv_formula' registered twice"):
        C.not_a_claim("01.kv_formula", "2 (K and V)", "a formula")
    assert {n.id for n in NON}.isdisjoint(c.id for c in ALL)


def test_helpers_read_the_code():
    from mooncake_lab.experiments import l01_roofline as ex
    assert C.default_of(ex.decode_ridge_batch, "context_per_seq") == 1024
    with pytest.raises(InputError, match=r"default_of\(decode_ridge_batch\)\.name: got 'context'.*context_per_seq"):
        C.default_of(ex.decode_ridge_batch, "context")
    assert C.answer_of("01.kv_bytes") == 640     # 320 KiB per token × 2,048 tokens, in MiB
    with pytest.raises(InputError, match=r"answer_of\.exercise_id: got '01\.kv_byte'.*01\.kv_bytes"):
        C.answer_of("01.kv_byte")
    assert C.notebook_arg("05", "l05.gantt", "x") == 4
    with pytest.raises(InputError, match=r"notebook_arg\.call: got 'l05\.nothing\(… x=…\)'"):
        C.notebook_arg("05", "l05.nothing", "x")
    assert C.when(True, 8) == 8 and math.isnan(C.when(False, 8))
