"""Every number the course states is a claim that a test recomputes.

Prose typed by hand drifts from the code. So each number that a lecture's markdown (its prose, its
"paper says / we get / why" box) or an exercise's question, hint or feedback states is registered here,
beside the lecture, as a :class:`Claim`: the exact text as it appears, and a function that computes the
number(s) in it from the code (a model's shape, a constant of ``paper.py``, an experiment's default, an
exercise's answer …) — never the number typed again. ``tests/test_claims.py`` checks that

* each claim's ``text`` occurs where it says (the notebook's markdown, or the exercise's strings),
* the numbers in ``text`` — apart from references inside it (:data:`REFERENCES`: "Fig. 1", "LLaMA2-70B",
  "FAST'25") — equal what ``value()`` computes, to the precision printed (or ``rel_tol``),
* no claim's ``value`` is a bare literal (``lambda: 1024``: it could never fail),
* no number in a lecture's markdown or exercise strings is left unclaimed (:func:`unclaimed`), apart
  from references and markup (:data:`NOT_CLAIMS`: "Fig. 8", "§7.2", "section 5", code …) and the spans
  declared with :func:`not_a_claim` — a number that states no quantity ("*n*²/2", "block 0", "e.g.
  0.25"), each with its reason; these are checked to occur, and are not claims.

Numbers that depend on the trace say which: ``trace="released"`` (computed on the released trace; checked
where it is present) or ``trace="stand-in"`` (on the labelled synthetic stand-in, checked everywhere).
A sentence about *this run* is not a claim: compute it in a code cell where it is shown.

A comma between digits groups thousands (``12,031``); a malformed grouping such as "1,00,000" or "1,2" is
refused (:class:`~mooncake_lab.validate.InputError`), not read as two numbers — the course writes none,
so one is a typo (inside code or a reference it is left alone).

    >>> numbers_in("a 16-block fetch takes ≈ 2.7 s at 10 Gbps (12,031 requests, 40%, 312e12 FLOP/s)")
    [16.0, 2.7, 10.0, 12031.0, 40.0, 312000000000000.0]
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .. import validate as v
from ..validate import InputError, describe

__all__ = ["Claim", "NotAClaim", "ClaimError", "claim", "not_a_claim", "claims", "non_claims", "numbers_in",
           "number_spans", "unclaimed", "mismatch", "values", "restate", "markdown_of", "solutions_of",
           "exercise_text", "default_of", "answer_of", "notebook_arg", "when", "LECTURES", "NOT_CLAIMS",
           "REFERENCES", "MARKUP"]

#: Lectures whose tables exist (``claims/lectureNN.py``), in course order.
LECTURES = ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09")

TRACES = (None, "released", "stand-in")
_ID = re.compile(r"\d\d\.[A-Za-z0-9_]+")
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


class ClaimError(RuntimeError):
    """A claim's ``value()`` raised; the message names the claim, the original error is chained."""


def _str(x: Any, name: str, where: str, allowed: str = "a non-empty str") -> str:
    if not isinstance(x, str) or not x:
        raise v.fail(name, x, allowed, where)
    return x


def _check_id(id: Any, what: str) -> str:
    if not isinstance(id, str) or not _ID.fullmatch(id):
        raise v.fail("id", id, "a str like '04.fetch_time' (NN = the lecture, then letters, digits, _)", what)
    return id


class _Numbered:
    """What a claim and a non-claim share: an id ``"NN.short_name"`` naming the lecture NN."""

    @property
    def lecture(self) -> str:
        return self.id.split(".", 1)[0]


