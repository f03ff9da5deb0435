"""Every statement the course makes about a real system names its source, in one place.

:mod:`mooncake_lab.claims` recomputes every *number* a lecture states. This module does the same job for
*statements*: a sentence saying what a paper, a router, an engine or the real Mooncake store does ("vLLM
V1 always chunks …", "Dynamo's router scores …", "Algorithm 1 rejects …", "the paper says …") is
registered here, beside the lecture's claims, as a :class:`Statement`: a ``quote`` exactly as it appears
in the lecture (a substring of the sentence, matched as the number claims are: the same places, read by
:func:`~mooncake_lab.claims.markdown_of`, :func:`~mooncake_lab.claims.solutions_of` and
:func:`~mooncake_lab.claims.exercise_text`) and the ``source`` a student can open::

    statement("09", "ties go to the smaller tree, then at random",
              "ai-dynamo/dynamo@07a6c9ce:lib/kv-router/src/scheduling/selector/mod.rs")

The entries live in ``claims/statements/lectureNN.py`` (``lab.py`` for the Mooncake Store lab), one
module a lecture, as the claims live in ``claims/lectureNN.py``. ``tests/test_statements.py`` checks that
each quote occurs where it says (a stale entry fails), that each source is well formed (:func:`source_problem`)
and that no sentence of a lecture that states something about a named system is left without an entry
(:func:`unsourced`); its failure message prints the ``statement(...)`` line to paste.

**Sources** (:func:`source_problem`), one or more separated by ``"; "``, each optionally followed by a
note in parentheses:

* a paper's place: a paper of :data:`PAPERS` and a locator — ``"FAST'25 §4.2"``, ``"arXiv 2407.00079 v3
  Fig. 8"``, ``"arXiv 2407.00079 v3 Algorithm 1"``, ``"Splitwise (ISCA'24) §3"``;
* a repository file at a commit: ``"owner/repo@<7-40 hex>:path"``;
* a documentation page: ``"https://…"``.

Nothing may point into ``../shared`` (or any absolute or parent path): a student's clone does not have it.

**The detector** (:func:`is_statement`) — a simple heuristic, on purpose:

* the text is cut into blocks — paragraphs, list items, block quotes and table rows (a row is one block);
  headings, table header rows, ``<details>``/``<summary>`` lines and fenced code are labels or code, not
  sentences — and each block into sentences after ".", "!" or "?" and a space, keeping "e.g.", "Fig." …
  whole (:mod:`mooncake_lab.prose_load`'s rule);
* a sentence *names a system* when it matches one of :data:`SYSTEMS` outside link targets, URLs and HTML
  tags (inside inline code too: the lecture 09 tables name routers as ```dynamo```);
* it *states what the system does* when it contains a verb of :data:`VERBS` (auxiliaries, "is", "has",
  and the verbs lectures use for what systems do: picks, sends, scores, rejects, chunks, …, in any
  inflection), or when it is a table body row (a row pairs a system with what it does).

Its limits: a sentence whose only verb is not in :data:`VERBS` is missed (add the verb); a sentence about
the course's own simulation that names a system ("we give SGLang the least loaded") is caught although
it states nothing about the real system — declare it with :func:`not_a_statement` and the reason, as
:func:`~mooncake_lab.claims.not_a_claim` declares a number that is no quantity; a system the text names
by a word :data:`SYSTEMS` does not list (a model, a GPU) is not a system here — numbers about those are
claims. A heading is never a statement, so a heading that asserts something must be said again in prose.

A sentence is *covered* when an occurrence of an entry's quote (statement or non-statement, same lecture
and place) lies inside it, or it lies inside an occurrence (a quote may span sentences).
"""
from __future__ import annotations

import dataclasses
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ... import validate as v
from ...prose_load import _ABBREVIATIONS, _END
from .. import LECTURES, NOTEBOOKS, _covered, exercise_text, markdown_of, register, solutions_of

