"""How heavy a lecture's main line is to read: words, mean sentence length, long sentences.

A lecture is layered: the *main line* is its markdown outside ``<details>`` boxes; the precision (the
semantics a run uses, why a number differs from the paper, what the stand-in prints) sits inside them,
one click away. This module measures the main line, so a test can hold each lecture to its targets
(:data:`TARGETS`) and an author can see where the weight is::

    python -m mooncake_lab.prose_load            # every lecture, as the files on disk are
    python -m mooncake_lab.prose_load 07 --long  # one lecture, and its sentences over 40 words

What counts: the words of the markdown cells, with ``<details>`` boxes, fenced code, math (``$…$``,
``$$…$$``), inline code, HTML tags, link targets and images left out. Headings, list items and table
cells count as words; sentences are the prose of paragraphs and list items (a heading or a table cell is a
label, not a sentence), split after ".", "!" or "?" followed by a space, with the usual abbreviations
("e.g.", "Fig.", "vs." …) kept whole. Markdown a notebook generates (``display(Markdown(…))``) is
measured by :func:`generated_load` on an executed notebook.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

__all__ = ["TARGETS", "LONG", "Load", "main_line", "sentences", "words", "load_of_text", "load_of_notebook",
           "generated_load", "lecture_paths"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: The targets of a lecture's main line: words, mean words per sentence, share of sentences over LONG words.
TARGETS = {"words": 2000, "mean_sentence": 20.0, "long_share": 0.05}
#: A sentence longer than this many words is "long".
LONG = 40

_DETAILS = re.compile(r"<details\b.*?</details>", re.S | re.I)
_FENCE = re.compile(r"```.*?```|~~~.*?~~~", re.S)
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$(?!\d)")
_CODE = re.compile(r"`[^`\n]*`")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_ABBREVIATIONS = ("e.g.", "i.e.", "Fig.", "Figs.", "Eq.", "vs.", "cf.", "al.", "etc.", "approx.", "No.", "Sec.",
                  "Tab.", "resp.", "incl.")
_END = re.compile(r"(?<=[.!?])[\"”')\]*_]*\s+")
_WORD = re.compile(r"[^\W_](?:[\w'’.,/+×%-]*[^\W_%])?|\d+%?", re.U)


def main_line(markdown: str) -> str:
    """``markdown`` with what is not read as prose left out: ``<details>`` boxes, code, math, tags."""
    text = _DETAILS.sub(" ", markdown)
    text = _FENCE.sub(" ", text)
    text = _DISPLAY_MATH.sub(" ", text)
    text = _INLINE_MATH.sub(" ", text)
    text = _CODE.sub(" ", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    return _TAG.sub(" ", text)


def words(text: str) -> int:
    """The number of words in ``text`` (a number, "12,031" or "2.7", is one word)."""
    return len(_WORD.findall(text))


def _prose_blocks(text: str) -> Iterable[str]:
    """Paragraphs and list items of ``text`` (already :func:`main_line`), without headings and tables."""
    block: list[str] = []
    for line in text.splitlines() + [""]:
        s = line.strip()
        starts_item = bool(re.match(r"([-*+]|\d+[.)])\s", s))
        if not s or s.startswith("#") or s.startswith("|") or starts_item or s.startswith(">"):
            if block:
                yield " ".join(block)
            block = []
            if starts_item:
                block = [re.sub(r"^([-*+]|\d+[.)])\s+", "", s)]
            elif s.startswith(">"):
                block = [s.lstrip("> ")] if s.lstrip("> ") else []
            continue
        block.append(s)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (already :func:`main_line`): paragraphs and list items split after
    ".", "!" or "?" and a space; abbreviations such as "e.g." and "Fig." do not end a sentence."""
    out = []
    for block in _prose_blocks(text):
        parts = _END.split(block)
        current = ""
        for part in parts:
            current = f"{current} {part}".strip() if current else part.strip()
            if current.endswith(_ABBREVIATIONS) or re.search(r"\b[A-Z]\.$", current):
                continue
            if words(current):
                out.append(current)
            current = ""
        if current and words(current):
            out.append(current)
    return out


