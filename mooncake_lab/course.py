"""Build the course as browsable HTML: ``make course`` (``python -m mooncake_lab.course``).

Every notebook (lectures in order, then their solutions) is executed in a fresh kernel, one after
another in this process, and written as HTML with its figures (nbconvert's lab template). Each
dashboard appears as a picture of its state after the run, with its controls' values; other
widgets keep their final state and render where the page can load the Jupyter widgets manager. ``index.html`` lists the lectures in order, titled by each notebook's first heading,
with links to the worked answers.
"""
from __future__ import annotations

import argparse
import html
import re
import sys
import time
from pathlib import Path
from queue import Empty

__all__ = ["build_course", "notebook_title", "course_notebooks", "notebook_client", "static_dashboards"]

ROOT = Path(__file__).resolve().parents[1]
#: A hang guard per cell, not a speed target (the budget is ≤ 60 s per notebook).
CELL_TIMEOUT_S = 180


def course_notebooks(notebooks_dir: str | Path = ROOT / "notebooks") -> list[Path]:
    """Lecture notebooks ``NN_*.ipynb`` and labs ``lab_*.ipynb`` in order, then their solutions in order."""
    d = Path(notebooks_dir)

    def of(folder: Path) -> list[Path]:
        return sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted(folder.glob("lab_*.ipynb"))

    return of(d) + of(d / "solutions")


