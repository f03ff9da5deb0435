"""CPP prefill groups in the cluster simulator: the one place both engines get a prefill instance's
prefill and fetch times from.

With ``ClusterConfig.cpp_group_size = X`` the ``n_prefill`` nodes form ``n_prefill / X``
chunked-pipeline-parallel groups (Mooncake arXiv §5.1); each group is one *prefill instance* for the
Conductor. The rules (both engines, :mod:`.kernel` and :mod:`.reference`):

* **Prefill time** of a request with ``n_new`` uncached tokens after ``n_cached`` cached ones =
  :func:`mooncake_lab.cpp.cm_cpp_request_time` with X stages and chunks of at most ``cpp_chunk``
  tokens (≤ ``cpp_chunk`` uncached tokens: one chunk — the paper's "split into chunks and pipelined
  if the uncached tokens exceed prefill_chunk"), activations of ``d_model × 2 B`` per token over
  the node's RDMA bandwidth, sent overlapped or not (``cpp_overlap``). X = 1: one node, never
  chunked, :func:`~mooncake_lab.roofline.cm_prefill_time` (exactly the simulator without CPP).
  Algorithm 1's estimates (``cache_aware``, ``kvcentric``) use this same time.
* **One request at a time per group** (FIFO): the group is busy from the request's start until its
  last chunk leaves the last stage. The next request does not enter stage 0 while the previous one
  is still draining the pipeline, and chunks of different requests never interleave. The
  standalone lecture-05 model (:func:`mooncake_lab.cpp.simulate_pipeline`, ``order="interleave"``)
  shows that interleaving lets short requests overtake a long one; the cluster simulator does not
  model it (nor the pipelined overlap of consecutive requests), so its CPP queueing is conservative
  — each request pays the pipeline's fill and drain.
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

from ..cpp import cm_cpp_request_time
from ..roofline import cm_kv_transfer_time, cm_prefill_time

__all__ = ["group_prefill_time", "group_fetch_time"]


@njit(cache=True, inline="always")
def group_prefill_time(c, n_new, n_cached, group_size, chunk, act_bytes, bandwidth, overlap):
    """Seconds to prefill ``n_new`` tokens after ``n_cached`` on an idle instance of ``group_size``
    nodes (1: :func:`cm_prefill_time`, unchunked; > 1: CPP, :func:`cm_cpp_request_time` with chunks
    of ``chunk`` tokens, ``act_bytes`` B per token between stages at ``bandwidth`` B/s)."""
    if group_size == 1:
        return cm_prefill_time(c, n_new, n_cached)
    return cm_cpp_request_time(c, n_new, n_cached, chunk, group_size, act_bytes, bandwidth, overlap)


@njit(cache=True, inline="always")
def group_fetch_time(c, n_tokens, group_size):
    """Seconds to fetch ``n_tokens`` of KV from another instance: X node pairs in parallel, each
    moving its 1/X of the layers (``group_size`` = 1: one node pair, :func:`cm_kv_transfer_time`)."""
    return cm_kv_transfer_time(c, n_tokens) / group_size
