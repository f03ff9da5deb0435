"""Request traces: the :class:`Trace` container (NumPy arrays, block hash chains as CSR), and the
loader of Mooncake JSONL files (:func:`load_trace`, :func:`read_jsonl`).

A request = arrival time (s), input and output length (tokens) and the chain of 512-token block
ids of its prompt (equal id ⇒ same block *and* same whole prefix, as in the released Mooncake
traces). Block ids are remapped to dense integers 0..n_blocks-1 at load, so caches can be arrays.

Where trace files come from (environment variable, ``data/``, user cache, download) is
:mod:`mooncake_lab.trace_data`; the calibrated synthetic stand-ins are :mod:`mooncake_lab.synthetic`.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

__all__ = ["Trace", "BLOCK_TOKENS", "TraceFormatError", "SyntheticFallbackWarning", "dense_block_ids",
           "trace_from_requests", "read_jsonl", "load_trace", "load_trace_or_synthetic", "cached_trace", "as_trace"]

#: Tokens per KV block in the released Mooncake traces (FAST'25 release README; every line of
#: both shipped traces satisfies len(hash_ids) == ceil(input_length / 512)).
BLOCK_TOKENS = 512


class TraceFormatError(ValueError):
    """A trace file is malformed; the message names the file and the line."""


class SyntheticFallbackWarning(UserWarning):
    """A real trace was unavailable and a calibrated synthetic stand-in is used instead."""


@dataclass(frozen=True, eq=False)
class Trace:
    """A request trace as flat arrays (all of length ``n`` unless noted).

    Attributes
    ----------
    arrival_s : float64, seconds since the trace start, non-decreasing.
    input_len, output_len : int64, tokens (> 0).
    block_offsets : int64, length n+1; request i's blocks are ``block_ids[block_offsets[i]:block_offsets[i+1]]``.
    block_ids : int64, dense block ids in 0..n_blocks-1.
    name : short label shown in plots ("conversation", "synthetic:toolagent-like", ...).
    source : where it came from (a path, a URL, or the generator and its seed).
    block_tokens : tokens per block (512).
    n_blocks : size of the block-id space (max id + 1); a slice keeps its parent's id space.
    """

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    block_offsets: np.ndarray
    block_ids: np.ndarray
    name: str = "trace"
    source: str = ""
    block_tokens: int = BLOCK_TOKENS
    n_blocks: int = field(default=-1)

    def __post_init__(self):
        n = len(self.arrival_s)
        conv = {
            "arrival_s": np.ascontiguousarray(self.arrival_s, dtype=np.float64),
            "input_len": np.ascontiguousarray(self.input_len, dtype=np.int64),
            "output_len": np.ascontiguousarray(self.output_len, dtype=np.int64),
            "block_offsets": np.ascontiguousarray(self.block_offsets, dtype=np.int64),
            "block_ids": np.ascontiguousarray(self.block_ids, dtype=np.int64),
        }
        for k, v in conv.items():
            object.__setattr__(self, k, v)
        for k in ("input_len", "output_len"):
            if len(conv[k]) != n:
                raise ValueError(f"Trace.{k} has {len(conv[k])} entries, arrival_s has {n}")
        if len(self.block_offsets) != n + 1:
            raise ValueError(f"Trace.block_offsets must have n+1 = {n + 1} entries, has {len(self.block_offsets)}")
        if n and (self.block_offsets[0] != 0 or self.block_offsets[-1] != len(self.block_ids)):
            raise ValueError("Trace.block_offsets must start at 0 and end at len(block_ids)")
        if self.n_blocks < 0:
            nb = int(self.block_ids.max()) + 1 if len(self.block_ids) else 0
            object.__setattr__(self, "n_blocks", nb)

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def n_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        """Time from the first to the last arrival, seconds."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0

    @property
    def blocks_per_request(self) -> np.ndarray:
        """Number of blocks of each request's prompt (int64, length n)."""
        return np.diff(self.block_offsets)

    def blocks_of(self, i: int) -> np.ndarray:
        """Block ids of request ``i``'s prompt, in prefix order."""
        return self.block_ids[self.block_offsets[i]:self.block_offsets[i + 1]]

    def __repr__(self) -> str:
        return (f"Trace({self.name!r}: {len(self):,} requests over {self.duration_s:,.0f} s, "
                f"{self.n_blocks:,} distinct blocks)")

    # ---------------------------------------------------------------- checks and comparisons
    def validate(self) -> "Trace":
        """Check the invariants the simulator relies on; return ``self`` or raise ``ValueError``.

        Arrivals finite and non-decreasing; lengths ≥ 1; every request has exactly
        ``ceil(input_len / block_tokens)`` blocks; block ids in ``0..n_blocks-1``.
        """
        a = self.arrival_s
        if not np.all(np.isfinite(a)):
            raise ValueError(f"Trace {self.name!r}: arrival_s has non-finite values")
        if len(a) > 1 and np.any(np.diff(a) < 0):
            i = int(np.argmax(np.diff(a) < 0)) + 1
            raise ValueError(f"Trace {self.name!r}: arrival_s goes backwards at request {i} "
                             f"({a[i - 1]} s then {a[i]} s)")
        for k in ("input_len", "output_len"):
            v = getattr(self, k)
            if len(v) and v.min() < 1:
                i = int(np.argmin(v))
                raise ValueError(f"Trace {self.name!r}: {k}[{i}] = {v[i]}, must be ≥ 1 token")
        want = -(-self.input_len // self.block_tokens)
        bad = np.flatnonzero(self.blocks_per_request != want)
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"Trace {self.name!r}: request {i} has {self.blocks_per_request[i]} blocks, "
                             f"ceil({self.input_len[i]}/{self.block_tokens}) = {want[i]} expected")
        if len(self.block_ids) and (self.block_ids.min() < 0 or self.block_ids.max() >= self.n_blocks):
            raise ValueError(f"Trace {self.name!r}: block ids must lie in 0..{self.n_blocks - 1}")
        return self

    def equals(self, other: "Trace") -> bool:
        """True if both traces have identical arrays (names and sources are ignored)."""
        return all(np.array_equal(getattr(self, k), getattr(other, k))
                   for k in ("arrival_s", "input_len", "output_len", "block_offsets", "block_ids"))

    # ---------------------------------------------------------------- slicing
    def select(self, index) -> "Trace":
        """The requests at ``index`` (increasing integer indices or a boolean mask), as a new Trace.

        Block ids (and ``n_blocks``) are kept, so blocks stay comparable with the parent trace.
        """
        idx = np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"index: boolean mask must have length {len(self)}, got shape {idx.shape}")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        if len(idx) > 1 and np.any(np.diff(idx) <= 0):
            raise ValueError("index: must be strictly increasing (arrival order is kept)")
        counts = self.blocks_per_request[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = self.block_offsets[idx]
        # position of each output block in the parent's block_ids: start of its request + rank within it
        within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], counts)
        ids = self.block_ids[np.repeat(starts, counts) + within]
        return Trace(self.arrival_s[idx], self.input_len[idx], self.output_len[idx], offsets, ids,
                     name=self.name, source=self.source, block_tokens=self.block_tokens,
                     n_blocks=self.n_blocks)

    def head(self, n: int) -> "Trace":
        """The first ``n`` requests (all of them if ``n`` ≥ len)."""
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        return self.select(np.arange(min(int(n), len(self))))

    def window(self, t0_s: float, t1_s: float, *, rebase: bool = True) -> "Trace":
        """Requests arriving in ``[t0_s, t1_s)`` seconds.

        With ``rebase=True`` (default) arrival times are shifted by ``-t0_s`` so the window starts at
        0 s (the first request may arrive later than 0 if none arrived exactly at ``t0_s``).
        """
        t0, t1 = float(t0_s), float(t1_s)
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 < t0:
            raise ValueError(f"window needs finite t0_s ≤ t1_s, got t0_s={t0_s!r}, t1_s={t1_s!r}")
        lo, hi = np.searchsorted(self.arrival_s, [t0, t1], side="left")
        sub = self.select(np.arange(lo, hi))
        return replace(sub, arrival_s=sub.arrival_s - t0) if rebase else sub

    def replay(self, speed: float) -> "Trace":
        """The same requests replayed ``speed`` times faster: arrival times divided by ``speed``.

        The paper replays the real trace at 2× speed to overload the cluster (arXiv Table 3).
        """
        try:
            s = float(speed)
        except (TypeError, ValueError):
            raise ValueError(f"speed must be a positive number, got {speed!r}") from None
        if not (s > 0 and math.isfinite(s)):
            raise ValueError(f"speed must be a positive finite number (2.0 = twice as fast), got {speed!r}")
        name = self.name if s == 1 else f"{self.name} ×{s:g}"
        return replace(self, arrival_s=self.arrival_s / s, name=name,
                       source=f"{self.source}; replayed at {s:g}× speed")

    # ---------------------------------------------------------------- views and statistics
    def to_frame(self):
        """One row per request: arrival_s, input_len, output_len, n_blocks, first_block (pandas)."""
        import pandas as pd

        nb = self.blocks_per_request
        first = np.full(len(self), -1, dtype=np.int64)
        has = nb > 0
        first[has] = self.block_ids[self.block_offsets[:-1][has]]
        df = pd.DataFrame({"arrival_s": self.arrival_s, "input_len": self.input_len,
                           "output_len": self.output_len, "n_blocks": nb, "first_block": first})
        df.index.name = "request"
        return df

    def describe(self):
        """Summary statistics as a pandas Series (lengths in tokens, times in s, rate in req/s).

        Keys: requests, duration_s, rate_per_s, mean/median/p99/max of input and output, unique_blocks
        (distinct block ids used). Block popularity is :func:`mooncake_lab.prefix_cache.block_popularity`.
        """
        import pandas as pd

        n = len(self)
        d = {"requests": n, "duration_s": self.duration_s,
             "rate_per_s": n / self.duration_s if self.duration_s > 0 else float("nan")}
        for k in ("input", "output"):
            v = getattr(self, f"{k}_len")
            if n:
                d.update({f"mean_{k}": float(v.mean()), f"median_{k}": float(np.median(v)),
                          f"p99_{k}": float(np.percentile(v, 99)), f"max_{k}": float(v.max())})
            else:
                d.update({f"{s}_{k}": float("nan") for s in ("mean", "median", "p99", "max")})
        d["unique_blocks"] = int(len(np.unique(self.block_ids)))
        return pd.Series(d, name=self.name)

    # ---------------------------------------------------------------- writing
    def to_jsonl(self, path: str | os.PathLike) -> Path:
        """Write the Mooncake JSONL format (timestamp in ms, rounded to integers when exact)."""
        path = Path(path)
        ms = self.arrival_s * 1000.0
        ms_r = np.round(ms)
        ts = [int(x) for x in ms_r] if np.allclose(ms, ms_r, rtol=0, atol=1e-6) else ms.tolist()
        inp, out, off, ids = (self.input_len.tolist(), self.output_len.tolist(),
                              self.block_offsets.tolist(), self.block_ids.tolist())
        with path.open("w", encoding="utf-8") as f:
            for i in range(len(self)):
                f.write(json.dumps({"timestamp": ts[i], "input_length": inp[i], "output_length": out[i],
                                    "hash_ids": ids[off[i]:off[i + 1]]}) + "\n")
        return path


