"""Request traces: the :class:`Trace` container (NumPy arrays, block hash chains as CSR), and the
loader of Mooncake JSONL files (:func:`load_trace`, :func:`read_jsonl`).

A request = arrival time (s), input and output length (tokens) and the chain of 512-token block
ids of its prompt (equal id ⇒ same block *and* same whole prefix, as in the released Mooncake
traces). Block ids are remapped to dense integers 0..n_blocks-1 at load, so caches can be arrays.

Where trace files come from (environment variable, ``data/``, user cache, download) is
:mod:`mooncake_lab.trace_data`; the calibrated synthetic stand-ins are :mod:`mooncake_lab.synthetic`.
"""
from __future__ import annotations

import codecs
import io
import json
import json.scanner
import os
import stat
import warnings
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from pathlib import Path

import numpy as np
from numba import njit

from .validate import InputError, describe, flag, int_array, integer, real, real_array

__all__ = ["Trace", "BLOCK_TOKENS", "TraceFormatError", "SyntheticFallbackWarning", "dense_block_ids",
           "trace_from_requests", "read_jsonl", "load_trace", "load_trace_or_synthetic", "cached_trace", "as_trace",
           "MAX_TIMESTAMP_MS", "MAX_TOKENS", "MAX_BLOCK_ID", "MAX_BLOCKS", "MAX_REQUESTS", "MAX_FILE_BYTES",
           "MAX_LINE_BYTES", "MAX_BLOCK_TOKENS", "REPLAY_SPEEDS"]

#: Tokens per KV block in the released Mooncake traces (FAST'25 release README; every line of
#: both shipped traces satisfies len(hash_ids) == ceil(input_length / 512)).
BLOCK_TOKENS = 512

# ---------------------------------------------------------------------------------------- bounds
# What a trace can mean. A value outside is a corrupted file or a unit error, refused at load (file
# and line named) and by Trace.validate(), so it never reaches a cache, a kernel or a plot.
#: Latest arrival, ms after the trace start: 10 years (3.15e11 ms). The released traces span under an
#: hour (3,537 s); epoch milliseconds (1.7e12 for 2024) or microseconds are refused as unit errors.
MAX_TIMESTAMP_MS = 10 * 365 * 24 * 3600 * 1000
#: Longest prompt or output, tokens: 100 million = 10× the longest context window any model offers
#: (10M tokens, Llama 4 Scout, 2025) and 500× the longest released prompt (191,378; longest output 2,000).
MAX_TOKENS = 100_000_000
#: Largest raw hash id: a signed 64-bit integer (ids are non-negative counters in the released files).
MAX_BLOCK_ID = 2**63 - 1
#: Largest block-id space of a Trace (dense ids; caches allocate arrays this long): 2**26 = 67M, more
#: than any file within MAX_FILE_BYTES can hold (≥ 2 bytes per id ⇒ ≤ 33.5M ids); the released
#: conversation trace has 182,790.
MAX_BLOCKS = 2**26
#: Most requests of a generated trace: 10**6 = 42× the largest released trace (23,608 requests).
MAX_REQUESTS = 1_000_000
#: Largest trace file read: 64 MiB, 22× the conversation trace (3.0 MB for 12,031 requests; toolagent
#: and arXiv, 23,608 requests each, are over 4 MiB — MANIFEST.md). Refused before reading, so a huge or
#: endless file never fills memory.
MAX_FILE_BYTES = 64 * 2**20
#: Longest line: 8 MiB, twice a line holding MAX_TOKENS of hash ids (195,313 ids of ≤ 19 digits + ", ").
MAX_LINE_BYTES = 8 * 2**20
#: Largest block size, tokens (512 in the released traces; engines use 16–512).
MAX_BLOCK_TOKENS = 65_536
#: Replay speeds accepted by Trace.replay: (0.001, 1000) × — an hour replayed in 3.6 s up to 42 days.
REPLAY_SPEEDS = (1e-3, 1e3)


