"""Long-context prefill across X nodes: chunked pipeline parallelism (CPP), TP and SP, and the VRAM
occupation of layer-wise prefill.

**CPP** (Mooncake arXiv §5.1): X prefill nodes form a pipeline group; node s holds layers
``s·L/X … (s+1)·L/X``; a request's uncached tokens are cut into chunks of at most ``chunk`` tokens.
Chunk j on stage s starts when chunk j has left stage s−1 (and crossed the network) and stage s has
finished the chunk before it. Stage time of a chunk of ``k`` tokens after ``o`` tokens already in
the KV cache (cached prefix + earlier chunks) is derived from :func:`roofline.cm_prefill_time` on a
*per-stage* coefficient array (:func:`cm_stage_coefficients`):

* the layer-proportional terms (linear + LM head per token, TP comm per token, attention per pair,
  weight and KV streaming) are divided by X — each stage runs L/X of the layers. (The LM head
  really runs on the last stage only; spreading it is a < 0.4% error for LLaMA2-70B.)
* the fixed terms — per-forward overhead ``overhead_s`` (kernel launches; the "modern" preset's
  0.5 ms + 20 µs/layer) and the serial ``prefill_serial_s`` — are paid **in full by every stage
  for every chunk**: each stage runs its own forward pass. (The CostModel array merges the
  per-step and per-layer overheads, so this slightly over-charges the per-layer part: ≤ 1.6 ms per
  stage and chunk with "modern".) This is what makes very small chunks expensive.

Between stages the chunk's hidden states move over RDMA: ``k × d_model × 2 B`` (BF16 activations,
one ``[tokens, d_model]`` tensor per boundary: Narayanan et al., SC'21 "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", §3.3: pipeline point-to-point size
b·s·h elements) at the node's RDMA bandwidth. **Overlapped**: a separate NIC sends while the
GPUs compute the next chunk (the send only delays the next stage). **Not overlapped**: the stage is
busy until its send has finished.

The stage-time kernel :func:`cm_cpp_stage_time` ``(c, chunk_tokens, cached_tokens, n_stages,
act_bytes_per_token, bandwidth, overlap)``, :func:`cm_cpp_advance` (one request through a group
whose stages may still be busy: pipelined FIFO, what the cluster simulator's CPP groups use) and
:func:`cm_cpp_request_time` (one request alone) are ``@njit`` functions of plain numbers, flat
arrays and the ``CostModel.as_array()`` so a cluster simulator's kernel can call them.

**Comparisons on the same cost model** (one request of ``n`` tokens, X nodes):

* one node: :func:`roofline.cm_prefill_time`;
* TP across X nodes: every node runs every layer at 1/X of the width (same per-stage coefficients),
  plus two all-reduces per layer over RDMA (:func:`roofline.tp_allreduce_bytes_per_token` with X
  participants — a hierarchical all-reduce where each node's NICs carry its share), on the critical
  path (the next matmul needs the sum);
* SP with ring attention across X nodes: each node holds n/X tokens (load-balanced striped split:
  Brandon et al. 2023, "Striped Attention"); compute divides by X; per layer each node passes its
  KV block around the ring, (X−1)/X × n × KV bytes per node in total, overlapped layer by layer with
  compute (:func:`storage.layerwise_time`) — optimistic, as only attention can hide it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from .models import get_model
from .roofline import CostModel, cm_prefill_reuse_time, cm_prefill_time, cost_model, tp_allreduce_bytes_per_token
from .storage import layerwise_time
from .validate import InputError, choice, int_array, integer, memory, real, real_array

__all__ = [
    "cm_stage_coefficients", "cm_cpp_stage_time", "cm_cpp_link_time", "cm_cpp_advance", "cm_cpp_advance_stages",
    "cm_cpp_request_time",
    "activation_bytes_per_token", "network_bandwidth", "n_chunks",
    "PipelineResult", "simulate_pipeline", "pipeline_reference", "ORDERS",
    "cpp_ttft", "one_node_ttft", "tp_ttft", "sp_ttft", "scheme_summary", "SCHEMES",
    "kv_vram_profile",
]

#: Chunk orders at stage 0: "fifo" (a request's chunks all go before the next request's) and
#: "interleave" (each free slot goes to the arrived request served least recently; a newcomer first).
ORDERS = ("fifo", "interleave")
SCHEMES = ("one_node", "tp", "sp", "cpp")

# indices of CostModel.as_array() that scale with the number of layers a node runs
_LAYER_TERMS = (1, 2, 3, 4, 5, 8, 15, 16, 17)


# --- kernels ------------------------------------------------------------------------------------
@njit(cache=True)
def cm_stage_coefficients(c, n_stages):
    """Cost coefficients of one stage holding 1/``n_stages`` of the layers (a new array).

    Layer-proportional terms divided by ``n_stages``; fixed overheads (0: per forward, 9: serial)
    kept whole — every stage pays them for every chunk.
    """
    s = c.copy()
    x = float(n_stages)
    s[1] /= x
    s[2] /= x
    s[3] /= x
    s[4] /= x
    s[5] /= x
    s[8] /= x
    s[15] /= x
    s[16] /= x   # a stage loads its layers' share of a cached prefix over its own PCIe
    s[17] /= x   # over its own layers
    return s


@njit(cache=True)
def cm_cpp_link_time(chunk_tokens, act_bytes_per_token, bandwidth):
    """Seconds to send a chunk's activations (``chunk_tokens × act_bytes_per_token`` B) at ``bandwidth`` B/s."""
    return float(chunk_tokens) * act_bytes_per_token / bandwidth


