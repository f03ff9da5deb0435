"""Each lecture's main line (its markdown outside ``<details>`` boxes) meets the reading targets:
≤ 2,000 words, mean sentence ≤ 20 words, ≤ 5% of sentences over 40 words (mooncake_lab.prose_load).
Measured on the notebooks as git holds them; the counting rules are checked on hand-worked text."""
from __future__ import annotations

import json

import pytest

from notebook_checks import committed_text
from mooncake_lab import prose_load as P

LECTURES = P.lecture_paths()


def test_the_main_line_leaves_out_boxes_code_math_and_tags():
    md = ("Prefill is slow. <details><summary>Why</summary>\n\nBecause of the 12,031 requests.\n\n</details>\n"
          "The cost is $T = a L^2$ and `simulate(cfg)` returns it. ```python\nx = 1\n```\n"
          "See [the paper](https://arxiv.org/abs/2407.00079) and ![a figure](fig.png).")
    text = P.main_line(md)
    assert "12,031" not in text and "simulate" not in text and "L^2" not in text and "x = 1" not in text
    assert "arxiv" not in text and "figure" not in text and "the paper" in text
    # Prefill is slow (3) · The cost is and returns it (6) · See the paper and (4) = 13 words
    assert P.words(text) == 13


def test_numbers_and_abbreviations_do_not_split_words_or_sentences():
    assert P.words("12,031 requests took 2.7 s (e.g. 40%).") == 7      # "e.g" is a word
    s = P.sentences("Fig. 8 shows it, e.g. at 2.7 s. The next one vs. the last! Is it? Yes.")
    assert s == ["Fig. 8 shows it, e.g. at 2.7 s.", "The next one vs. the last!", "Is it?", "Yes."]


def test_headings_and_tables_are_words_but_not_sentences():
    md = "# The question\n\n| policy | TTFT (s) |\n|---|---|\n| random | 4.4 |\n\nOne sentence here.\n- An item. Two.\n"
    load = P.load_of_text(md)
    assert load.sentences == ("One sentence here.", "An item.", "Two.")
    assert load.words == 2 + 5 + 3 + 3       # heading, table cells (policy TTFT s random 4.4), the two lines


def test_a_long_sentence_is_counted_as_long():
    long = " ".join(["word"] * (P.LONG + 1)) + "."
    load = P.load_of_text(f"{long} Short one.")
    assert load.long == [long] and load.long_share == 0.5 and load.mean_sentence == (P.LONG + 1 + 2) / 2
    assert any("over 40 words" in x for x in load.over_targets())
    assert not P.load_of_text("Short one. Another.").over_targets()


def test_generated_markdown_is_measured_from_the_outputs():
    nb = {"cells": [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/markdown": "The run completed. It took 3 s.",
                                                   "text/plain": "<IPython.core.display.Markdown object>"}}]},
        {"cell_type": "markdown", "source": "Not generated."}]}
    load = P.generated_load(nb)
    assert load.sentences == ("The run completed.", "It took 3 s.") and load.words == 7


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_each_lectures_main_line_meets_the_reading_targets(path):
    """The precision (semantics, paper-vs-ours, the stand-in, presets) belongs in <details> boxes and the
    lecture's assumptions table; the main line stays short: `python -m mooncake_lab.prose_load NN --long`."""
    load = P.load_of_notebook(committed_text(path), path.name)
    assert not load.over_targets(), f"{path.name}: " + "; ".join(load.over_targets())


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_each_lecture_has_its_assumptions_in_one_table_one_click_away(path):
    """One assumptions table per lecture, inside a <details> box, referred to afterwards."""
    cells = [c for c in json.loads(committed_text(path))["cells"] if c["cell_type"] == "markdown"]
    text = "\n".join("".join(c["source"]) for c in cells)
    boxes = [b for b in P._DETAILS.findall(text) if "assumption" in b.lower() and "|" in b]
    assert len(boxes) == 1, f"{path.name}: {len(boxes)} <details> boxes hold an assumptions table (want one)"
    assert text.count("<details") >= 2, f"{path.name}: the precision is not one click away (fewer than 2 boxes)"
