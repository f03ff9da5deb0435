"""Named metrics of the course: ours beside the paper's (or a measured) value.

Each lecture's module registers a *metric group*: a function returning a list of :class:`Metric`.
``python -m mooncake_lab reproduce`` collects them all; notebooks and tests call :func:`collect`.
Figures are registered the same way (a function returning ``{filename: matplotlib Figure}``).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["Metric", "metric_group", "figure_group", "collect", "collect_figures",
           "format_table", "to_json"]


@dataclass(frozen=True)
class Metric:
    """One headline number: ``ours`` computed by the package, ``paper`` quoted with its ``source``."""

    name: str
    ours: float
    unit: str
    paper: float | None = None
    source: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("name")
        return d


_GROUPS: dict[str, Callable[[], Iterable[Metric]]] = {}
_FIGURES: dict[str, Callable[[], dict]] = {}


def metric_group(prefix: str):
    """Decorator: register a function returning the metrics whose names start with ``prefix``."""
    def deco(fn):
        _GROUPS[prefix] = fn
        return fn
    return deco


def figure_group(prefix: str):
    """Decorator: register a function returning ``{file_stem: Figure}`` for ``--figures``."""
    def deco(fn):
        _FIGURES[prefix] = fn
        return fn
    return deco


def _load_all_groups() -> None:
    # Importing the modules registers their groups (kept lazy so `import mooncake_lab` stays fast).
    from . import experiments  # noqa: F401


def _selected(prefix: str, only: str | None) -> bool:
    return only is None or prefix.startswith(only) or only.startswith(prefix)


def check_only(only: str | None) -> None:
    """``--only PREFIX`` checked before anything is computed: a non-empty prefix selecting at least
    one metric group; else a ValueError naming the known prefixes."""
    from .validate import fail

    if only is None:
        return
    _load_all_groups()
    known = ", ".join(sorted(_GROUPS))
    if not isinstance(only, str) or not only.strip() or not any(_selected(p, only) for p in _GROUPS):
        raise fail("--only", only, f"a prefix of a metric name; known prefixes: {known}")


def collect(only: str | None = None) -> list[Metric]:
    """All registered metrics (those whose name starts with ``only`` if given), in registry order."""
    _load_all_groups()
    out: list[Metric] = []
    for prefix, fn in _GROUPS.items():
        if _selected(prefix, only):
            out.extend(m for m in fn() if only is None or m.name.startswith(only))
    if only is not None and not out:
        known = ", ".join(sorted(_GROUPS))
        raise ValueError(f"--only {only!r} matches no metric; known prefixes: {known}")
    return out


def collect_figures(only: str | None = None) -> dict:
    _load_all_groups()
    figs: dict = {}
    for prefix, fn in _FIGURES.items():
        if _selected(prefix, only):
            figs.update(fn())
    return figs


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    ax = abs(x)
    if ax != 0 and (ax >= 1e6 or ax < 1e-3):
        return f"{x:.4g}"
    if float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.4g}"


def format_table(metrics: list[Metric]) -> str:
    """A fixed-width text table: name, ours, paper, unit, source."""
    rows = [("metric", "ours", "paper", "unit", "source")]
    rows += [(m.name, _fmt(m.ours), _fmt(m.paper), m.unit, m.source) for m in metrics]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) if j == 0 else r[j].rjust(widths[j])
                               for j in range(4)) + "  " + r[4])
        if i == 0:
            lines.append("-" * (sum(widths) + 8 + 20))
    return "\n".join(lines)


def to_json(metrics: list[Metric], path: str | Path) -> None:
    """Write ``{"metrics": {NAME: {"ours", "paper", "unit", "source"}}}``."""
    payload = {"metrics": {m.name: m.as_dict() for m in metrics}}
    Path(path).write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
