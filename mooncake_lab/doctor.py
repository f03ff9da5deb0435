"""``python -m mooncake_lab doctor``: what an instructor runs before class.

Prints library versions, checks that numba compiles (and how long it took), that ipywidgets and
JupyterLab import, that ``$MOONCAKE_LAB_DATA`` (when set) is a readable folder, where each trace would be
loaded from, and whether each local trace file is the released one (sha256, or request count where none is
pinned) and parses. Returns 0 when all is well.
"""
from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from pathlib import Path

REQUIRED = ["numpy", "pandas", "matplotlib", "numba", "ipywidgets", "jupyterlab", "pooch", "tqdm"]


def _version(name: str) -> str | None:
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure is a doctor finding
        return None
    return getattr(mod, "__version__", "?")


def _numba_check() -> tuple[bool, str]:
    try:
        import numpy as np
        from numba import njit

        @njit(cache=False)
        def _sum(a):
            s = 0.0
            for x in a:
                s += x
            return s

        t0 = time.perf_counter()
        ok = _sum(np.arange(10.0)) == 45.0
        return ok, f"compiled and ran a kernel in {time.perf_counter() - t0:.2f} s"
    except Exception as err:  # noqa: BLE001
        return False, f"numba failed: {err}"


def _data_folder() -> tuple[list[str], int]:
    """The line on ``$MOONCAKE_LAB_DATA`` (none when unset or empty, as the lookup ignores it then) and 1 if
    it names no readable folder: the lookup then silently skips it, so a trace put there is never found."""
    from .trace_data import ENV_DATA

    raw = os.environ.get(ENV_DATA)
    if not raw:
        return [], 0
    p = Path(raw).expanduser()
    if p.is_dir() and os.access(p, os.R_OK | os.X_OK):
        return [f"ok   ${ENV_DATA} = {raw} (a folder)"], 0
    what = ("is a folder you may not read" if p.is_dir() else "is a file, not a folder" if p.exists()
            else "is a broken link" if p.is_symlink() else "does not exist")
    return [f"FAIL ${ENV_DATA} = {raw!r} {what}: no trace is looked up there. Set it to the folder holding the "
            f"trace files (export {ENV_DATA}=/path/to/folder, not to a .jsonl file) or unset it "
            f"(unset {ENV_DATA})"], 1


def _trace_sources() -> tuple[list[str], int]:
    """One line per released trace (where from; for a local file, whether it is the released one and
    parses), and the number of problems (a local file that is not the release, or does not load)."""
    from .trace_data import TRACE_FILES, find_local, verify, where_is
    from .traces import read_jsonl

    lines, problems = _data_folder()
    for name in TRACE_FILES:
        lines.append(f"{name:<13} {where_is(name)}")
        found = find_local(name)
        if found is None:
            continue
        try:
            ok, what = verify(name, found[1])
            if ok:
                read_jsonl(found[1], name=name)
        except (ValueError, OSError) as err:
            ok, what = False, f"does not load: {err}"
        problems += not ok
        lines.append(f"  {'ok ' if ok else 'FAIL'} {what}")
    return lines, problems


def run_doctor(out=sys.stdout) -> int:
    """Print the checks; return 0 if every required piece works, 1 otherwise."""
    from . import __version__

    problems = 0
    print(f"mooncake_lab {__version__} on Python {platform.python_version()} ({sys.executable})", file=out)
    for name in REQUIRED:
        v = _version(name)
        problems += v is None
        print(f"  {'ok ' if v else 'MISSING'} {name:<11} {v or 'not importable: run `make lab` or pip install -e .'}",
              file=out)
    ok, msg = _numba_check()
    problems += not ok
    print(f"  {'ok ' if ok else 'FAIL'} numba       {msg}", file=out)
    from .experiments.lab_store import can_run_live
    from .store_lab import isolation

    live, why = can_run_live()   # optional: the store lab shows a recorded run where this says no
    where = "isolated in a private network namespace" if isolation()[0] else "ON THE HOST NETWORK (opted in)"
    print(f"  {'ok ' if live else 'note'} store lab   "
          f"{f'the real Mooncake Store {why} runs, {where}' if live else why + ' → the lab shows a recorded run'}",
          file=out)
    print("trace data (first match wins):", file=out)
    lines, bad = _trace_sources()
    problems += bad
    for line in lines:
        print(f"  {line}", file=out)
    print("all good — open the course with `make lab`" if not problems else f"{problems} problem(s) found",
          file=out)
    return 0 if not problems else 1
