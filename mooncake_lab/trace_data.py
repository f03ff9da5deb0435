"""Where the released Mooncake trace files come from: local folders, the user cache, or a download.

Lookup order for a trace name (first match wins):

1. the folder in the environment variable ``MOONCAKE_LAB_DATA``;
2. the project's ``data/`` folder (next to the ``mooncake_lab`` package in a git checkout);
3. the user cache, ``pooch.os_cache("mooncake-lab")`` (e.g. ``~/.cache/mooncake-lab``);
4. a download with pooch from the kvcache-ai/Mooncake repository at a pinned commit, into the cache,
   checked against its sha256 where known (conversation and synthetic; the toolagent and arXiv
   traces have no pinned hash, so pooch is called with ``known_hash=None`` and only the format
   validation of the loader protects them). Set ``MOONCAKE_LAB_OFFLINE=1`` to skip step 4.

Offline or on a failed download, :class:`TraceUnavailableError` says what was tried and what to do.

A local copy is verified (:func:`verify`) when loaded by name and by ``doctor``: its sha256 where one
is pinned, else its request count (FAST'25 Table 2); a mismatch warns with :class:`TraceMismatchWarning`.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TraceFile", "TRACE_FILES", "PINNED_COMMIT", "ENV_DATA", "ENV_OFFLINE", "TraceUnavailableError",
           "check_name", "url_of", "project_data_dir", "cache_dir", "local_candidates", "find_local",
           "fetch", "where_is", "data_sources", "verify", "TraceMismatchWarning"]

#: Commit of github.com/kvcache-ai/Mooncake that added the FAST'25 traces ("add FAST25 release",
#: 2025-02-21; files unchanged since).
PINNED_COMMIT = "3cca71daccf2a7afb8fe3f0295358f70e3a69fdb"
BASE_URL = f"https://raw.githubusercontent.com/kvcache-ai/Mooncake/{PINNED_COMMIT}/"
ENV_DATA = "MOONCAKE_LAB_DATA"
ENV_OFFLINE = "MOONCAKE_LAB_OFFLINE"
#: Seconds before a download attempt gives up (connect and read); offline, name resolution fails at once.
DOWNLOAD_TIMEOUT_S = 10.0


class TraceUnavailableError(RuntimeError):
    """A released trace is in no local folder and could not be downloaded."""


class TraceMismatchWarning(UserWarning):
    """A local file named like a released trace is not that trace (sha256 or request count differ)."""


@dataclass(frozen=True)
class TraceFile:
    """One released trace file: local file names to look for, path in the repository, sha256."""

    name: str
    filenames: tuple[str, ...]   # first one is the repository's file name (used in the cache)
    repo_path: str
    sha256: str | None           # None: not pinned (pooch known_hash=None)
    n_requests: int              # FAST'25 Table 2 / MANIFEST.md


# Sizes, line counts and sha256 of the files at PINNED_COMMIT (line counts: FAST'25 Table 2).
TRACE_FILES: dict[str, TraceFile] = {
    "conversation": TraceFile("conversation", ("conversation_trace.jsonl",),
                              "FAST25-release/traces/conversation_trace.jsonl",
                              "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df", 12_031),
    "synthetic": TraceFile("synthetic", ("synthetic_trace.jsonl",),
                           "FAST25-release/traces/synthetic_trace.jsonl",
                           "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131", 3_993),
    "toolagent": TraceFile("toolagent", ("toolagent_trace.jsonl",),
                           "FAST25-release/traces/toolagent_trace.jsonl", None, 23_608),
    "arxiv": TraceFile("arxiv", ("mooncake_trace.jsonl", "arxiv_trace.jsonl"),
                       "FAST25-release/arxiv-trace/mooncake_trace.jsonl", None, 23_608),
}


def check_name(name) -> str:
    """Return ``name`` if it is a released trace's name, else raise ValueError listing the names."""
    if not isinstance(name, str) or name not in TRACE_FILES:
        raise ValueError(f"unknown trace name {name!r}; known names: {', '.join(TRACE_FILES)} "
                         f"(or pass a path to a .jsonl file; synthetic presets: see "
                         f"mooncake_lab.synthetic.PRESETS)")
    return name


def url_of(name: str) -> str:
    """Download URL of a released trace at the pinned commit."""
    return BASE_URL + TRACE_FILES[check_name(name)].repo_path


def project_data_dir() -> Path:
    """The project's ``data/`` folder (repository root / data)."""
    return Path(__file__).resolve().parent.parent / "data"


def cache_dir() -> Path:
    """The user cache folder for downloaded traces (``pooch.os_cache("mooncake-lab")``)."""
    import pooch

    return Path(pooch.os_cache("mooncake-lab"))


def local_candidates(name: str) -> list[tuple[str, Path]]:
    """Every local ``(label, path)`` that :func:`fetch` checks, in lookup order."""
    tf = TRACE_FILES[check_name(name)]
    dirs: list[tuple[str, Path]] = []
    env = os.environ.get(ENV_DATA)
    if env:
        dirs.append((f"${ENV_DATA}", Path(env).expanduser()))
    dirs.append(("project data/", project_data_dir()))
    dirs.append(("user cache", cache_dir()))
    return [(label, d / fn) for label, d in dirs for fn in tf.filenames]


