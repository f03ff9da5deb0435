"""`make course` logic (mooncake_lab.course) on a small subset: lecture 00 and its solutions.

The full build executes every notebook; the suite already does that once (tests/test_notebooks.py),
so here only the two cheapest notebooks are built, plus two tiny notebooks written by the test."""
from __future__ import annotations

import re
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from mooncake_lab import course

ROOT = Path(__file__).resolve().parents[1]
LECTURE_00 = ROOT / "notebooks" / "00_welcome.ipynb"
SOLUTION_00 = ROOT / "notebooks" / "solutions" / "00_welcome.ipynb"


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self.links.append((self._href, ""))

    def handle_data(self, data):
        if self._href is not None:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)

    def handle_endtag(self, tag):
        if tag == "a":
            self._href = None


def _links(path: Path) -> list[tuple[str, str]]:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p.links


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    # Given solutions first on purpose: the index must still list by lecture and link the answers.
    index = course.build_course(out, [SOLUTION_00, LECTURE_00], log=lambda *_: None)
    return out, index


def test_index_lists_lecture_with_title_and_links_its_solution(built):
    out, index = built
    assert index == out / "index.html"
    title = course.notebook_title(nbformat.read(LECTURE_00, as_version=4))
    assert title.startswith("00 · Welcome"), title  # the notebook's first heading, '#' removed
    links = _links(index)
    assert links == [("00_welcome.html", title), ("solutions/00_welcome.html", "worked answers")]
    for href, _ in links:
        assert (out / href).is_file(), f"index links {href}, which was not written"


def test_lecture_html_has_executed_figures(built):
    out, _ = built
    page = (out / "00_welcome.html").read_text(encoding="utf-8")
    # Lecture 00 draws two figures (request timeline, coupled stall): both embedded as PNG.
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', page)) >= 2
    assert "mooncake_lab 0." in page  # the first code cell's printed version: the notebook ran
    assert "Traceback" not in page


def test_widget_state_is_stored(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A widget\n\ntext"),
        nbformat.v4.new_code_cell("import ipywidgets as w\nw.IntSlider(value=37, description='probe')"),
    ])
    path = tmp_path / "01_widget.ipynb"
    nbformat.write(nb, path)
    course.build_course(tmp_path / "out", [path], log=lambda *_: None)
    page = (tmp_path / "out" / "01_widget.html").read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-state+json" in page
    assert '"value": 37' in page and "probe" in page
    assert _links(tmp_path / "out" / "index.html") == [("01_widget.html", "A widget")]


def test_failing_notebook_stops_the_build_naming_it(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
    path = tmp_path / "02_broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CellExecutionError, match="02_broken.ipynb"):
        course.build_course(tmp_path / "out", [path], log=lambda *_: None)
    assert not (tmp_path / "out" / "index.html").exists()


def test_title_and_inputs():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("# not a heading"),
                                         nbformat.v4.new_markdown_cell("intro\n\n## 03 · Traces  \nmore")])
    assert course.notebook_title(nb) == "03 · Traces"
    assert course.notebook_title(nbformat.v4.new_notebook()) == ""
    with pytest.raises(ValueError, match="^notebooks must be existing .ipynb files, got "):
        course.build_course("unused", [ROOT / "README.md"])
    with pytest.raises(ValueError, match="^notebooks must name at least one .ipynb file"):
        course.build_course("unused", [])


def test_default_order_is_lectures_then_solutions():
    paths = course.course_notebooks()
    names = [str(p.relative_to(ROOT / "notebooks")) for p in paths]
    lectures = [n for n in names if not n.startswith("solutions/")]
    assert names[:len(lectures)] == sorted(lectures) and lectures[0] == "00_welcome.ipynb"
    assert names[len(lectures):] == sorted(n for n in names if n.startswith("solutions/"))


# --- instructor aids: reproduce --figures for every lecture; the projector style ------------------

