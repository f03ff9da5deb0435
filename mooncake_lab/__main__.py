"""Command line: ``python -m mooncake_lab reproduce|doctor|warmup``.

``reproduce`` prints every headline metric of the course (ours beside the paper's value and its
source); ``--json FILE`` writes them, ``--only PREFIX`` runs a subset, ``--figures DIR`` saves the
headline figures as PNG. ``doctor`` checks this machine before class. ``warmup`` compiles every
numba kernel once (``make lab`` runs it after installing).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _reproduce(args) -> int:
    from . import reproduce

    try:
        metrics = reproduce.collect(args.only)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(reproduce.format_table(metrics))
    if args.json:
        reproduce.to_json(metrics, args.json)
        print(f"\nwrote {len(metrics)} metrics to {args.json}")
    if args.figures:
        out = Path(args.figures)
        out.mkdir(parents=True, exist_ok=True)
        figs = reproduce.collect_figures(args.only)
        for stem, fig in figs.items():
            fig.savefig(out / f"{stem}.png", dpi=120)
        print(f"wrote {len(figs)} figures to {out}/")
    return 0


def _doctor(_args) -> int:
    from .doctor import run_doctor

    return run_doctor()


def _warmup(_args) -> int:
    from .warmup import warm_up

    warm_up()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mooncake_lab", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="print every headline metric (ours vs paper)")
    rep.add_argument("--json", metavar="FILE", help="also write the metrics as JSON to FILE")
    rep.add_argument("--only", metavar="PREFIX", help="only metrics whose name starts with PREFIX")
    rep.add_argument("--figures", metavar="DIR", help="save the headline figures as PNG into DIR")
    rep.set_defaults(func=_reproduce)
    doc = sub.add_parser("doctor", help="check versions, numba, widgets and where trace data comes from")
    doc.set_defaults(func=_doctor)
    warm = sub.add_parser("warmup", help="compile every numba kernel once (cached on disk)")
    warm.set_defaults(func=_warmup)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