@njit(cache=True)
def cm_cpp_stage_time(c, chunk_tokens, cached_tokens, n_stages, act_bytes_per_token, bandwidth, overlap):
    """Seconds a CPP stage is busy with one chunk: compute of ``chunk_tokens`` new tokens after
    ``cached_tokens`` on 1/``n_stages`` of the layers, plus — if not ``overlap`` and there is a next
    stage — the send of its activations. (For the last stage pass ``n_stages`` as usual and
    ``bandwidth = inf`` or ``overlap=True``: it sends nothing.)"""
    t = cm_prefill_time(cm_stage_coefficients(c, n_stages), chunk_tokens, cached_tokens)
    if not overlap and n_stages > 1:
        t += cm_cpp_link_time(chunk_tokens, act_bytes_per_token, bandwidth)
    return t


@njit(cache=True)
def cm_cpp_advance(c, free, link, ready, n_new, n_cached, chunk, n_stages, act_bytes_per_token, bandwidth,
                   overlap):
    """Push one request through a CPP group in pipelined FIFO order; returns the time (s) its last
    chunk leaves the last stage.

    ``free[s]`` (s): when stage s's GPUs are free; ``link[s]``: when its NIC is free (overlapped
    sends only). Both are advanced **in place** past this request. The request's ``n_new`` tokens
    (after ``n_cached``) are cut into chunks of at most ``chunk``; chunk j starts on stage 0 at
    max(``ready``, stage 0 free) and on stage s at max(chunk j received from stage s−1, stage s
    done with the chunk before it — its own previous chunk or the previous request's last one). So
    the next request's first chunk enters stage 0 as soon as this request's last chunk has left it.
    An idle group (all zeros, ``ready`` = 0) gives :func:`cm_cpp_request_time`.
    """
    return cm_cpp_advance_stages(cm_stage_coefficients(c, n_stages), free, link, ready, n_new, n_cached, chunk,
                                 n_stages, act_bytes_per_token, bandwidth, overlap)


