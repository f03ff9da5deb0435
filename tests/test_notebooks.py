"""Every notebook (lectures and solutions) runs top to bottom in a fresh kernel, shows its figures,
and prints no error. Executed with nbclient; the kernel inherits this process's environment, with
downloads off and the traces set per notebook (:func:`_kernel_traces`): lectures read the released
traces when this machine has them (``$MOONCAKE_LAB_DATA`` or ``../shared``), the worked answers —
which repeat their lecture's cells — run as on a fresh offline machine, with the synthetic stand-ins.
So every lecture runs both ways without running twice; and when this session also drives the lectures
in JupyterLab (tests/test_browser.py, which can run here), the lectures run there only, with the same
checks (:mod:`notebook_checks`) on the notebook the page saved. Also: every committed notebook is in the form
JupyterLab saves it (:mod:`mooncake_lab.notebook_form`)."""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import nbformat
import pytest

from conftest import _real_trace_dir
from notebook_checks import committed_text, differs_from_committed, lectures_run_in_browser, output_problems, stand_in_cells
from mooncake_lab import trace_data
from mooncake_lab.course import course_notebooks, notebook_client
from mooncake_lab.notebook_form import saved_form

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = course_notebooks(ROOT / "notebooks")   # lectures NN_*, labs lab_*, then their solutions


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_is_committed_as_jupyterlab_saves_it(path):
    """Opening and saving a notebook in JupyterLab leaves git clean (outputs stay stripped:
    tests/test_packaging.py). Fix with ``python -m mooncake_lab.notebook_form``. Checked on the
    version git holds (your own saved outputs and answers do not count: notebook_checks.committed_text)."""
    text = committed_text(path)
    assert text == saved_form(text), f"{path.name} is not in JupyterLab's saved form: run python -m mooncake_lab.notebook_form"


def test_notebooks_share_one_language_info():
    infos = {json.dumps(json.loads(committed_text(p))["metadata"].get("language_info"), sort_keys=True) for p in NOTEBOOKS}
    assert len(infos) == 1, infos


def test_the_tests_read_notebooks_as_git_holds_them_not_a_students_saved_copy(tmp_path):
    """A student's JupyterLab autosaves outputs (and their answers) into notebooks/: the tests read the
    version git holds, so ``make test`` stays green after using the course."""
    import subprocess

    repo = tmp_path / "clone"
    (repo / "notebooks").mkdir(parents=True)
    path = repo / "notebooks" / NOTEBOOKS[0].name
    path.write_text(committed_text(NOTEBOOKS[0]), encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "course"], check=True)
    committed = path.read_text(encoding="utf-8")
    nb = nbformat.reads(committed, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs, code.execution_count = [nbformat.v4.new_output("stream", text="a student's output")], 7
    path.write_text(nbformat.writes(nb), encoding="utf-8")           # what JupyterLab's autosave leaves
    assert committed_text(path, repo) == committed != path.read_text(encoding="utf-8")
    assert committed_text(path, repo) == saved_form(committed_text(path, repo))   # the check passes
    assert differs_from_committed([path], repo) == [path.name]
    outside = tmp_path / "new.ipynb"          # git does not know it: the file as it is
    outside.write_text("{}")
    assert committed_text(outside, repo) == "{}"


def test_saved_form_by_hand():
    """What JupyterLab 4.6 wrote when it saved an unmodified notebook (seen in a real session):
    language_info filled from the kernel, nbformat's JSON (sorted keys, indent 1, UTF-8, final newline)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 中文 ✅"), nbformat.v4.new_code_cell("1")])
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1")]
    nb.cells[1].execution_count = 3
    nb.metadata["language_info"] = {"name": "python"}
    text = saved_form(json.dumps(nb))
    got = json.loads(text)
    assert got["metadata"]["language_info"] == {
        "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py", "mimetype": "text/x-python",
        "name": "python", "nbconvert_exporter": "python", "pygments_lexer": "ipython3",
        "version": platform.python_version()}
    assert got["metadata"]["kernelspec"]["name"] == "python3" and got["nbformat_minor"] == 5
    assert got["cells"][1]["outputs"] == [] and got["cells"][1]["execution_count"] is None
    assert text.endswith("}\n") and "# 中文 ✅" in text and text.startswith('{\n "cells": [\n  {\n   "cell_type"')
    assert saved_form(text) == text                                  # idempotent
    got["metadata"]["language_info"]["version"] = "3.99.0"           # a version already there is kept
    assert '"version": "3.99.0"' in saved_form(json.dumps(got))


def _kernel_traces(path: Path, tmp_path: Path, monkeypatch) -> str:
    """Put the traces of ``path``'s kernel in place (it inherits ``os.environ``); says which."""
    monkeypatch.setenv(trace_data.ENV_OFFLINE, "1")
    real = _real_trace_dir()
    if real is not None and path.parent.name != "solutions":
        monkeypatch.setenv(trace_data.ENV_DATA, str(real))
        return f"released traces from {real}"
    empty = tmp_path / "no-traces"
    empty.mkdir()
    monkeypatch.setenv(trace_data.ENV_DATA, str(empty))
    # the kernel looks in the same places; project data/ and the user cache cannot be hidden from it
    found = [str(f[1]) for f in map(trace_data.find_local, trace_data.TRACE_FILES) if f is not None]
    return f"no traces given, but it finds {', '.join(found)}" if found else "no traces: synthetic stand-ins"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_runs_clean(path, capsys, tmp_path, monkeypatch, request):
    if path.parent.name != "solutions" and lectures_run_in_browser(request.session):
        pytest.skip(f"{path.name} runs in a fresh kernel in JupyterLab in this session (tests/test_browser.py), "
                    "checked there as here")
    traces = _kernel_traces(path, tmp_path, monkeypatch)
    nb = nbformat.reads(committed_text(path), as_version=4)   # the course's version, not a student's copy
    client = notebook_client(nb, path)
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    problems = output_problems(nb, path.name, released_traces=traces.startswith("released"))
    assert not problems, "\n".join(problems)
    stand_in = stand_in_cells(nb)
    with capsys.disabled():
        print(f"\n  {path.relative_to(ROOT)} executed in {elapsed:.1f} s ({traces}"
              f"{f'; stand-in shown in cells {stand_in}' if stand_in else ''})")


def test_output_checks_catch_what_they_should():
    """The checks above (shared with the browser test) can fail: an error, a printed traceback, a figure's
    repr, and a stand-in where the released traces were given are each reported; a clean notebook is not."""
    v4 = nbformat.v4
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("stand-in"), v4.new_code_cell("1"), v4.new_code_cell("2")])
    assert output_problems(nb, "a", released_traces=True) == []
    nb.cells[1].outputs = [v4.new_output("stream", text="using the calibrated synthetic Stand-In")]
    assert stand_in_cells(nb) == [1] and output_problems(nb, "a", released_traces=False) == []
    assert output_problems(nb, "a", released_traces=True) == [
        "a cells [1] fell back to a synthetic stand-in although the kernel was given the released traces"]
    nb.cells[1].outputs = [v4.new_output("error", ename="ValueError", evalue="x", traceback=[]),
                           v4.new_output("stream", text="Traceback (most recent call last):\n"),
                           v4.new_output("execute_result", data={"text/plain": "<Figure size 640x480 with 1 Axes>"})]
    found = output_problems(nb, "a", released_traces=False)
    assert found == ["a cell 1: ValueError: x", "a cell 1 printed a traceback",
                     "a cell 1 shows '<Figure size 640x480 with 1 Axes>' instead of a figure (is %matplotlib inline missing?)"]
    nb.cells[1].outputs[2]["data"]["image/png"] = "iVBOR"
    assert len(output_problems(nb, "a", released_traces=False)) == 2


