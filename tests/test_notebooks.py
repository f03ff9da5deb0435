"""Every notebook (lectures and solutions) runs top to bottom in a fresh kernel, shows its figures,
and prints no error. Executed with nbclient; the kernel inherits this process's environment
(``MOONCAKE_LAB_DATA`` set by ``.ci/run`` when the shared traces exist)."""
from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from mooncake_lab.course import course_notebooks, notebook_client

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = course_notebooks(ROOT / "notebooks")   # lectures NN_*, labs lab_*, then their solutions


def _text_of(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_runs_clean(path, capsys):
    nb = nbformat.read(path, as_version=4)
    client = notebook_client(nb, path)
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", f"{path.name} cell {i}: {out.get('ename')}: {out.get('evalue')}"
            text = _text_of(out)
            has_image = "image/png" in out.get("data", {})
            assert not (text.startswith("<Figure size") and not has_image), (
                f"{path.name} cell {i} shows '{text[:40]}' instead of a figure (is %matplotlib inline missing?)")
            assert "Traceback (most recent call last)" not in text, f"{path.name} cell {i} printed a traceback"
    with capsys.disabled():
        print(f"\n  {path.relative_to(ROOT)} executed in {elapsed:.1f} s")