__all__ = ["Statement", "NotAStatement", "statement", "not_a_statement", "statements", "non_statements",
           "restate", "SYSTEMS", "PAPERS", "VERBS", "PLACES", "systems_in", "sentence_spans", "is_statement",
           "unsourced", "missing", "suggest", "source_problem", "places", "stale"]

#: Where statements are registered: the lectures and the Mooncake Store lab.
PLACES = LECTURES + ("lab",)

#: The real systems the lectures state things about: name → the words that name it (regular expressions,
#: case-sensitive). One place: a new system is added here, with every spelling the lectures use.
SYSTEMS: dict[str, str] = {
    "Mooncake paper": r"\b[Tt]he (?:Mooncake )?papers?(?:'s|’s|')?(?!\w)|\bFAST ?'25\b|\barXiv\b|\bAlgorithm 1\b",
    "Mooncake": r"\bMooncake(?:'s|’s)?\b(?! [Ss]tore)(?! lab)|\bConductor\b|\bMessenger\b",
    "Mooncake Store": r"\bMooncake [Ss]tore\b|\bMooncakeDistributedStore\b|\bmooncake_master\b|\bmooncake-transfer-engine\S*",
    "Transfer Engine": r"\bTransfer Engine\b|\bTransferEngine\b",
    "Kimi": r"\bKimi\b|\bMoonshot\b",
    "vLLM": r"\bvLLM\b|\bMooncakeConnector\b",
    "SGLang": r"\bSGLang(?:'s)?\b|\bsglang\b|\bsgl-router\b|\bsgl-model-gateway\b|\bSMG\b|\bHiCache\b",
    "Dynamo": r"\bDynamo\b|\bdynamo\b",
    "llm-d": r"\bllm-d\b|\bllmd\b",
    "AIBrix": r"\bAIBrix\b|\baibrix\b",
    "production-stack": r"\bproduction-stack\b|\bproduction stack\b|\bprodstack_\w+",
    "Preble": r"\bPreble\b|\bpreble\b",
    "DistServe": r"\bDistServe\b",
    "Splitwise": r"\bSplitwise(?:Sim)?\b",
    "Sarathi-Serve": r"\bSarathi(?:-Serve)?\b",
    "LMCache": r"\bLMCache\b",
    "Vidur": r"\bVidur\b",
    "BLIS": r"\bBLIS\b",
    "FlashAttention": r"\bFlashAttention(?:-\d)?\b",
}
_SYSTEM_RES = {name: re.compile(p) for name, p in SYSTEMS.items()}

#: Papers a source may cite by name (then a locator: § / Fig. / Table / Eq. / Algorithm / line / abstract).
PAPERS: dict[str, str] = {
    "arXiv 2407.00079 v1": "Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving, v1",
    "arXiv 2407.00079 v3": "Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving, v3",
    "FAST'25": "Mooncake: Trading More Storage for Less Computation (USENIX FAST'25)",
    "DistServe (OSDI'24)": "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized LLM Serving",
    "Splitwise (ISCA'24)": "Splitwise: Efficient Generative LLM Inference Using Phase Splitting",
    "Sarathi-Serve (OSDI'24)": "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve",
    "Preble (ICLR'25)": "Preble: Efficient Distributed Prompt Scheduling for LLM Serving (arXiv 2407.00023)",
    "FlashAttention-2 (Dao 2023)": "FlashAttention-2: Faster Attention with Better Parallelism (arXiv 2307.08691)",
    "DeepSeek-V3 (arXiv 2412.19437)": "DeepSeek-V3 Technical Report",
    "Vidur (MLSys'24)": "Vidur: A Large-Scale Simulation Framework for LLM Inference",
}
_LOCATOR = (r"(?:§\s?\d+(?:\.\d+)*(?:[–-]\d+(?:\.\d+)*)?|Figs?\.\s?\d+[a-z]?|Tables?\s\d+|Eq\.\s?\d+|"
            r"Algorithm\s\d+(?:,?\s(?:lines?|l\.)\s\d+(?:[–-]\d+)?)?|abstract)")