# -------------------------------------------------------------------- construction helpers
def dense_block_ids(raw_ids) -> tuple[np.ndarray, int]:
    """Remap arbitrary integer block ids to dense ``0..k-1`` in order of first appearance.

    Returns ``(dense_ids, k)``. On the released traces (whose ids already count up from 0 in order
    of first appearance) this is the identity.
    """
    raw = np.asarray(raw_ids, dtype=np.int64)
    if raw.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    _, first, inv = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int64)
    return rank[inv.reshape(-1)], len(first)


def trace_from_requests(arrival_s, input_len, output_len, block_counts, raw_block_ids, *,
                        name: str = "trace", source: str = "",
                        block_tokens: int = BLOCK_TOKENS) -> Trace:
    """Build a :class:`Trace` from per-request arrays plus flat raw block ids (remapped densely)."""
    counts = np.asarray(block_counts, dtype=np.int64)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    ids, k = dense_block_ids(raw_block_ids)
    return Trace(arrival_s, input_len, output_len, offsets, ids, name=name, source=source,
                 block_tokens=block_tokens, n_blocks=k)


# -------------------------------------------------------------------- JSONL reader
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_INT64_MAX = 2**63 - 1
_INT_ONLY = {int}


def _kind(v) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "list",
            dict: "object", type(None): "null"}.get(type(v), type(v).__name__)