@dataclass(frozen=True)
class Claim(_Numbered):
    """A number (or a few) stated in the course, and how to compute it.

    ``id``: ``"NN.short_name"`` (NN = the lecture). ``text``: the snippet exactly as it appears; every
    number in it outside references (:data:`REFERENCES`) is checked (a range "82–94%" is two numbers).
    ``value``: zero-argument function giving those numbers in order, in the units printed (a percentage
    as 40, not 0.4): a number, or a list/tuple (or 1-D array) of numbers. ``where``: ``"notebook"`` (the
    lecture's markdown), ``"solutions"`` or an exercise id (its question, hint, why and choices).
    ``rel_tol``: accepted relative difference, a finite number in [0, 1); ``None`` = the printed precision
    (2.7 means 2.65–2.75). ``trace``: ``None``, ``"released"`` or ``"stand-in"`` (see the module doc).
    ``source``: where the number comes from, for quotes of the papers (``"arXiv 2407.00079 v3, Fig. 8"``).
    """

    id: str
    text: str
    value: Callable[[], Any]
    where: str = "notebook"
    rel_tol: float | None = None
    trace: str | None = None
    source: str = ""

    def __post_init__(self):
        w = f"claim {_check_id(self.id, 'claim')}"
        _str(self.text, "text", w)
        _str(self.where, "where", w)
        if not callable(self.value):
            raise v.fail("value", self.value, "a function of no arguments", w)
        if self.rel_tol is not None:
            v.real(self.rel_tol, "rel_tol", lo=0, hi=1, hi_open=True, where=w)
        v.choice(self.trace, "trace", TRACES, w)
        if not isinstance(self.source, str):
            raise v.fail("source", self.source, "a str", w)
        if not _stated(self.text):
            raise v.fail("text", self.text, "a snippet stating a number outside references (Fig. 8, LLaMA2-70B …)", w)


@dataclass(frozen=True)
class NotAClaim(_Numbered):
    """A snippet whose number states no quantity — part of a formula ("*n*²/2"), an index or a name
    ("block 0", "layer *i*+1"), an example of a format ("e.g. 0.25"), a quote the code does not hold —
    with ``why`` (one line). :func:`unclaimed` skips it where it occurs; it is not a :class:`Claim`.
    ``id``, ``text`` and ``where`` as for a claim."""

    id: str
    text: str
    why: str
    where: str = "notebook"

    def __post_init__(self):
        w = f"not_a_claim {_check_id(self.id, 'not_a_claim')}"
        _str(self.text, "text", w)
        _str(self.where, "where", w)
        if not isinstance(self.why, str) or not self.why.strip() or "\n" in self.why:
            raise v.fail("why", self.why, "a one-line reason", w)
        skip = _not_claim_spans(self.text)
        if all(_covered((a, b), skip) for a, b, _, _ in number_spans(self.text, skip=skip)):
            raise v.fail("text", self.text, "a snippet with a number NOT_CLAIMS does not already skip", w)


_REGISTRY: dict[str, Claim] = {}
_NON_CLAIMS: dict[str, NotAClaim] = {}


def register(entry, key, registry: dict, other: dict, name: str):
    """Put ``entry`` in ``registry`` under ``key``: refused (naming it as ``name``) if ``other`` holds that
    key, or ``registry`` holds another entry there. Shared by the claims and the statements registries."""
    if key in other or (key in registry and registry[key] != entry):
        raise InputError(f"{name} registered twice")
    registry[key] = entry
    return entry


def _register(entry, registry: dict, other: dict):
    return register(entry, entry.id, registry, other, repr(entry.id))


def claim(id: str, text: str, value: Callable[[], Any], **kw) -> Claim:
    """Register a claim (see :class:`Claim`); ids are unique (claims and non-claims together)."""
    return _register(Claim(id, text, value, **kw), _REGISTRY, _NON_CLAIMS)


def not_a_claim(id: str, text: str, why: str, where: str = "notebook") -> NotAClaim:
    """Register a snippet whose number is not a claim, with the one-line reason (see :class:`NotAClaim`)."""
    return _register(NotAClaim(id, text, why, where), _NON_CLAIMS, _REGISTRY)


def _unknown(name: str, value: Any, known: Iterable[str], where: str) -> InputError:
    near = difflib.get_close_matches(str(value), list(known), n=5, cutoff=0.6)
    return v.fail(name, value, "a registered id" + (f"; near matches: {', '.join(near)}" if near else ""), where)


