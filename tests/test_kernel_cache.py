"""Cached numba kernels are dropped when any source file of the package changed (kernel_cache)."""
import os
from pathlib import Path

import pytest

from mooncake_lab import kernel_cache as kc


def _package(tmp_path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "a.py").write_text("from numba import njit\n")
    (pkg / "sub" / "b.py").write_text("from ..jit import helper_njit\ny = 2\n")
    (pkg / "sub" / "plots.py").write_text("import matplotlib\n")
    return pkg


def _cache_files(pkg):
    for d in (pkg / "__pycache__", pkg / "sub" / "__pycache__"):
        (d / "k.nbi").write_text("index")
        (d / "k.1.nbc").write_text("code")
        (d / "m.cpython-311.pyc").write_text("bytecode")


def test_kernels_are_dropped_when_any_source_file_changes(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    pkg = _package(tmp_path)
    _cache_files(pkg)
    assert kc.drop_stale(pkg) == 4            # no record of their source: dropped
    _cache_files(pkg)
    assert kc.drop_stale(pkg) == 0            # same source: kept
    assert (pkg / "sub" / "__pycache__" / "k.nbi").is_file()
    (pkg / "sub" / "plots.py").write_text("import matplotlib  # edited\n")   # no compiled code there
    assert kc.drop_stale(pkg) == 0
    (pkg / "sub" / "b.py").write_text("from ..jit import helper_njit\ny = 3\n")   # a helper in another folder
    assert kc.drop_stale(pkg) == 4
    assert not list(pkg.rglob("*.nb[ic]")) and len(list(pkg.rglob("*.pyc"))) == 2   # bytecode untouched


def test_with_numba_cache_dir_the_mirror_folders_are_used(tmp_path, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nc"))
    dirs = kc.cache_dirs(pkg)
    assert all(d.parent == tmp_path / "nc" for d in dirs) and dirs[0].name.startswith("pkg_")
    dirs[1].mkdir(parents=True)
    (dirs[1] / "k.nbi").write_text("index")
    assert kc.drop_stale(pkg) == 1 and (dirs[0] / kc.STAMP).is_file()


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no numba cache without the JIT")
def test_the_folders_are_where_numba_caches_this_package():
    from mooncake_lab.prefix_cache import _match_prefix
    from mooncake_lab.sim.kernel import _kernel

    for f in (_match_prefix, _kernel):
        assert Path(f._cache._cache_path) in kc.cache_dirs(), f._cache._cache_path
