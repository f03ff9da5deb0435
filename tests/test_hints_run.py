"""Every piece of code an exercise hint shows (in backticks) runs when pasted into its notebook.

A hint that says ``l03_cache.hit_curve(...)`` while the notebook imported the module as ``cache``
gives a student a NameError. For each hint snippet that parses as a Python expression, the test builds
the notebook's namespace the way a student has it — the cells that define the names the snippet uses
(found by their top-level assignments and imports, resolved recursively) — and evaluates the snippet.
"""
from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import nbformat
import pytest

from mooncake_lab.exercises import list_exercises

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
#: Lectures whose hints this test covers (one helper's lectures; others add theirs).
LECTURES = ("00", "03", "04", "05")
_BACKTICKS = re.compile(r"`([^`]+)`")


def _free_names(tree: ast.AST) -> set[str]:
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return loaded - stored - set(dir(builtins))


def _code_snippets(hint: str) -> list[str]:
    out = []
    for s in _BACKTICKS.findall(hint):
        try:
            ast.parse(s, mode="eval")
        except SyntaxError:
            continue
        if any(ch in s for ch in "(.["):   # a call, attribute or subscript: code, not a bare name
            out.append(s)
    return out


def _cells(nn: str) -> list[tuple[str, ast.Module, set[str]]]:
    (path,) = NOTEBOOKS.glob(f"{nn}_*.ipynb")
    nb = nbformat.read(str(path), as_version=4)
    out = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        src = "\n".join(line for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(src)
        defined = set()
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        out.append((src, tree, defined))
    return out


def _namespace_for(nn: str, names: set[str]) -> dict:
    cells = _cells(nn)
    ns: dict = {}
    done: set[int] = set()

    def need(name: str, depth: int = 0):
        if name in ns or depth > 20:
            return
        for i, (src, tree, defined) in enumerate(cells):
            if name in defined and i not in done:
                done.add(i)
                for dep in sorted(_free_names(tree)):
                    need(dep, depth + 1)
                exec(compile(tree, f"<{nn} cell {i}>", "exec"), ns)
                return

    for n in sorted(names):
        need(n)
    return ns


CASES = [(nn, ex.id, s) for nn in LECTURES for ex in list_exercises(nn) for s in _code_snippets(ex.hint)]


@pytest.mark.parametrize("nn,exercise_id,snippet", CASES, ids=[f"{e}:{s[:30]}" for _, e, s in CASES])
def test_hint_code_runs_in_its_notebook(nn, exercise_id, snippet):
    import matplotlib
    matplotlib.use("Agg")
    tree = ast.parse(snippet, mode="eval")
    ns = _namespace_for(nn, _free_names(tree))
    missing = _free_names(tree) - set(ns)
    assert not missing, f"{exercise_id}: hint code {snippet!r} uses {sorted(missing)}, which notebook {nn} never defines"
    eval(compile(tree, "<hint>", "eval"), ns)


def test_every_lecture_has_hint_code_to_check():
    assert {nn for nn, _, _ in CASES} == set(LECTURES)