def restate(where: str, *ids: str) -> None:
    """Register claims (or non-claims) already made (``ids``) again for ``where``: the same text and value,
    stated a second time there (the solutions notebook repeats the lecture's introduction). Id:
    ``<id>_<where>``. An unknown id is refused, naming the near matches."""
    _str(where, "where", "restate")
    for i in ids:
        reg = _REGISTRY if i in _REGISTRY else _NON_CLAIMS if i in _NON_CLAIMS else None
        if reg is None:
            raise _unknown("id", i, [*_REGISTRY, *_NON_CLAIMS], "restate")
        new = dataclasses.replace(reg[i], id=f"{i}_{where}", where=where)
        _register(new, reg, _NON_CLAIMS if reg is _REGISTRY else _REGISTRY)


def _load() -> None:
    for nn in LECTURES:
        try:
            importlib.import_module(f"{__name__}.lecture{nn}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.lecture{nn}":
                raise


def _lecture(lecture: Any, where: str) -> str | None:
    """``None``, or the lecture as in :data:`LECTURES`: ``"09"``, ``"9"`` and ``9`` are lecture 09."""
    if lecture is None:
        return None
    if isinstance(lecture, str) and re.fullmatch(r"[0-9]{1,2}", lecture):
        key = lecture.zfill(2)
    elif isinstance(lecture, numbers.Integral) and not isinstance(lecture, (bool, np.bool_)):
        key = f"{int(lecture):02d}"
    else:
        key = None
    if key not in LECTURES:
        raise v.fail("lecture", lecture, f"None or one of {', '.join(LECTURES)} (as a str or an int)", where)
    return key


def claims(lecture: str | int | None = None) -> list[Claim]:
    """Registered claims, optionally of one lecture (``"04"``, ``"4"`` or ``4``; another is refused)."""
    key = _lecture(lecture, "claims")
    _load()
    return [c for _, c in sorted(_REGISTRY.items()) if key is None or c.lecture == key]


def non_claims(lecture: str | int | None = None) -> list[NotAClaim]:
    """Registered :class:`NotAClaim` snippets, optionally of one lecture (as :func:`claims`)."""
    key = _lecture(lecture, "non_claims")
    _load()
    return [n for _, n in sorted(_NON_CLAIMS.items()) if key is None or n.lecture == key]


# ----------------------------------------------------------------------------------------------
# what values are computed from
# ----------------------------------------------------------------------------------------------
def default_of(fn: Callable, name: str) -> Any:
    """The default of parameter ``name`` of ``fn``: what an experiment or a dashboard uses unless told."""
    p = inspect.signature(fn).parameters.get(name)
    if p is None or p.default is inspect.Parameter.empty:
        raise _unknown("name", name, [k for k, q in inspect.signature(fn).parameters.items()
                                      if q.default is not inspect.Parameter.empty], f"default_of({fn.__name__})")
    return p.default


def answer_of(exercise_id: str) -> Any:
    """The expected answer of exercise ``exercise_id`` (its ``answer()``)."""
    from ..exercises import list_exercises

    found = {e.id: e for e in list_exercises(_str(exercise_id, "exercise_id", "answer_of")[:2])}
    if exercise_id not in found:
        raise _unknown("exercise_id", exercise_id, found, "answer_of")
    return found[exercise_id].answer()


def notebook_arg(lecture: str, call: str, name: str) -> float:
    """The number passed as ``name=`` in the first call ``call(...)`` of lecture ``lecture``'s code cells
    (``notebook_arg("05", "l05.gantt", "x")`` → 4): a parameter the prose describes and a cell sets."""
    (path,) = NOTEBOOKS.glob(f"{_lecture(lecture, 'notebook_arg')}_*.ipynb")
    code = "\n".join(c.source for c in read_notebook(path).cells if c.cell_type == "code")
    m = re.search(re.escape(call) + r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", code)
    arg = m and re.search(rf"\b{re.escape(name)}\s*=\s*([-+]?[0-9_.]+(?:[eE][-+]?\d+)?)", m.group(1))
    if not arg:
        raise v.fail("call", f"{call}(… {name}=…)", f"a call in {path.name}'s code cells", "notebook_arg")
    return float(arg.group(1))


def when(holds: bool, value: Any) -> Any:
    """``value`` if ``holds`` else NaN (the claim then fails): for a number the code uses only implicitly,
    e.g. ``when(answer matches prefill_flops(8192), 8192)``."""
    return value if holds else math.nan


# ----------------------------------------------------------------------------------------------
# numbers in text
# ----------------------------------------------------------------------------------------------
_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
# A number: digits (commas between them must group thousands: checked below), optional decimals, and a
# power of ten written e12 / 10⁻³ / 10^-3.
_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d+)*(?:\.\d+)?(?:[eE][-+]?\d+|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+|\^-?\d+)?(?![\d])")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+")