def find_local(name: str) -> tuple[str, Path] | None:
    """The first existing local ``(label, path)`` of trace ``name``, or None.

    Anything at a candidate path counts (a directory, a FIFO, a broken link too): loading it then
    fails with a clear error instead of silently using a copy further down the list.
    """
    for label, p in local_candidates(name):
        if os.path.lexists(p):
            return label, p
    return None


def _offline() -> bool:
    return os.environ.get(ENV_OFFLINE, "").strip().lower() not in ("", "0", "false", "no")


def _advice(name: str) -> str:
    tf = TRACE_FILES[name]
    return (f"To fix: download {url_of(name)} on a machine with internet and either set "
            f"{ENV_DATA}=/folder/holding/{tf.filenames[0]} or put the file in {project_data_dir()}; "
            f"or use mooncake_lab.traces.load_trace_or_synthetic({name!r}) for the calibrated synthetic stand-in.")


def fetch(name: str, *, download: bool = True, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Path of trace ``name``'s file, downloading it into the cache if no local copy exists.

    Raises :class:`TraceUnavailableError` (what was tried, and what to do) when it is nowhere and
    the download is disabled (``download=False`` or env ``MOONCAKE_LAB_OFFLINE=1``) or fails.
    """
    found = find_local(name)
    if found is not None:
        return found[1]
    tried = "; ".join(str(p) for _, p in local_candidates(name))
    tf = TRACE_FILES[name]
    if not download or _offline():
        why = "download disabled" + (f" by {ENV_OFFLINE}" if _offline() else "")
        raise TraceUnavailableError(f"trace {name!r} not found locally ({why}).\n"
                                    f"Looked for: {tried}.\n{_advice(name)}")
    import pooch

    url = url_of(name)
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{tf.sha256}" if tf.sha256 else None,
                              fname=tf.filenames[0], path=cache_dir(),
                              downloader=pooch.HTTPDownloader(timeout=timeout_s, progressbar=False))
    except Exception as e:  # noqa: BLE001 - network, HTTP and hash errors all mean "unavailable"
        raise TraceUnavailableError(f"trace {name!r} not found locally and the download failed: "
                                    f"{type(e).__name__}: {str(e)[:300]}\n"
                                    f"Looked for: {tried}; then tried {url}.\n{_advice(name)}") from e
    return Path(path)


_VERIFIED: dict[tuple, tuple[bool, str]] = {}


def _n_lines(raw: bytes) -> int:
    """Non-blank lines of a JSONL file (= its requests, if it parses)."""
    return sum(1 for ln in raw.split(b"\n") if ln.strip())


def verify(name: str, path: str | os.PathLike, raw: bytes | None = None) -> tuple[bool, str]:
    """Is the file at ``path`` the released trace ``name``? Returns ``(ok, what was checked / found)``.

    Checks the sha256 where it is pinned (conversation, synthetic), else the request count of
    FAST'25 Table 2 (toolagent, arXiv: 23,608; content not checked). ``raw``: the file's bytes if
    already read. The answer is cached by (path, size, mtime), so a file is hashed once per version.
    """
    from .traces import read_bytes

    tf = TRACE_FILES[check_name(name)]
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return _VERIFIED[key]
    if raw is None:
        raw = read_bytes(path)
    n = _n_lines(raw)
    if tf.sha256:
        got = hashlib.sha256(raw).hexdigest()
        ok = got == tf.sha256
        found = (f"sha256 matches the released file ({n:,} requests)" if ok else
                 f"sha256 {got[:16]}… but the released file's is {tf.sha256[:16]}…; {n:,} requests (non-blank "
                 f"lines), the release has {tf.n_requests:,}")
    else:
        ok = n == tf.n_requests
        found = (f"{n:,} requests as released (no pinned sha256: only the count is checked)" if ok else
                 f"{n:,} requests (non-blank lines) but the release has {tf.n_requests:,} (FAST'25 Table 2)")
    if not ok:
        found = (f"{path} is not the released {name!r} trace: {found}. The course uses this file as it is, "
                 f"so its numbers will differ from the paper's and the lectures'. To use the released one, "
                 f"replace it with {url_of(name)}")
    _VERIFIED[key] = ok, found
    return ok, found


def where_is(name: str) -> str:
    """One line saying where trace ``name`` would be loaded from right now (no download)."""
    found = find_local(name)
    if found is not None:
        label, p = found
        return f"{p} (from {label})"
    tf = TRACE_FILES[check_name(name)]
    check = f"sha256 {tf.sha256[:12]}…" if tf.sha256 else "no pinned sha256"
    if _offline():
        return f"not found locally; downloads disabled by {ENV_OFFLINE} → synthetic stand-in"
    return f"not found locally; would download {url_of(name)} ({check}) into {cache_dir()}"


def data_sources() -> dict[str, str]:
    """``{name: where_is(name)}`` for every released trace (printed by ``python -m mooncake_lab doctor``)."""
    return {name: where_is(name) for name in TRACE_FILES}