_PAPER_SRC = re.compile(r"(?:" + "|".join(re.escape(p) for p in PAPERS) + r"),?\s" + _LOCATOR
                        + r"(?:(?:,\s?|\s?and\s|\s?&\s)(?:" + _LOCATOR + r"|\d+(?:\.\d+)*[a-z]?))*")
_REPO_SRC = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+@[0-9a-f]{7,40}:[^\s;()]+")
_URL_SRC = re.compile(r"https://[^\s;()]+\.[^\s;()]+")
_NOTE = re.compile(r"(?:\s\([^()]*(?:\([^()]*\)[^()]*)*\))?")
_FORBIDDEN = re.compile(r"\.\./|(?<![\w/])shared/|^/|\s/|/work/")

#: Verbs that make a sentence naming a system a statement about it (any inflection: -s, -es, -ed, -ing, and
#: the irregular forms listed). Auxiliaries and "is"/"has" catch most; the rest are what systems *do*.
VERBS = (
    "is are was were be been being isn't aren't has have had does do did doesn't don't can cannot can't could "
    "will would may might must should shall "
    "accept add adjust admit allow apply ask assume balance beat become begin break bring build cache call "
    "cap change check choose chose chosen chunk claim come compare compute count credit cut decide decode "
    "default define depend describe differ discount document double drop ends estimate evict expose fall "
    "fell fetch find found fit fix follow forward gain get give given go goes gone grow guess handle hash "
    "hide hid hold held ignore implement improve include keep kept know knew known land lead leave left let "
    "limit list load look lose lost lower make made map match mean meant measure meet met migrate miss move "
    "need note offer overlap pay paid pick pipeline place plot predict prefer prefill prioriti[sz]e prove "
    "provide publish put queue raise reach read recommend record reduce refuse reject rely remain replay "
    "replicate report require reserve return reuse route run ran save say said schedule score see seen "
    "select send sent serve set ship show shown shrink sort spend spent split spread start state stay "
    "stop store support switch take took taken tell told test think tie track trade treat trigger try tried "
    "turn update use wait want weigh win won work write wrote written yield"
).split()
_IRREGULAR = {"is", "are", "was", "were", "be", "been", "being", "isn't", "aren't", "has", "have", "had",
              "does", "do", "did", "doesn't", "don't", "can", "cannot", "can't", "could", "will", "would",
              "may", "might", "must", "should", "shall", "goes", "ends"}
_VERB_RE = re.compile(r"(?<![\w'-])(?:" + "|".join(
    re.escape(w) if w in _IRREGULAR else w + r"(?:s|es|ed|d|ing|ies)?" for w in VERBS) + r")(?![\w'-])")

# What is not prose: fenced code, link targets, URLs, HTML tags (names inside inline code do count).
_NOT_PROSE = tuple(re.compile(p, re.S) for p in (r"```.*?```", r"\]\([^)\s]*\)", r"https?://\S+", r"<[^>\n]*>"))
_CODE = re.compile(r"`[^`\n]*`")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


# ----------------------------------------------------------------------------------------------
# the registry
# ----------------------------------------------------------------------------------------------
def _place(lecture, where: str) -> str:
    if not isinstance(lecture, str) or lecture not in PLACES:
        raise v.fail("lecture", lecture, f"one of {', '.join(PLACES)} (a str)", where)
    return lecture


def _text(x, name: str, where: str) -> str:
    if not isinstance(x, str) or not x.strip():
        raise v.fail(name, x, "a non-empty str", where)
    return x


def _placed(entry, kind: str) -> str:
    """Check an entry's ``lecture``, ``quote`` and ``where``; the name its errors use (``kind`` 'lecture')."""
    w = f"{kind} {entry.lecture!r}"
    _place(entry.lecture, w)
    _text(entry.quote, "quote", w)
    _text(entry.where, "where", w)
    return w