class TraceFormatError(InputError):
    """A trace file cannot be used (not a regular file, too large, unreadable or malformed); the message
    names the file and, for its content, the line. A ``ValueError``."""


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

    The constructor checks the structure (1-D finite numbers, whole lengths and ids, a consistent CSR,
    ids within ``n_blocks`` ≤ :data:`MAX_BLOCKS`); :meth:`validate` checks what a simulation needs.
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
        w = "Trace"
        conv = {
            "arrival_s": real_array(self.arrival_s, "arrival_s", where=w),
            "input_len": int_array(self.input_len, "input_len", lo=0, hi=MAX_TOKENS, where=w),
            "output_len": int_array(self.output_len, "output_len", lo=0, hi=MAX_TOKENS, where=w),
            "block_offsets": int_array(self.block_offsets, "block_offsets", lo=0, where=w),
            "block_ids": int_array(self.block_ids, "block_ids", lo=0, hi=MAX_BLOCKS - 1, where=w),
        }
        for k, v in conv.items():
            object.__setattr__(self, k, np.ascontiguousarray(v))
        n = len(self.arrival_s)
        for k in ("input_len", "output_len"):
            if len(conv[k]) != n:
                raise InputError(f"Trace.{k} has {len(conv[k])} entries, arrival_s has {n}")
        off, ids = self.block_offsets, self.block_ids
        if len(off) != n + 1:
            raise InputError(f"Trace.block_offsets must have n+1 = {n + 1} entries, has {len(off)}")
        if off[0] != 0 or off[-1] != len(ids):
            raise InputError(f"Trace.block_offsets must start at 0 and end at len(block_ids) = {len(ids)}, "
                             f"got {off[0]} … {off[-1]}")
        if n and np.any(np.diff(off) < 0):
            i = int(np.argmax(np.diff(off) < 0))
            raise InputError(f"Trace.block_offsets must be non-decreasing; request {i} would have "
                             f"{off[i + 1] - off[i]} blocks")
        for k in ("name", "source"):
            if not isinstance(getattr(self, k), str):
                raise InputError(f"Trace.{k}: got {describe(getattr(self, k))}; allowed: a string")
        object.__setattr__(self, "block_tokens",
                           integer(self.block_tokens, "block_tokens", lo=1, hi=MAX_BLOCK_TOKENS, where=w))
        used = int(ids.max()) + 1 if len(ids) else 0
        nb = self.n_blocks
        if isinstance(nb, (int, np.integer)) and not isinstance(nb, bool) and nb == -1:
            nb = used
        object.__setattr__(self, "n_blocks", integer(nb, "n_blocks", lo=used, hi=MAX_BLOCKS, where=w))

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
        """Block ids of request ``i``'s prompt (``0 ≤ i < n``), in prefix order."""
        i = integer(i, "i", lo=0, hi=len(self) - 1, where="Trace.blocks_of")
        return self.block_ids[self.block_offsets[i]:self.block_offsets[i + 1]]

    def __repr__(self) -> str:
        return (f"Trace({self.name!r}: {len(self):,} requests over {self.duration_s:,.0f} s, "
                f"{self.n_blocks:,} distinct blocks)")

    # ---------------------------------------------------------------- checks and comparisons
    def validate(self) -> "Trace":
        """Check the invariants the simulator relies on; return ``self`` or raise ``ValueError``.

        Arrivals in ``[0, MAX_TIMESTAMP_MS]`` (as s) and non-decreasing; lengths in ``[1, MAX_TOKENS]``;
        every request has exactly ``ceil(input_len / block_tokens)`` blocks; and the chains are
        prefix-consistent — a block id always follows the same parent id (so sits at the same position), as
        prefix caching assumes (equal id ⇒ same whole prefix). The last check catches lengths paired
        with another request's blocks, or chains stitched from two requests.
        """
        a, who = self.arrival_s, f"Trace {self.name!r}"
        hi_s = MAX_TIMESTAMP_MS / 1000
        bad = (a < 0) | (a > hi_s)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{who}: arrival_s[{i}] = {float(a[i])!r} s, must be in [0, {hi_s:,.0f}] s (10 years)")
        if len(a) > 1 and np.any(np.diff(a) < 0):
            i = int(np.argmax(np.diff(a) < 0)) + 1
            raise InputError(f"{who}: arrival_s goes backwards at request {i} ({a[i - 1]} s then {a[i]} s)")
        for k in ("input_len", "output_len"):
            v = getattr(self, k)
            if len(v) and v.min() < 1:
                i = int(np.argmin(v))
                raise InputError(f"{who}: {k}[{i}] = {v[i]}, must be ≥ 1 token")
        want = -(-self.input_len // self.block_tokens)
        bad = np.flatnonzero(self.blocks_per_request != want)
        if len(bad):
            i = int(bad[0])
            raise InputError(f"{who}: request {i} has {self.blocks_per_request[i]} blocks, "
                             f"ceil({self.input_len[i]}/{self.block_tokens}) = {want[i]} expected")
        clash = _chain_clash(self)
        if clash:
            (j0, r0, p0), (j1, r1, p1) = clash
            par = ["starts the prompt" if p < 0 else f"follows block {p}" for p in (p0, p1)]
            raise InputError(f"{who}: block id {self.block_ids[j0]} {par[0]} in request {r0} but {par[1]} "
                             f"in request {r1}: the block chains are not prefix-consistent (equal id must "
                             f"mean the same whole prefix; lengths paired with another request's blocks?)")
        return self

    def equals(self, other: "Trace") -> bool:
        """True if both traces have identical arrays (names and sources are ignored)."""
        return isinstance(other, Trace) and all(
            np.array_equal(getattr(self, k), getattr(other, k))
            for k in ("arrival_s", "input_len", "output_len", "block_offsets", "block_ids"))

    # ---------------------------------------------------------------- slicing
    def select(self, index) -> "Trace":
        """The requests at ``index`` (strictly increasing indices in ``0..n-1``, or a boolean mask of
        length n), as a new Trace. Negative indices are refused (arrival order is kept).

        Block ids (and ``n_blocks``) are kept, so blocks stay comparable with the parent trace.
        """
        n = len(self)
        try:
            idx = np.asarray(index)
        except (ValueError, TypeError):
            idx = np.asarray(None)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise InputError(f"Trace.select.index: a boolean mask must have shape ({n},), got shape {idx.shape}")
            idx = np.flatnonzero(idx)
        idx = int_array(idx, "index", lo=0, hi=n - 1, where="Trace.select")
        if len(idx) > 1 and np.any(np.diff(idx) <= 0):
            i = int(np.argmax(np.diff(idx) <= 0)) + 1
            raise InputError(f"Trace.select.index: must be strictly increasing (arrival order is kept); "
                             f"index[{i}] = {idx[i]} follows {idx[i - 1]}")
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
        n = integer(n, "n", lo=0, where="Trace.head")
        return self.select(np.arange(min(n, len(self))))

    def window(self, t0_s: float, t1_s: float, *, rebase: bool = True) -> "Trace":
        """Requests arriving in ``[t0_s, t1_s)`` seconds.

        With ``rebase=True`` (default) arrival times are shifted by ``-t0_s`` so the window starts at
        0 s (the first request may arrive later than 0 if none arrived exactly at ``t0_s``).
        """
        hi_s = MAX_TIMESTAMP_MS / 1000
        t0 = real(t0_s, "t0_s", lo=0, hi=hi_s, where="Trace.window")
        t1 = real(t1_s, "t1_s", lo=t0, hi=hi_s, where="Trace.window")
        rebase = flag(rebase, "rebase", where="Trace.window")
        lo, hi = np.searchsorted(self.arrival_s, [t0, t1], side="left")
        sub = self.select(np.arange(lo, hi))
        return replace(sub, arrival_s=sub.arrival_s - t0) if rebase else sub

    def replay(self, speed: float) -> "Trace":
        """The same requests replayed ``speed`` times faster: arrival times divided by ``speed``.

        The paper replays the real trace at 2× speed to overload the cluster (arXiv Table 3).
        ``speed`` must lie in :data:`REPLAY_SPEEDS`.
        """
        lo, hi = REPLAY_SPEEDS
        s = real(speed, "speed", lo=lo, hi=hi, where="Trace.replay")
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
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"Trace.to_jsonl.path: got {describe(path)}; allowed: a str or os.PathLike")
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


