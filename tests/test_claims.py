"""The claims check (mooncake_lab/claims): every number the course states is recomputed.

For each lecture: each registered claim's text appears where it says, its numbers equal what the package
computes (trace-independent claims with no trace available at all, "released" claims on the released
traces, "stand-in" claims on the offline synthetic stand-in), and — for the lectures whose claims table is
complete — no number in the markdown or exercise strings is left unclaimed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mooncake_lab import claims as C
from mooncake_lab.exercises import list_exercises

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


@pytest.mark.parametrize("c", ALL, ids=[c.id for c in ALL])
def test_claim_text_appears_where_it_says(c):
    places = _places(c.lecture)
    assert c.where in places, f"{c.id}: unknown place {c.where!r} (the notebook or one of {sorted(places)})"
    assert c.text in places[c.where], f"{c.id}: {c.text!r} not found in {c.where} of lecture {c.lecture}"


@pytest.mark.parametrize("c", [c for c in ALL if c.trace in (None, "stand-in")], ids=lambda c: c.id)
def test_claim_is_true_with_no_trace_anywhere(c, isolated_trace_lookup):
    """Trace-independent claims, and claims about the stand-in (what a fresh offline clone shows)."""
    assert C.mismatch(c) is None, C.mismatch(c)


@pytest.mark.parametrize("c", [c for c in ALL if c.trace == "released"], ids=lambda c: c.id)
def test_claim_about_the_released_trace_is_true(c, real_trace_dir, offline_traces):
    assert C.mismatch(c) is None, C.mismatch(c)


@pytest.mark.parametrize("lecture", C.LECTURES)
def test_every_number_is_claimed(lecture):
    mine = C.claims(lecture)
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
