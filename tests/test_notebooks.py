"""Every notebook (lectures and solutions) runs top to bottom in a fresh kernel, shows its figures,
and prints no error. Executed with nbclient; the kernel inherits this process's environment
(``MOONCAKE_LAB_DATA`` set by ``.ci/run`` when the shared traces exist)."""
from __future__ import annotations

import time
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))
#: A hang guard, not a speed target: the budget is ≤ 60 s per notebook (printed below).
CELL_TIMEOUT_S = 180


class _Client(NotebookClient):
    """nbclient with a workaround for jupyter/nbclient#312: a cell that displays widgets can leave
    the wait for its shell reply blocked until the cell timeout even though the reply has arrived
    (seen here as 3-minute stalls at 0% CPU). Waiting in short polls re-checks the socket."""

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


def _text_of(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "notebooks")))
def test_notebook_runs_clean(path, capsys):
    nb = nbformat.read(path, as_version=4)
    client = _Client(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
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
