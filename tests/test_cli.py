"""The command line: reproduce prints a table and writes JSON of the documented shape; doctor runs."""
from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

from mooncake_lab import reproduce
from mooncake_lab.__main__ import main
from mooncake_lab.doctor import run_doctor


def test_reproduce_json_has_documented_shape(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["reproduce", "--only", "roofline", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    metrics = payload["metrics"]
    assert metrics, "reproduce --only roofline wrote no metrics"
    for name, m in metrics.items():
        assert name.startswith("roofline.")
        assert set(m) == {"ours", "paper", "unit", "source"}
        assert isinstance(m["ours"], (int, float))
    printed = capsys.readouterr().out
    assert "roofline.kv_bytes_per_token.llama2_70b" in printed


def test_reproduce_unknown_prefix_is_a_clear_error(capsys):
    assert main(["reproduce", "--only", "no_such_prefix"]) == 2
    assert "no_such_prefix" in capsys.readouterr().err


def test_every_metric_is_finite_and_named_uniquely():
    metrics = reproduce.collect()
    names = [m.name for m in metrics]
    assert len(names) == len(set(names)), "duplicate metric names"
    for m in metrics:
        assert math.isfinite(m.ours), f"{m.name} = {m.ours!r} is not finite"
        assert m.unit, f"{m.name} has no unit"
        if m.paper is not None:
            assert m.source, f"{m.name} quotes a paper value without a source"


def test_format_table_lines_up():
    table = reproduce.format_table([reproduce.Metric("a.b", 1.5, "s", 2.0, "paper"),
                                    reproduce.Metric("a.long_name", 1e9, "FLOP", None, "")])
    lines = table.splitlines()
    assert lines[0].startswith("metric") and "a.long_name" in lines[3]
    assert "—" in lines[3]  # no paper value shown as a dash


def test_doctor_reports_ok():
    buf = io.StringIO()
    assert run_doctor(buf) == 0, buf.getvalue()
    text = buf.getvalue()
    assert "numba" in text and "compiled" in text


def test_module_entry_point_runs():
    res = subprocess.run([sys.executable, "-m", "mooncake_lab", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "reproduce" in res.stdout


def test_warmup_compiles_every_kernel_family(capsys):
    assert main(["warmup"]) == 0
    out = capsys.readouterr().out
    for lecture in ("lectures 04, 06, 07", "lectures 06, 08", "lecture 08", "lecture 09", "lecture 03", "lecture 05"):
        assert lecture in out
    assert "numba kernels ready" in out


# ------------------------------------------------------- bad output paths and prefixes (issue 12 §4)
import os  # noqa: E402

import pytest  # noqa: E402

_BAD_ARGS = [
    (["--json", "/nonexistent/x.json"], "/nonexistent does not exist"),
    (["--json", "/tmp"], "not a folder"),
    (["--json", ""], "a file path"),
    (["--json", "   "], "a file path"),
    (["--json", "a\x00b.json"], "valid file path"),
    (["--json", "x" * 5000 + ".json"], "valid file path"),
    (["--json", "/etc/passwd/m.json"], "does not exist"),
    (["--figures", "/etc/passwd"], "not a file"),
    (["--figures", "/etc/passwd/deeper/dir"], "/etc/passwd is a file"),
    (["--figures", ""], "a folder path"),
    (["--figures", "f\x00x"], "valid folder path"),
    (["--only", ""], "known prefixes"),
    (["--only", " "], "known prefixes"),
    (["--only", "no_such_prefix"], "known prefixes"),
    (["--only", "roofline", "--json", "/tmp"], "not a folder"),
    (["--json", "/tmp/ok.json", "--figures", "/etc/passwd"], "not a file"),
]


@pytest.mark.parametrize("args,says", _BAD_ARGS, ids=lambda a: " ".join(a)[:40] if isinstance(a, list) else "")
def test_bad_arguments_are_an_error_before_anything_is_computed(args, says, capsys, monkeypatch):
    def computed(*a, **k):
        raise AssertionError("computed metrics before checking the arguments")

    monkeypatch.setattr(reproduce, "collect", computed)
    monkeypatch.setattr(reproduce, "collect_figures", computed)
    assert main(["reproduce", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err, err
    assert err.count("\n") == 1, err   # one line


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_output_folder_is_an_error(tmp_path, capsys, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setattr(reproduce, "collect", lambda *a: pytest.fail("computed"))
    assert main(["reproduce", "--json", str(ro / "m.json")]) == 2
    assert main(["reproduce", "--figures", str(ro / "figs")]) == 2
    assert "read-only" in capsys.readouterr().err


def test_folder_the_user_may_not_write_is_an_error_also_as_root(tmp_path, capsys, monkeypatch):
    """As root (CI) a mode-0500 folder is writable; what os.access refuses is still refused before computing."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real_access(p, mode, **kw))
    monkeypatch.setattr(reproduce, "collect", lambda *a: pytest.fail("computed"))
    assert main(["reproduce", "--json", str(ro / "m.json")]) == 2
    assert main(["reproduce", "--figures", str(ro / "figs")]) == 2
    err = capsys.readouterr().err
    assert err.count("read-only") == 2 and "Traceback" not in err, err


def test_figures_folder_is_made_and_json_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(reproduce, "collect_figures", lambda only=None: {})
    out, figs = tmp_path / "m.json", tmp_path / "new" / "figs"
    assert main(["reproduce", "--only", "roofline", "--json", str(out), "--figures", str(figs)]) == 0
    assert out.exists() and figs.is_dir()


def test_module_reports_a_bad_path_without_a_traceback():
    res = subprocess.run([sys.executable, "-m", "mooncake_lab", "reproduce", "--json", "/tmp"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and res.stderr.startswith("error: --json") and "Traceback" not in res.stderr
    assert res.stdout == ""   # nothing computed, nothing printed


def test_warmup_compiles_the_router_variants_of_both_engines():
    """After the warm-up, a lecture's first router run (either engine, true caches or a belief, with
    and without a TTL) adds no compiled variant to the simulation kernels (none compiles)."""
    from mooncake_lab import sim
    from mooncake_lab.sim.coupled import _coupled_kernel
    from mooncake_lab.sim.kernel import _kernel
    from mooncake_lab.synthetic import synthetic_trace
    from mooncake_lab.warmup import warm_up

    warm_up(verbose=False)
    before = {k: len(k.signatures) for k in (_kernel, _coupled_kernel)}
    tr = synthetic_trace("conversation-like", n_requests=40, seed=3)
    for r in ("dynamo", "llmd", "prodstack_rr", "aibrix", "preble", "kvcentric"):
        sim.simulate(tr, sim.ClusterConfig(prefill_policy=r, n_prefill=3, n_decode=2))
        sim.simulate(tr, sim.ClusterConfig(prefill_policy=r, n_prefill=3, n_decode=2, **sim.SIMPLE_SEMANTICS))
        sim.simulate(tr, sim.ClusterConfig(prefill_policy=r, engine_mode="coupled", n_coupled=3, chunked_prefill=True))
    assert {k: len(k.signatures) for k in before} == before