def _chain_clash(t: Trace):
    """None if every block id of ``t`` follows the same parent id everywhere (-1: first block of a
    prompt) — by induction it then also sits at the same position, so equal id ⇒ same whole prefix.
    Else two occurrences that disagree: ``((index in block_ids, request, parent), (…))``."""
    ids, off = t.block_ids, t.block_offsets
    if not len(ids):
        return None
    # a sparse id space (a small slice of a big trace) is compacted so the check stays O(blocks)
    key = ids if t.n_blocks <= 2 * len(ids) + 4096 else np.unique(ids, return_inverse=True)[1]
    if _chains_consistent(key, off, int(key.max()) + 1):  # the usual case, in one compiled pass
        return None
    parent = np.empty_like(ids)  # a clash: find the first one the same way as ever, for the message
    parent[1:] = ids[:-1]
    parent[off[:-1][t.blocks_per_request > 0]] = -1
    rep = np.empty(int(key.max()) + 1, dtype=np.int64)
    rep[key] = parent    # one occurrence's parent per id: all agree iff the chains are consistent
    clash = np.flatnonzero(rep[key] != parent)
    if not len(clash):
        return None
    occ = np.flatnonzero(ids == ids[clash[0]])
    j0 = int(occ[0])
    j1 = int(occ[parent[occ] != parent[j0]][0])
    return tuple((j, int(np.searchsorted(off, j, side="right")) - 1, int(parent[j])) for j in (j0, j1))