def read_jsonl(path: str | os.PathLike, *, name: str | None = None,
               block_tokens: int = BLOCK_TOKENS) -> Trace:
    """Read and validate a Mooncake JSONL trace file.

    Each non-blank line must be a JSON object with ``timestamp`` (ms since the trace start, a
    non-negative number, non-decreasing), ``input_length`` and ``output_length`` (positive
    integers, tokens) and ``hash_ids`` (a list of ``ceil(input_length / block_tokens)`` integers).
    Unknown extra keys are ignored. Raises :class:`TraceFormatError` naming the file and line.
    """
    path = Path(path)
    fname = path.name
    label = name or path.stem.removesuffix("_trace")

    def err(line: int | None, msg: str) -> TraceFormatError:
        where = f"{fname} line {line}" if line is not None else fname
        return TraceFormatError(f"{where}: {msg}")

    raw = path.read_bytes()
    if not raw.strip():
        raise err(None, "file is empty (expected one JSON object per line)")
    if b"\x00" in raw[:65536]:
        line = raw[:raw.index(b"\x00")].count(b"\n") + 1
        raise err(line, "binary content (NUL byte); expected a text JSONL trace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise err(line, f"not UTF-8 text (byte {e.start}); expected a text JSONL trace") from None
    if text.lstrip().startswith("["):
        raise err(1, "looks like a JSON array; expected JSON Lines (one JSON object per line)")

    ts_l: list = []
    in_l: list[int] = []
    out_l: list[int] = []
    cnt_l: list[int] = []
    flat: list[int] = []
    prev_ts = -math.inf
    loads = json.loads
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = loads(line)
        except json.JSONDecodeError as e:
            hint = " (is this a CSV file?)" if "," in line and "{" not in line else ""
            raise err(lineno, f"malformed JSON ({e.msg} at column {e.colno}){hint}; "
                              f"expected an object like {{\"timestamp\": 0, \"input_length\": 600, "
                              f"\"output_length\": 20, \"hash_ids\": [0, 1]}}") from None
        if type(rec) is not dict:
            raise err(lineno, f"expected a JSON object, got a {_kind(rec)}")
        missing = [k for k in _FIELDS if k not in rec]
        if missing:
            raise err(lineno, f"missing field(s) {', '.join(missing)}; each line needs {', '.join(_FIELDS)}")
        ts, il, ol, h = rec["timestamp"], rec["input_length"], rec["output_length"], rec["hash_ids"]
        if type(ts) not in (int, float) or not math.isfinite(ts) or ts < 0:
            raise err(lineno, f"timestamp must be a non-negative number of ms, got {ts!r} ({_kind(ts)})")
        if ts < prev_ts:
            raise err(lineno, f"timestamp {ts!r} is earlier than the previous line's {prev_ts!r} "
                              f"(timestamps must be non-decreasing)")
        for key, v in (("input_length", il), ("output_length", ol)):
            if type(v) is not int or v <= 0:
                raise err(lineno, f"{key} must be a positive integer, got {v!r} ({_kind(v)})")
        if type(h) is not list:
            raise err(lineno, f"hash_ids must be a list of integers, got a {_kind(h)}")
        if h and set(map(type, h)) != _INT_ONLY:   # C-speed type check of every id
            bad = next(x for x in h if type(x) is not int)
            raise err(lineno, f"hash_ids must be a list of integers, found {bad!r} ({_kind(bad)})")
        want = -(-il // block_tokens)
        if len(h) != want:
            raise err(lineno, f"hash_ids has {len(h)} ids but input_length {il} needs "
                              f"ceil({il}/{block_tokens}) = {want}")
        if h and (max(h) > _INT64_MAX or min(h) < -_INT64_MAX):
            raise err(lineno, "hash_ids values must fit in a signed 64-bit integer")
        prev_ts = ts
        ts_l.append(ts)
        in_l.append(il)
        out_l.append(ol)
        cnt_l.append(want)
        flat.extend(h)

    flat_ids = np.array(flat, dtype=np.int64) if flat else np.zeros(0, dtype=np.int64)
    arrival_s = np.asarray(ts_l, dtype=np.float64) / 1000.0
    return trace_from_requests(arrival_s, in_l, out_l, cnt_l, flat_ids, name=label, source=str(path),
                               block_tokens=block_tokens)


# -------------------------------------------------------------------- named traces
def _looks_like_path(s: str) -> bool:
    return os.sep in s or "/" in s or s.endswith((".jsonl", ".json")) or Path(s).exists()


def load_trace(name_or_path: str | os.PathLike, *, download: bool = True) -> Trace:
    """Load a released Mooncake trace by name, or any Mooncake JSONL file by path.

    Names: ``"conversation"``, ``"synthetic"``, ``"toolagent"``, ``"arxiv"``. A name is looked up
    in order: the folder in env ``MOONCAKE_LAB_DATA``, the project's ``data/`` folder, the user
    cache, then (if ``download``) fetched from the Mooncake repository at a pinned commit — see
    :func:`mooncake_lab.trace_data.where_is`. Block ids are remapped to dense ints once here.

    Raises
    ------
    ValueError : unknown name (the message lists the known ones).
    TraceUnavailableError : the file is nowhere and could not be downloaded.
    TraceFormatError : the file is malformed (message names file and line).
    """
    from . import trace_data

    if isinstance(name_or_path, os.PathLike) or (isinstance(name_or_path, str)
                                                  and name_or_path not in trace_data.TRACE_FILES
                                                  and _looks_like_path(name_or_path)):
        path = Path(name_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"trace file {str(path)!r} does not exist")
        return read_jsonl(path)
    name = trace_data.check_name(name_or_path)
    path = trace_data.fetch(name, download=download)
    return read_jsonl(path, name=name)


def load_trace_or_synthetic(name: str, *, download: bool = True, seed: int = 0,
                            warn: bool = True) -> Trace:
    """The real trace ``name`` if available, else its calibrated synthetic stand-in (with a warning).

    The stand-in's ``name`` is ``"synthetic:<preset>"`` and its ``source`` says why it was used.
    Malformed files still raise :class:`TraceFormatError` (a broken file is not silently replaced).
    """
    from . import synthetic, trace_data

    name = trace_data.check_name(name)
    try:
        return load_trace(name, download=download)
    except trace_data.TraceUnavailableError as e:
        preset = synthetic.STAND_IN[name]
        tr = synthetic.synthetic_trace(preset, seed=seed)
        reason = str(e).splitlines()[0]
        tr = replace(tr, source=f"{tr.source}; stand-in for the real {name!r} trace ({reason})")
        if warn:
            warnings.warn(f"the real Mooncake {name!r} trace is not available here; using the calibrated "
                          f"synthetic stand-in {tr.name!r} (seed {seed}). To use the real one, set "
                          f"MOONCAKE_LAB_DATA to a folder holding it, or put it in the project's data/ "
                          f"folder — see `python -m mooncake_lab doctor`.",
                          SyntheticFallbackWarning, stacklevel=2)
        return tr


# -------------------------------------------------------------------- one parse per process
_CACHE: dict[tuple, Trace] = {}


def cached_trace(name: str) -> Trace:
    """A released trace by name (real, or its labelled synthetic stand-in) or a synthetic preset, memoised.

    ``name``: a released trace (``"conversation"``, ``"synthetic"``, ``"toolagent"``, ``"arxiv"``,
    loaded with :func:`load_trace_or_synthetic`) or a preset of :data:`mooncake_lab.synthetic.PRESETS`
    (``"toolagent-like"`` …, seed 0). Notebooks, dashboards and experiments share it, so a file is
    parsed once per process, not once per widget move. The memo is keyed on where the file would be
    read from now (and whether downloads are disabled), so changing ``MOONCAKE_LAB_DATA`` or
    ``MOONCAKE_LAB_OFFLINE`` in a running process is honoured. Traces are immutable: share freely.
    """
    from . import synthetic, trace_data

    if isinstance(name, str) and name in synthetic.PRESETS:
        key: tuple = ("preset", name)
        if key not in _CACHE:
            _CACHE[key] = synthetic.synthetic_trace(name, seed=0)
        return _CACHE[key]
    if not isinstance(name, str) or name not in trace_data.TRACE_FILES:
        raise ValueError(f"name must be a released trace ({', '.join(trace_data.TRACE_FILES)}) or a synthetic "
                         f"preset ({', '.join(synthetic.PRESETS)}), got {name!r}")
    found = trace_data.find_local(name)
    key = ("trace", name, str(found[1]) if found else None, trace_data._offline())
    if key not in _CACHE:
        _CACHE[key] = load_trace_or_synthetic(name)
    return _CACHE[key]


def _cache_clear() -> None:
    """Forget every memoised trace (tests; or after putting a real trace file in place)."""
    _CACHE.clear()


cached_trace.cache_clear = _cache_clear  # same spelling as functools.lru_cache


def as_trace(trace: "Trace | str") -> Trace:
    """``trace`` itself if it is a :class:`Trace`, else :func:`cached_trace` of that name."""
    if isinstance(trace, Trace):
        return trace
    if not isinstance(trace, str):
        raise ValueError(f"trace must be a Trace or a trace name such as 'conversation' or 'toolagent-like', "
                         f"got {trace!r}")
    return cached_trace(trace)
