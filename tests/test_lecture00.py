"""Lecture 00 (welcome): the tables the notebook shows read as numbers for people (issue 25)."""
from __future__ import annotations

import re

from mooncake_lab.experiments import l00_welcome as welcome


def _cells(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, re.S)]


def test_request_table_counts_are_integers_and_times_have_units():
    one = welcome.one_request(12_035, 343, preset="ideal")
    t = welcome.request_table(one)
    col = t.iloc[:, 0]
    assert col["prompt (tokens)"] == "12,035" and col["output (tokens)"] == "343"        # not 12035.000000
    assert col["prefill = TTFT (s)"] == f"{one['prefill_s']:.2f}"
    assert col["mean time between tokens (ms)"] == f"{one['tbt_mean_s'] * 1e3:.1f}"
    assert all(re.search(r"\((s|ms|tokens)\)$", k) for k in t.index)


def test_stall_table_labels_and_ratios():
    stall = welcome.coupled_stall([2_000, 32_000])
    cells = _cells(welcome.stall_table(stall, tbt_slo_s=0.1).to_html())
    assert "prompt prefilled (tokens)" in cells and "× the 0.1 s TBT SLO" in cells
    assert "32,000" in cells and "2000" not in cells
    ratio = stall.set_index("prompt_tokens").loc[32_000, "stalled_gap_s"] / 0.1
    assert f"{ratio:,.1f}" in cells
    assert not any("_" in c for c in cells)       # no raw column names (stalled_gap_s)