@njit(cache=True)
def cm_cpp_advance_stages(sc, free, link, ready, n_new, n_cached, chunk, n_stages, act_bytes_per_token, bandwidth,
                          overlap):
    """:func:`cm_cpp_advance` given the stage coefficients ``sc`` (:func:`cm_stage_coefficients`):
    allocates nothing, so the simulator's no-refcount helpers can call it."""
    x = int(n_stages)
    done = ready
    o = float(n_cached)
    left = float(n_new)
    while left > 0.0:
        k = min(float(chunk), left)
        # the first chunk loads the cached prefix's KV from DRAM (sc[16] > 0); later ones find it in HBM
        comp = cm_prefill_reuse_time(sc, k, o) if o == n_cached else cm_prefill_time(sc, k, o)
        xfer = cm_cpp_link_time(k, act_bytes_per_token, bandwidth)
        rdy = ready
        for s in range(x):
            start = max(rdy, free[s])
            end = start + comp
            if s == x - 1:
                free[s] = end
                done = end
            elif overlap:
                free[s] = end
                send0 = max(end, link[s])
                link[s] = send0 + xfer
                rdy = link[s]
            else:
                free[s] = end + xfer
                rdy = end + xfer
        o += k
        left -= k
    return done


@njit(cache=True)
def cm_cpp_request_time(c, n_new, n_cached, chunk, n_stages, act_bytes_per_token, bandwidth, overlap):
    """Seconds from start to last token out of one request alone in an idle CPP group
    (:func:`cm_cpp_advance` from an all-free group at time 0)."""
    x = int(n_stages)
    return cm_cpp_advance(c, np.zeros(x), np.zeros(x), 0.0, n_new, n_cached, chunk, x, act_bytes_per_token,
                          bandwidth, overlap)


@njit(cache=True, nogil=True)  # nogil: work computed ahead leaves the GIL to the student's move
def _pipeline_kernel(c, arrival, n_new, n_cached, chunk, n_stages, act_bytes, bandwidth, overlap,
                     interleave, n_total):
    n_req = arrival.shape[0]
    x = n_stages
    sc = cm_stage_coefficients(c, x)
    c_req = np.empty(n_total, np.int64)
    c_idx = np.empty(n_total, np.int64)
    c_tok = np.empty(n_total, np.float64)
    c_off = np.empty(n_total, np.float64)
    start = np.full((n_total, x), np.nan)
    end = np.full((n_total, x), np.nan)
    sent = np.full((n_total, x), np.nan)
    finish = np.full(n_req, np.nan)
    left = n_new.astype(np.float64).copy()
    done_tok = np.zeros(n_req)
    next_idx = np.zeros(n_req, np.int64)
    last_served = np.full(n_req, -1.0)   # order of the last chunk slot; -1: never served
    free = np.zeros(x)
    link = np.zeros(x)
    for i in range(n_total):
        # choose the request whose chunk enters stage 0 next
        t0 = free[0]
        pick = -1
        while pick < 0:
            for r in range(n_req):
                if left[r] <= 0.0 or arrival[r] > t0:
                    continue
                if pick < 0:
                    pick = r
                elif interleave:
                    if last_served[r] < last_served[pick] or (
                            last_served[r] == last_served[pick] and arrival[r] < arrival[pick]):
                        pick = r
                elif arrival[r] < arrival[pick]:
                    pick = r
            if pick < 0:       # nothing has arrived: stage 0 idles until the next arrival
                nxt = np.inf
                for r in range(n_req):
                    if left[r] > 0.0 and arrival[r] < nxt:
                        nxt = arrival[r]
                t0 = nxt
        r = pick
        k = min(float(chunk), left[r])
        o = float(n_cached[r]) + done_tok[r]
        c_req[i] = r
        c_idx[i] = next_idx[r]
        c_tok[i] = k
        c_off[i] = o
        left[r] -= k
        done_tok[r] += k
        next_idx[r] += 1
        last_served[r] = float(i)
        comp = cm_prefill_time(sc, k, o)
        xfer = k * act_bytes / bandwidth
        ready = arrival[r]
        for s in range(x):
            st = max(ready, free[s])
            en = st + comp
            start[i, s] = st
            end[i, s] = en
            if s == x - 1:
                free[s] = en
                sent[i, s] = en
            elif overlap:
                free[s] = en
                s0 = max(en, link[s])
                link[s] = s0 + xfer
                sent[i, s] = link[s]
                ready = link[s]
            else:
                free[s] = en + xfer
                sent[i, s] = en + xfer
                ready = en + xfer
        if left[r] <= 0.0:
            finish[r] = end[i, x - 1]
    return c_req, c_idx, c_tok, c_off, start, end, sent, finish


