"""House rules checked as tests: the conda and pip dependency lists agree; notebooks ship stripped;
the two set-up commands exist."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from notebook_checks import committed_text

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*([<>=!~].*)?$")


def _split(req: str) -> tuple[str, str]:
    m = NAME.match(req.split("#")[0].strip())
    assert m, f"cannot parse requirement {req!r}"
    return m.group(1).lower().replace("_", "-"), (m.group(2) or "").replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        reqs += extra
    return dict(_split(r) for r in reqs)


def _environment_requirements() -> dict[str, str]:
    out = {}
    in_deps = False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        if in_deps and re.match(r"^      - [A-Za-z]", line):  # a PyPI-only package in the pip: list
            name, spec = _split(line.strip()[2:])
            out[name] = spec
            continue
        if in_deps and re.match(r"^  - [A-Za-z]", line):  # top-level conda entries
            item = line[4:].strip()
            if item.startswith("pip") and item.rstrip(":") == "pip":
                continue
            name, spec = _split(item)
            if name != "python":
                out[name] = spec
    return out


def test_environment_yml_agrees_with_pyproject():
    pip = _pyproject_requirements()
    conda = _environment_requirements()
    assert set(conda) == set(pip), (
        f"only in environment.yml: {sorted(set(conda) - set(pip))}; "
        f"only in pyproject.toml: {sorted(set(pip) - set(conda))}")
    for name, spec in pip.items():
        assert conda[name] == spec, f"{name}: pyproject says {spec!r}, environment.yml says {conda[name]!r}"


def test_required_stack_is_declared():
    pip = _pyproject_requirements()
    for name in ["jupyterlab", "numpy", "matplotlib", "ipywidgets", "pandas", "numba"]:
        assert name in pip, f"{name} is part of the required stack but not in pyproject.toml"


def test_python_floor_agrees():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "python>=3.11" in (ROOT / "environment.yml").read_text()
    assert meta["requires-python"] == ">=3.11"


NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_is_committed_stripped(path):
    """As git holds it (a student's autosaved outputs do not count: notebook_checks.committed_text)."""
    nb = json.loads(committed_text(path))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has outputs: strip them"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


def test_there_are_notebooks_and_solutions():
    names = [p.name for p in NOTEBOOKS]
    assert any(n.startswith("00_") for n in names)
    lectures = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    solutions = sorted(p.name[:2] for p in (ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))
    missing = [n for n in lectures if n not in solutions]
    assert not missing, f"lectures without a solutions notebook: {missing}"


def test_readme_commands_and_ci_agree():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab:", make, re.M) and re.search(r"^test:", make, re.M)


def test_make_lab_starts_jupyterlab_without_news_or_update_toasts():
    """A first JupyterLab start asks 'Would you like to get notified about official Jupyter news?' in a
    toast over the bottom right of a lecture's outputs. `make lab` gives JupyterLab the course's defaults
    (.jupyter/labconfig), which turn both off; each setting is one JupyterLab's schema knows."""
    import os
    import subprocess
    import sys

    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert 'JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter' in recipe and "jupyter lab notebooks/" in recipe
    code = ("from jupyterlab_server.settings_utils import _get_overrides; import json; "
            "print(json.dumps(_get_overrides('/nonexistent')[0]))")
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / ".jupyter")}
    got = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout)
    notification = got["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    schema = Path(sys.prefix) / "share/jupyter/lab/schemas/@jupyterlab/apputils-extension/notification.json"
    props = json.loads(schema.read_text())["properties"]
    assert set(notification) <= set(props) and "false" in [o["const"] for o in props["fetchNews"]["oneOf"]]
