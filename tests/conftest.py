"""Shared pytest fixtures.

``real_trace_dir``: the folder holding the released Mooncake traces — ``$MOONCAKE_LAB_DATA`` if set,
else ``../shared/data/mooncake_traces`` next to the repository; tests using it are skipped (with
the reason) when neither holds ``conversation_trace.jsonl`` and ``synthetic_trace.jsonl``.
``isolated_trace_lookup``: points every trace lookup place (env folder, project data/, user cache)
at empty temporary folders and disables downloads, so a test sees no real trace unless it puts one.
``trace_setup``: for tests whose behaviour depends on which traces are on the machine, parametrised
(``indirect=True``) over :data:`TRACE_SETUPS`: ``"released"`` (the released traces, told to the
package through ``$MOONCAKE_LAB_DATA``; skipped, saying why, when absent) and ``"no-traces"`` (a fresh
offline machine: :func:`isolated_trace_lookup`). So ``make test`` covers both wherever it runs.
``offline_traces``: the same two set-ups for every test of a lecture's test file (its ``pytestmark``).

The suite never downloads (``MOONCAKE_LAB_OFFLINE=1`` unless set): a machine with network behaves like
one without, and a run leaves nothing in the user cache.

Dashboards do not compute runs ahead in the background during tests (``MOONCAKE_LAB_PREFETCH=0``,
also inherited by the notebooks the tests execute): the suite stays lean on 2 cores, and
``tests/test_dashboards.py`` switches it on where it tests it.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MOONCAKE_LAB_PREFETCH", "0")
os.environ.setdefault("MOONCAKE_LAB_OFFLINE", "1")


def pytest_configure(config):
    """Read the course's notebooks as git holds them (tests/notebook_checks.committed_text): a
    student's own outputs, answers and notes in their copy never turn a test red."""
    import nbformat
    from notebook_checks import ROOT, committed_text

    from mooncake_lab import claims

    claims.NOTEBOOK_TEXT = committed_text
    read, notebooks = nbformat.read, (ROOT / "notebooks").resolve()

    def read_committed(fp, *args, **kwargs):
        if isinstance(fp, (str, os.PathLike)) and Path(fp).resolve().is_relative_to(notebooks):
            return nbformat.reads(committed_text(Path(fp)), *args, **kwargs)
        return read(fp, *args, **kwargs)

    nbformat.read = read_committed

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = REPO_ROOT.parent / "shared" / "data" / "mooncake_traces"
REAL_TRACE_FILES = ("conversation_trace.jsonl", "synthetic_trace.jsonl")
TRACE_SETUPS = ("released", "no-traces")


def _real_trace_dir() -> Path | None:
    for d in (os.environ.get("MOONCAKE_LAB_DATA"), SHARED_TRACES):
        if d and all((Path(d) / f).is_file() for f in REAL_TRACE_FILES):
            return Path(d)
    return None


@pytest.fixture(scope="session")
def real_trace_dir() -> Path:
    d = _real_trace_dir()
    if d is None:
        pytest.skip(f"real Mooncake traces ({', '.join(REAL_TRACE_FILES)}) not found in $MOONCAKE_LAB_DATA "
                    f"or {SHARED_TRACES}")
    return d


@pytest.fixture
def isolated_trace_lookup(tmp_path, monkeypatch):
    """Empty env/data/cache folders (returned as a dict of Paths) and downloads disabled."""
    from mooncake_lab import trace_data

    dirs = {k: tmp_path / k for k in ("env", "data", "cache")}
    for d in dirs.values():
        d.mkdir()
    monkeypatch.setenv(trace_data.ENV_DATA, str(dirs["env"]))
    monkeypatch.setenv(trace_data.ENV_OFFLINE, "1")
    monkeypatch.setattr(trace_data, "project_data_dir", lambda: dirs["data"])
    monkeypatch.setattr(trace_data, "cache_dir", lambda: dirs["cache"])
    return dirs


@pytest.fixture
def trace_setup(request, monkeypatch) -> str:
    """The trace set-up named by the parameter (one of :data:`TRACE_SETUPS`), put in place;
    ``None``: left as this machine has it (returns ``"as found"``)."""
    from mooncake_lab import trace_data

    setup = request.param
    if setup is None:
        return "as found"
    if setup not in TRACE_SETUPS:
        raise ValueError(f"trace_setup must be one of {TRACE_SETUPS}, got {setup!r}")
    monkeypatch.setenv(trace_data.ENV_OFFLINE, "1")
    if setup == "released":
        monkeypatch.setenv(trace_data.ENV_DATA, str(request.getfixturevalue("real_trace_dir")))
    else:
        request.getfixturevalue("isolated_trace_lookup")
    return setup


@pytest.fixture
def offline_traces(request, monkeypatch):
    """Never download; and run the test both ways: with the released traces (skipped, saying why, where
    absent) and as on a fresh offline clone (no traces anywhere: :func:`isolated_trace_lookup`).

    Lecture tests use it with ``pytestmark = pytest.mark.usefixtures("offline_traces")``:
    :func:`pytest_generate_tests` parametrises each of them over :data:`TRACE_SETUPS`, so a test
    whose behaviour depends on the traces cannot pass here (where ``../shared`` holds them) and fail
    on a student's offline machine. A test that asks for ``trace_setup`` itself is left to it, and one
    that asks for ``real_trace_dir`` is about the released traces (run where they are, never offline).
    """
    from mooncake_lab import trace_data

    monkeypatch.setenv(trace_data.ENV_OFFLINE, "1")
    setup = getattr(request, "param", None)
    if setup is None and "trace_setup" not in request.fixturenames:   # about the released traces
        d = _real_trace_dir()
        if d is not None:
            monkeypatch.setenv(trace_data.ENV_DATA, str(d))
    elif setup == "released":
        monkeypatch.setenv(trace_data.ENV_DATA, str(request.getfixturevalue("real_trace_dir")))
    elif setup == "no-traces":
        request.getfixturevalue("isolated_trace_lookup")
    return setup


#: Fixtures that put traces in place themselves.
TRACE_FIXTURES = {"trace_setup", "offline_traces", "real_trace_dir", "isolated_trace_lookup"}


@pytest.fixture(autouse=True)
def _no_traces_unless_asked(request):
    """Every other test sees no trace at all, wherever it runs (not a developer's
    ``$MOONCAKE_LAB_DATA`` nor a user cache filled by ``make lab`` online): as on CI and a fresh offline
    clone, so what it checks cannot depend on the machine."""
    if TRACE_FIXTURES & set(request.fixturenames):
        yield
        return
    request.getfixturevalue("isolated_trace_lookup")
    yield


def pytest_generate_tests(metafunc):
    names = metafunc.fixturenames
    if "offline_traces" in names and not {"trace_setup", "real_trace_dir"} & set(names):
        metafunc.parametrize("offline_traces", TRACE_SETUPS, indirect=True)


def all_dashboards() -> list:
    """Every Dashboard class of the package (each module of mooncake_lab/dashboards imported), by name."""
    import importlib
    import pkgutil

    import mooncake_lab.dashboards as dashboards
    from mooncake_lab.dashboards import Dashboard

    for m in pkgutil.iter_modules(dashboards.__path__):
        importlib.import_module(f"{dashboards.__name__}.{m.name}")
    found, todo = [], list(Dashboard.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted((c for c in found if c.__module__.startswith("mooncake_lab.")), key=lambda c: c.__qualname__)
