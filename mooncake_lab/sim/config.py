"""``ClusterConfig``: everything a simulation run needs besides the trace, validated up front.

Policies, admission rules and outcomes are small integer codes inside the kernels (a numba kernel
cannot dispatch on strings cheaply); the tables here map names to codes. A student's policy
function gets code 4 (:data:`.conductor_view.STUDENT_POLICY_CODE`), outside the table, so code
looping over the built-in names never meets it. CPP prefill groups are numbers (``cpp_group_size``,
``cpp_chunk``, ``cpp_overlap``), not codes: see :mod:`.cpp_group`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from ..prefix_cache import EVICTION_POLICIES
from ..validate import InputError, choice, fail, flag, integer, real
from .conductor_view import STUDENT_POLICY_CODE
from .routers import ROUTERS, RouterConfig, RouterParams

__all__ = ["ClusterConfig", "PREFILL_POLICIES", "ADMISSIONS", "DECODE_BINDINGS", "DECODE_LOAD_METRICS",
           "ENGINE_MODES", "OUTPUT_LENGTHS", "OUTCOMES", "OUTCOME_CODES",
           "COMPLETED", "REJECTED_AT_ARRIVAL", "REJECTED_AFTER_PREFILL", "REJECTED_TOO_LARGE",
           "UNFINISHED", "ResolvedConfig", "SIMPLE_SEMANTICS"]

#: The Conductor's prefill-instance choices, name → kernel code. ``prefill_policy`` also takes the
#: routers of today's stacks (:data:`.routers.ROUTERS`, codes 5–12; a student's function is 4).
PREFILL_POLICIES = {"random": 0, "load": 1, "cache_aware": 2, "kvcentric": 3}
#: Admission control, name → kernel code (arXiv §7; semantics in :mod:`.reference`): none;
#: baseline = TTFT check at arrival + decode-side check when the KV is ready (may waste the prefill);
#: early = at arrival on the larger of prefill and current decode load; predicted = at arrival on
#: the decode load predicted for when this request's prefill ends (uniform decode time t_d, §7.4).
ADMISSIONS = {"none": 0, "baseline": 1, "early": 2, "predicted": 3}
#: When the Conductor picks a request's decode instance, name → kernel code: when its KV is ready
#: (late binding) or when it is admitted at arrival (arXiv v3 Algorithm 1 line 24). Rules: :mod:`.reference`.
DECODE_BINDINGS = {"ready": 0, "arrival": 1}
#: The decode load of :mod:`.admission`, name → kernel code: max(TBT / SLO, KV / capacity), or the
#: predicted TBT / SLO only, averaged over the decode instances (arXiv v3 §7.1, §7.4).
DECODE_LOAD_METRICS = {"tbt_or_memory": 0, "tbt": 1}
#: Cluster architecture: Mooncake's prefill/decode pools, or vLLM-like coupled instances that run
#: prefill and decode on the same node (:mod:`.coupled`, semantics in :mod:`.coupled_reference`).
ENGINE_MODES = ("disaggregated", "coupled")
#: What the decode side knows of a request's output length, name → kernel code: ``known`` (decode
#: reserves input + output at admission) or ``unknown`` (arXiv v3 §7.4: KV grows one token per
#: step; a node out of KV memory preempts its newest request, vLLM's RECOMPUTE preemption).
OUTPUT_LENGTHS = {"known": 0, "unknown": 1}

#: The simulator's semantics before the fidelity work (arXiv v3 departures kept as switches where a lecture
#: shows the contrast, e.g. lecture 07's overload): the decode instance chosen when the KV is ready, decode
#: load = max(TBT / SLO, KV / capacity), output lengths known in advance (KV reserved at admission, no
#: preemption), an uncontended network (every transfer gets a whole NIC) and KV that moves between host DRAM and
#: HBM in no time. ``ClusterConfig(**SIMPLE_SEMANTICS)``.
SIMPLE_SEMANTICS = dict(decode_binding="ready", decode_load_metric="tbt_or_memory", output_lengths="known",
                        network_contention=False, dram_hbm_load=False)

#: Per-request outcome codes (int8 in the kernels). UNFINISHED must never survive a run.
UNFINISHED, COMPLETED, REJECTED_AT_ARRIVAL, REJECTED_AFTER_PREFILL, REJECTED_TOO_LARGE = 0, 1, 2, 3, 4
OUTCOMES = {UNFINISHED: "unfinished", COMPLETED: "completed", REJECTED_AT_ARRIVAL: "rejected_at_arrival",
            REJECTED_AFTER_PREFILL: "rejected_after_prefill", REJECTED_TOO_LARGE: "rejected_too_large"}
OUTCOME_CODES = {v: k for k, v in OUTCOMES.items()}


#: Upper bounds of the fields (each with its reason). Beyond them a run is not a cluster a lecture could
#: mean, and the kernels' int64 / float64 arithmetic or memory would fail deep inside instead.
#: Instances per pool: 4× the paper's 16-node experiments (arXiv Fig. 8: 8P+8D; FAST'25 Fig. 5: 16
#: nodes) and 2× lecture 04's largest slider (32). Every arrival scans every instance's cache, so a
#: run's time grows with it (the conversation trace at 64P+64D with estimator noise: ≈ 0.5 s).
MAX_INSTANCES = 64
#: Prefix-cache blocks per instance: ~10× the most any catalogue node could hold, DRAM + SSD
#: (2 TB + 30.7 TB) over the smallest catalogue block (512 tokens × DeepSeek-V3's 70,272 B = 36 MB):
#: 0.91 M blocks.
MAX_CACHE_BLOCKS = 10_000_000
#: Decode KV tokens per node: ~100× the most a catalogue node holds (768 GB of an H20 node / 70,272 B
#: per DeepSeek-V3 token = 1.1e7 tokens); token sums stay exact in float64 far beyond it.
MAX_KV_TOKENS = 1e9
#: Per-node RDMA bandwidth, Gbit/s: ≥ 1 (slower is not an RDMA fabric: a 10k-token LLaMA2-70B KV
#: already takes 26 s at 1 Gbps) and ≤ 10× the fastest catalogue node (8 × 400 Gbps, FAST'25 §5.4.1).
NETWORK_GBPS_RANGE = (1.0, 32_000.0)
#: Tokens per prefill chunk (coupled ``prefill_chunk``, CPP ``cpp_chunk``): 2**20, 8× the longest
#: context of the catalogue models (DeepSeek-V3: 128k); a chunk longer than the prompt is one chunk.
MAX_CHUNK_TOKENS = 2**20
#: ``decode_time_s`` (t_d of ``predicted``), s: 10^6 s ≈ 11.6 days, far beyond any decode.
MAX_DECODE_TIME_S = 1e6
#: ``estimator_noise`` (relative sd) and ``prediction_horizon`` (×): 10 is already pure noise / far past
#: the prefill's end.
MAX_NOISE, MAX_HORIZON = 10.0, 10.0
#: Rule 14: a pool gains a node only when its load is at least this (1 = at its SLO) and ρ × the other's.
ROLE_SWITCH_AT_LOAD = 1.0
#: ``role_switch_ratio``: at 1000× one pool is idle beside a saturated other; beyond it the rule never fires.
MAX_SWITCH_RATIO = 1000.0
#: Seeds: any int64 (``np.random.default_rng`` takes more, but seeds round-trip through int64 arrays).
MAX_SEED = 2**63 - 1

_WHERE = "ClusterConfig"


def _bad(name, value, allowed):
    return fail(name, value, allowed, _WHERE)


@dataclass(frozen=True)
class ClusterConfig:
    """A disaggregated Mooncake-like cluster (times in s, sizes in tokens or 512-token blocks).

    Parameters
    ----------
    n_prefill, n_decode : instances (one 8-GPU node each) in the prefill and decode pools.
    cache_capacity_blocks : per-prefill-instance prefix cache in DRAM (blocks of 512 tokens; it
        evicts by ``cache_eviction``);
        ``None`` = the node's DRAM / KV bytes of a block (A800 node, LLaMA2-70B: 2 TB / 160 MiB
        = 11,920 blocks; 0 disables caching.
    prefill_policy : ``"random"``, ``"load"`` (least queued work), ``"cache_aware"`` (min queue +
        prefill with the local prefix) or ``"kvcentric"`` (Algorithm 1 with remote-prefix fetch
        and hot-spot replication), a router of today's stacks (``"dynamo"``, ``"sglang"``, ``"llmd"``,
        ``"prodstack_rr"``, ``"prodstack_prefix"``, ``"prodstack_kv"``, ``"aibrix"``, ``"preble"``:
        :mod:`mooncake_lab.sim.routers`, both engines) — or a student's function
        ``policy(req, view) -> instance`` (:mod:`mooncake_lab.sim.student_policy`; disaggregated only).
    router : the routers' parameters (:class:`~mooncake_lab.sim.routers.RouterConfig`; ``None`` =
        every default as its source code sets it); used only when ``prefill_policy`` is a router.
    kvcache_balancing_threshold : ``kvcentric`` fetches the pool's best prefix for an instance when
        best_prefix / local_prefix ≥ this (blocks; a ratio ≥ 1; local 0 counts as an infinite
        ratio). The paper gives no value; 1.0 fetches whenever the pool has more than the instance.
    estimator_noise : relative standard deviation of the Conductor's TTFT estimates (0 = exact;
        the work itself is always timed exactly by the cost model).
    ttft_slo_s, tbt_slo_s : SLOs; arXiv real-workload run: TTFT 30 s, TBT 0.1 s/token. TBT is
        compared with the mean of a request's longest 10% token intervals (FAST'25).
    model, node, preset : the cost model (:func:`mooncake_lab.roofline.cost_model`).
    layerwise_kv_transfer : True = KV streams to decode layer by layer during prefill (only the
        last layer's share is exposed); False = sent after the prefill (serialized).
    network_gbps : per-node RDMA bandwidth in Gbit/s for KV transfers (None = the node's NICs,
        4 × 200 Gbps for the A800 testbed, FAST'25 §5.1).
    decode_kv_capacity_tokens : KV tokens a decode node holds (None = from the cost model:
        (HBM × 0.9 − weights) / KV bytes per token).
    admission : ``"none"``, ``"baseline"``, ``"early"`` or ``"predicted"`` (arXiv §7; see
        :mod:`mooncake_lab.sim.reference` for the exact rules and :mod:`.admission` for the loads).
    admission_threshold : reject when a load (TTFT / ttft_slo, decode load of
        :mod:`~mooncake_lab.sim.admission`) exceeds this (1.0 = exactly at the SLO /
        full memory; the paper gives no value).
    decode_binding : when the Conductor chooses a request's decode instance. ``"ready"`` (late
        binding; :data:`SIMPLE_SEMANTICS`): when its KV reaches the decode pool, the instance with the least KV reserved
        + queued — load balancing for free, since the choice sees the pool as it is then.
        ``"arrival"`` (default): when the request is admitted at arrival, together with its prefill instance
        (arXiv v3 Algorithm 1 line 24) — what layer-wise prefill needs, since it streams KV into
        the destination's memory while the prefill runs, so the destination must be known up
        front. The rule is the same load, plus the KV of the requests already bound to the instance
        and still in prefill or transfer: argmin over instances of reserved + queued + bound-in-flight
        KV tokens (each request counts its input + output tokens; ties: the lowest index). The
        request then joins that instance's queue when its KV is ready, whatever the pool looks like
        by then (``baseline``'s decode-side check uses that instance). Rejected requests and those
        whose only output token comes from the prefill (output 1) get no decode instance.
        Disaggregated only (a coupled instance decodes what it prefilled: ignored there).
    decode_load_metric : the decode load admission compares with the threshold (arXiv v3 §7.1:
        load = SLO satisfaction). ``"tbt_or_memory"`` (:data:`SIMPLE_SEMANTICS`): max(predicted TBT / ``tbt_slo``,
        KV / capacity) of the pool's average instance (pool totals / ``n_decode``). ``"tbt"`` (default): the
        predicted TBT over ``tbt_slo`` only, as the average of the per-instance ratios — §7.4's
        "the average TBT ratio of all decoding instances to l_tbt"; a request whose instance is
        not chosen yet counts 1 / ``n_decode`` on every instance (formula: :mod:`.admission`).
        KV memory still bounds admission physically whatever the metric: a request whose KV does
        not fit waits in its decode instance's queue.
    decode_time_s : ``predicted``: the uniform decode time t_d (s) assumed for every request
        (arXiv §7.4; the paper gives no value). Default 10 s: a round number, not derived — under
        the ``modern`` preset with 40k-token decode nodes a step takes ≈ 15 ms and the mean decode
        lasts ≈ 2.7 s (toolagent-like) / ≈ 5 s (conversation); lecture 07 derives t_d from the trace
        and preset in use (:func:`mooncake_lab.experiments.l07_overload.decode_time_estimate`).
    prediction_horizon : ``predicted``: the decode load is predicted at
        ``arrival + horizon × (KV ready − arrival)``; 1 = when this request's prefill ends (the
        paper), 0 = now (a current-load check under the t_d model).
    seed : seeds the random policy and the estimator noise (np.random.default_rng).
    engine_mode : ``"disaggregated"`` (Mooncake: the fields above) or ``"coupled"`` (vLLM-like:
        ``n_coupled`` nodes that each prefill *and* decode; ``n_prefill`` / ``n_decode`` are then
        ignored, ``kvcentric`` routes like ``cache_aware`` (no global pool to fetch from), the
        transfer fields do not apply and ``admission`` must be ``"none"``). Rules:
        :mod:`mooncake_lab.sim.coupled_reference`.
    n_coupled : coupled instances (one 8-GPU node each; each has its own prefix cache of
        ``cache_capacity_blocks`` and ``decode_kv_capacity_tokens`` of KV memory).
    chunked_prefill : coupled only. False = an iteration with a waiting prefill runs that whole
        prefill and the running decodes wait (vLLM without chunking); True = every iteration runs
        the decode batch plus up to ``prefill_chunk`` prompt tokens (vLLM chunked prefill /
        Sarathi-Serve).
    prefill_chunk : coupled only: prompt tokens per iteration when chunking. Default 512 = vLLM's
        ``max_num_batched_tokens`` when chunked prefill is enabled (vLLM 0.4–0.5 engine arguments;
        Sarathi-Serve, OSDI'24, evaluates token budgets of 512 and 2048). The disaggregated CPP
        groups use their own ``cpp_chunk`` (a different trade-off: a pipeline chunk only needs to
        fill one stage's GPUs, a vLLM chunk shares an iteration with the decode batch).
    cpp_group_size : disaggregated only: X nodes per prefill *instance*. X = 1 (default): every
        prefill node is an instance (the behaviour without CPP). X > 1: the ``n_prefill`` nodes form
        ``n_prefill / X`` chunked-pipeline-parallel groups (arXiv §5.1; X must divide
        ``n_prefill`` and be ≤ the model's layer count); each group is one instance for the
        Conductor (one FIFO queue, one prefix cache). Rules: :mod:`mooncake_lab.sim.cpp_group`.
    cpp_chunk : disaggregated, X > 1: a request's uncached tokens are cut into chunks of at most
        this many tokens and pipelined through the X stages (≤ ``cpp_chunk`` uncached tokens: one
        chunk, i.e. unchunked). Default 4096: the paper says ``prefill_chunk`` is "typically >
        1,000 tokens" (arXiv v3 §3) and lecture 05's pipeline (:func:`mooncake_lab.cpp.cpp_ttft`)
        defaults to 4096, so both lectures show the same group.
    cpp_overlap : X > 1: True = a stage's NIC sends a chunk's activations while its GPUs compute
        the next chunk; False = the stage is busy until the send is done (:mod:`mooncake_lab.cpp`).
    cache_eviction : how every prefix cache (each prefill instance's; coupled: each node's) evicts:
        ``"lru"`` (default, least recently used), ``"lfu"`` (fewest touches since stored, ties least
        recent) or ``"length_aware"`` (LFU, ties evict the block at the largest prompt position
        first) — arXiv v3 §4.2 / Table 1's LRU, LFU and LengthAwareCache, which the paper does not
        define further; exact rules in :mod:`mooncake_lab.prefix_cache`.
    output_lengths : disaggregated only (the coupled engine always reserves input + output).
        ``"known"`` (:data:`SIMPLE_SEMANTICS`): decode
        reserves input + output tokens of KV at admission, "too large" means input + output >
        ``decode_kv_capacity_tokens`` and the Conductor's loads count input + output.
        ``"unknown"`` (default; arXiv v3 §7.4: "the output length is unknown"): the Conductor and decode
        admission see the prompt only (admission needs prompt + 1 tokens free; loads count prompts
        and a running request's current KV, prompt + tokens so far; too large only when prompt + 1
        cannot fit); each running request's KV grows one token per step; when the next step would
        not fit, the node preempts its newest-admitted request (vLLM v0.4–0.6 ``PreemptionMode.RECOMPUTE``:
        KV freed, back to the front of the node's queue, on re-admission a prefill of prompt +
        generated tokens stalls the batch) and a request whose KV alone outgrows a node ends as
        ``rejected_too_large``. Rules 8b–8d of :mod:`mooncake_lab.sim.reference`.
    network_contention : disaggregated only (ignored by the coupled engine: no KV moves between its
        nodes). False (:data:`SIMPLE_SEMANTICS`) = every transfer gets the whole NIC (the network is
        never a bottleneck). True (default) = each prefill node has a send and a receive link
        and each decode node a receive link, of the node's RDMA bandwidth (``network_gbps`` or its
        NICs, × the preset's RDMA efficiency), shared by the remote-prefix fetches of ``kvcentric``
        and the KV streams to decode, which reserve them in the order they are committed, each in
        the earliest gap long enough (arXiv v3 §4: replicating hot blocks "is essential to avoid
        transfer congestion"); a stream reserves its decode node's receive link only under
        ``decode_binding="arrival"`` (late binding does not know the node yet). The Conductor's
        fetch estimates see the links' reservations, so a hot holder becomes slow to fetch from.
        Rules and what they leave out (CPP activations): :mod:`mooncake_lab.sim.links`.
    dram_hbm_load : True (default) = KV kept in a node's host DRAM costs the time to load it into HBM at
        the node's host-to-device bandwidth (128 GB/s, FAST'25 Table 1). A prefill reusing ``c`` cached
        tokens (local or fetched) loads them layer by layer while the previous layer computes,
        max(load, compute) + min(load, compute) / layers (lecture 02; FAST'25 Fig. 14's "layer-wise
        prefill integrating cache load"); a CPP stage loads its layers' share with its first chunk; a
        coupled node with its first chunk. A decode node loads a received prompt's KV from its DRAM
        into HBM before the request joins the batch, L × KV bytes / 128 GB/s (arXiv v3 §3; FAST'25
        Fig. 14's "load cache"): asynchronous, so no running request waits for it, and loads do not
        queue for the PCIe link (they keep it busy ≈ 1% of the time on the conversation trace;
        ``tests/test_sim_dram_load.py`` bounds it). It lands in the request's first token interval.
        False (:data:`SIMPLE_SEMANTICS`) = both free.
    inline_prefill : the paper's hybrid (arXiv v3 §5: "A request's prefill is inlined into the decoding
        batch only when it can be forwarded without chunking and without compromising the TBT SLO").
        False (default) = every prefill runs in the prefill pool. True = at arrival, a request with
        output > 1 whose prompt fits one chunk (L ≤ ``cpp_chunk``, the paper's prefill_chunk) goes
        straight to the decode instance rule 7 would choose now if that instance's queue is empty, the
        request's KV fits, and the prefill plus the batch's next step keep the TBT SLO:
        ``cm_prefill_time(L, 0) + cm_decode_step_time(b + 1, context + L + 1) ≤ tbt_slo_s``. There the
        batch's next step runs its prefill first (nothing cached: the prefix caches are the prefill
        nodes'), which makes its first token (TTFT = its end − arrival); every running request waits
        for it, then the step decodes the batch with the request in it. It bypasses admission (it is admitted at once within the
        SLO). Its ``prefill_instance`` is −1. Disaggregated only, with a Conductor policy
        (``"random"`` … ``"kvcentric"``) and ``admission="none"``. Rule 2c of :mod:`.reference`.
    """

    n_prefill: int = 8
    n_decode: int = 8
    cache_capacity_blocks: int | None = None
    prefill_policy: str = "kvcentric"
    kvcache_balancing_threshold: float = 1.0
    estimator_noise: float = 0.0
    ttft_slo_s: float = 30.0   # arXiv v3 §8 real-workload TTFT SLO
    tbt_slo_s: float = 0.1     # arXiv v3 §8 real-workload TBT SLO (s/token)
    model: object = "llama2-70b"
    node: object = "a800x8"
    preset: object = "calibrated"
    layerwise_kv_transfer: bool = True
    network_gbps: float | None = None
    decode_kv_capacity_tokens: float | None = None
    admission: str = "none"
    admission_threshold: float = 1.0
    decode_time_s: float = 10.0
    prediction_horizon: float = 1.0
    seed: int = 0
    engine_mode: str = "disaggregated"
    n_coupled: int = 16
    chunked_prefill: bool = False
    prefill_chunk: int = 512  # vLLM 0.4–0.5 default max_num_batched_tokens with chunked prefill
    cpp_group_size: int = 1
    cpp_chunk: int = 4096     # arXiv v3 §3: prefill_chunk "typically > 1,000 tokens"; cpp.py's default
    cpp_overlap: bool = True
    decode_binding: str = "arrival"           # arXiv v3 Algorithm 1 line 24; "ready" = late binding
    decode_load_metric: str = "tbt"           # arXiv v3 §7.1 / §7.4; "tbt_or_memory" = max(TBT, KV) load
    cache_eviction: str = "lru"   # arXiv v3 Table 1: "lru", "lfu" or "length_aware"
    output_lengths: str = "unknown"           # arXiv v3 §7.4; "known" = reserved in advance
    network_contention: bool = True           # arXiv v3 §4, §6.1; False = a whole NIC per transfer
    router: RouterConfig | None = None        # the routers' parameters (sim/routers.py)
    dram_hbm_load: bool = True                # arXiv v3 §3, FAST'25 Fig. 14; False = DRAM ↔ HBM in no time
    inline_prefill: bool = False              # arXiv v3 §5's hybrid: short prefills inlined into decode
    role_switch_ratio: float = 0.0            # FAST'25 §5.5: 0 = fixed roles; ρ ≥ 1 = switch on a load ratio ≥ ρ
    role_switch_interval_s: float = 60.0      # how often the Conductor compares the pools' loads (s)
    role_switch_s: float | None = None        # a switch's reload (s); None = the weights from DRAM at 128 GB/s

    def __post_init__(self):
        w = _WHERE

        def put(name, value):  # the checked, normalised value (int, float, bool) replaces the given one
            object.__setattr__(self, name, value)

        def whole(name, lo, hi):
            put(name, integer(getattr(self, name), name, lo=lo, hi=hi, where=w))

        def number(name, lo, hi, **kw):
            put(name, real(getattr(self, name), name, lo=lo, hi=hi, where=w, **kw))

        def switch(name):
            put(name, flag(getattr(self, name), name, where=w))

        whole("n_prefill", 1, MAX_INSTANCES)
        whole("n_decode", 1, MAX_INSTANCES)
        if self.cache_capacity_blocks is not None:
            whole("cache_capacity_blocks", 0, MAX_CACHE_BLOCKS)
        if callable(self.prefill_policy):
            from .student_policy import check_policy_signature
            check_policy_signature(self.prefill_policy, "ClusterConfig.prefill_policy")
        elif not isinstance(self.prefill_policy, str) or self.prefill_policy not in {**PREFILL_POLICIES, **ROUTERS}:
            raise _bad("prefill_policy", self.prefill_policy, ", ".join(map(repr, {**PREFILL_POLICIES, **ROUTERS}))
                       + " or a function policy(req, view) -> instance index")
        number("kvcache_balancing_threshold", 1.0, math.inf, allow_inf=True)
        number("estimator_noise", 0.0, MAX_NOISE)
        number("ttft_slo_s", 0.0, math.inf, lo_open=True, allow_inf=True)  # inf: no SLO
        number("tbt_slo_s", 0.0, math.inf, lo_open=True, allow_inf=True)
        switch("layerwise_kv_transfer")
        if self.network_gbps is not None:
            number("network_gbps", *NETWORK_GBPS_RANGE)
        if self.decode_kv_capacity_tokens is not None:
            number("decode_kv_capacity_tokens", 0.0, MAX_KV_TOKENS, lo_open=True)
        if self.router is not None and not isinstance(self.router, RouterConfig):
            raise _bad("router", self.router, "None or a mooncake_lab.sim.routers.RouterConfig")
        choice(self.admission, "admission", ADMISSIONS, w)
        number("admission_threshold", 0.0, math.inf, lo_open=True, allow_inf=True)  # inf: never reject
        number("decode_time_s", 0.0, MAX_DECODE_TIME_S, lo_open=True)
        number("prediction_horizon", 0.0, MAX_HORIZON)
        whole("seed", 0, MAX_SEED)
        choice(self.engine_mode, "engine_mode", ENGINE_MODES, w)
        whole("n_coupled", 1, MAX_INSTANCES)
        switch("chunked_prefill")
        whole("prefill_chunk", 1, MAX_CHUNK_TOKENS)
        whole("cpp_group_size", 1, MAX_INSTANCES)
        x = self.cpp_group_size
        if self.n_prefill % x != 0:
            raise _bad("cpp_group_size", self.cpp_group_size,
                       f"a divisor of n_prefill={self.n_prefill} (n_prefill nodes form n_prefill / "
                       f"cpp_group_size pipeline groups)")
        whole("cpp_chunk", 1, MAX_CHUNK_TOKENS)
        switch("cpp_overlap")
        choice(self.decode_binding, "decode_binding", DECODE_BINDINGS, w)
        choice(self.decode_load_metric, "decode_load_metric", DECODE_LOAD_METRICS, w)
        choice(self.cache_eviction, "cache_eviction", EVICTION_POLICIES, w)
        choice(self.output_lengths, "output_lengths", OUTPUT_LENGTHS, w)
        switch("network_contention")
        switch("dram_hbm_load")
        switch("inline_prefill")
        if self.inline_prefill:
            if self.engine_mode == "coupled":
                raise _bad("inline_prefill", self.inline_prefill, "False when engine_mode='coupled' (a coupled "
                           "node prefills inside its own batch already)")
            if not (isinstance(self.prefill_policy, str) and self.prefill_policy in PREFILL_POLICIES):
                raise _bad("inline_prefill", self.inline_prefill, "False unless prefill_policy is one of the "
                           "Conductor's (" + ", ".join(map(repr, PREFILL_POLICIES)) + "): the hybrid is the "
                           "Conductor's decision")
            if self.admission != "none":
                raise _bad("inline_prefill", self.inline_prefill, "False unless admission='none' (how the hybrid "
                           "meets admission control is not modelled)")
        number("role_switch_ratio", 0.0, MAX_SWITCH_RATIO)
        number("role_switch_interval_s", 0.0, MAX_DECODE_TIME_S, lo_open=True)
        if self.role_switch_s is not None:
            number("role_switch_s", 0.0, MAX_DECODE_TIME_S)
        if self.role_switch_ratio > 0.0:
            if self.role_switch_ratio < 1.0:
                raise _bad("role_switch_ratio", self.role_switch_ratio, "0 (fixed roles) or a ratio in [1, "
                           f"{MAX_SWITCH_RATIO:g}] (a pool must be at least as loaded as the other to gain a node)")
            why = None
            if self.engine_mode == "coupled":
                why = "engine_mode='disaggregated' (a coupled node has no role to switch)"
            elif not (isinstance(self.prefill_policy, str) and self.prefill_policy in PREFILL_POLICIES):
                why = ("prefill_policy one of the Conductor's (" + ", ".join(map(repr, PREFILL_POLICIES))
                       + "): switching roles is the Conductor's decision")
            elif x != 1:
                why = "cpp_group_size=1 (a CPP group switching one node at a time is not modelled)"
            elif self.inline_prefill:
                why = "inline_prefill=False (the hybrid and role switching together are not modelled)"
            if why:
                raise _bad("role_switch_ratio", self.role_switch_ratio, "0 unless " + why)
        if self.engine_mode == "coupled" and x != 1:
            raise _bad("cpp_group_size", self.cpp_group_size, "1 when engine_mode='coupled' (CPP "
                       "groups are modelled for the disaggregated cluster only)")
        if self.engine_mode == "coupled" and callable(self.prefill_policy):
            raise _bad("prefill_policy", self.prefill_policy, "a built-in policy name when engine_mode="
                       "'coupled' (student policies run on the disaggregated cluster)")
        if self.engine_mode == "coupled" and self.admission != "none":
            raise _bad("admission", self.admission, "'none' when engine_mode='coupled' (admission "
                       "control is modelled for the disaggregated cluster only)")
        # model / node / preset: resolving them validates the names (ValueError naming the field)
        # and that the model fits its node
        self.resolve()

    @property
    def coupled(self) -> bool:
        """True for the vLLM-like coupled engine."""
        return self.engine_mode == "coupled"

    @property
    def policy_name(self) -> str:
        """The prefill policy's name: a built-in one, or a student function's ``__name__``."""
        p = self.prefill_policy
        return p if isinstance(p, str) else getattr(p, "__name__", type(p).__name__)

    @property
    def n_prefill_instances(self) -> int:
        """Instances a request is routed to: n_coupled, or n_prefill / cpp_group_size groups."""
        return self.n_coupled if self.coupled else self.n_prefill // self.cpp_group_size

    @property
    def n_nodes(self) -> int:
        """Nodes the cluster uses: n_coupled, or n_prefill + n_decode."""
        return self.n_coupled if self.coupled else self.n_prefill + self.n_decode

    @property
    def switches_roles(self) -> bool:
        """True when nodes may move between the pools (``role_switch_ratio`` > 0)."""
        return not self.coupled and self.role_switch_ratio > 0.0

    @property
    def prefill_slots(self) -> int:
        """Prefill instance numbers a run uses: the instances, or every node when roles switch."""
        return self.n_nodes if self.switches_roles else self.n_prefill_instances

    @property
    def decode_slots(self) -> int:
        """Decode instance numbers a run uses: n_decode (n_coupled), or every node when roles switch."""
        return self.n_nodes if self.switches_roles else (self.n_coupled if self.coupled else self.n_decode)

    @property
    def label(self) -> str:
        """Short name of the architecture, e.g. ``"8P+8D"`` or ``"16 coupled, chunked 512"``."""
        if not self.coupled:
            cpp = (f", CPP {self.n_prefill_instances}×{self.cpp_group_size}" if self.cpp_group_size > 1 else "")
            return f"{self.n_prefill}P+{self.n_decode}D{cpp}"
        return f"{self.n_coupled} coupled" + (f", chunked {self.prefill_chunk}" if self.chunked_prefill else "")

    def replace(self, **changes) -> "ClusterConfig":
        """A copy with some fields changed (validated again)."""
        names = [f.name for f in fields(self)]
        for k in changes:
            if k not in names:
                raise _bad(k, changes[k], "a keyword naming a field of ClusterConfig: " + ", ".join(names))
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def resolve(self) -> "ResolvedConfig":
        """The numbers the kernels take: cost coefficients, capacities, layer count, codes."""
        from ..cpp import activation_bytes_per_token, network_bandwidth
        from ..hardware import get_node
        from ..models import get_model
        from ..roofline import cost_model
        from ..traces import BLOCK_TOKENS

        try:
            m = get_model(self.model)
        except ValueError as e:
            raise InputError(f"ClusterConfig.model: {e}") from None
        try:
            nd = get_node(self.node)
        except ValueError as e:
            raise InputError(f"ClusterConfig.node: {e}") from None
        if self.network_gbps is not None:  # same node, NICs replaced by one link of that speed
            nd = replace(nd, nic_count=1, nic_gbps=float(self.network_gbps))
        try:
            cm = cost_model(m, nd, self.preset)
        except ValueError as e:
            raise InputError(f"ClusterConfig.preset: {e}") from None
        x = int(self.cpp_group_size)
        if x > m.n_layers:
            raise _bad("cpp_group_size", self.cpp_group_size,
                       f"at most the model's {m.n_layers} layers (one pipeline stage holds ≥ 1 layer)")
        if cm.kv_capacity_tokens < BLOCK_TOKENS:  # weights + one block of KV do not fit in HBM
            from ..calibration import get_preset
            f = get_preset(self.preset).kv_usable_fraction
            raise _bad("model", self.model,
                       f"a model that fits one {nd.name!r} node: {m.name}'s weights ({m.weight_bytes() / 1e9:,.0f} GB) "
                       f"+ the KV of one {BLOCK_TOKENS}-token block ({BLOCK_TOKENS * m.kv_bytes_per_token() / 1e9:.2g} "
                       f"GB) exceed {f:.0%} of the node's {nd.hbm_bytes / 1e9:,.0f} GB of HBM (the usable share, "
                       f"preset {self.preset!r}); every request would be rejected as too large. Choose a "
                       f"smaller model or a node with more HBM")
        kv_cap = (cm.kv_capacity_tokens if self.decode_kv_capacity_tokens is None
                  else float(self.decode_kv_capacity_tokens))
        if self.cache_capacity_blocks is None:  # node DRAM / bytes of one 512-token block
            cache = int(nd.dram_bytes // (BLOCK_TOKENS * m.kv_bytes_per_token()))
        else:
            cache = int(self.cache_capacity_blocks)
        cost = cm.as_array()
        if not self.dram_hbm_load:  # no host-DRAM ↔ HBM time anywhere (roofline.cm_prefill_reuse_time, rule 6c)
            cost[16] = 0.0
        return ResolvedConfig(cost=cost, decode_kv_capacity=float(kv_cap),
                              cache_capacity_blocks=cache * x, n_layers=int(m.n_layers),
                              policy=(STUDENT_POLICY_CODE if callable(self.prefill_policy)
                                      else {**PREFILL_POLICIES, **ROUTERS}[self.prefill_policy]),
                              admission=ADMISSIONS[self.admission], cpp_group_size=x,
                              cpp_chunk=int(self.cpp_chunk),
                              cpp_act_bytes=float(activation_bytes_per_token(m)),
                              cpp_bandwidth=float(network_bandwidth(m, nd, self.preset)),
                              cpp_overlap=bool(self.cpp_overlap),
                              decode_binding=DECODE_BINDINGS[self.decode_binding],
                              decode_load_metric=DECODE_LOAD_METRICS[self.decode_load_metric],
                              output_unknown=self.output_lengths == "unknown",
                              router=self._router_params(cache * x, BLOCK_TOKENS),
                              role_switch_s=(m.weight_bytes() / nd.h2d_bw if self.role_switch_s is None
                                             else float(self.role_switch_s)))

    def _router_params(self, cache_blocks: int, block_tokens: int) -> RouterParams:
        """The router's kernel-ready parameters (a Conductor policy or a student's: round robin's, unused)."""
        name = self.prefill_policy if isinstance(self.prefill_policy, str) and self.prefill_policy in ROUTERS \
            else "prodstack_rr"
        return (self.router or RouterConfig()).resolve(name, not self.coupled, cache_blocks, block_tokens)


@dataclass(frozen=True, eq=False)
class ResolvedConfig:
    """Kernel-ready numbers derived from a :class:`ClusterConfig`."""

    cost: np.ndarray               # CostModel.as_array()
    decode_kv_capacity: float      # tokens per decode instance
    cache_capacity_blocks: int     # blocks per prefill instance (a CPP group: X × per node)
    n_layers: int                  # for layer-wise KV streaming
    policy: int
    admission: int
    cpp_group_size: int = 1        # X nodes per prefill instance
    cpp_chunk: int = 4096          # tokens per pipeline chunk (X > 1)
    cpp_act_bytes: float = 0.0     # activation bytes per token crossing a stage boundary
    cpp_bandwidth: float = 1.0     # RDMA B/s between stages (the node's NICs × RDMA efficiency)
    cpp_overlap: bool = True       # send activations while computing the next chunk
    decode_binding: int = 0        # DECODE_BINDINGS code
    decode_load_metric: int = 0    # DECODE_LOAD_METRICS code
    output_unknown: bool = False   # output_lengths == "unknown": KV grows, preemption
    router: RouterParams | None = None  # the router's settings (prefill_policy a router; .routers)
    role_switch_s: float = 0.0     # s a switching node reloads (the weights from DRAM by default)
