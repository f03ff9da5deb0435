"""Every number the course states is a claim that a test recomputes.

Prose typed by hand drifts from the code. So each number that a lecture's markdown (its prose, its
"paper says / we get / why" box) or an exercise's question, hint or feedback states is registered here,
beside the lecture, as a :class:`Claim`: the exact text as it appears, and a function that computes the
number(s) in it. ``tests/test_claims.py`` checks that

* each claim's ``text`` occurs where it says (the notebook's markdown, or the exercise's strings),
* the numbers in ``text`` equal what ``value()`` computes, to the precision printed (or ``rel_tol``),
* no number in a lecture's markdown or exercise strings is left unclaimed (:func:`unclaimed`), apart
  from references such as "Fig. 8", "§7.2", "lecture 04", model names and code (:data:`NOT_CLAIMS`).

Numbers that depend on the trace say which: ``trace="released"`` (computed on the released trace; checked
where it is present) or ``trace="stand-in"`` (on the labelled synthetic stand-in, checked everywhere).
A sentence about *this run* is not a claim: compute it in a code cell where it is shown.

    >>> numbers_in("a 16-block fetch takes ≈ 2.7 s at 10 Gbps (12,031 requests, 40%, 312e12 FLOP/s)")
    [16.0, 2.7, 10.0, 12031.0, 40.0, 312000000000000.0]
"""
from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["Claim", "claim", "claims", "numbers_in", "number_spans", "unclaimed", "mismatch",
           "restate", "markdown_of", "solutions_of", "exercise_text", "LECTURES", "NOT_CLAIMS"]

#: Lectures whose tables exist (``claims/lectureNN.py``), in course order.
LECTURES = ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09")

TRACES = (None, "released", "stand-in")


@dataclass(frozen=True)
class Claim:
    """A number (or a few) stated in the course, and how to compute it.

    ``id``: ``"NN.short_name"`` (NN = the lecture). ``text``: the snippet exactly as it appears; every
    number in it is checked (a range "82–94%" is two numbers). ``value``: zero-argument function giving
    the number(s) of ``text`` in order, in the units printed (a percentage as 40, not 0.4). ``where``:
    ``"notebook"`` (the lecture's markdown) or an exercise id (its question, hint, why and choices).
    ``rel_tol``: accepted relative difference; ``None`` = the printed precision (2.7 means 2.65–2.75).
    ``trace``: ``None``, ``"released"`` or ``"stand-in"`` (see the module doc). ``source``: where the
    number comes from, for quotes of the papers (e.g. ``"arXiv 2407.00079 v3, Fig. 8"``).
    """

    id: str
    text: str
    value: Callable[[], Any]
    where: str = "notebook"
    rel_tol: float | None = None
    trace: str | None = None
    source: str = ""

    @property
    def lecture(self) -> str:
        return self.id.split(".", 1)[0]

    def __post_init__(self):
        if not re.fullmatch(r"\d\d\.[A-Za-z0-9_]+", self.id):
            raise ValueError(f"Claim id must look like '04.fetch_time', got {self.id!r}")
        if self.trace not in TRACES:
            raise ValueError(f"Claim {self.id}: trace must be one of {TRACES}, got {self.trace!r}")
        if not number_spans(self.text):
            raise ValueError(f"Claim {self.id}: text {self.text!r} states no number")


_REGISTRY: dict[str, Claim] = {}


def claim(id: str, text: str, value: Callable[[], Any], **kw) -> Claim:
    """Register a claim (see :class:`Claim`); ids are unique."""
    c = Claim(id, text, value, **kw)
    if c.id in _REGISTRY and _REGISTRY[c.id] != c:
        raise ValueError(f"Claim {c.id!r} registered twice")
    _REGISTRY[c.id] = c
    return c


def restate(where: str, *ids: str) -> None:
    """Register claims already made (``ids``) again for ``where``: the same text and value, stated a
    second time there (the solutions notebook repeats the lecture's introduction). Id: ``<id>_<where>``."""
    import dataclasses

    for i in ids:
        c = _REGISTRY[i]
        claim(f"{i}_{where}", c.text, c.value, **{**{f.name: getattr(c, f.name) for f in
                                                      dataclasses.fields(c)[3:]}, "where": where})


def _load() -> None:
    for nn in LECTURES:
        try:
            importlib.import_module(f"{__name__}.lecture{nn}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.lecture{nn}":
                raise


def claims(lecture: str | None = None) -> list[Claim]:
    """Registered claims, optionally of one lecture ("04")."""
    _load()
    return [c for k, c in sorted(_REGISTRY.items()) if lecture is None or c.lecture == lecture]


# ----------------------------------------------------------------------------------------------
# numbers in text
# ----------------------------------------------------------------------------------------------
_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
# A number: digits with optional thousands commas and decimals, or a power of ten written 10⁻³ / 10^-3.
_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+|\^-?\d+)?(?![\d])")