def number_spans(text: str, *, skip: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int, float, int]]:
    """``(start, end, value, decimals)`` of each number in ``text`` (``12,031`` → 12031; ``10⁻³`` → 0.001).

    A malformed grouping ("1,00,000", "1,2") raises :class:`~mooncake_lab.validate.InputError` naming its
    position, unless it lies inside one of the ``skip`` spans (code, references), where it is left out."""
    if not isinstance(text, str):
        raise v.fail("text", text, "a str", "number_spans")
    skip = list(skip)
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0)
        whole = re.match(r"[\d,]+", s).group(0)
        if "," in whole and not _GROUPED.fullmatch(whole):
            if _covered((m.start(), m.end()), skip):
                continue
            raise v.fail(f"text[{m.start()}]", whole, "digits grouped in threes by commas (100,000) or "
                         "no commas (100000)", "number_spans")
        power = None
        sup = re.search(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+$|\^-?\d+$", s)
        if sup:
            power, s = sup.group(0).translate(_SUP).lstrip("^"), s[: sup.start()]
        base = s.replace(",", "")
        mant, _, exp = base.lower().partition("e")
        decimals = (len(mant.split(".")[1]) if "." in mant else 0) - (int(exp) if exp else 0)
        x = float(base)
        if power is not None:
            try:
                x, decimals = x ** int(power), max(0, -int(power))
            except (ValueError, OverflowError):
                continue
        if m.start() > 0 and text[m.start() - 1] == "−":  # U+2212 MINUS SIGN
            x = -x
        out.append((m.start(), m.end(), x, decimals))
    return out


def numbers_in(text: str) -> list[float]:
    """The numbers in ``text``, in order."""
    return [x for _, _, x, _ in number_spans(text)]


def _stated(text: str) -> list[tuple[int, int, float, int]]:
    """The spans of ``text``'s numbers a claim states: all but those inside references."""
    refs = _spans(text, REFERENCES)
    return [s for s in number_spans(text, skip=refs) if not _covered(s[:2], refs)]


_ALLOWED = "a number or a list of numbers"


def _kind(x: Any) -> str:
    """What ``x`` is, for a message: "None", "a dict (…)", "a 2-D array of shape (2, 2) (…)"."""
    if x is None:
        return "None"
    what = f"a {x.ndim}-D array of shape {x.shape}" if isinstance(x, np.ndarray) else f"a {type(x).__name__}"
    return f"{what} ({' '.join(describe(x).split())})"


def _as_values(x: Any, cid: str) -> list[float]:
    """``value()``'s result as floats: a number, a list/tuple of numbers, or a 1-D array (0-D: a number)."""
    if isinstance(x, np.ndarray) and x.ndim <= 1:
        x = x.tolist()
    items = list(x) if isinstance(x, (list, tuple)) else [x] if v._is_real(x) else None
    if items is None:
        raise InputError(f"claim {cid}: value() returned {_kind(x)}; allowed: {_ALLOWED}")
    for i, e in enumerate(items):
        if not v._is_real(e):
            raise InputError(f"claim {cid}: value()[{i}] is {_kind(e)}; allowed: a number")
    return [float(e) for e in items]


def values(c: Claim) -> list[float]:
    """What ``c.value()`` computes, as floats. A result of another kind raises
    :class:`~mooncake_lab.validate.InputError`, an error inside ``value()`` :class:`ClaimError` (chained);
    both name the claim."""
    try:
        x = c.value()
    except Exception as err:
        raise ClaimError(f"claim {c.id}: value() raised {type(err).__name__}: {err}") from err
    return _as_values(x, c.id)


def mismatch(c: Claim) -> str | None:
    """``None`` if the numbers ``c.text`` states equal ``c.value()``; else what differs."""
    stated = _stated(c.text)
    got = values(c)
    if len(got) != len(stated):
        return f"{c.id}: {c.text!r} states {len(stated)} number(s), value() gives {len(got)}: {got}"
    bad = []
    for (_, _, s, dec), g in zip(stated, got):
        if not math.isfinite(g):
            bad.append(f"{s:g} vs {g}")
            continue
        if c.rel_tol is None:
            ok = abs(g - s) <= 0.5 * 10.0 ** (-dec) * (1 + 1e-9) + 1e-12
        else:
            ok = math.isclose(g, s, rel_tol=c.rel_tol, abs_tol=1e-12)
        if not ok:
            bad.append(f"stated {s:g}, computed {g:.6g}")
    return f"{c.id}: {c.text!r}: " + "; ".join(bad) if bad else None


# ----------------------------------------------------------------------------------------------
# which numbers are not claims
# ----------------------------------------------------------------------------------------------
#: Markup whose numbers state no quantity: code, HTML, links, heading numbers, list markers. (A claim may
#: still state a number inside code, e.g. "`threshold = 8`": its text is compared in full.)
MARKUP = tuple(re.compile(p) for p in (
    r"```.*?```",                                   # fenced code
    r"`[^`\n]*`",                                   # inline code (names, calls, parameters)
    r"<[^>\n]*>",                                   # HTML tags and attributes
    r"\]\([^)\s]*\)",                               # link targets
    r"https?://\S+",                                # URLs
    r"(?m)^\s{0,3}#{1,6}\s*\d+(\.\d+)*\.?",         # heading numbers "## 3."
    r"(?m)^\s*\d+[.)]\s",                           # numbered list markers
))
#: References and names: numbers that name something ("Fig. 8", "section 5", "Dashboard 2", "LLaMA2-70B",
#: "HTTP 429"). Neither claimed nor, inside a claim's text, compared.
REFERENCES = tuple(re.compile(p) for p in (
    r"\b(?:Figs?|Figures?|Tables?|Tab|Eqs?|Equations?|Algorithms?|Alg|Sections?|sections?|Lectures?|lectures?|"
    r"Notebooks?|notebooks?|Questions?|questions?|Dashboards?|Exercises?|Parts?|Steps?|lines?|Line|Q|v)\.?\s*"
    r"\d+[a-z]?(?:\.\d+)*(?:\s*(?:[-–,]|and|&)\s*\d+[a-z]?(?:\.\d+)*)*",  # Fig. 8, lectures 04–08, Q5, v3
    r"§\s*\d+(?:\.\d+)*(?:\s*[-–,]\s*§?\s*\d+(?:\.\d+)*)*",        # §7.2, §5.1–5.2
    r"\b(?:arXiv|arxiv)[: ]\s*\d{4}\.\d{4,5}(?:v\d+)?",           # arXiv 2407.00079
    r"\bFAST\s?'\s?\d\d\b|\bOSDI\s?'\d\d\b|\bSOSP\s?'\d\d\b",       # venues
    r"\b(?:19|20)\d\d\b(?!\s*(?:tokens|ms|s\b|GB|MB|%))",          # years
    r"\b(?:LLaMA|Llama|LLAMA)\s?-?\d+(?:\.\d+)?(?:-\d+[BbKk])?\b",   # model names
    r"\b[A-Za-z][A-Za-z]*-?\d+[A-Za-z]*(?:-[A-Za-z0-9]+)*\b",      # names with digits: A800, H20, DeepSeek-V3, OPT-13B, fp16
    r"\b\d\d_[a-z][a-z0-9_]*",                                      # notebook names 04_kvcache…
    r"\b\d\d\.[a-z][a-z0-9_]*",                                     # exercise ids 04.worked_choice
    r"\bHTTP \d{3}\b",                                              # status codes: HTTP 429
))
#: Everything :func:`unclaimed` skips (besides the :func:`not_a_claim` snippets): one list, so what the
#: check skips is visible in one place.
NOT_CLAIMS = MARKUP + REFERENCES


def _spans(text: str, patterns: Iterable[re.Pattern]) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for pat in patterns for m in pat.finditer(text)]