@dataclass(frozen=True)
class Load:
    """The reading load of some prose: its words, sentences and how long they are."""

    name: str
    words: int
    sentences: tuple[str, ...]

    @property
    def mean_sentence(self) -> float:
        """Mean words per sentence (0 when there is none)."""
        return sum(words(s) for s in self.sentences) / len(self.sentences) if self.sentences else 0.0

    @property
    def long(self) -> list[str]:
        """The sentences over :data:`LONG` words."""
        return [s for s in self.sentences if words(s) > LONG]

    @property
    def long_share(self) -> float:
        """The share of sentences over :data:`LONG` words, 0–1."""
        return len(self.long) / len(self.sentences) if self.sentences else 0.0

    def over_targets(self) -> list[str]:
        """What exceeds :data:`TARGETS`, one phrase each (empty: within every target)."""
        out = []
        if self.words > TARGETS["words"]:
            out.append(f"{self.words:,} words in the main line (target ≤ {TARGETS['words']:,})")
        if self.mean_sentence > TARGETS["mean_sentence"]:
            out.append(f"mean sentence {self.mean_sentence:.1f} words (target ≤ {TARGETS['mean_sentence']:.0f})")
        if self.long_share > TARGETS["long_share"]:
            out.append(f"{self.long_share:.0%} of sentences over {LONG} words "
                       f"({len(self.long)} of {len(self.sentences)}; target ≤ {TARGETS['long_share']:.0%})")
        return out

    def row(self) -> str:
        return (f"{self.name:<34} {self.words:>6,} {self.mean_sentence:>6.1f} {self.long_share:>6.0%} "
                f"{len(self.sentences):>6,}")


def load_of_text(markdown: str, name: str = "text") -> Load:
    """The :class:`Load` of the main line of ``markdown``."""
    text = main_line(markdown)
    return Load(name, words(text), tuple(sentences(text)))


def _markdown_cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb.get("cells", []) if c.get("cell_type") == "markdown"]


def load_of_notebook(text: str, name: str = "notebook") -> Load:
    """The :class:`Load` of a notebook's markdown cells (``text``: the notebook's JSON)."""
    return load_of_text("\n\n".join(_markdown_cells(json.loads(text))), name)


def generated_load(nb: dict, name: str = "notebook") -> Load:
    """The :class:`Load` of the markdown an executed notebook ``nb`` (a dict) generated in its outputs
    (``display(Markdown(…))`` notes and tables), measured like the cells' markdown."""
    parts = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            md = out.get("data", {}).get("text/markdown")
            if md:
                parts.append("".join(md) if isinstance(md, list) else md)
    return load_of_text("\n\n".join(parts), name)


def lecture_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    """The lectures (``NN_*.ipynb``) and labs (``lab_*.ipynb``) of ``folder``, in course order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted(folder.glob("lab_*.ipynb"))


def _report(paths: list[Path], show_long: bool) -> int:
    print(f"{'notebook':<34} {'words':>6} {'mean':>6} {'>40':>6} {'sents':>6}")
    over = 0
    for p in paths:
        load = load_of_notebook(p.read_text(encoding="utf-8"), p.name)
        print(load.row() + ("" if not load.over_targets() else "   over: " + "; ".join(load.over_targets())))
        over += bool(load.over_targets())
        if show_long:
            for s in load.long:
                print(f"    ({words(s)} words) {s}")
    return over


if __name__ == "__main__":
    args = sys.argv[1:]
    show_long = "--long" in args
    picks = [a for a in args if not a.startswith("--")]
    chosen = [p for p in lecture_paths() if not picks or any(p.name.startswith(k) for k in picks)]
    if picks and not chosen:
        sys.exit(f"no lecture matches {picks}: give a lecture number such as 07, or 'lab'")
    sys.exit(1 if _report(chosen, show_long) else 0)
