"""Where traces come from: lookup order, downloads (served from a loopback HTTP server), failures,
and the synthetic fallback. No test touches the internet."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import threading
import warnings
from dataclasses import replace

import pytest

from mooncake_lab import trace_data
from mooncake_lab.trace_data import TraceMismatchWarning, TraceUnavailableError, data_sources, fetch, where_is
from mooncake_lab.traces import SyntheticFallbackWarning, TraceFormatError, load_trace, load_trace_or_synthetic


def _trace_lines(input_length: int) -> str:
    """A one-request trace whose input length tells which copy was loaded."""
    k = -(-input_length // 512)
    return json.dumps({"timestamp": 0, "input_length": input_length, "output_length": 1,
                       "hash_ids": list(range(k))}) + "\n"


def _put(folder, text, fname="conversation_trace.jsonl"):
    (folder / fname).write_text(text)
    return folder / fname


def test_lookup_order_env_then_data_then_cache(isolated_trace_lookup):
    d = isolated_trace_lookup
    _put(d["env"], _trace_lines(100))
    _put(d["data"], _trace_lines(200))
    _put(d["cache"], _trace_lines(300))
    assert load_trace("conversation").input_len[0] == 100
    assert "$MOONCAKE_LAB_DATA" in where_is("conversation")
    (d["env"] / "conversation_trace.jsonl").unlink()
    assert load_trace("conversation").input_len[0] == 200
    assert "project data/" in where_is("conversation")
    (d["data"] / "conversation_trace.jsonl").unlink()
    assert load_trace("conversation").input_len[0] == 300
    assert "user cache" in where_is("conversation")


def test_env_var_unset_skips_that_place(isolated_trace_lookup, monkeypatch):
    monkeypatch.delenv(trace_data.ENV_DATA)
    _put(isolated_trace_lookup["data"], _trace_lines(200))
    assert [label for label, _ in trace_data.local_candidates("conversation")] == ["project data/", "user cache"]
    assert load_trace("conversation").input_len[0] == 200


def test_arxiv_accepts_both_file_names(isolated_trace_lookup):
    _put(isolated_trace_lookup["data"], _trace_lines(700), "arxiv_trace.jsonl")
    assert load_trace("arxiv").input_len[0] == 700
    _put(isolated_trace_lookup["env"], _trace_lines(800), "mooncake_trace.jsonl")
    assert load_trace("arxiv").input_len[0] == 800


def test_missing_offline_is_a_clear_error(isolated_trace_lookup):
    with pytest.raises(TraceUnavailableError) as e:
        load_trace("synthetic")
    msg = str(e.value)
    for d in isolated_trace_lookup.values():
        assert str(d / "synthetic_trace.jsonl") in msg          # says where it looked
    assert "MOONCAKE_LAB_DATA" in msg and "load_trace_or_synthetic" in msg   # and what to do
    assert "MOONCAKE_LAB_OFFLINE" in msg
    assert "downloads disabled" in where_is("synthetic")


def test_download_false_is_respected(isolated_trace_lookup, monkeypatch):
    monkeypatch.delenv(trace_data.ENV_OFFLINE)
    with pytest.raises(TraceUnavailableError, match="download disabled"):
        fetch("conversation", download=False)
    # nothing found, downloads allowed: where_is names the pinned URL and the hash
    w = where_is("conversation")
    assert trace_data.PINNED_COMMIT in w and "sha256 b8cbb061a852" in w
    assert "no pinned sha256" in where_is("toolagent")


def test_failed_download_fails_fast_with_advice(isolated_trace_lookup, monkeypatch):
    monkeypatch.delenv(trace_data.ENV_OFFLINE)
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    monkeypatch.setattr(trace_data, "BASE_URL", "http://127.0.0.1:9/")
    with pytest.raises(TraceUnavailableError) as e:
        load_trace("conversation")
    msg = str(e.value)
    assert "download failed" in msg and "http://127.0.0.1:9/FAST25-release/traces/conversation_trace.jsonl" in msg
    assert "MOONCAKE_LAB_DATA" in msg
    assert not list(isolated_trace_lookup["cache"].iterdir())   # no partial file left behind


@pytest.fixture
def http_server(tmp_path):
    """A loopback HTTP server serving ``tmp_path/'www'``; yields (root folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield root, f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


def _serve(root, name, text):
    path = root / trace_data.TRACE_FILES[name].repo_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def test_download_into_cache_with_hash_check(isolated_trace_lookup, http_server, monkeypatch):
    root, url = http_server
    monkeypatch.delenv(trace_data.ENV_OFFLINE)
    monkeypatch.setattr(trace_data, "BASE_URL", url)
    sha = _serve(root, "conversation", _trace_lines(1234))
    monkeypatch.setitem(trace_data.TRACE_FILES, "conversation",
                        replace(trace_data.TRACE_FILES["conversation"], sha256=sha))
    t = load_trace("conversation")
    assert t.input_len[0] == 1234
    cached = isolated_trace_lookup["cache"] / "conversation_trace.jsonl"
    assert cached.is_file() and str(cached) in t.source
    assert "user cache" in where_is("conversation")


def test_download_with_wrong_hash_is_refused(isolated_trace_lookup, http_server, monkeypatch):
    root, url = http_server
    monkeypatch.delenv(trace_data.ENV_OFFLINE)
    monkeypatch.setattr(trace_data, "BASE_URL", url)
    _serve(root, "synthetic", _trace_lines(99))      # served content ≠ the pinned sha256
    with pytest.raises(TraceUnavailableError, match="download failed"):
        load_trace("synthetic")
    assert not (isolated_trace_lookup["cache"] / "synthetic_trace.jsonl").exists()


def test_unpinned_trace_downloads_without_hash(isolated_trace_lookup, http_server, monkeypatch):
    root, url = http_server
    monkeypatch.delenv(trace_data.ENV_OFFLINE)
    monkeypatch.setattr(trace_data, "BASE_URL", url)
    assert trace_data.TRACE_FILES["toolagent"].sha256 is None
    _serve(root, "toolagent", _trace_lines(4321))
    assert load_trace("toolagent").input_len[0] == 4321


def test_fallback_to_synthetic_warns_and_says_so(isolated_trace_lookup):
    with pytest.warns(SyntheticFallbackWarning, match="synthetic stand-in 'synthetic:conversation-like'"):
        t = load_trace_or_synthetic("conversation")
    assert t.name == "synthetic:conversation-like"
    assert "stand-in for the real 'conversation' trace" in t.source
    assert len(t) == 12_031


def test_fallback_not_used_when_real_file_exists(isolated_trace_lookup):
    _put(isolated_trace_lookup["env"], _trace_lines(100))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntheticFallbackWarning)
        with pytest.warns(TraceMismatchWarning):     # a one-line file is not the released trace
            t = load_trace_or_synthetic("conversation")
    assert t.name == "conversation" and len(t) == 1