def number_spans(text: str) -> list[tuple[int, int, float, int]]:
    """``(start, end, value, decimals)`` of each number in ``text`` (``12,031`` → 12031; ``10⁻³`` → 0.001)."""
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0)
        power = None
        sup = re.search(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+$|\^-?\d+$", s)
        if sup:
            power, s = sup.group(0).translate(_SUP).lstrip("^"), s[: sup.start()]
        base = s.replace(",", "")
        mant, _, exp = base.lower().partition("e")
        decimals = (len(mant.split(".")[1]) if "." in mant else 0) - (int(exp) if exp else 0)
        v = float(base)
        if power is not None:
            try:
                v, decimals = v ** int(power), max(0, -int(power))
            except (ValueError, OverflowError):
                continue
        if m.start() > 0 and text[m.start() - 1] == "−":  # U+2212 MINUS SIGN
            v = -v
        out.append((m.start(), m.end(), v, decimals))
    return out


def numbers_in(text: str) -> list[float]:
    """The numbers in ``text``, in order."""
    return [v for _, _, v, _ in number_spans(text)]


def _as_values(x: Any) -> list[float]:
    if isinstance(x, (list, tuple)):
        return [float(v) for v in x]
    return [float(x)]


def mismatch(c: Claim) -> str | None:
    """``None`` if the numbers in ``c.text`` equal ``c.value()``; else what differs."""
    stated = number_spans(c.text)
    got = _as_values(c.value())
    if len(got) != len(stated):
        return (f"{c.id}: {c.text!r} states {len(stated)} number(s), value() gives {len(got)}: {got}")
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
#: Spans that hold numbers but state no quantity: references, names, code and markup. One list, so
#: what the check skips is visible in one place.
NOT_CLAIMS = tuple(re.compile(p) for p in (
    r"```.*?```",                                   # fenced code
    r"`[^`\n]*`",                                   # inline code (names, calls, parameters)
    r"<[^>\n]*>",                                   # HTML tags and attributes
    r"\]\([^)\s]*\)",                               # link targets
    r"https?://\S+",                                # URLs
    r"(?m)^\s{0,3}#{1,6}\s*\d+(\.\d+)*\.?",         # heading numbers "## 3."
    r"(?m)^\s*\d+[.)]\s",                           # numbered list markers
    r"\b(?:Figs?|Figures?|Tables?|Tab|Eqs?|Equations?|Algorithms?|Alg|Sections?|Lectures?|lectures?|"
    r"Notebooks?|notebooks?|Questions?|Exercises?|Parts?|Steps?|lines?|Line|Q|v)\.?\s*"
    r"\d+[a-z]?(?:\.\d+)*(?:\s*(?:[-–,]|and|&)\s*\d+[a-z]?(?:\.\d+)*)*",  # Fig. 8, lectures 04–08, Q5, v3
    r"§\s*\d+(?:\.\d+)*(?:\s*[-–,]\s*§?\s*\d+(?:\.\d+)*)*",        # §7.2, §5.1–5.2
    r"\b(?:arXiv|arxiv)[: ]\s*\d{4}\.\d{4,5}(?:v\d+)?",           # arXiv 2407.00079
    r"\bFAST\s?'\s?\d\d\b|\bOSDI\s?'\d\d\b|\bSOSP\s?'\d\d\b",       # venues
    r"\b(?:19|20)\d\d\b(?!\s*(?:tokens|ms|s\b|GB|MB|%))",          # years
    r"\b(?:LLaMA|Llama|LLAMA)\s?-?\d+(?:\.\d+)?(?:-\d+[BbKk])?\b",   # model names
    r"\b[A-Za-z][A-Za-z]*-?\d+[A-Za-z]*(?:-[A-Za-z0-9]+)*\b",      # names with digits: A800, H20, DeepSeek-V3, OPT-13B, fp16
    r"\b\d\d_[a-z][a-z0-9_]*",                                      # notebook names 04_kvcache…
    r"\b\d\d\.[a-z][a-z0-9_]*",                                     # exercise ids 04.worked_choice
))


def _not_claim_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for pat in NOT_CLAIMS:
        spans += [(m.start(), m.end()) for m in pat.finditer(text)]
    return spans


def _covered(pos: tuple[int, int], spans: Iterable[tuple[int, int]]) -> bool:
    return any(a <= pos[0] and pos[1] <= b for a, b in spans)


def unclaimed(text: str, texts: Iterable[str]) -> list[str]:
    """Numbers in ``text`` that neither lie inside an occurrence of one of ``texts`` (the claims of
    this place) nor inside a :data:`NOT_CLAIMS` span; each shown with some context."""
    claimed = []
    for t in texts:
        start = 0
        while (i := text.find(t, start)) >= 0:
            claimed.append((i, i + len(t)))
            start = i + 1
    skip = _not_claim_spans(text)
    out = []
    for a, b, _, _ in number_spans(text):
        if not _covered((a, b), claimed) and not _covered((a, b), skip):
            out.append(text[max(0, a - 40):b + 20].replace("\n", " "))
    return out


# ----------------------------------------------------------------------------------------------
# where claims are stated
# ----------------------------------------------------------------------------------------------
#: Lectures whose claims table is complete: every number of their markdown and exercise strings is
#: claimed or a reference (tests/test_claims.py enforces it for these; the others are reported).
COMPLETE: frozenset[str] = frozenset(LECTURES)


def markdown_of(notebook) -> str:
    """All markdown cells of a notebook file, joined by blank lines (what a student reads)."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def solutions_of(solutions, lecture) -> str:
    """What a solutions notebook adds to its lecture: its markdown cells not identical to one of the
    lecture notebook's markdown cells, then the ``#`` comment lines of its code cells, joined by blank
    lines (the worked answers' prose and the numbers their comments state)."""
    import nbformat

    sol = nbformat.read(str(solutions), as_version=4)
    lec = nbformat.read(str(lecture), as_version=4)
    seen = {c.source for c in lec.cells if c.cell_type == "markdown"}
    prose = [c.source for c in sol.cells if c.cell_type == "markdown" and c.source not in seen]
    comments = ["\n".join(ln.strip() for ln in c.source.splitlines() if ln.lstrip().startswith("#"))
                for c in sol.cells if c.cell_type == "code"]
    return "\n\n".join(p for p in prose + comments if p)


def exercise_text(ex) -> str:
    """What a student reads of an exercise: its question, hint, the feedback after a right answer
    (``why``) and its choices, joined by blank lines."""
    return "\n\n".join([ex.question, ex.hint, ex.why, *ex.choices])
