"""Key terms of the course in English and Chinese (the source material is Chinese).

``glossary()`` returns a DataFrame; ``glossary("01")`` only the terms a lecture introduces.
"""
from __future__ import annotations

import pandas as pd

#: (term, 中文, short meaning, lecture that introduces it)
TERMS: list[tuple[str, str, str, str]] = [
    ("prefill", "预填充", "process the whole prompt at once; produces the KV cache and the first token", "00"),
    ("decode", "解码", "generate one token per iteration, reading the whole KV cache each time", "00"),
    ("KV cache (KVCache)", "KV 缓存", "keys and values of every past token, per layer, kept so they are not recomputed", "00"),
    ("prefill/decode disaggregation", "预填充/解码分离（PD 分离）", "run prefill and decode on different GPUs or nodes", "00"),
    ("TTFT (time to first token)", "首 token 时延（首字延迟）", "arrival → first output token, seconds", "00"),
    ("TBT (time between tokens)", "token 间时延", "gap between consecutive output tokens, seconds", "00"),
    ("SLO (service-level objective)", "服务等级目标", "latency limits a request must meet, e.g. TTFT ≤ 30 s, TBT ≤ 0.1 s", "00"),
    ("goodput", "有效吞吐", "throughput counting only requests that meet their SLOs", "00"),
    ("Conductor", "全局调度器（Conductor）", "Mooncake's global scheduler choosing prefill and decode instances", "00"),
    ("roofline model", "屋顶线模型", "attainable FLOP/s = min(peak FLOP/s, bandwidth × arithmetic intensity)", "01"),
    ("arithmetic intensity", "算术强度（计算访存比）", "FLOPs per byte moved from memory", "01"),
    ("compute-bound", "计算受限", "time set by FLOP/s: prefill of long prompts", "01"),
    ("memory-bound", "访存受限", "time set by memory bandwidth: decode at small batch", "01"),
    ("MFU (model FLOPs utilisation)", "模型算力利用率", "useful FLOP/s divided by peak FLOP/s", "01"),
    ("tensor parallelism (TP)", "张量并行", "split each layer's matrices over GPUs; all-reduce after each block", "01"),
    ("ridge point", "屋脊点（拐点）", "peak FLOP/s ÷ HBM bandwidth: the intensity where a kernel turns compute-bound (A800: 153 FLOP/B)", "01"),
    ("all-reduce / NVLink", "全规约 / NVLink 互联", "sum a tensor across GPUs (TP does 2 per layer) over the GPU-to-GPU link: A800 400 GB/s, A100 600", "01"),
    ("GQA (grouped-query attention)", "分组查询注意力", "several query heads share one K/V head: fewer KV bytes", "02"),
    ("MLA (multi-head latent attention)", "多头潜在注意力", "store a compressed latent instead of full K and V", "02"),
    ("trading storage for computation", "以存换算", "keep KV in cheaper tiers and reload it rather than recompute", "02"),
    ("HBM / DRAM / SSD", "显存 / 内存 / 固态硬盘", "the memory tiers, fastest and smallest first", "02"),
    ("RDMA", "远程直接内存访问", "network reads of another machine's memory without its CPU", "02"),
    ("layer-wise prefill", "逐层预填充", "load/store each layer's KV while computing the next layer", "02"),
    ("MHA (multi-head attention)", "多头注意力", "every query head has its own K and V head: the most KV bytes per token", "02"),
    ("recompute", "重计算", "rebuild a prefix's KV by running its prefill again instead of loading it", "02"),
    ("break-even bandwidth", "盈亏平衡带宽", "tier bandwidth at which reloading KV takes as long as recomputing it (FAST'25 Eq. 2)", "02"),
    ("prefix cache", "前缀缓存", "KV of prompt prefixes kept for reuse by later requests", "03"),
    ("cache hit ratio", "缓存命中率", "share of prompt tokens whose KV is reused", "03"),
    ("block (512 tokens)", "块（512 token）", "unit of caching in the Mooncake traces; ids chained by prefix hash", "03"),
    ("LRU eviction", "最近最少使用淘汰", "evict the block used longest ago", "03"),
    ("LFU eviction", "最不经常使用淘汰", "evict the block with the fewest uses since it was stored (ties: least recently used)", "03"),
    ("LengthAware eviction", "长度感知淘汰", "LFU whose ties evict the block latest in its prompt first (arXiv v3 Table 1)", "03"),
    ("global cache pool", "全局缓存池", "one KV store shared by all instances (Mooncake Store)", "03"),
    ("stack distance", "栈距离", "distinct blocks used since a block's last use; an LRU cache of C blocks hits iff it is < C", "03"),
    ("sticky (session) routing", "会话粘性路由", "send every turn of a conversation to the same instance, so its prefix is cached there", "03"),
    ("KVCache-centric scheduling", "以 KVCache 为中心的调度", "choose the prefill instance by estimated TTFT = queue + prefill with the best reachable prefix (+ its transfer) (arXiv Algorithm 1)", "04"),
    ("cache-aware scheduling", "缓存感知调度", "choose the instance minimising queue + prefill with its own local prefix", "04"),
    ("load balancing", "负载均衡", "send each request to the instance with the least queued work, ignoring caches", "04"),
    ("kvcache_balancing_threshold", "KVCache 均衡阈值", "fetch the pool's best prefix to an instance only if best/local ≥ this ratio", "04"),
    ("hot-spot migration", "热点迁移", "copy a popular prefix's blocks to the instance that fetched them, so later requests can go there", "04"),
    ("offered load / utilisation", "负载率 / 利用率", "work arriving per second ÷ work the pool can do per second; queues explode as it nears 1", "04"),
    ("replay speed", "回放倍速", "divide a trace's arrival times by this factor to raise (or lower) the load", "04"),
    ("network contention (shared links)", "网络争用（共享链路）", "fetches and KV streams share each node's NIC send / receive capacity, so a busy hot holder is slow to fetch from (ClusterConfig.network_contention)", "04"),
    ("chunked pipeline parallelism (CPP)", "分块流水线并行", "X prefill nodes each hold L/X layers; a prompt's chunks flow through them like a pipeline (arXiv §5.1)", "05"),
    ("pipeline bubble", "流水线气泡", "stage time idle while the pipeline fills and drains: (X − 1) chunk slots per request", "05"),
    ("sequence parallelism (SP) / ring attention", "序列并行 / 环形注意力", "each node holds a slice of the tokens; KV blocks circulate around a ring of nodes every layer", "05"),
    ("chunk interleaving", "分块交错调度", "alternate chunks of different requests in one pipeline so short prompts are not stuck behind a long one", "05"),
    ("VRAM occupation cost (S·T)", "显存占用成本（S·T）", "KV size × time it stays in GPU memory; layer-wise store frees each layer's KV almost at once (arXiv §5.2)", "05"),
    ("continuous batching", "连续批处理", "a decode node adds and removes requests at every step boundary instead of waiting for a whole batch to finish", "06"),
    ("chunked prefill", "分块预填充", "split a prompt into chunks of a few hundred tokens and run one per iteration beside the decode batch (vLLM, Sarathi-Serve)", "06"),
    ("coupled engine", "耦合引擎", "prefill and decode share each node (vLLM-like); a long prefill stalls every decode in its batch", "06"),
    ("prefill–decode interference", "预填充-解码干扰", "the TBT spike decodes suffer when a prefill runs on the same GPUs", "06"),
    ("TBT tail (FAST'25)", "TBT 尾部（FAST'25）", "mean of a request's longest 10% token intervals, compared with the TBT SLO", "06"),
    ("SLO attainment", "SLO 达成率", "share of requests that meet both TTFT and TBT SLOs", "06"),
    ("effective request capacity (FAST'25)", "有效请求容量", "FAST'25 §5.1: share of requests meeting both SLOs at the trace's own load (its Fig. 1: \"request capacity ratio\", %)", "06"),
    ("90 % capacity", "90% 容量", "the course's own metric: highest request rate (req/s) at which ≥ 90% of requests meet both SLOs — not the paper's", "06"),
    ("P:D ratio", "P:D 比例", "prefill nodes : decode nodes of a disaggregated cluster", "06"),
    ("preemption (recompute)", "抢占（重计算）", "a decode node out of KV memory frees its newest request's KV and recomputes it later, as vLLM does; output lengths are not known in advance", "06"),
    ("overload", "过载", "requests arrive faster than the cluster can serve them within the SLOs; some must be rejected", "07"),
    ("admission control", "准入控制", "decide per request whether to serve it or reject it (HTTP 429)", "07"),
    ("early rejection", "早期拒绝", "reject at arrival, before any prefill, on the larger of the prefill and decode loads (arXiv §7.2)", "07"),
    ("wasted prefill", "浪费的预填充", "prefill seconds spent on a request that is rejected afterwards at decode", "07"),
    ("load prediction", "负载预测", "estimate the decode load at the moment this request's prefill ends, assuming each request decodes for t_d (arXiv §7.4)", "07"),
    ("anti-phase oscillation", "反相振荡", "prefill and decode loads swing in opposite directions (negative correlation) under early rejection (arXiv Fig. 9–10)", "07"),
    ("load (SLO satisfaction)", "负载（SLO 满足度）", "prefill: predicted TTFT / TTFT SLO; decode: predicted TBT / TBT SLO, as the paper defines it — lecture 07 also takes KV memory used / capacity, whichever is larger; 1 = at the limit", "07"),
    ("ablation (leave-one-out)", "消融实验（逐一关闭）", "switch one mechanism off at a time and measure what the whole system loses", "08"),
    ("heterogeneous disaggregation (level 3)", "异构 PD 分离（第 3 级）", "prefill and decode on different accelerator types, e.g. H800 prefill + H20 decode", "08"),
    ("cost per million requests", "每百万请求成本", "USD of GPUs (and network) per hour ÷ requests served per hour × 10⁶", "08"),
    ("break-even network price", "网络盈亏平衡价格", "price of moving KV (USD per TB) at which a heterogeneous fleet stops saving money", "08"),
    ("fleet fragmentation", "集群碎片化", "capacity lost because two node types cannot stand in for each other and each pool rounds up", "08"),
    ("KV-aware router", "KV 感知路由器", "a gateway that picks the instance for a request by its cached prefix and the instances' load (Dynamo, SGLang, llm-d, production-stack, AIBrix)", "09"),
    ("router-side belief (approximate cache knowledge)", "路由器侧缓存估计（近似缓存信息）", "what the router remembers having sent to each instance, used instead of asking the engines what they cache", "09"),
    ("KV events", "KV 缓存事件", "messages in which engines report blocks stored and removed, so the router knows the true caches", "09"),
    ("stale belief", "过时的缓存估计", "the router believes an instance holds a prefix it has already evicted; the request recomputes it there", "09"),
    ("load imbalance", "负载不均衡度", "work of the busiest instance ÷ the mean over instances (1 = even)", "09"),
    ("overlap score", "前缀重叠分数", "the prefix blocks a request shares with an instance's cache, as a router weighs them", "09"),
    ("cache-aware routing with balance threshold", "带均衡阈值的缓存感知路由", "follow the deepest cache match unless the in-flight loads differ too much; then send to the least loaded", "09"),
    ("exploit / explore (Preble)", "利用 / 探索", "send a request to the instances holding its longest match (exploit) or pick among all instances by load (explore)", "09"),
    ("QPS (queries per second)", "每秒查询数", "requests an instance received per second over a recent window; production-stack's fallback routes to the lowest", "09"),
    ("ITL (inter-token latency)", "令牌间延迟", "the time between two output tokens of a request: the docs' name for what the course calls TBT", "09"),
    ("router temperature", "路由温度", "Dynamo's softmax temperature over normalised costs: 0 takes the cheapest instance, higher spreads requests at random", "09"),
    ("Mooncake Store", "Mooncake Store（KVCache 池）", "the open-source distributed KV-cache pool: one master (metadata) + clients that contribute DRAM segments", "lab"),
    ("Transfer Engine", "传输引擎", "Mooncake's data mover between segments, over RDMA or TCP; the master never touches the bytes", "lab"),
    ("segment", "内存段", "DRAM a client contributes to the pool; every replica of an object lives in one segment", "lab"),
    ("lease (default_kv_lease_ttl)", "租约", "after a read an object cannot be evicted for the lease TTL (10 s by default)", "lab"),
    ("replica (replica_num)", "副本", "a copy of an object in another segment: asked for at put, or added by hot-spot replication", "lab"),
    ("hard pin", "硬固定", "an object put with_hard_pin is never evicted", "lab"),
    ("master (mooncake_master)", "主节点（元数据服务）", "the store's metadata server: which key has which replicas in which segment; it never touches the bytes", "lab"),
    ("watermark (eviction_high_watermark_ratio)", "高水位线", "the share of the pool in use (0.9 by default) above which the master's background thread evicts", "lab"),
    ("client_ttl", "客户端存活时间", "seconds without a heartbeat after which the master drops a client and its segments (10 s by default)", "lab"),
    ("hot-spot replication", "热点副本复制", "the master adds a replica to a key read often (dynamic_replication_mode; off by default)", "lab"),
    ("soft pin", "软固定", "an object put with a soft pin is evicted only after unpinned ones; the lab uses none", "lab"),
    ("network namespace", "网络命名空间", "a private network stack; the lab's has only loopback, so nothing in it is reachable from outside", "lab"),
]