@dataclass(frozen=True)
class Statement:
    """A statement about a real system: ``quote`` (exactly as in the lecture, inside the sentence it covers),
    its ``source`` (see :func:`source_problem`), the ``systems`` it is about (names of :data:`SYSTEMS`;
    empty = those its sentence names) and ``where``: ``"notebook"``, ``"solutions"`` or an exercise id."""

    lecture: str
    quote: str
    source: str
    systems: tuple[str, ...] = ()
    where: str = "notebook"

    def __post_init__(self):
        w = _placed(self, "statement")
        if not isinstance(self.source, str):
            raise v.fail("source", self.source, "a str", w)
        if isinstance(self.systems, str) or not all(s in SYSTEMS for s in self.systems):
            raise v.fail("systems", self.systems, f"a tuple of names of SYSTEMS ({', '.join(SYSTEMS)})", w)
        problem = source_problem(self.source)
        if problem:
            raise v.fail("source", self.source, problem, f"{w} {self.quote[:40]!r}")


@dataclass(frozen=True)
class NotAStatement:
    """A sentence the detector takes for a statement about a real system but which is not one — it is
    about the course's simulation, or only names the system — with ``why`` (one line)."""

    lecture: str
    quote: str
    why: str
    where: str = "notebook"

    def __post_init__(self):
        w = _placed(self, "not_a_statement")
        if not isinstance(self.why, str) or not self.why.strip() or "\n" in self.why:
            raise v.fail("why", self.why, "a one-line reason", w)


_REGISTRY: dict[tuple[str, str, str], Statement] = {}
_NON: dict[tuple[str, str, str], NotAStatement] = {}


def _register(entry, registry: dict, other: dict):
    return register(entry, (entry.lecture, entry.where, entry.quote), registry, other,
                    f"{entry.quote!r} ({entry.lecture}, {entry.where})")


def statement(lecture: str, quote: str, source: str, systems: Iterable[str] = (), where: str = "notebook") -> Statement:
    """Register a statement about a real system (see :class:`Statement`)."""
    if isinstance(systems, str):
        systems = (systems,)
    return _register(Statement(lecture, quote, source, tuple(systems), where), _REGISTRY, _NON)


def not_a_statement(lecture: str, quote: str, why: str, where: str = "notebook") -> NotAStatement:
    """Register a sentence that names a system but states nothing about the real one, with the reason."""
    return _register(NotAStatement(lecture, quote, why, where), _NON, _REGISTRY)


def restate(lecture: str, where: str, *quotes: str) -> None:
    """Register statements (or non-statements) of ``lecture``'s notebook again for ``where`` (the solutions
    notebook repeats the lecture's text): the same quote and source. An unknown quote is refused."""
    for q in quotes:
        key = (lecture, "notebook", q)
        reg = _REGISTRY if key in _REGISTRY else _NON if key in _NON else None
        if reg is None:
            raise v.fail("quote", q, f"a quote registered for lecture {lecture}'s notebook", "restate")
        _register(dataclasses.replace(reg[key], where=where), reg, _NON if reg is _REGISTRY else _REGISTRY)


def _load() -> None:
    for nn in PLACES:
        name = f"{__name__}.{'lab' if nn == 'lab' else 'lecture' + nn}"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise


def statements(lecture: str | None = None) -> list[Statement]:
    """Registered statements, optionally of one lecture (``"04"``, or ``"lab"``)."""
    if lecture is not None:
        _place(lecture, "statements")
    _load()
    return [s for k, s in sorted(_REGISTRY.items()) if lecture is None or s.lecture == lecture]


def non_statements(lecture: str | None = None) -> list[NotAStatement]:
    """Registered :class:`NotAStatement` sentences, optionally of one lecture."""
    if lecture is not None:
        _place(lecture, "non_statements")
    _load()
    return [s for k, s in sorted(_NON.items()) if lecture is None or s.lecture == lecture]


