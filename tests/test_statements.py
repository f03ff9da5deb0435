"""The statements check (mooncake_lab/claims/statements): every sentence that says what a real system does
names its source, in one place beside the lecture's claims (issue 26 §5).

For each lecture and the Mooncake Store lab: no statement about a named system is left without an entry (the
detector finds none uncovered), every entry's quote occurs where it says (a stale entry fails), and every
source is well formed. Then the detector itself: it catches a planted unsourced sentence, and leaves
headings, code and sentences naming no system alone.
"""
from __future__ import annotations

import pytest

from mooncake_lab.claims import statements as S
from mooncake_lab.validate import InputError


def _module(lecture: str) -> str:
    return f"mooncake_lab/claims/statements/{'lab' if lecture == 'lab' else 'lecture' + lecture}.py"


@pytest.mark.parametrize("lecture", S.PLACES)
def test_every_statement_about_a_system_names_its_source(lecture):
    places = S.places(lecture)
    missing = S.missing(lecture)
    lines = [S.suggest(lecture, where, sentence, places[where]) for where, found in missing.items() for sentence in found]
    assert not lines, (
        f"{len(lines)} sentence(s) of lecture {lecture} state what a real system does but name no source. Add to "
        f"{_module(lecture)} one line each, with the paper's § / Fig. / Table / Algorithm, owner/repo@<commit>:path or "
        f"an https URL as the source (or not_a_statement(quote, why) if it states nothing about the real system):\n"
        + "\n".join(lines))


@pytest.mark.parametrize("lecture", S.PLACES)
def test_every_quote_occurs_where_it_says(lecture):
    bad = S.stale(lecture)
    assert not bad, (f"{len(bad)} entr(y/ies) of {_module(lecture)} no longer match the lecture (update the quote and "
                     f"check the source still says it): {bad}")


def test_every_lecture_has_entries_and_every_source_is_well_formed():
    for lecture in S.PLACES:
        assert S.statements(lecture), f"no statements registered for {lecture}"
    for st in S.statements():
        assert S.source_problem(st.source) is None, (st.lecture, st.quote, S.source_problem(st.source))
        assert all(s in S.SYSTEMS for s in st.systems)


@pytest.mark.parametrize("source", [
    "FAST'25 §4.2", "arXiv 2407.00079 v3 Fig. 8", "arXiv 2407.00079 v3 Algorithm 1", "FAST'25 Fig. 6 and 7",
    "arXiv 2407.00079 v3 §7.1 and 7.4", "FAST'25 Table 2; arXiv 2407.00079 v3 Table 1",
    "ai-dynamo/dynamo@07a6c9ce:lib/kv-router/src/scheduling/selector/mod.rs (random among exact ties; not the classic)",
    "https://docs.vllm.ai/en/latest/features/mooncake_connector_usage/"])
def test_well_formed_sources_pass(source):
    assert S.source_problem(source) is None


@pytest.mark.parametrize("source, why", [
    ("", "non-empty"), ("the paper", "not a paper's place"), ("FAST'25", "not a paper's place"),
    ("Mooncake paper §4", "not a paper's place"), ("ai-dynamo/dynamo:lib/x.rs", "not a paper's place"),
    ("ai-dynamo/dynamo@main:lib/x.rs", "not a paper's place"), ("ai-dynamo/dynamo@07a6c9c", "not a paper's place"),
    ("http://docs.vllm.ai/x", "not a paper's place"), ("../shared/reference/routers.md", "points into ../shared"),
    ("FAST'25 §4.2; shared/reference/mooncake_paper.md", "points into ../shared"),
    ("/work/shared/reference/routers.md", "points into ../shared")])
def test_malformed_sources_are_refused(source, why):
    assert why in (S.source_problem(source) or "")


def test_a_statement_with_a_malformed_source_is_refused_naming_it():
    with pytest.raises(InputError, match=r"statement '09' 'Dynamo picks'.source: got '\.\./shared/reference/routers\.md'"):
        S.Statement("09", "Dynamo picks", "../shared/reference/routers.md")
    with pytest.raises(InputError, match=r"statement '10'.lecture"):
        S.Statement("10", "Dynamo picks", "FAST'25 §4.2")
    with pytest.raises(InputError, match=r"systems: got 'Dynamo'"):
        S.Statement("09", "Dynamo picks", "FAST'25 §4.2", systems="Dynamo")
    with pytest.raises(InputError, match=r"systems"):
        S.Statement("09", "Dynamo picks", "FAST'25 §4.2", systems=("Dynamo2",))
    with pytest.raises(InputError, match=r"why: got 'two\\nlines'"):
        S.NotAStatement("09", "we compare with vLLM", "two\nlines")