def _not_claim_spans(text: str) -> list[tuple[int, int]]:
    return _spans(text, NOT_CLAIMS)


def _covered(pos: tuple[int, int], spans: Iterable[tuple[int, int]]) -> bool:
    return any(a <= pos[0] and pos[1] <= b for a, b in spans)


def unclaimed(text: str, texts: Iterable[str]) -> list[str]:
    """Numbers in ``text`` that neither lie inside an occurrence of one of ``texts`` (the snippets claimed,
    or declared not claims, at this place) nor inside a :data:`NOT_CLAIMS` span; each shown with some
    context. ``texts`` is a list (or other iterable) of non-empty str; a single str is refused, not read
    as its characters (pass ``[snippet]``)."""
    if not isinstance(text, str):
        raise v.fail("text", text, "a str", "unclaimed")
    if isinstance(texts, (str, bytes)):
        raise v.fail("texts", texts, "a list of snippets, not one str (pass [snippet])", "unclaimed")
    try:
        snippets = list(texts)
    except TypeError:
        raise v.fail("texts", texts, "a list of snippets (str)", "unclaimed") from None
    claimed = []
    for k, t in enumerate(snippets):
        _str(t, f"texts[{k}]", "unclaimed")
        start = 0
        while (i := text.find(t, start)) >= 0:
            claimed.append((i, i + len(t)))
            start = i + 1
    skip = _not_claim_spans(text)
    return [text[max(0, a - 40):b + 20].replace("\n", " ") for a, b, _, _ in number_spans(text, skip=skip)
            if not _covered((a, b), claimed) and not _covered((a, b), skip)]