def test_every_lecture_registers_headline_figures():
    from mooncake_lab import reproduce

    reproduce.collect_figures("no_such_prefix")  # imports every lecture's module (registers the groups)
    lectures = {p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    modules = {fn.__module__.rsplit(".", 1)[-1] for fn in reproduce._FIGURES.values()}  # e.g. "l03_cache"
    covered = {m[1:3] for m in modules if re.fullmatch(r"l\d\d_\w+", m)}
    assert lectures <= covered, f"lectures without a @figure_group: {sorted(lectures - covered)}"


def test_reproduce_figures_cli_writes_lecture_00(tmp_path, capsys):
    from mooncake_lab.__main__ import main

    out = tmp_path / "figs"
    assert main(["reproduce", "--only", "welcome", "--figures", str(out)]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == ["l00_coupled_stall.png", "l00_request_timeline.png"]
    for name in written:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "welcome.one_request_ttft_s" in printed and "wrote 2 figures" in printed


def test_welcome_metrics_by_hand():
    from mooncake_lab.experiments import l00_welcome

    m = {x.name: x.ours for x in l00_welcome.metrics()}
    # 12,035 tokens × ≈ 140 GFLOP/token ≈ 1.68 PFLOP (+ attention) on 8 × 312 TFLOP/s = 2.50 PFLOP/s
    # → ≈ 0.67 s at 100% of peak plus the attention term: between 0.6 s and 1 s.
    assert 0.6 < m["welcome.one_request_ttft_s"] < 1.0
    # 32,000 × 140 GFLOP ≈ 4.5 PFLOP / 2.50 PFLOP/s ≈ 1.8 s, + attention (quadratic) ≈ 2.3 s: far past 0.1 s.
    assert 1.8 < m["welcome.coupled_stall_32k_gap_s"] < 3.0


def _sizes(fig):
    ax = fig.axes[0]
    return {"title": ax.title.get_fontsize(), "xlabel": ax.xaxis.label.get_fontsize(),
            "ytick": ax.get_yticklabels()[0].get_fontsize(),
            "legend": ax.get_legend().get_texts()[0].get_fontsize(),
            "line": max(line.get_linewidth() for line in ax.get_lines()),
            "width_in": fig.get_figwidth()}


def test_projector_style_enlarges_figures_and_resets():
    from mooncake_lab import style  # the public entry point, as in a notebook
    from mooncake_lab.experiments import l00_welcome
    from mooncake_lab.plots import current_style
    from mooncake_lab.plots import welcome as plots

    df = l00_welcome.coupled_stall()
    assert current_style() == "notebook"
    default = _sizes(plots.coupled_stall(df))
    try:
        style("projector")
        assert current_style() == "projector"
        big = _sizes(plots.coupled_stall(df))
    finally:
        style("notebook")
    for key in default:
        assert big[key] > default[key], f"{key}: projector {big[key]} vs notebook {default[key]}"
    # Styles in plots/__init__.py: title 17 vs 11 pt, width × 1.35 (7 in → 9.45 in).
    assert (default["title"], big["title"]) == (11, 17)
    assert big["width_in"] == pytest.approx(7 * 1.35)
    assert _sizes(plots.coupled_stall(df)) == default  # back to the notebook style
    with pytest.raises(ValueError, match="style must be one of"):
        style("poster")
    assert current_style() == "notebook"


def test_links_to_the_course_notes_work_in_the_html_build(tmp_path):
    """Lecture 09 links the course's notes (notebooks/routers.md): the build writes them as HTML beside the
    lectures and points the links of lectures and worked answers there."""
    folder = tmp_path / "notebooks"
    (folder / "solutions").mkdir(parents=True)
    (folder / "notes.md").write_text("# The notes\n\n| rule | source |\n|---|---|\n| least KV | a.py |\n")
    for path, link in ((folder / "98_demo.ipynb", "notes.md#rules"), (folder / "solutions" / "98_demo.ipynb", "../notes.md")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# Demo\n\nSee [the notes]({link}).")])
        nbformat.write(nb, path)
    out = tmp_path / "out"
    course.build_course(out, [folder / "98_demo.ipynb", folder / "solutions" / "98_demo.ipynb"], log=lambda *_: None)
    notes = (out / "notes.html").read_text()
    assert "<title>The notes</title>" in notes and "<table>" in notes and "least KV" in notes
    lecture, answers = _Links(), _Links()
    lecture.feed((out / "98_demo.html").read_text())
    answers.feed((out / "solutions" / "98_demo.html").read_text())
    assert ("notes.html#rules", "the notes") in lecture.links
    assert ("../notes.html", "the notes") in answers.links
    assert (out / "solutions" / "../notes.html").resolve() == (out / "notes.html").resolve()


def test_the_lectures_cite_only_notes_that_are_in_the_course():
    """Every .md a lecture links is a file of notebooks/, so the link works in JupyterLab and in the build."""
    missing = []
    for nb_path in course.course_notebooks(ROOT / "notebooks"):
        nb = nbformat.read(nb_path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for target in re.findall(r"\]\(([^)#\s]+\.md)", cell.source):
                    if not (nb_path.parent / target).resolve().is_file():
                        missing.append(f"{nb_path.name}: {target}")
    assert not missing, missing


def test_dashboards_are_pictures_with_their_settings_in_the_html(tmp_path):
    """A page without a kernel cannot move a slider: each dashboard is shown as drawn after the run,
    captioned with its controls' values, and needs no script from a CDN; a plain widget is left live."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Dashboards\n\ntext"),
        nbformat.v4.new_code_cell("from mooncake_lab.dashboards.roofline import RooflineDashboard\n"
                                  "RooflineDashboard()"),
        nbformat.v4.new_code_cell("import ipywidgets as w\nw.IntSlider(value=37, description='probe')"),
    ])
    path = tmp_path / "01_dash.ipynb"
    nbformat.write(nb, path)
    course.build_course(tmp_path / "out", [path], log=lambda *_: None)
    page = (tmp_path / "out" / "01_dash.html").read_text(encoding="utf-8")
    figures = re.findall(r'<figure class="mooncake-dashboard".*?</figure>', page, flags=re.S)
    assert len(figures) == 1, figures
    assert re.search(r'<img[^>]+src="data:image/png;base64,iVBORw0KGgo', figures[0])   # a PNG
    from mooncake_lab.dashboards.roofline import RooflineDashboard
    d = RooflineDashboard()
    caption = d.static_caption()
    assert html_escape(caption) in figures[0]
    for name, w in d.controls.items():   # every control named with the value it shows
        assert (w.description or name).rstrip(": ") in caption
    assert page.count('<script type="application/vnd.jupyter.widget-view+json">') == 1   # the slider only
    assert '"value": 37' in page


def test_a_dashboard_publishes_its_picture_beside_the_widget():
    import base64

    from mooncake_lab.dashboards.roofline import RooflineDashboard
    d = RooflineDashboard()
    bundle = d._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == d.widget.model_id
    assert base64.b64decode(bundle["image/png"]) == d.png
    assert bundle["text/plain"] == d.static_caption() and "run the notebook" in bundle["text/plain"]