def test_output_checks_catch_what_renders_badly():
    """A price typeset as LaTeX between two '$', a number in scientific notation and a truncated cell in a
    table are reported; math, an escaped price, a lone '$' and clean tables are not."""
    from notebook_checks import rendering_problems

    def md(text):
        return {"output_type": "display_data", "data": {"text/markdown": text}}

    def html(cells):
        return {"output_type": "execute_result", "data": {"text/html": "<table>" + "".join(
            f"<tr><td>{c}</td></tr>" for c in cells) + "</table>"}}

    bad = rendering_problems(md("**US$145.6/h** against $160.0/h for the same goodput"))
    assert len(bad) == 1 and "typesets a price as LaTeX" in bad[0] and "145.6" in bad[0]
    for fine in ("$h_i = m_i B$ tokens", r"\$145.6/h against \$160.0/h", "costs $145.6/h", "`$1` and `$2`"):
        assert rendering_problems(md(fine)) == [], fine
    assert "scientific notation" in rendering_problems(html(["1.638e+04", "12"]))[0]
    assert "truncated" in rendering_problems(html(["without kvcen…", "3"]))[0]
    assert "truncated" in rendering_problems(html(["...", "3"]))[0]
    assert rendering_problems(html(["16,384", "0.25", "Fig. 8", "e.g. 3"])) == []


def test_notebook_form_command(tmp_path, capsys):
    from mooncake_lab.notebook_form import main

    nb = tmp_path / "a.ipynb"
    nb.write_text(json.dumps(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])))
    assert main(["--check", str(nb)]) == 1 and "1 of 1 notebooks not in" in capsys.readouterr().out
    assert main([str(nb)]) == 0 and main(["--check", str(nb)]) == 0     # rewritten, then in form
    assert nb.read_text() == saved_form(nb.read_text())
    for name, content in (("nope.ipynb", "nope"), ("empty.ipynb", "{}"), ("bytes.ipynb", b"\xff\xfe")):
        bad = tmp_path / name
        bad.write_bytes(content if isinstance(content, bytes) else content.encode())
        assert main([str(bad)]) == 2 and f"{bad}: not a readable notebook" in capsys.readouterr().err
        assert bad.read_bytes() == (content if isinstance(content, bytes) else content.encode())  # untouched
    assert main([str(tmp_path / "missing.ipynb")]) == 2 and "no such notebook" in capsys.readouterr().err
