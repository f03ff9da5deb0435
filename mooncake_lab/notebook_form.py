"""Committed notebooks in the form JupyterLab 4 saves them, so opening and saving one leaves git clean.

Checked by opening and saving an unmodified notebook in JupyterLab 4.6 (jupyter_server 2.21,
ipykernel 7.4): the only change it made was ``metadata.language_info``, filled in from the kernel's
``kernel_info`` reply (ipykernel's ``IPythonKernel.language_info``: codemirror mode, file extension,
mimetype, exporter, lexer and the kernel's Python version). The file is written by jupyter_server with
``nbformat.write``: keys sorted, one-space indent, non-ASCII kept, a trailing newline.

:func:`saved_form` returns that text for a notebook, with outputs and execution counts stripped (the
committed form). The Python version in ``language_info`` is kept when the notebook already has one (a
kernel on another Python writes its own: the one line that can still change), else this interpreter's.

Apply to every course notebook: ``python -m mooncake_lab.notebook_form`` (``--check`` only lists the
notebooks not in that form and exits 1). Idempotent.
"""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

__all__ = ["KERNELSPEC", "language_info", "saved_form", "course_notebook_files", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: The kernel every course notebook runs in (ipykernel's default ``python3`` kernelspec).
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def language_info(version: str | None = None) -> dict:
    """``language_info`` as the ipykernel kernel reports it; ``version`` defaults to this Python's."""
    from ipykernel.ipkernel import IPythonKernel

    info = dict(IPythonKernel.language_info)
    info["version"] = version or platform.python_version()
    return info


def saved_form(text: str) -> str:
    """The notebook JSON ``text`` as JupyterLab saves it, outputs and execution counts stripped.

    Raises :class:`~mooncake_lab.validate.InputError` when ``text`` is not a notebook's JSON."""
    import nbformat

    from .validate import InputError, describe

    if not isinstance(text, str):
        raise InputError(f"saved_form.text: got {describe(text)}; allowed: a notebook's JSON text (str)")
    try:
        nb = nbformat.reads(text, as_version=4)
        nb.metadata, nb.cells  # noqa: B018 - a JSON value that is not a notebook has neither
    except (ValueError, KeyError, AttributeError, TypeError, nbformat.ValidationError) as err:
        raise InputError(f"saved_form.text: not a notebook ({type(err).__name__}: {str(err)[:120]})") from None
    if nb.nbformat_minor < 5:     # JupyterLab 4 saves nbformat 4.5: every cell has an id
        nb.nbformat_minor = 5
        for cell in nb.cells:
            cell.setdefault("id", nbformat.v4.nbbase.random_cell_id())
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    old = nb.metadata.get("language_info", {}).get("version")
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = language_info(old)
    out = nbformat.writes(nb)
    return out if out.endswith("\n") else out + "\n"


def course_notebook_files(root: Path = ROOT / "notebooks") -> list[Path]:
    """Every ``.ipynb`` in ``notebooks/`` and ``notebooks/solutions/`` (no checkpoints)."""
    return sorted(p for p in list(root.glob("*.ipynb")) + list((root / "solutions").glob("*.ipynb")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mooncake_lab.notebook_form", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks (default: notebooks/ and notebooks/solutions/)")
    parser.add_argument("--check", action="store_true", help="only list notebooks not in saved form (exit 1)")
    args = parser.parse_args(argv)
    from nbformat import ValidationError

    paths = [Path(p) for p in args.notebooks] or course_notebook_files()
    off = []
    for p in paths:
        if not p.is_file():
            print(f"error: {p}: no such notebook", file=sys.stderr)
            return 2
        try:
            text = p.read_text(encoding="utf-8")
            want = saved_form(text)
        except (ValueError, KeyError, AttributeError, ValidationError) as err:   # not UTF-8 / JSON / a notebook
            print(f"error: {p}: not a readable notebook ({type(err).__name__}: {str(err)[:200]})", file=sys.stderr)
            return 2
        if want != text:
            off.append(p)
            if not args.check:
                p.write_text(want, encoding="utf-8")
    verb = "not in JupyterLab's saved form" if args.check else "rewritten in JupyterLab's saved form"
    print(f"{len(off)} of {len(paths)} notebooks {verb}" + "".join(f"\n  {p}" for p in off))
    return 1 if args.check and off else 0


if __name__ == "__main__":
    sys.exit(main())