# ----------------------------------------------------------------------------------------------
# where claims are stated
# ----------------------------------------------------------------------------------------------
#: Lectures whose claims table is complete: every number of their markdown and exercise strings is
#: claimed or a reference (tests/test_claims.py enforces it for these; the others are reported).
COMPLETE: frozenset[str] = frozenset(LECTURES)


def _read_file(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


#: How a notebook's text is read: the file by default. The test suite reads each notebook as git holds
#: it instead (tests/conftest.py), so a student's own notes in a lecture never fail a claims test.
NOTEBOOK_TEXT: Callable[[Any], str] = _read_file


def read_notebook(path):
    """The notebook at ``path`` (nbformat 4), its text read by :data:`NOTEBOOK_TEXT`."""
    import nbformat

    return nbformat.reads(NOTEBOOK_TEXT(path), as_version=4)


def markdown_of(notebook) -> str:
    """All markdown cells of a notebook file, joined by blank lines (what a student reads)."""
    nb = read_notebook(notebook)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def solutions_of(solutions, lecture) -> str:
    """What a solutions notebook adds to its lecture: its markdown cells not identical to one of the
    lecture notebook's markdown cells, then the ``#`` comment lines of its code cells, joined by blank
    lines (the worked answers' prose and the numbers their comments state)."""
    sol, lec = read_notebook(solutions), read_notebook(lecture)
    seen = {c.source for c in lec.cells if c.cell_type == "markdown"}
    prose = [c.source for c in sol.cells if c.cell_type == "markdown" and c.source not in seen]
    comments = ["\n".join(ln.strip() for ln in c.source.splitlines() if ln.lstrip().startswith("#"))
                for c in sol.cells if c.cell_type == "code"]
    return "\n\n".join(p for p in prose + comments if p)


def exercise_text(ex) -> str:
    """What a student reads of an exercise: its question, hint, the feedback after a right answer
    (``why``) and its choices, joined by blank lines."""
    return "\n\n".join([ex.question, ex.hint, ex.why, *ex.choices])