# ----------------------------------------------------------------------------------------------
# sources
# ----------------------------------------------------------------------------------------------
def _parts(source: str) -> list[str]:
    """``source`` split at each "; " outside parentheses (a note may hold one)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(source):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and source.startswith("; ", i):
            parts.append(source[start:i])
            start = i + 2
    return parts + [source[start:]]


def source_problem(source: str) -> str | None:
    """``None`` if ``source`` is well formed (see the module doc), else what is wrong with it."""
    if not isinstance(source, str) or not source.strip():
        return "a non-empty source: a paper's § / Fig. / Table / Algorithm, owner/repo@<hex>:path, or an https URL"
    bad = []
    for part in _parts(source):
        if _FORBIDDEN.search(re.sub(r"https://\S+", "", part)):
            bad.append(f"{part!r} points into ../shared or a local path (a student's clone has neither)")
            continue
        if not any(re.fullmatch(p.pattern + _NOTE.pattern, part) for p in (_PAPER_SRC, _REPO_SRC, _URL_SRC)):
            bad.append(f"{part!r} is not a paper's place (one of PAPERS, then § / Fig. / Table / Eq. / "
                       f"Algorithm …), owner/repo@<7-40 hex>:path or an https URL (each may end in a (note))")
    return "; ".join(bad) or None


# ----------------------------------------------------------------------------------------------
# the detector
# ----------------------------------------------------------------------------------------------
def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """``(start, end, is_table_row)`` of the prose blocks of markdown ``text``: paragraphs, list items,
    block quotes and table body rows; headings, table header rows, details/summary lines and fenced
    code are left out."""
    out: list[tuple[int, int, bool]] = []
    lines = text.splitlines(keepends=True)
    starts, pos = [], 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln)
    block: list[int] | None = None   # [start, end]
    fence = False

    def close():
        nonlocal block
        if block:
            out.append((block[0], block[1], False))
        block = None

    for i, ln in enumerate(lines):
        s, a = ln.strip(), starts[i]
        b = a + len(ln.rstrip("\r\n"))
        if s.startswith(("```", "~~~")):
            close()
            fence = not fence
            continue
        if fence:
            continue
        if s.startswith("|"):
            close()
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not _TABLE_SEP.match(s) and not _TABLE_SEP.match(nxt.strip()):
                out.append((a, b, True))
            continue
        label = s.startswith("#") or re.fullmatch(r"(?:</?details\b[^>]*>|<summary>.*?</summary>|\s)*", s or " ")
        if label or not s:
            close()
            continue
        lead = len(ln) - len(ln.lstrip())
        if _ITEM.match(ln) or s.startswith(">"):
            close()
            block = [a + lead, b]
        elif block is None:
            block = [a + lead, b]
        else:
            block[1] = b
    close()
    return out


def sentence_spans(text: str) -> list[tuple[int, int, bool]]:
    """``(start, end, is_table_row)`` of the sentences of markdown ``text`` (see the module doc)."""
    out = []
    for a, b, row in _blocks(text):
        if row:
            out.append((a, b, True))
            continue
        chunk, start = text[a:b], 0
        for m in _END.finditer(chunk):
            piece = chunk[start:m.start()].rstrip()
            if piece.endswith(_ABBREVIATIONS) or re.search(r"\b[A-Z]\.$", piece):
                continue
            if piece.strip():
                out.append((a + start, a + m.start(), False))
            start = m.end()
        if chunk[start:].strip():
            out.append((a + start, b, False))
    return out


def _prose(sentence: str) -> str:
    """``sentence`` with link targets, URLs and HTML tags blanked (same length)."""
    for pat in _NOT_PROSE:
        sentence = pat.sub(lambda m: " " * len(m.group(0)), sentence)
    return sentence


def systems_in(sentence: str) -> list[str]:
    """The names of :data:`SYSTEMS` that ``sentence`` names (outside link targets, URLs and tags)."""
    prose = _prose(sentence)
    return [name for name, pat in _SYSTEM_RES.items() if pat.search(prose)]


def is_statement(sentence: str, table_row: bool = False) -> bool:
    """True if ``sentence`` names a system and states something about it: it has a verb of :data:`VERBS`
    outside code, or it is a table body row."""
    if not systems_in(sentence):
        return False
    return table_row or bool(_VERB_RE.search(_CODE.sub(" ", _prose(sentence))))


def _occurrences(text: str, quotes: Iterable[str]) -> list[tuple[int, int]]:
    spans = []
    for q in quotes:
        start = 0
        while (i := text.find(q, start)) >= 0:
            spans.append((i, i + len(q)))
            start = i + 1
    return spans


def unsourced(text: str, quotes: Iterable[str]) -> list[str]:
    """The statements (sentences, see :func:`is_statement`) of ``text`` that no occurrence of ``quotes``
    covers: lies inside the sentence, or contains it."""
    if isinstance(quotes, str):
        raise v.fail("quotes", quotes, "a list of quotes, not one str (pass [quote])", "unsourced")
    occ = _occurrences(text, list(quotes))
    out = []
    for a, b, row in sentence_spans(text):
        if not is_statement(text[a:b], row):
            continue
        if any(a <= x and y <= b for x, y in occ) or _covered((a, b), occ):
            continue
        out.append(text[a:b])
    return out


def suggest(lecture: str, where: str, sentence: str, text: str) -> str:
    """The ``statement(...)`` line to paste for an unsourced ``sentence``: a quote that starts it, unique in
    ``text`` (up to the whole sentence), its systems, and the source to fill in."""
    words, quote = sentence.split(" "), sentence
    for n in range(1, len(words) + 1):
        q = " ".join(words[:n])
        if len(q) >= 30 and text.count(q) == 1:
            quote = q
            break
    args = [repr(lecture), repr(quote), '"SOURCE: FAST\'25 §… / owner/repo@<commit>:path / https://…"',
            f"systems={tuple(systems_in(sentence))!r}"]
    if where != "notebook":
        args.append(f"where={where!r}")
    return f"statement({', '.join(args)})"


# ----------------------------------------------------------------------------------------------
# where statements are made
# ----------------------------------------------------------------------------------------------
def _notebook(lecture: str) -> Path:
    pattern = "lab_*.ipynb" if lecture == "lab" else f"{lecture}_*.ipynb"
    (path,) = NOTEBOOKS.glob(pattern)
    return path


def places(lecture: str) -> dict[str, str]:
    """What a student reads of ``lecture`` (``"04"`` or ``"lab"``), by place: ``"notebook"`` (its markdown),
    ``"solutions"`` (what the solutions notebook adds) and each exercise id (its strings) — the places
    of :mod:`mooncake_lab.claims`."""
    from ...exercises import list_exercises

    lec = _notebook(_place(lecture, "places"))
    out = {"notebook": markdown_of(lec)}
    sol = NOTEBOOKS / "solutions" / lec.name
    if sol.exists():
        out["solutions"] = solutions_of(sol, lec)
    for ex in list_exercises(lecture):
        out[ex.id] = exercise_text(ex)
    return out


def stale(lecture: str) -> list[str]:
    """Entries of ``lecture`` whose quote does not occur where they say, one line each."""
    texts = places(lecture)
    bad = []
    for e in statements(lecture) + non_statements(lecture):
        if e.where not in texts:
            bad.append(f"{e.quote!r}: unknown place {e.where!r} (one of {sorted(texts)})")
        elif e.quote not in texts[e.where]:
            bad.append(f"{e.quote!r} not found in {e.where} of {lecture}")
    return bad


def missing(lecture: str) -> dict[str, list[str]]:
    """Per place, the unsourced statements of ``lecture`` (see :func:`unsourced`)."""
    mine = statements(lecture) + non_statements(lecture)
    out = {}
    for where, text in places(lecture).items():
        got = unsourced(text, [e.quote for e in mine if e.where == where])
        if got:
            out[where] = got
    return out
