"""Command line: ``python -m mooncake_lab reproduce|doctor|warmup``.

``reproduce`` prints every headline metric of the course (ours beside the paper's value and its
source); ``--json FILE`` writes them, ``--only PREFIX`` runs a subset, ``--figures DIR`` saves the
headline figures as PNG. ``doctor`` checks this machine before class. ``warmup`` compiles every
numba kernel once (``make lab`` runs it after installing).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .validate import InputError


def _existing_ancestor(path: Path) -> Path:
    """The nearest of ``path``'s ancestors that exists (``path`` itself excluded)."""
    for parent in path.absolute().parents:
        if parent.exists():
            return parent
    return Path("/")


def _output_file(value: str, flag: str) -> Path:
    """``--json FILE``: a path a file can be written to now (its folder exists and is writable; it is
    not a folder), or an InputError saying which and why."""
    from .validate import fail

    if not value.strip():
        raise fail(flag, value, "a file path such as metrics.json")
    if "\x00" in value:
        raise fail(flag, value, "a valid file path (no NUL character)")
    path = Path(value)
    try:
        if path.is_dir():
            raise fail(flag, value, f"a file path, not a folder (e.g. {path / 'metrics.json'})")
        folder = path.absolute().parent
        if not folder.is_dir():
            raise fail(flag, value, f"a file in an existing folder ({folder} does not exist)")
        if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise fail(flag, value, f"a file you may write ({path if path.exists() else folder} is read-only)")
    except (OSError, ValueError) as err:   # a name too long, a NUL byte, ...
        if isinstance(err, InputError):
            raise
        raise fail(flag, value, f"a valid file path ({err})") from None
    return path


def _output_folder(value: str, flag: str) -> Path:
    """``--figures DIR``: an existing writable folder, or one that can be made (its nearest existing
    ancestor is a writable folder), or an InputError."""
    from .validate import fail

    if not value.strip():
        raise fail(flag, value, "a folder path such as figures/")
    if "\x00" in value:
        raise fail(flag, value, "a valid folder path (no NUL character)")
    path = Path(value)
    try:
        if path.exists() and not path.is_dir():
            raise fail(flag, value, "a folder, not a file")
        top = path if path.exists() else _existing_ancestor(path)
        if not top.is_dir():
            raise fail(flag, value, f"a folder that can be made ({top} is a file)")
        if not os.access(top, os.W_OK | os.X_OK):
            raise fail(flag, value, f"a folder you may write ({top} is read-only)")
    except (OSError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        raise fail(flag, value, f"a valid folder path ({err})") from None
    return path


def _reproduce(args) -> int:
    from . import reproduce

    try:   # every argument checked before anything is computed
        json_path = None if args.json is None else _output_file(args.json, "--json")
        fig_dir = None if args.figures is None else _output_folder(args.figures, "--figures")
        reproduce.check_only(args.only)
        metrics = reproduce.collect(args.only)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(reproduce.format_table(metrics))
    try:
        if json_path is not None:
            reproduce.to_json(metrics, json_path)
            print(f"\nwrote {len(metrics)} metrics to {json_path}")
        if fig_dir is not None:
            fig_dir.mkdir(parents=True, exist_ok=True)
            figs = reproduce.collect_figures(args.only)
            for stem, fig in figs.items():
                fig.savefig(fig_dir / f"{stem}.png", dpi=120)
            print(f"wrote {len(figs)} figures to {fig_dir}/")
    except OSError as err:   # the disk filled up, a permission changed meanwhile, ...
        print(f"error: could not write {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        return 2
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