def notebook_title(nb) -> str:
    """Text of the notebook's first Markdown heading (``""`` when it has none)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.lstrip().startswith("#"):
                    return line.strip().lstrip("#").strip()
    return ""


def notebook_client(nb, path: Path):
    """An nbclient for notebook ``nb`` (read from ``path``) that runs in the notebook's folder,
    keeps the widgets' state, and polls its shell channel in short steps.

    (Workaround for jupyter/nbclient#312: a cell that displays widgets can leave the wait for its
    shell reply blocked until the cell timeout even though the reply arrived — seen here as
    3-minute stalls at 0% CPU. Used by ``make course`` and by tests/test_notebooks.py.)"""
    from nbclient import NotebookClient

    class _Client(NotebookClient):
        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            channel = kc.shell_channel
            blocking_get = channel.get_msg

            async def get_msg(timeout=None):
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    step = 0.25 if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
                    try:
                        return await blocking_get(timeout=step)
                    except Empty:
                        if deadline is not None and time.monotonic() >= deadline:
                            raise

            channel.get_msg = get_msg
            return kc

    return _Client(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}})


def _index_html(entries: list[dict]) -> str:
    rows = []
    for e in entries:
        sol = (f' · <a href="{html.escape(e["solution"])}">worked answers</a>' if e["solution"] else "")
        rows.append(f'<li><a href="{html.escape(e["href"])}">{html.escape(e["title"])}</a>{sol}</li>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>mooncake-lab · the course</title>"
            "<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;line-height:1.6}</style>"
            "</head><body>\n<h1>mooncake-lab · the course</h1>\n"
            "<p>How Kimi's Mooncake serves LLMs, one lecture at a time (executed notebooks; "
            "run them yourself with <code>make lab</code>).</p>\n<ol start=\"0\">\n"
            + "\n".join(rows) + "\n</ol>\n</body></html>\n")


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def static_dashboards(nb) -> int:
    """Show each dashboard of the executed notebook ``nb`` as its picture and caption (the
    ``image/png`` and ``text/plain`` it publishes beside its widget view), not as a live widget:
    a page without a kernel cannot recompute a move, and its widgets need scripts from a CDN
    that an offline page cannot load. Other widgets are left as they are. Returns how many."""
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if _WIDGET_VIEW in data and "image/png" in data:
                caption = html.escape(str(data.get("text/plain", "")))
                data["text/html"] = (f'<figure class="mooncake-dashboard" style="margin:0">'
                                     f'<img src="data:image/png;base64,{data["image/png"]}" alt="{caption}">'
                                     f'<figcaption style="font-size:90%;color:#444">{caption}</figcaption></figure>')
                for key in (_WIDGET_VIEW, "image/png"):
                    del data[key]
                n += 1
    return n


def _link_notes(body: str, folder: Path, out: Path) -> str:
    """``body`` (a page's HTML) with its links to the course's notes (``folder/*.md``, e.g. ``routers.md``)
    pointed at their HTML, written beside the lectures in ``out`` (``routers.html``)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    for md in sorted(folder.glob("*.md")):
        page = out / f"{md.stem}.html"
        if not page.exists():
            out.mkdir(parents=True, exist_ok=True)
            title = next((ln.lstrip("# ").strip() for ln in md.read_text(encoding="utf-8").splitlines()
                          if ln.startswith("#")), md.stem)
            page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                            "<style>body{font-family:sans-serif;max-width:56em;margin:2em auto;line-height:1.5}"
                            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>"
                            f"</head><body>{markdown2html_mistune(md.read_text(encoding='utf-8'))}</body></html>",
                            encoding="utf-8")
        body = re.sub(rf'href="((?:\.\./)?){re.escape(md.name)}(#[^"]*)?"', rf'href="\g<1>{md.stem}.html\2"', body)
    return body


def build_course(out_dir: str | Path = ROOT / "build" / "course", notebooks: list[str | Path] | None = None,
                 *, log=print) -> Path:
    """Execute ``notebooks`` (default: :func:`course_notebooks`) and write HTML plus ``index.html``.

    A lecture ``NN_x.ipynb`` becomes ``out_dir/NN_x.html``; a notebook in a ``solutions`` folder
    becomes ``out_dir/solutions/NN_x.html`` and is linked from its lecture's line in the index.
    A cell that raises stops the build with nbclient's ``CellExecutionError`` naming the notebook.
    Returns the path of ``index.html``.
    """
    import nbformat
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter

    paths = [Path(p).resolve() for p in (course_notebooks() if notebooks is None else notebooks)]
    if not paths:
        raise ValueError("notebooks must name at least one .ipynb file, got none")
    for p in paths:
        if p.suffix != ".ipynb" or not p.is_file():
            raise ValueError(f"notebooks must be existing .ipynb files, got {str(p)!r}")
    out = Path(out_dir)
    exporter = HTMLExporter(template_name="lab")
    lectures: dict[str, dict] = {}
    solutions: dict[str, str] = {}
    t_all = time.perf_counter()
    for p in paths:
        is_solution = p.parent.name == "solutions"
        rel = f"solutions/{p.stem}.html" if is_solution else f"{p.stem}.html"
        nb = nbformat.read(p, as_version=4)
        t0 = time.perf_counter()
        try:
            notebook_client(nb, p).execute()
        except CellExecutionError as err:
            raise CellExecutionError(f"{p.name}: {err}", err.ename, err.evalue) from None
        static_dashboards(nb)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook_title(nb) or p.stem}})
        body = _link_notes(body, p.parent.parent if is_solution else p.parent, out)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(body, encoding="utf-8")
        log(f"  {rel:<45} {time.perf_counter() - t0:6.1f} s")
        if is_solution:
            solutions[p.stem] = rel
        else:
            lectures[p.stem] = {"href": rel, "title": notebook_title(nb) or p.stem}
    entries = [{**e, "solution": solutions.get(stem)} for stem, e in lectures.items()]
    index = out / "index.html"
    index.write_text(_index_html(entries), encoding="utf-8")
    log(f"wrote {len(paths)} notebooks and {index} in {time.perf_counter() - t_all:.1f} s")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mooncake_lab.course", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to build (default: every lecture, then solutions)")
    parser.add_argument("--out", default=str(ROOT / "build" / "course"), help="output folder (default build/course)")
    args = parser.parse_args(argv)
    try:
        build_course(args.out, args.notebooks or None)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
