"""The routers of :mod:`.routers` in plain Python: each rule written out as its source states it.

:func:`route_reference` takes the same :class:`~.routers.RouterParams` and per-instance inputs as
the numba :func:`~.routers.route` (lists or arrays) and must return the same instance;
:class:`ReferenceBelief` is the router-side history (:func:`~.routers.belief_match` /
:func:`~.routers.belief_insert`) over :class:`~mooncake_lab.prefix_cache.ReferenceCache` s.
"""
from __future__ import annotations

import math

from ..prefix_cache import ReferenceCache

__all__ = ["route_reference", "ReferenceBelief"]


class ReferenceBelief:
    """Per instance: an LRU of the blocks the router sent there and when it last sent each (s)."""

    def __init__(self, n_instances: int, capacity_blocks: int, ttl_s: float):
        self.caches = [ReferenceCache(capacity_blocks, "lru") for _ in range(n_instances)]
        self.sent_at = [{} for _ in range(n_instances)]
        self.ttl = ttl_s

    def match(self, inst: int, blocks, t: float) -> int:
        """Leading blocks believed held by ``inst`` at ``t``: cached in its LRU and sent within the TTL."""
        k = 0
        cache, sent = self.caches[inst], self.sent_at[inst]
        while k < len(blocks) and blocks[k] in cache.entries and (
                self.ttl == math.inf or t - sent[blocks[k]] <= self.ttl):
            k += 1
        return k

    def insert(self, inst: int, blocks, t: float) -> None:
        """The router sent a request with ``blocks`` to ``inst`` at ``t``."""
        self.caches[inst].touch(blocks)
        for b in blocks:
            self.sent_at[inst][b] = t

    def size(self, inst: int) -> int:
        """Blocks in the router's view of ``inst``."""
        return len(self.caches[inst].entries)


def route_reference(rp, ri, L, n_blocks, bt, u, rr, kv_cap) -> int:
    """The instance the router ``rp.code`` sends the request to (see :mod:`.routers`)."""
    n = len(ri.inflight)
    if rp.code == 8:  # production-stack roundrobin: sorted(urls)[idx++ % n]
        return rr % n
    raise NotImplementedError(f"router code {rp.code}")