LECTURE = """# 09 · Dynamo's router

Mooncake's Conductor is our baseline. We compare with vLLM.
Dynamo's router scores each worker by its prefill and decode blocks, e.g. a cost in blocks.

| router | rule |
|---|---|
| `dynamo` | argmin cost |
| `aibrix` | least loaded |

```python
Dynamo picks argmin  # code: not a sentence
```
<details><summary>What Dynamo does</summary>

The router notes give each rule. AIBrix's threshold is 8 at the commit we read.

</details>
"""


def test_detector_catches_a_planted_unsourced_sentence():
    found = S.unsourced(LECTURE, [])
    assert "Dynamo's router scores each worker by its prefill and decode blocks, e.g. a cost in blocks." in found
    assert "| `dynamo` | argmin cost |" in found and "| `aibrix` | least loaded |" in found
    assert "AIBrix's threshold is 8 at the commit we read." in found        # inside <details> too
    assert "Mooncake's Conductor is our baseline." in found
    # a heading, code, the table's header, the summary line and a sentence naming no system are not statements
    assert not any(s.startswith(("#", "Dynamo picks", "| router", "<details")) for s in found)
    assert "The router notes give each rule." not in found
    # the heuristic is broad: "we compare with vLLM" has a verb, so it is declared with not_a_statement
    assert "We compare with vLLM." in found
    assert len(found) == 6, found


def test_an_entry_covers_the_sentence_its_quote_lies_in_and_only_that():
    quotes = ["Dynamo's router scores each worker", "`dynamo` | argmin", "AIBrix's threshold is 8",
              "Mooncake's Conductor is our baseline. We compare with vLLM."]    # a quote may span sentences
    assert S.unsourced(LECTURE, quotes) == ["| `aibrix` | least loaded |"]
    with pytest.raises(InputError, match=r"unsourced\.quotes: got 'Dynamo'"):
        S.unsourced(LECTURE, "Dynamo")


def test_the_failure_message_says_what_to_paste():
    text = "Dynamo's router scores each worker by its prefill and decode blocks."
    line = S.suggest("09", "notebook", text, text)
    assert line.startswith("statement('09', \"Dynamo's router scores each worker\", ")
    assert "systems=('Dynamo',)" in line and "SOURCE" in line
    assert "where='09.x'" in S.suggest("09", "09.x", text, text)


def test_systems_are_named_as_the_lectures_spell_them():
    assert S.systems_in("vLLM V1 always chunks") == ["vLLM"]
    assert S.systems_in("the llm-d router and `prodstack_kv` and SGLang's gateway") == ["SGLang", "llm-d",
                                                                                        "production-stack"]
    assert S.systems_in("the real Mooncake Store and its Transfer Engine") == ["Mooncake Store", "Transfer Engine"]
    assert S.systems_in("FAST'25 §4.2 says") == ["Mooncake paper"] and S.systems_in("the paper's Fig. 8") == ["Mooncake paper"]
    assert S.systems_in("see [the notes](https://github.com/ai-dynamo/dynamo)") == []   # a link target names nothing
    assert S.systems_in("A router scores the instances") == []


def test_sentences_keep_abbreviations_whole():
    text = "Dynamo picks argmin, e.g. the idle one. Fig. 8 shows it.\n\n# Heading with Dynamo\n"
    spans = [text[a:b] for a, b, _ in S.sentence_spans(text)]
    assert spans == ["Dynamo picks argmin, e.g. the idle one.", "Fig. 8 shows it."]


def test_registry_refuses_a_quote_registered_twice_with_another_source():
    S.statements()                         # load the registry
    st = S.statements("09")[0]
    with pytest.raises(InputError, match="registered twice"):
        S.statement(st.lecture, st.quote, "FAST'25 §1", where=st.where)
    with pytest.raises(InputError, match="registered twice"):
        S.not_a_statement(st.lecture, st.quote, "not one", where=st.where)
    with pytest.raises(InputError, match=r"restate\.quote"):
        S.restate("09", "solutions", "no such quote at all")