class Glossary(pd.DataFrame):
    """A DataFrame that shows every meaning in full: wrapped, never cut with "…" (pandas truncates
    cells past ``display.max_colwidth``, 50 characters, which cut every meaning)."""

    @property
    def _constructor(self):
        return Glossary

    def _repr_html_(self) -> str:
        return (self.style.format(escape="html").hide(axis="index")
                .set_properties(**{"text-align": "left", "white-space": "normal", "vertical-align": "top"})
                .set_properties(subset=["meaning"], **{"min-width": "28em", "max-width": "48em"})
                .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}])
                .to_html())

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None, "display.max_columns", None,
                               "display.expand_frame_repr", False):
            return super().__repr__()


def glossary(lecture: str | None = None) -> pd.DataFrame:
    """The glossary as a table (columns: term, 中文, meaning, lecture), optionally for one lecture;
    shown with the meanings wrapped in full (:class:`Glossary`)."""
    df = Glossary(TERMS, columns=["term", "中文", "meaning", "lecture"])
    if lecture is not None:
        df = df[df["lecture"] == str(lecture)]
        if df.empty:
            raise ValueError(f"no glossary terms for lecture {lecture!r}; lectures: {sorted(set(t[3] for t in TERMS))}")
    return df.reset_index(drop=True)
