"""Request traces: the :class:`Trace` container (NumPy arrays, block hash chains as CSR).

A request = arrival time (s), input and output length (tokens) and the chain of 512-token block
ids of its prompt (equal id ⇒ same block *and* same whole prefix, as in the released Mooncake
traces). Block ids are remapped to dense integers 0..n_blocks-1 at load, so caches can be arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "BLOCK_TOKENS"]

#: Tokens per KV block in the released Mooncake traces (FAST'25 release README; every line of
#: both shipped traces satisfies len(hash_ids) == ceil(input_length / 512)).
BLOCK_TOKENS = 512


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

    def blocks_of(self, i: int) -> np.ndarray:
        """Block ids of request ``i``'s prompt, in prefix order."""
        return self.block_ids[self.block_offsets[i]:self.block_offsets[i + 1]]

    def __repr__(self) -> str:
        return (f"Trace({self.name!r}: {len(self):,} requests over {self.duration_s:,.0f} s, "
                f"{self.n_blocks:,} distinct blocks)")