@njit(cache=True, nogil=True)  # nogil: work computed ahead leaves the GIL to the student's move
def _chains_consistent(key, off, n_keys):
    """Whether every id of ``key`` (block ids, dense ``0 … n_keys − 1``) has the same parent at each of its
    occurrences (−1: first block of a prompt): :func:`_chain_clash`'s check in one pass, without its
    temporary arrays (a whole trace: ≈ 1 ms instead of ≈ 6 ms)."""
    rep = np.full(n_keys, -2, dtype=np.int64)  # the parent at an id's first occurrence (−2: not seen yet)
    for r in range(len(off) - 1):
        parent = -1
        for j in range(off[r], off[r + 1]):
            b = key[j]
            if rep[b] == -2:
                rep[b] = parent
            elif rep[b] != parent:
                return False
            parent = b
    return True


# -------------------------------------------------------------------- construction helpers
def dense_block_ids(raw_ids) -> tuple[np.ndarray, int]:
    """Remap arbitrary integer block ids to dense ``0..k-1`` in order of first appearance.

    Returns ``(dense_ids, k)``. On the released traces (whose ids already count up from 0 in order
    of first appearance) this is the identity.
    """
    raw = int_array(raw_ids, "raw_ids", where="dense_block_ids")
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
    w = "trace_from_requests"
    counts = int_array(block_counts, "block_counts", lo=0, where=w)
    ids, k = dense_block_ids(raw_block_ids)
    if int(counts.sum()) != len(ids):
        raise InputError(f"{w}: block_counts sum to {int(counts.sum())} but raw_block_ids has {len(ids)} ids")
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Trace(arrival_s, input_len, output_len, offsets, ids, name=name, source=source,
                 block_tokens=block_tokens, n_blocks=k)


# -------------------------------------------------------------------- JSONL reader
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_FIELD_SET = frozenset(_FIELDS)
_EXAMPLE = '{"timestamp": 0, "input_length": 600, "output_length": 20, "hash_ids": [0, 1]}'


def _kind(v) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "list",
            dict: "object", type(None): "null"}.get(type(v), type(v).__name__)


class _BadJSON(ValueError):
    """Raised from inside the JSON decoder (duplicate key, NaN/Infinity)."""


def _no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _BadJSON(f"duplicate key {dup!r} (which value is meant?)")
    return d


