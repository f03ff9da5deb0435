"""The command line: reproduce prints a table and writes JSON of the documented shape; doctor runs."""
from __future__ import annotations

import io
import json
import subprocess
import sys

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
        assert m.ours == m.ours, f"{m.name} is NaN"
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
    for lecture in ("lectures 04, 06, 07", "lectures 06, 08", "lecture 08", "lecture 03", "lecture 05"):
        assert lecture in out
    assert "numba kernels ready" in out