# --- helpers --------------------------------------------------------------------------------------
def activation_bytes_per_token(model) -> float:
    """Bytes of hidden state per token crossing a pipeline boundary: ``d_model × 2 B`` (BF16).

    LLaMA2-70B: 8,192 × 2 = 16,384 B = 16 KiB (20× less than its 320 KiB of KV per token).
    """
    m = get_model(model)
    return float(m.d_model * m.bytes_per_param)


def network_bandwidth(model, node, preset="modern") -> float:
    """Effective RDMA bandwidth of a node under ``preset``, B/s: NIC line rate × RDMA efficiency
    (read back from the CostModel: KV bytes per token / KV transfer seconds per token)."""
    cm = cost_model(model, node, preset)
    return cm.kv_bytes_per_token / cm.kv_transfer_s_per_token


def n_chunks(n_new, chunk) -> int:
    """Number of chunks of at most ``chunk`` tokens in ``n_new`` tokens (ceil)."""
    n_new = integer(n_new, "n_new", lo=0, hi=MAX_TOKENS, where="n_chunks")
    chunk = integer(chunk, "chunk", lo=1, hi=MAX_TOKENS, where="n_chunks")
    return -(-n_new // chunk)


#: Tokens of one prefill (n_new, n_cached, chunk): 2**24 = 16.8 M, 128× the longest context of the
#: catalogue models (DeepSeek-V3: 128k) and of lecture 05's slider (131,072); a pipeline loops per chunk.
MAX_TOKENS = 2**24
#: RDMA bandwidth between stages, B/s: ≤ 1e30, an idealised free network (transfers take ~0 s; lecture
#: 05's exercise and tests use it). Physical links are ≤ 4e11 B/s (8 × 400 Gbps, FAST'25 §5.4.1).
MAX_BANDWIDTH = 1e30
#: Chunks :func:`pipeline_reference` steps through in plain Python (≈ 10 µs each: ≤ ~1 s).
MAX_REFERENCE_CHUNKS = 100_000


def _check_int(name, value, minimum, maximum=None) -> int:
    return integer(value, name, lo=minimum, hi=MAX_TOKENS if maximum is None else maximum)


def _check_tokens(name, value, minimum) -> float:
    return real(value, name, lo=minimum, hi=MAX_TOKENS)


def _check_bw(bandwidth, model, node, preset) -> float:
    if bandwidth is None:
        return network_bandwidth(model, node, preset)
    return real(bandwidth, "bandwidth", lo=0.0, lo_open=True, hi=MAX_BANDWIDTH)  # B/s


def _check_order(order) -> bool:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return order == "interleave"


def _requests(arrival, n_new, n_cached):
    a = real_array(np.atleast_1d(arrival), "arrival", lo=0.0)
    n = int_array(np.atleast_1d(n_new), "n_new", lo=1, hi=MAX_TOKENS).astype(np.float64)
    cached = (np.zeros_like(n) if n_cached is None
              else int_array(np.atleast_1d(n_cached), "n_cached", lo=0, hi=MAX_TOKENS).astype(np.float64))
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"arrival must be a non-empty 1-D array of seconds, got shape {a.shape}")
    if n.shape != a.shape or cached.shape != a.shape:
        raise ValueError(f"arrival, n_new and n_cached must have the same length, got {a.size}, {n.size}, "
                         f"{cached.size}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("arrival must hold finite times >= 0 s")
    if not np.all(np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise ValueError("n_new must hold whole token counts >= 1")
    if not np.all(np.isfinite(cached)) or np.any(cached < 0) or np.any(cached != np.round(cached)):
        raise ValueError("n_cached must hold whole token counts >= 0")
    return a, n, cached


@dataclass(frozen=True)
class PipelineResult:
    """What :func:`simulate_pipeline` returns (times in seconds).

    Per chunk (in stage-0 order): ``chunk_request``, ``chunk_index`` (within its request),
    ``chunk_tokens``, ``chunk_offset`` (tokens already in the KV cache before it); per chunk and
    stage (shape ``(chunks, X)``): ``start``, ``end`` (compute) and ``sent`` (activations received by
    the next stage; = ``end`` on the last stage). Per request: ``arrival``, ``n_new``, ``n_cached``,
    ``finish`` (last chunk leaves the last stage) and ``ttft`` (finish − arrival).
    """

    chunk_request: np.ndarray
    chunk_index: np.ndarray
    chunk_tokens: np.ndarray
    chunk_offset: np.ndarray
    start: np.ndarray
    end: np.ndarray
    sent: np.ndarray
    arrival: np.ndarray
    n_new: np.ndarray
    n_cached: np.ndarray
    finish: np.ndarray

    @property
    def ttft(self) -> np.ndarray:
        return self.finish - self.arrival

    @property
    def n_stages(self) -> int:
        return int(self.start.shape[1])

    def chunks_frame(self) -> pd.DataFrame:
        """One row per (chunk, stage): request, chunk, stage, tokens, offset, start_s, end_s, sent_s."""
        nc, x = self.start.shape
        return pd.DataFrame({
            "request": np.repeat(self.chunk_request, x), "chunk": np.repeat(self.chunk_index, x),
            "stage": np.tile(np.arange(x), nc), "tokens": np.repeat(self.chunk_tokens, x),
            "offset": np.repeat(self.chunk_offset, x), "start_s": self.start.ravel(),
            "end_s": self.end.ravel(), "sent_s": self.sent.ravel()})

    def requests_frame(self) -> pd.DataFrame:
        """One row per request: request, arrival_s, n_new, n_cached, finish_s, ttft_s."""
        return pd.DataFrame({"request": np.arange(self.arrival.size), "arrival_s": self.arrival,
                             "n_new": self.n_new, "n_cached": self.n_cached, "finish_s": self.finish,
                             "ttft_s": self.ttft})


def _costs_array(costs, model, node, preset) -> np.ndarray:
    """``CostModel.as_array()`` of (model, node, preset), or of ``costs`` (a CostModel or such an array)."""
    if costs is None:
        return cost_model(model, node, preset).as_array()
    n_fields = len(CostModel.field_names())
    arr = real_array(costs.as_array() if isinstance(costs, CostModel) else costs, "costs", lo=0)
    if arr.shape != (n_fields,):
        raise ValueError(f"costs must be a CostModel or {n_fields} finite coefficients >= 0, got shape {arr.shape}")
    return arr


def _prepare(arrival, n_new, n_cached, model, node, preset, chunk, x, bandwidth, order, costs):
    m = get_model(model)
    a, n, cached = _requests(arrival, n_new, n_cached)
    chunk = _check_int("chunk", chunk, 1)
    x = _check_int("x", x, 1, m.n_layers)
    bw = _check_bw(bandwidth, m, node, preset)
    inter = _check_order(order)
    return m, a, n, cached, chunk, x, bw, inter, _costs_array(costs, m, node, preset)


def simulate_pipeline(arrival, n_new, n_cached=None, *, model="llama2-70b", node="a800x8", preset="modern",
                      chunk: int = 4096, x: int = 4, bandwidth: float | None = None, overlap: bool = True,
                      order: str = "interleave", costs=None) -> PipelineResult:
    """Simulate requests through one CPP group of ``x`` nodes (numba kernel).

    Parameters
    ----------
    arrival : seconds, one per request; n_new : uncached tokens per request; n_cached : cached prefix
        tokens per request (default 0; they only make attention of the new tokens longer).
    model, node, preset : the cost model (:func:`roofline.cost_model`); "modern" by default, since
        "calibrated" extrapolates badly past 8k tokens.
    chunk : tokens per chunk (``prefill_chunk``); x : nodes (stages) in the group, 1 … L.
    bandwidth : RDMA bandwidth between stages, B/s (default: the node's NICs × the preset's RDMA
        efficiency, :func:`network_bandwidth`); overlap : send activations while computing the next chunk.
    order : "fifo" or "interleave" (:data:`ORDERS`).
    costs : optional CostModel (or its array) replacing the one of (model, node, preset); the model
        still sets the activation bytes per token.
    """
    m, a, n, cached, chunk, x, bw, inter, c = _prepare(arrival, n_new, n_cached, model, node, preset, chunk, x,
                                                       bandwidth, order, costs)
    total = int(np.sum(-(-n.astype(np.int64) // chunk)))  # chunks: ceil(n_new / chunk) per request
    memory(8 * total * (3 * x + 4), f"{total:,} chunks (n_new / chunk) × {x} stages", "simulate_pipeline")
    out = _pipeline_kernel(c, a, n, cached, float(chunk), x, activation_bytes_per_token(m), bw, bool(overlap),
                           inter, total)
    return PipelineResult(*out[:7], arrival=a, n_new=n, n_cached=cached, finish=out[7])


def pipeline_reference(arrival, n_new, n_cached=None, *, model="llama2-70b", node="a800x8", preset="modern",
                       chunk: int = 4096, x: int = 4, bandwidth: float | None = None, overlap: bool = True,
                       order: str = "interleave", costs=None) -> PipelineResult:
    """Plain-Python reference of :func:`simulate_pipeline` (same semantics, written for reading).

    Step 1 decides the order in which chunks enter stage 0 (stage 0 only depends on itself);
    step 2 pushes that fixed sequence through the stages one stage at a time.
    """
    m, a, n, cached, chunk, x, bw, inter, c = _prepare(arrival, n_new, n_cached, model, node, preset, chunk, x,
                                                       bandwidth, order, costs)
    sc = cm_stage_coefficients(c, x)
    act = activation_bytes_per_token(m)
    total = int(np.sum(-(-n.astype(np.int64) // chunk)))  # chunks: ceil(n_new / chunk) per request
    if total > MAX_REFERENCE_CHUNKS:
        raise InputError(f"pipeline_reference: got {total:,} chunks (n_new / chunk); allowed: at most "
                         f"{MAX_REFERENCE_CHUNKS:,} (plain Python, chunk by chunk: use simulate_pipeline)")
    # the chunks of each request, in order
    todo = {r: [] for r in range(a.size)}
    for r in range(a.size):
        done = 0.0
        while done < n[r]:
            k = min(float(chunk), n[r] - done)
            todo[r].append({"request": r, "index": len(todo[r]), "tokens": k, "offset": cached[r] + done})
            done += k
    # step 1: stage-0 order
    seq, last, stage0_free = [], {}, 0.0
    while any(todo.values()):
        waiting = [r for r in todo if todo[r] and a[r] <= stage0_free]
        if not waiting:
            stage0_free = min(a[r] for r in todo if todo[r])
            continue
        if inter:
            r = min(waiting, key=lambda q: (last.get(q, -1), a[q], q))
        else:
            r = min(waiting, key=lambda q: (a[q], q))
        ch = todo[r].pop(0)
        last[r] = len(seq)
        ch["compute"] = float(cm_prefill_time(sc, ch["tokens"], ch["offset"]))
        ch["xfer"] = ch["tokens"] * act / bw
        ch["start"], ch["end"], ch["sent"] = [0.0] * x, [0.0] * x, [0.0] * x
        ready = a[r]
        start = max(ready, stage0_free)
        busy = ch["compute"] if (overlap or x == 1) else ch["compute"] + ch["xfer"]
        stage0_free = start + busy
        ch["start"][0] = start
        seq.append(ch)
    # step 2: every stage processes the same sequence
    for s in range(x):
        gpu_free = link_free = 0.0
        for ch in seq:
            ready = a[ch["request"]] if s == 0 else ch["sent"][s - 1]
            st = max(ready, gpu_free)
            en = st + ch["compute"]
            ch["start"][s], ch["end"][s] = st, en
            if s == x - 1:
                ch["sent"][s] = en
                gpu_free = en
            elif overlap:
                link_free = max(en, link_free) + ch["xfer"]
                ch["sent"][s] = link_free
                gpu_free = en
            else:
                ch["sent"][s] = en + ch["xfer"]
                gpu_free = en + ch["xfer"]
    finish = np.full(a.size, np.nan)
    for ch in seq:
        finish[ch["request"]] = ch["end"][x - 1]
    arr = lambda key, dt=np.float64: np.array([ch[key] for ch in seq], dtype=dt)  # noqa: E731
    return PipelineResult(arr("request", np.int64), arr("index", np.int64), arr("tokens"), arr("offset"),
                          arr("start"), arr("end"), arr("sent"), arrival=a, n_new=n, n_cached=cached, finish=finish)


# --- one request, four schemes ---------------------------------------------------------------------
def _one(model, node, n_tokens, n_cached, x, preset):
    m = get_model(model)
    n = _check_tokens("n_tokens", n_tokens, 1)
    c0 = _check_tokens("n_cached", n_cached, 0)
    x = _check_int("x", x, 1, m.n_layers)
    c = cost_model(m, node, preset).as_array()
    c[16] = 0.0  # the schemes compare compute: a cached prefix's DRAM load is lecture 02's (and the simulator's)
    return m, n, c0, x, c


def one_node_ttft(model="llama2-70b", node="a800x8", n_tokens=131072, n_cached=0, preset="modern") -> float:
    """Seconds to prefill ``n_tokens`` after ``n_cached`` on one node, unchunked (:func:`roofline.cm_prefill_time`)."""
    m, n, c0, _, c = _one(model, node, n_tokens, n_cached, 1, preset)
    return float(cm_prefill_time(c, n, c0))


def cpp_ttft(model="llama2-70b", node="a800x8", n_tokens=131072, x=4, chunk=4096, n_cached=0, preset="modern",
             bandwidth=None, overlap=True) -> float:
    """Seconds for one request alone in an idle CPP group of ``x`` nodes (:func:`cm_cpp_request_time`)."""
    m, n, c0, x, c = _one(model, node, n_tokens, n_cached, x, preset)
    chunk = _check_int("chunk", chunk, 1)
    bw = _check_bw(bandwidth, m, node, preset)
    return float(cm_cpp_request_time(c, n, c0, float(chunk), x, activation_bytes_per_token(m), bw, bool(overlap)))


def tp_ttft(model="llama2-70b", node="a800x8", n_tokens=131072, x=4, n_cached=0, preset="modern",
            bandwidth=None) -> float:
    """Seconds for TP across ``x`` nodes: compute at 1/x per node + 2 all-reduces per layer over RDMA."""
    m, n, c0, x, c = _one(model, node, n_tokens, n_cached, x, preset)
    bw = _check_bw(bandwidth, m, node, preset)
    comm = n * tp_allreduce_bytes_per_token(m, x) / bw
    return float(cm_prefill_time(cm_stage_coefficients(c, x), n, c0)) + comm


def sp_ttft(model="llama2-70b", node="a800x8", n_tokens=131072, x=4, n_cached=0, preset="modern",
            bandwidth=None, overlap=True) -> float:
    """Seconds for sequence parallelism (ring attention) across ``x`` nodes: compute at 1/x per node;
    KV blocks of (x−1)/x × (n_cached + n) tokens per node pass around the ring, layer by layer."""
    m, n, c0, x, c = _one(model, node, n_tokens, n_cached, x, preset)
    bw = _check_bw(bandwidth, m, node, preset)
    compute = float(cm_prefill_time(cm_stage_coefficients(c, x), n, c0))
    ring = (x - 1) / x * (n + c0) * m.kv_bytes_per_token() / bw
    return layerwise_time(ring, compute, m.n_layers, overlap=overlap)


def scheme_summary(scheme: str, model="llama2-70b", node="a800x8", n_tokens=131072, x=4, chunk=4096,
                   preset="modern", bandwidth=None, overlap=True) -> dict:
    """TTFT, MFU and network bytes of one ``n_tokens`` prefill under ``scheme`` (:data:`SCHEMES`).

    Returns ``{"scheme", "x", "n_tokens", "ttft_s", "mfu", "net_bytes"}``: MFU = model FLOPs /
    (TTFT × nodes × node peak); ``net_bytes`` = bytes sent over RDMA by all nodes together
    (CPP: (x−1) boundaries × n × d·2 B; TP: x × n × all-reduce bytes; SP: (x−1) × n × KV bytes).
    """
    from .hardware import get_node
    m, nd = get_model(model), get_node(node)
    n = _check_tokens("n_tokens", n_tokens, 1)
    scheme = choice(scheme, "scheme", SCHEMES, where="scheme_summary")
    x = _check_int("x", x, 1, m.n_layers)
    if scheme == "one_node":
        x, t, net = 1, one_node_ttft(m, nd, n, preset=preset), 0.0
    elif scheme == "cpp":
        t = cpp_ttft(m, nd, n, x, chunk, preset=preset, bandwidth=bandwidth, overlap=overlap)
        net = (x - 1) * n * activation_bytes_per_token(m)
    elif scheme == "tp":
        t = tp_ttft(m, nd, n, x, preset=preset, bandwidth=bandwidth)
        net = x * n * tp_allreduce_bytes_per_token(m, x)
    elif scheme == "sp":
        t = sp_ttft(m, nd, n, x, preset=preset, bandwidth=bandwidth, overlap=overlap)
        net = (x - 1) * n * m.kv_bytes_per_token()
    else:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return {"scheme": scheme, "x": x, "n_tokens": n, "ttft_s": t,
            "mfu": m.prefill_flops(n) / (t * x * nd.peak_flops), "net_bytes": float(net)}


# --- VRAM occupation: S·T ----------------------------------------------------------------------------
def kv_vram_profile(model="llama2-70b", node="a800x8", n_tokens=131072, preset="modern", tier="dram",
                    layerwise: bool = True) -> dict:
    """KV bytes held in the prefill node's VRAM over time, for one unchunked prefill whose new KV is
    stored to ``tier`` (arXiv §5.2: a request's VRAM occupation cost is S × T).

    Layer i's KV (S/L bytes) appears when layer i finishes (i·T/L, T = prefill time) and is freed
    when its store to ``tier`` finishes. Serialized: all stores start after the prefill, layer by
    layer. Layer-wise: layer i's store starts as soon as layer i is done (and the link is free).
    Returns ``{"t_s": times, "bytes": bytes held just after each time (step function),
    "gb_s": ∫ bytes dt / 1e9 (GB·s), "done_s": last store done, "peak_bytes"}``.
    """
    from .roofline import kv_load_time
    m = get_model(model)
    n = _check_tokens("n_tokens", n_tokens, 1)
    L = m.n_layers
    T = one_node_ttft(m, node, n, preset=preset)
    per_store = kv_load_time(m, node, n, tier) / L           # same bytes, same PCIe link (lecture 02)
    born = np.arange(1, L + 1) * T / L
    freed = np.empty(L)
    link = 0.0 if layerwise else T
    for i in range(L):
        link = max(link, born[i]) + per_store
        freed[i] = link
    size = n * m.kv_bytes_per_token() / L
    t = np.unique(np.concatenate([[0.0], born, freed]))
    held = np.array([size * np.sum((born <= ti) & (freed > ti)) for ti in t])
    return {"t_s": t, "bytes": held, "gb_s": float(size * np.sum(freed - born) / 1e9),
            "done_s": float(freed[-1]), "peak_bytes": float(held.max())}