def test_fallback_does_not_hide_a_broken_file(isolated_trace_lookup):
    _put(isolated_trace_lookup["env"], "not json\n")
    with pytest.raises(TraceFormatError, match="conversation_trace.jsonl line 1"):
        load_trace_or_synthetic("conversation")


def test_unknown_names(isolated_trace_lookup):
    for f in (load_trace_or_synthetic, where_is, fetch):
        with pytest.raises(ValueError, match="known names: conversation, synthetic, toolagent, arxiv"):
            f("mooncake")


def test_data_sources_lists_every_trace(isolated_trace_lookup):
    _put(isolated_trace_lookup["data"], _trace_lines(5), "synthetic_trace.jsonl")
    src = data_sources()
    assert list(src) == ["conversation", "synthetic", "toolagent", "arxiv"]
    assert str(isolated_trace_lookup["data"]) in src["synthetic"]


def test_doctor_prints_trace_sources(isolated_trace_lookup):
    import io

    from mooncake_lab.doctor import run_doctor

    out = io.StringIO()
    run_doctor(out=out)
    text = out.getvalue()
    assert "conversation" in text and "downloads disabled" in text


def test_pinned_hashes_match_the_shipped_copies(real_trace_dir):
    for name in ("conversation", "synthetic"):
        tf = trace_data.TRACE_FILES[name]
        digest = hashlib.sha256((real_trace_dir / tf.filenames[0]).read_bytes()).hexdigest()
        assert digest == tf.sha256