def _no_constant(name):
    raise _BadJSON(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
_decode = _DECODER.decode
_scan = json.scanner.make_scanner(_DECODER)   # the C scanner: one value at an index, no wrapper


def _fast_decode(line: str):
    """The JSON value of ``line`` if it is one clean value starting at column 1, else None (then
    :data:`_decode` parses it again, to raise with a message)."""
    try:
        value, end = _scan(line, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return value if end == len(line) or not line[end:].strip(" \t\r\n") else None


def read_bytes(path: str | os.PathLike, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, read in a bounded way.

    Refuses (:class:`TraceFormatError`, naming the path) a directory, a FIFO, a device such as
    ``/dev/zero`` or ``/dev/stdin``, a socket, an unreadable or too large file — without blocking:
    the file is opened non-blocking and checked with ``fstat`` before a byte is read, and at most
    ``limit + 1`` bytes are ever read (a file growing meanwhile is caught too).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path: got {describe(path)}; allowed: a str or os.PathLike naming a trace file")
    p = os.fspath(path)
    if isinstance(p, bytes) or not p or "\x00" in p:
        raise InputError(f"path: got {describe(path)}; allowed: a non-empty file name")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        broken = " (a broken symbolic link)" if os.path.islink(p) else ""
        raise FileNotFoundError(f"trace file {p!r} does not exist{broken}") from None
    except IsADirectoryError:
        raise TraceFormatError(f"{p}: is a directory, not a trace file") from None
    except OSError as e:
        raise TraceFormatError(f"{p}: cannot be opened ({e.strerror or e}); a trace must be a readable file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                    else "a character device" if stat.S_ISCHR(st.st_mode) else "a block device"
                    if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise TraceFormatError(f"{p}: is {kind}, not a regular file; a trace must be a file on disk "
                                   f"(reading it could block forever or never end)")
        if st.st_size > limit:
            raise TraceFormatError(f"{p}: is {st.st_size:,} bytes, more than the {limit:,} a trace file may have "
                                   f"(the released traces are a few MB: conversation 3.0 MB)")
        chunks, total = [], 0
        while total <= limit:
            b = os.read(fd, min(1 << 22, limit + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
    except OSError as e:
        raise TraceFormatError(f"{p}: cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if total > limit:
        raise TraceFormatError(f"{p}: has more than the {limit:,} bytes a trace file may have (it grew while read)")
    return b"".join(chunks)


def read_jsonl(path: str | os.PathLike, *, name: str | None = None,
               block_tokens: int = BLOCK_TOKENS) -> Trace:
    """Read and validate a Mooncake JSONL trace file.

    Each non-blank line (lines end with ``\\n``; a ``\\r`` before it, a UTF-8 BOM and a missing last
    newline are accepted) must be a JSON object with ``timestamp`` (ms since the trace start, a number
    in [0, :data:`MAX_TIMESTAMP_MS`], non-decreasing), ``input_length`` and ``output_length``
    (integers in [1, :data:`MAX_TOKENS`], tokens) and ``hash_ids`` (a list of
    ``ceil(input_length / block_tokens)`` integers in [0, 2**63-1], prefix-chained: an id always
    follows the same id, or always comes first). Unknown extra keys are ignored;
    duplicate keys, ``NaN``/``Infinity`` and lines over :data:`MAX_LINE_BYTES` are refused. The file
    must be a regular file of at most :data:`MAX_FILE_BYTES` (see :func:`read_bytes`). Raises
    :class:`TraceFormatError` (a ``ValueError``) naming the file, the line and the field.
    """
    return _parse(read_bytes(path), Path(path), name=name, block_tokens=block_tokens)


def _parse(raw: bytes, path: Path, *, name: str | None = None, block_tokens: int = BLOCK_TOKENS) -> Trace:
    """Parse the bytes of a JSONL trace file (see :func:`read_jsonl`); ``path`` is only for messages."""
    if name is not None and not isinstance(name, str):
        raise InputError(f"read_jsonl.name: got {describe(name)}; allowed: a string or None")
    block_tokens = integer(block_tokens, "block_tokens", lo=1, hi=MAX_BLOCK_TOKENS, where="read_jsonl")
    fname = path.name
    label = name or path.stem.removesuffix("_trace")

    def err(line: int | None, msg: str) -> TraceFormatError:
        where = f"{fname} line {line}" if line is not None else fname
        return TraceFormatError(f"{where}: {msg}")

    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    if not raw.strip():
        raise err(None, "file is empty (expected one JSON object per line)")
    if b"\x00" in raw:
        line = raw[:raw.index(b"\x00")].count(b"\n") + 1
        raise err(line, "binary content (NUL byte); expected a text JSONL trace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise err(line, f"not UTF-8 text (byte {e.start}); expected a text JSONL trace") from None
    if text.lstrip(" \t\r\n").startswith("["):
        raise err(1, "looks like a JSON array; expected JSON Lines (one JSON object per line)")
    # JSON Lines ends lines with \n only: str.splitlines() would also split at U+2028, U+0085, \x1c …
    # which may sit inside a JSON string of a valid record. Lines are read lazily (no list of them).
    recs: list[dict] = []
    linenos: list[int] = []
    for lineno, line in enumerate(io.StringIO(text, newline="\n"), start=1):
        if len(line) > MAX_LINE_BYTES:
            raise err(lineno, f"line is {len(line):,} characters long, more than {MAX_LINE_BYTES:,} "
                              f"(a line holding {MAX_TOKENS:,} tokens of hash ids is half that)")
        if not line.strip(" \t\r\n"):
            continue
        rec = _fast_decode(line)
        try:
            if rec is None:
                rec = _decode(line)
        except _BadJSON as e:
            raise err(lineno, f"malformed JSON: {e}") from None
        except json.JSONDecodeError as e:
            hint = " (is this a CSV file?)" if "," in line and "{" not in line else ""
            raise err(lineno, f"malformed JSON ({e.msg} at column {e.colno}){hint}; "
                              f"expected an object like {_EXAMPLE}") from None
        except (ValueError, RecursionError) as e:   # an integer of > 4300 digits; nesting too deep
            raise err(lineno, f"malformed JSON ({type(e).__name__}: {str(e)[:120]})") from None
        if type(rec) is not dict:
            kind = _kind(rec)
            raise err(lineno, f"expected a JSON object, got {'an' if kind[0] in 'aeiou' else 'a'} {kind}")
        if not _FIELD_SET <= rec.keys():
            missing = [k for k in _FIELDS if k not in rec]
            raise err(lineno, f"missing field(s) {', '.join(missing)}; each line needs {', '.join(_FIELDS)}")
        recs.append(rec)
        linenos.append(lineno)
    cols = list(zip(*map(itemgetter(*_FIELDS), recs)))
    ts, il, ol, hs = cols

    def check_types(field_: str, col, types: set, allowed: str, rows=None) -> None:
        if not set(map(type, col)) <= types:    # C-speed type check of a whole column
            i = next(i for i, x in enumerate(col) if type(x) not in types)
            r = i if rows is None else int(np.searchsorted(rows, i, side="right")) - 1
            raise err(linenos[r], f"{field_}: got {describe(col[i])} ({_kind(col[i])}); allowed: {allowed}")

    def column(field_: str, col, lo, hi, allowed: str, rows=None, dtype=np.int64) -> np.ndarray:
        """``col`` as an int64/float64 array, every value in [lo, hi] (vectorised), else file:line."""
        try:
            a = np.array(col, dtype=dtype)
            return (int_array if dtype is np.int64 else real_array)(a, field_, lo=lo, hi=hi)
        except InputError as e:
            i = e.index
        except OverflowError:                  # an integer beyond int64 / float range
            i = next(i for i, x in enumerate(col) if not lo <= x <= hi)
        r = i if rows is None else int(np.searchsorted(rows, i, side="right")) - 1
        raise err(linenos[r], f"{field_}: got {describe(col[i])}; allowed: {allowed}")

    t_allowed = (f"a number of ms in [0, {MAX_TIMESTAMP_MS:,}] (10 years) since the trace start "
                 f"(epoch times: subtract the first one)")
    n_allowed = f"an integer in [1, {MAX_TOKENS:,}] tokens (10× the longest context window of any model)"
    check_types("timestamp", ts, {int, float}, t_allowed)
    ts_a = column("timestamp", ts, 0, MAX_TIMESTAMP_MS, t_allowed, dtype=np.float64)
    lens = {}
    for key, col in (("input_length", il), ("output_length", ol)):
        check_types(key, col, {int}, n_allowed)
        lens[key] = column(key, col, 1, MAX_TOKENS, n_allowed)
    h_allowed = f"a list of integers in [0, 2**63-1], one per {block_tokens}-token block"
    check_types("hash_ids", hs, {list}, h_allowed)
    counts = np.fromiter(map(len, hs), dtype=np.int64, count=len(hs))
    want = -(-lens["input_length"] // block_tokens)
    bad = np.flatnonzero(counts != want)
    if len(bad):
        i = int(bad[0])
        raise err(linenos[i], f"hash_ids has {counts[i]} ids but input_length {il[i]} needs "
                              f"ceil({il[i]}/{block_tokens}) = {want[i]}")
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = list(chain.from_iterable(hs))
    id_allowed = "integers in [0, 2**63-1]"
    check_types("hash_ids", flat, {int}, id_allowed, rows=offsets)
    flat_ids = column("hash_ids", flat, 0, MAX_BLOCK_ID, "a list of " + id_allowed, rows=offsets)
    back = np.flatnonzero(np.diff(ts_a) < 0)
    if len(back):
        i = int(back[0]) + 1
        raise err(linenos[i], f"timestamp {ts[i]!r} is earlier than the previous line's {ts[i - 1]!r} "
                              f"(timestamps must be non-decreasing)")
    tr = trace_from_requests(ts_a / 1000.0, lens["input_length"], lens["output_length"], counts, flat_ids,
                             name=label, source=str(path), block_tokens=block_tokens)
    clash = _chain_clash(tr)
    if clash:
        (j0, r0, p0), (j1, r1, p1) = clash
        desc = ["first" if p < 0 else f"after id {flat_ids[j - 1]}" for j, p in ((j0, p0), (j1, p1))]
        raise err(linenos[r1], f"hash_ids: id {flat_ids[j1]} comes {desc[1]} here but {desc[0]} on line "
                               f"{linenos[r0]}; hash ids must be prefix-chained (equal id ⇒ same block and "
                               f"same whole prefix, as in the released traces)")
    return tr


# -------------------------------------------------------------------- named traces
def _looks_like_path(s: str) -> bool:
    if os.sep in s or "/" in s or s.endswith((".jsonl", ".json")):
        return True
    try:
        return os.path.lexists(s)
    except (OSError, ValueError):   # a NUL byte, a name too long …
        return False


def load_trace(name_or_path: str | os.PathLike, *, download: bool = True) -> Trace:
    """Load a released Mooncake trace by name, or any Mooncake JSONL file by path.

    Names: ``"conversation"``, ``"synthetic"``, ``"toolagent"``, ``"arxiv"``. A name is looked up
    in order: the folder in env ``MOONCAKE_LAB_DATA``, the project's ``data/`` folder, the user
    cache, then (if ``download``) fetched from the Mooncake repository at a pinned commit — see
    :func:`mooncake_lab.trace_data.where_is`. Block ids are remapped to dense ints once here.
    A released trace found locally is checked against its known sha256 (or, where none is pinned,
    its request count) — once per file version, see :func:`mooncake_lab.trace_data.verify` — and
    a mismatch warns (:class:`~mooncake_lab.trace_data.TraceMismatchWarning`) and is noted in ``source``.

    Raises
    ------
    ValueError : unknown name (the message lists the known ones).
    TraceUnavailableError : the file is nowhere and could not be downloaded.
    TraceFormatError : the file is malformed (message names file and line), or not a regular file.
    """
    from . import trace_data

    download = flag(download, "download", where="load_trace")
    if isinstance(name_or_path, os.PathLike) or (isinstance(name_or_path, str)
                                                  and name_or_path not in trace_data.TRACE_FILES
                                                  and _looks_like_path(name_or_path)):
        return read_jsonl(name_or_path)
    name = trace_data.check_name(name_or_path)
    path = trace_data.fetch(name, download=download)
    raw = read_bytes(path)
    tr = _parse(raw, Path(path), name=name)
    ok, found = trace_data.verify(name, path, raw=raw)
    if not ok:
        warnings.warn(found, trace_data.TraceMismatchWarning, stacklevel=2)
        tr = replace(tr, source=f"{tr.source} (NOT the released {name!r} trace: see TraceMismatchWarning)")
    return tr


def load_trace_or_synthetic(name: str, *, download: bool = True, seed: int = 0,
                            warn: bool = True) -> Trace:
    """The real trace ``name`` if available, else its calibrated synthetic stand-in (with a warning).

    The stand-in's ``name`` is ``"synthetic:<preset>"`` and its ``source`` says why it was used.
    Malformed files still raise :class:`TraceFormatError` (a broken file is not silently replaced).
    """
    from . import synthetic, trace_data

    name = trace_data.check_name(name)
    warn = flag(warn, "warn", where="load_trace_or_synthetic")
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
