"""What an executed notebook must not show, checked the same way wherever it ran: by nbclient in a
fresh kernel (tests/test_notebooks.py) or in JupyterLab, read back from the file the page saved
(tests/test_browser.py). Also: where the lectures are executed in this session, and which version of
a notebook the tests read (:func:`committed_text`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Debian's Chromium, which tests/test_browser.py drives (override with MOONCAKE_LAB_CHROMIUM).
CHROMIUM = Path(os.environ.get("MOONCAKE_LAB_CHROMIUM", "/usr/bin/chromium"))


def committed_text(path: Path, root: Path = ROOT) -> str:
    """A notebook as git holds it (the index: committed, or staged with ``git add``), not as the
    working copy has it: a student's JupyterLab saves their outputs and answers there, and the tests
    check the course, not the student's copy. Where git does not know the file (a zip download, a
    new file), the working copy."""
    try:
        rel = Path(path).resolve().relative_to(Path(root).resolve())
        r = subprocess.run(["git", "-C", str(root), "show", f":{rel.as_posix()}"], capture_output=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        r = None
    if r is not None and r.returncode == 0:
        return r.stdout.decode("utf-8")
    return Path(path).read_text(encoding="utf-8")


def differs_from_committed(paths, root: Path = ROOT) -> list[str]:
    """The notebooks among ``paths`` whose working copy is not what git holds (named for a note)."""
    return [Path(p).name for p in paths if Path(p).read_text(encoding="utf-8") != committed_text(p, root)]


def copy_committed(src: Path, dst: Path) -> None:
    """``src`` (a folder of notebooks) copied to ``dst`` with every notebook as git holds it."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for nb in dst.rglob("*.ipynb"):
        nb.write_text(committed_text(src / nb.relative_to(dst)), encoding="utf-8")


def _text_of(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


def stand_in_cells(nb) -> list[int]:
    """Code cells (indices) whose output says a synthetic stand-in replaced a trace."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any("stand-in" in _text_of(out).lower() for out in cell.get("outputs", []))]


def output_problems(nb, name: str, released_traces: bool) -> list[str]:
    """Every problem of the executed notebook ``nb`` (named ``name``): an error output, a traceback
    printed as text, a figure shown as its repr instead of an image, and — when the kernel was given
    the released traces — a fall-back to a synthetic stand-in."""
    found = []
    stand_in = stand_in_cells(nb)
    if released_traces and stand_in:
        found.append(f"{name} cells {stand_in} fell back to a synthetic stand-in although the kernel was given "
                     f"the released traces")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"{name} cell {i}: {out.get('ename')}: {out.get('evalue')}")
            text = _text_of(out)
            if text.startswith("<Figure size") and "image/png" not in out.get("data", {}):
                found.append(f"{name} cell {i} shows '{text[:40]}' instead of a figure (is %matplotlib inline missing?)")
            if "Traceback (most recent call last)" in text:
                found.append(f"{name} cell {i} printed a traceback")
            found += [f"{name} cell {i}: {p}" for p in rendering_problems(out)]
    return found


_CODE_SPAN = re.compile(r"`[^`\n]*`")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_SCIENTIFIC = re.compile(r"(?<![\w.])\d\.\d+e[+-]\d+\b")
_CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)


def rendering_problems(output) -> list[str]:
    """What a student would see wrong in ``output`` as JupyterLab renders it: a markdown output with a
    price such as "$145.6" and another "$" (JupyterLab typesets the text between two "$" as LaTeX), and an
    HTML table with a number in scientific notation ("1.638e+04") or a truncated cell ("…", "...")."""
    data = output.get("data", {})
    found = []
    md = data.get("text/markdown")
    if md:
        md = _CODE_SPAN.sub("", "".join(md) if isinstance(md, list) else md)
        dollars = [m.start() for m in _UNESCAPED_DOLLAR.finditer(md)]
        if len(dollars) >= 2 and any(md[k + 1:k + 2].isdigit() for k in dollars):
            k = next(k for k in dollars if md[k + 1:k + 2].isdigit())
            found.append(f"a markdown output typesets a price as LaTeX (two unescaped '$'): "
                         f"{md[max(0, k - 30):k + 40]!r}; write \\$ or USD")
    html = data.get("text/html")
    if html:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in _CELL.findall("".join(html) if isinstance(html, list) else html)]
        sci = [c for c in cells if _SCIENTIFIC.search(c)]
        if sci:
            found.append(f"a table prints numbers in scientific notation: {sci[:3]}")
        cut = [c for c in cells if c in ("...", "…") or (len(c) > 1 and c.endswith(("...", "…")))]
        if cut:
            found.append(f"a table has truncated cells or rows: {cut[:3]}")
    return found


def browser_missing() -> str | None:
    """Why tests/test_browser.py cannot drive JupyterLab here (None: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as err:
        return f"the playwright package is not installed ({err}); `pip install -e .[test]` installs it"
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM}: install Debian's `chromium` (.ci/run does) or set MOONCAKE_LAB_CHROMIUM"
    return None


def lectures_run_in_browser(session) -> bool:
    """True when this pytest session also runs tests/test_browser.py's lecture test and it can run: then
    that test executes every lecture in a fresh JupyterLab kernel, with :func:`output_problems`'s checks
    on the saved notebook, and running it once more with nbclient would test nothing new."""
    return browser_missing() is None and any(
        item.get_closest_marker("browser") is not None and item.originalname == "test_lecture_runs_in_jupyterlab"
        for item in session.items)
