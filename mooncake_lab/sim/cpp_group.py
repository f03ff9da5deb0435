"""CPP prefill groups in the cluster simulator: the one place both engines get a prefill instance's
prefill and fetch times from.

With ``ClusterConfig.cpp_group_size = X`` the ``n_prefill`` nodes form ``n_prefill / X``
chunked-pipeline-parallel groups (Mooncake arXiv §5.1); each group is one *prefill instance* for the
Conductor. The rules (both engines, :mod:`.kernel` and :mod:`.reference`):

* **Chunks**: a request's ``n_new`` uncached tokens (after ``n_cached`` cached ones) are cut into
  chunks of at most ``cpp_chunk`` tokens (≤ ``cpp_chunk`` uncached tokens: one chunk — the paper's
  "split into chunks and pipelined if the uncached tokens exceed prefill_chunk") that cross X
  stages; activations of ``d_model × 2 B`` per token over the node's RDMA bandwidth, sent
  overlapped or not (``cpp_overlap``); stage times :func:`mooncake_lab.cpp.cm_cpp_stage_time`.
* **Pipelined FIFO** (the standalone lecture-05 model :func:`mooncake_lab.cpp.simulate_pipeline`
  with ``order="fifo"``): a group keeps, per stage s, the time its GPUs are free (``free[s]``) and,
  with overlapped sends, the time its NIC is free (``link[s]``). Requests enter in dispatch order
  and their chunks follow each other through the stages (:func:`mooncake_lab.cpp.cm_cpp_advance`):
  a request may **start** (and fetch its remote prefix) as soon as stage 0 is free —
  ``start = max(arrival, free[0])``, i.e. when the previous request's last chunk has left stage 0
  — and its chunks then enter stage 0 at ``start + fetch``; on stage s a chunk waits for its
  activations from stage s−1 and for stage s to finish the chunk before it (possibly the previous
  request's, still draining the pipeline). Its **prefill time** is its own pipeline time from
  ``start + fetch`` to its last chunk leaving the last stage (:func:`group_prefill`): on an idle
  group :func:`mooncake_lab.cpp.cm_cpp_request_time`, longer when it waits behind the previous
  request on a later stage. Chunks of different requests never interleave (no overtaking; lecture 05's
  ``order="interleave"`` is not modelled). The fetch does not share the NICs with activation sends
  (with ``network_contention`` fetches and KV streams share the nodes' links, :mod:`.links`;
  activations still do not).
* **Algorithm 1's estimate** for a group (``load``: the queue term only): ``max(0, free[0] −
  arrival)`` (wait for stage 0) ``+ fetch +`` the request's span from :func:`group_prefill` on
  that group's current state (its own pipeline time, drain waits included), so the estimate is
  the TTFT the request would get there (before noise; equal up to rounding), as with X = 1
  (queue until the node frees + prefill time).
* **X = 1**: one node, never chunked, :func:`~mooncake_lab.roofline.cm_prefill_time`; ``free[0]`` is
  the node's "busy until" and everything is exactly the simulator without CPP.
* **Prefix cache**: a group stores X × ``cache_capacity_blocks`` blocks. Stage s holds only its L/X
  layers, so it keeps only those layers' share of a block's KV: a block costs every node 1/X of its
  bytes, and the group's DRAM (X nodes) holds X times the blocks of one node. The pool's total
  capacity is the same for every X.
* **Remote prefix fetch** (``kvcentric``) between two groups: stage s of the destination reads its
  layers from stage s of the source, X node pairs in parallel, each moving 1/X of the bytes:
  :func:`~mooncake_lab.roofline.cm_kv_transfer_time` / X.
* **KV to decode**: a decode node is one node and receives the whole KV through its own NICs, so
  the transfer time is unchanged; layer-wise streaming exposes ``max(x/l, x − p(1 − 1/l))`` with
  p = the group's prefill time (KV production spread over the whole group prefill, an
  approximation: with CPP the layers of early chunks finish early).
"""
from __future__ import annotations

from numba import njit

from ..cpp import cm_cpp_advance_stages, cm_cpp_request_time
from ..roofline import cm_kv_transfer_time, cm_prefill_reuse_time

__all__ = ["group_prefill_time", "group_prefill", "group_fetch_time"]


@njit(cache=True, inline="always")
def group_prefill_time(c, n_new, n_cached, group_size, chunk, act_bytes, bandwidth, overlap):
    """Seconds to prefill ``n_new`` tokens after ``n_cached`` on an idle instance of ``group_size``
    nodes (1: :func:`~mooncake_lab.roofline.cm_prefill_reuse_time`, unchunked; > 1: CPP, :func:`cm_cpp_request_time` with chunks
    of ``chunk`` tokens, ``act_bytes`` B per token between stages at ``bandwidth`` B/s)."""
    if group_size == 1:
        return cm_prefill_reuse_time(c, n_new, n_cached)
    return cm_cpp_request_time(c, n_new, n_cached, chunk, group_size, act_bytes, bandwidth, overlap)


@njit(cache=True, inline="always")
def group_prefill(c, sc, free, link, p, new_free, new_link, ready, n_new, n_cached, group_size, chunk, act_bytes,
                  bandwidth, overlap):
    """``(finish, span)`` in s of a request whose chunks may enter stage 0 from ``ready`` on, on
    group ``p`` whose stages are free at ``free[p]`` and NICs at ``link[p]`` (2-D arrays, left
    untouched): ``finish``
    = its last chunk leaves the last stage (:func:`mooncake_lab.cpp.cm_cpp_advance`), ``span`` =
    its own prefill time ``finish − ready`` (including waits behind the previous request on later
    stages). The group's state after it goes to ``new_free`` / ``new_link`` (commit by copying).
    ``group_size`` 1: one node, unchunked: span = ``cm_prefill_reuse_time`` exactly, finish =
    ``max(ready, free[0]) + span`` (the simulator without CPP, bit for bit). ``sc``: the stage
    coefficients of ``group_size`` (:func:`mooncake_lab.cpp.cm_stage_coefficients`), made once by the
    caller so that this allocates nothing."""
    if group_size == 1:
        span = cm_prefill_reuse_time(c, n_new, n_cached)
        end = max(ready, free[p, 0]) + span
        new_free[0] = end
        new_link[0] = link[p, 0]
        return end, span
    for s in range(group_size):
        new_free[s] = free[p, s]
        new_link[s] = link[p, s]
    end = cm_cpp_advance_stages(sc, new_free, new_link, ready, n_new, n_cached, chunk, group_size, act_bytes,
                                bandwidth, overlap)
    return end, end - ready


@njit(cache=True, inline="always")
def group_fetch_time(c, n_tokens, group_size):
    """Seconds to fetch ``n_tokens`` of KV from another instance: X node pairs in parallel, each
    moving its 1/X of the layers (``group_size`` = 1: one node pair, :func:`cm_kv_transfer_time`)."""
    return cm_kv_transfer_time(c, n_tokens) / group_size
