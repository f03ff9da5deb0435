"""The Mooncake Store lab: measurements on the real store, live or as recorded.

:func:`run_all` starts the real store (:class:`~mooncake_lab.store_lab.StoreLab`, isolated) three
times — once for transfer, replication and failure, once per lease TTL for eviction — and returns
one JSON-serialisable dict. :func:`results` returns that dict live where the store can run here,
else the committed recording (``mooncake_lab/data/store_lab_recorded.json``, with package version,
date and machine) and one sentence saying why. Sizes are bytes, times seconds, rates GB/s (10^9 B/s).
"""
from __future__ import annotations

import datetime as _dt
import json
import platform
import time
from importlib import resources
from pathlib import Path

import numpy as np

from .. import paper as _paper
from .. import prefix_cache as pc
from .. import validate as v
from ..models import get_model
from ..traces import trace_from_requests

__all__ = ["KV_LAYER_BYTES", "KV_BLOCK_BYTES", "FAST25_RDMA_GBPS", "TRANSFER_SIZES", "LEASES",
           "EVICTION_SIZES", "POOL_MIB", "zipf_stream", "exact_lru_hits", "measure_transfer",
           "measure_eviction", "measure_replication_failure", "run_all", "results", "record",
           "RECORDED", "load_recorded", "hits_array", "NO_AVAILABLE_HANDLE", "OBJECT_NOT_FOUND",
           "TRANSFER_FAIL", "lease_agreement", "MAIN_LAB", "can_run_live", "header",
           "recorded_note", "eviction_lab", "start_labs", "MODE_ENV", "measure_roundtrip", "HIGH_WATERMARK",
           "watermark_capacity", "watermark_agreement", "DYNAMIC_REPLICATION_QPS", "HEAT_WINDOW_S",
           "check_results", "size_label", "transfer_note", "TRANSFER_ROUND_BYTES", "TRANSFER_ROUNDS", "read_label", "key_table", "KEY_COLUMNS", "lease_label"]

MiB = 1 << 20
KiB = 1 << 10
_MODEL = get_model("llama2-70b")
#: One 512-token block of LLaMA2-70B KV (BF16): 512 × 327,680 B = 160 MiB; one of its 80 layers: 2 MiB.
KV_BLOCK_BYTES = int(512 * _MODEL.kv_bytes_per_token())
KV_LAYER_BYTES = KV_BLOCK_BYTES // _MODEL.n_layers
#: FAST'25 §5.4.1, Fig. 12: Transfer Engine bandwidth over 4×200 Gbps and
#: 8×400 Gbps RoCE, GB/s (:data:`mooncake_lab.paper.FAST25_TE_NETWORKS`).
FAST25_RDMA_GBPS = {f"{net} RDMA": v["gbs"] for net, v in _paper.FAST25_TE_NETWORKS.items()}

TRANSFER_SIZES = (64 * KiB, 512 * KiB, 2 * MiB)   # value sizes; 2 MiB = KV_LAYER_BYTES
TRANSFER_ROUND_BYTES = 8 * MiB                   # bytes moved per (size, API) point and round
TRANSFER_ROUNDS = 5                               # rounds per point; a point reports its fastest
PUT_APIS = ("put", "put_batch", "batch_put_from")
GET_APIS = ("get", "get_batch", "batch_get_into")
LEASES = ("1ms", "10s")                            # default_kv_lease_ttl; 10 s is the master's default
POOL_MIB = 32                                      # 2 memory nodes × 16 MiB (the store's minimum segment)
EVICTION_SIZES = (64 * KiB, 128 * KiB, 256 * KiB)  # → 512, 256, 128 blocks of capacity
N_KEYS, N_ACCESSES, ZIPF_A = 2000, 2000, 1.0       # the replayed stream
#: ``eviction_high_watermark_ratio``: mooncake_master's default (``--help``; tests check it).
HIGH_WATERMARK = 0.9
#: ``dynamic_replication_admission_qps_threshold`` (reads/s) and ``dynamic_replication_heat_window_seconds``:
#: the master's defaults for when a key counts as hot (``--help``; tests check them).
DYNAMIC_REPLICATION_QPS, HEAT_WINDOW_S = 0.8, 10

RECORDED = "store_lab_recorded.json"
#: ``MOONCAKE_LAB_STORE=recorded`` makes the lab show the recording even where the store could run.
MODE_ENV = "MOONCAKE_LAB_STORE"
#: The store's return codes met in the lab (mooncake-store/include/types.h, ErrorCode).
NO_AVAILABLE_HANDLE, OBJECT_NOT_FOUND, TRANSFER_FAIL = -200, -704, -800


# ---------------------------------------------------------------------------------------- eviction
def zipf_stream(n_accesses: int = N_ACCESSES, n_keys: int = N_KEYS, a: float = ZIPF_A,
                seed: int = 0) -> np.ndarray:
    """Key ids (0..n_keys−1) drawn Zipf(a) by rank; halfway the popularity ranks are reshuffled."""
    n_accesses = v.integer(n_accesses, "n_accesses", lo=2, hi=10**6)
    n_keys = v.integer(n_keys, "n_keys", lo=1, hi=10**7)
    a = v.real(a, "a", lo=0, hi=5)
    rng = np.random.default_rng(v.integer(seed, "seed", lo=0))
    p = 1.0 / np.arange(1, n_keys + 1) ** a
    ranks = rng.choice(n_keys, size=n_accesses, p=p / p.sum())
    first, second = rng.permutation(n_keys), rng.permutation(n_keys)
    half = n_accesses // 2
    return np.concatenate([first[ranks[:half]], second[ranks[half:]]]).astype(np.int64)


def exact_lru_hits(stream, capacity: int) -> np.ndarray:
    """Per access: hit in the course's exact LRU of ``capacity`` blocks (``prefix_cache``)."""
    ids = v.int_array(stream, "stream", lo=0)
    n = len(ids)
    tr = trace_from_requests(np.zeros(n), np.full(n, 512), np.ones(n, dtype=np.int64),
                             np.ones(n, dtype=np.int64), ids, name="key stream")
    return pc.stack_distances(tr) < v.integer(capacity, "capacity", lo=1)


def _needs(lab, nodes: int, clients, where: str) -> None:
    """``lab`` must be a running StoreLab with at least ``nodes`` memory nodes and these clients."""
    from ..store_lab import StoreLab

    if not isinstance(lab, StoreLab):
        raise v.fail("lab", lab, "a started StoreLab (e.g. L.start_labs() or `with StoreLab(...) as lab`)", where)
    missing = [c for c in clients if c not in lab.clients]
    if len(lab.nodes) < nodes or missing:
        raise v.fail("lab", f"StoreLab(nodes={len(lab.nodes)}, clients={tuple(lab.clients)})",
                     f"a lab with >= {nodes} memory nodes and the clients {tuple(clients)}", where)


def _sizes(sizes, name: str, hi: int, where: str) -> tuple[int, ...]:
    sizes = tuple(sizes) if isinstance(sizes, (list, tuple)) else None
    if not sizes:
        raise v.fail(name, sizes, "a non-empty list of value sizes in bytes", where)
    return tuple(v.integer(s, name, lo=1, hi=hi, where=where) for s in sizes)


def _leases(leases, where: str) -> tuple[str, ...]:
    """Lease TTLs as the master takes them: a whole number of ms or s, e.g. "1ms", "10s"."""
    import re

    leases = (leases,) if isinstance(leases, str) else leases
    if not isinstance(leases, (list, tuple)) or not leases:
        raise v.fail("leases", leases, 'a non-empty list of lease TTLs, e.g. ("1ms", "10s")', where)
    for i, lease in enumerate(leases):
        if not (isinstance(lease, str) and re.fullmatch(r"[1-9][0-9]{0,6}(ms|s)", lease)):
            raise v.fail("lease", lease, 'a lease TTL: a whole number of ms or s, e.g. "1ms" or "10s"', where, i)
    return tuple(leases)


def eviction_lab(lease: str):
    """A (not yet started) store for the eviction replay: a 32 MiB pool, one writer, lease TTL ``lease``."""
    from ..store_lab import StoreLab

    _leases(lease, "eviction_lab")
    return StoreLab(nodes=2, segment_mib=POOL_MIB // 2, clients=("writer",), buffer_mib=16,
                    master_flags={"default_kv_lease_ttl": lease})


def measure_eviction(lab, lease: str, sizes=EVICTION_SIZES, stream=None, pins: int = 4) -> list[dict]:
    """Replay ``stream`` with ``is_exist``-before-``put`` through ``lab``'s pool (from
    :func:`eviction_lab`) at each value size, beside the course's exact LRU at the same capacity."""
    where = "measure_eviction"
    _needs(lab, 1, ("writer",), where)
    stream = zipf_stream() if stream is None else v.int_array(stream, "stream", lo=0, where=where)
    pins = v.integer(pins, "pins", lo=0, hi=64, where=where)
    half = len(stream) // 2
    out = []
    pool = len(lab.nodes) * lab.segment_mib * MiB
    # a value must fit one segment, and the pool must hold more values than the pins take
    sizes = _sizes(sizes, "sizes", min(lab.segment_mib * MiB, pool // (pins + 2)), where)
    for size in sizes:
        cap = pool // size
        pinned = [f"pin{size}-{i}" for i in range(pins)]
        lab.put(pinned, size, hard_pin=True)
        r = lab.replay([f"k{int(k)}" for k in stream], size)
        store = r["hits"]
        lru = exact_lru_hits(stream, cap)
        out.append({
            "lease": lease, "value_bytes": int(size), "capacity_blocks": int(cap),
            "store_hit": float(store.mean()), "lru_hit": float(lru.mean()),
            "agreement": float((store == lru).mean()),
            "store_hit_first_half": float(store[:half].mean()), "lru_hit_first_half": float(lru[:half].mean()),
            "store_hit_second_half": float(store[half:].mean()), "lru_hit_second_half": float(lru[half:].mean()),
            "put_failures": r["put_failures"], "replay_s": r["seconds"],
            "first_put_failures": {str(k): n for k, n in r["first_put_failures"].items()},
            "pins_kept": int(sum(lab.is_exist(pinned, who="writer"))), "pins": pins,
            "store_hits": "".join("01"[int(h)] for h in store), "lru_hits": "".join("01"[int(h)] for h in lru),
        })
        lab.call("writer", "remove_all")
    return out


# ---------------------------------------------------------------------------------------- transfer
def measure_roundtrip(lab, n: int = 4) -> dict:
    """Put ``n`` KV layers (2 MiB each) from the writer, read them on the reader, checksum every byte;
    also the listening TCP sockets inside the lab's network namespace (address, port)."""
    where = "measure_roundtrip"
    _needs(lab, 1, ("writer", "reader"), where)
    keys = [f"block0/layer{i}" for i in range(v.integer(n, "n", lo=1, hi=16, where=where))]
    put = lab.put(keys, KV_LAYER_BYTES)                       # writer → segments of the memory nodes
    got = lab.get(keys, KV_LAYER_BYTES)                       # segments → reader, checksummed
    rows = [{"key": k, "put_rc": rc, "content_ok": ok,
             "segments": [d["segment"] for d in lab.replica_desc(k, who="writer")]}
            for k, rc, ok in zip(keys, put["rc"], got["ok"])]
    lab.call("writer", "remove_all")
    return {"rows": rows, "segments": dict(lab.segments), "listening": sorted(set(lab.listening())),
            "ports": {k: lab.ports[k] for k in ("rpc", "metadata", "metrics")}}


def _warm_up(lab, sizes, bytes_per_round: int) -> None:
    """Untimed: fill most of the pool once (every segment page touched, every connection open), then
    one put and get with each API, which registers both clients' buffers at the size the rounds use."""
    big = max(sizes)
    pool = len(lab.nodes) * lab.segment_mib * MiB
    fill = [f"warm{i}" for i in range(max(1, int(0.75 * pool) // big))]
    lab.put(fill, big)
    lab.get(fill, big, check=False)
    lab.call("writer", "remove_all")
    n = max(1, bytes_per_round // big)
    for put_api, get_api in zip(PUT_APIS, GET_APIS):
        keys = [f"warm-{put_api}-{i}" for i in range(n)]
        lab.put(keys, big, api=put_api)
        lab.get(keys, big, api=get_api, check=False)
    lab.call("writer", "remove_all")


def measure_transfer(lab, sizes=TRANSFER_SIZES, bytes_per_round: int = TRANSFER_ROUND_BYTES,
                     rounds: int = TRANSFER_ROUNDS) -> list[dict]:
    """GB/s of each put API (writer → memory nodes) and get API (memory nodes → reader), checksummed.

    After an untimed warm-up (:func:`_warm_up`), each round moves ``bytes_per_round`` at every (size,
    API) point in turn, so a burst of other work on the machine slows all points of one round alike;
    a point reports its fastest round (the least disturbed) and keeps every round's rate."""
    where = "measure_transfer"
    _needs(lab, 1, ("writer", "reader"), where)
    rounds = v.integer(rounds, "rounds", lo=1, hi=20, where=where)
    bytes_per_round = v.integer(bytes_per_round, "bytes_per_round", lo=1,
                                hi=min(len(lab.nodes) * lab.segment_mib // 2, lab.buffer_mib) * MiB, where=where)
    sizes = _sizes(sizes, "sizes", min(lab.segment_mib, lab.buffer_mib) * MiB, where)
    _warm_up(lab, sizes, bytes_per_round)
    points = {(size, put_api): {"value_bytes": int(size), "n": 0, "put_api": put_api, "get_api": get_api,
                                "put_gbps_rounds": [], "get_gbps_rounds": [], "put_ok": 0, "get_ok": 0}
              for size in sizes for put_api, get_api in zip(PUT_APIS, GET_APIS)}
    for k in range(rounds):
        for (size, put_api), row in points.items():
            n = max(1, bytes_per_round // size)
            keys = [f"t{size}-{put_api}-{k}-{i}" for i in range(n)]
            p = lab.put(keys, size, api=put_api)
            g = lab.get(keys, size, api=row["get_api"])
            row["put_gbps_rounds"].append(n * size / p["seconds"] / 1e9)
            row["get_gbps_rounds"].append(n * size / g["seconds"] / 1e9)
            row["n"] += n
            row["put_ok"] += int(sum(rc == 0 for rc in p["rc"]))
            row["get_ok"] += int(sum(g["ok"]))
            lab.call("writer", "remove_all")
    for row in points.values():
        row["put_gbps"], row["get_gbps"] = max(row["put_gbps_rounds"]), max(row["get_gbps_rounds"])
        row["rounds"] = rounds
    return list(points.values())


def transfer_note(res: dict) -> str:
    """Two sentences on this run's transfer table: at the smallest value, how the batch APIs compare
    with one call per value; and which point was fastest and which slowest."""
    rows = res["transfer"]
    small = min(r["value_bytes"] for r in rows)
    at = [r for r in rows if r["value_bytes"] == small]
    single = next(r for r in at if r["put_api"] == PUT_APIS[0])
    batch = [r for r in at if r["put_api"] != PUT_APIS[0]]
    ratio = {kind: max(r[f"{kind}_gbps"] for r in batch) / single[f"{kind}_gbps"] for kind in ("put", "get")}
    points = [(r[f"{kind}_gbps"], r[f"{kind}_api"], r["value_bytes"]) for r in rows for kind in ("put", "get")]
    (hi, hi_api, hi_size), (lo, lo_api, lo_size) = max(points), min(points)
    return (f"At {size_label(small)}, the faster batch API moved {ratio['put']:.1f}× the rate of one call per "
            f"value on put, {ratio['get']:.1f}× on get. The fastest point was `{hi_api}` at {size_label(hi_size)} "
            f"({hi:.2f} GB/s), the slowest `{lo_api}` at {size_label(lo_size)} ({lo:.2f} GB/s).")


# -------------------------------------------------------------------------- replication and failure
def _n_replicas(lab, key):
    return len(lab.replica_desc(key, who="writer"))


def _node_of(segments: dict, seg) -> str:
    """The lab's name of the memory node that owns segment ``seg`` ("node0"), or the segment itself."""
    return next((n for n, s in segments.items() if s == seg), str(seg))


def measure_replication_failure(lab, value_bytes: int = KV_LAYER_BYTES, hot_reads: int = 200, n_two: int = 8,
                                n_one: int = 4, client_ttl_s: float = 10.0, polls: int = 20) -> dict:
    """Replica placement, hot-spot replication, and what a SIGKILLed memory node takes with it.

    Every key of the failure part is read once in each phase — before the kill, after the kill while
    the master still lists the node, and after ``client_ttl`` — and ``keys`` holds one row per key
    (its replicas, the node its replica list names first, the code of each read). Half the two-replica
    keys are put preferring node0, half node1, so their replica lists start with either. A failing read
    can take about 1 s, so the reads after the kill are shared between the writer and the reader (two at
    once)."""
    from concurrent.futures import ThreadPoolExecutor

    where = "measure_replication_failure"
    _needs(lab, 2, ("writer", "reader"), where)
    value_bytes = v.integer(value_bytes, "value_bytes", lo=1, hi=min(lab.segment_mib, lab.buffer_mib) * MiB // 8,
                            where=where)
    hot_reads = v.integer(hot_reads, "hot_reads", lo=10, hi=10_000, where=where)
    n_two = v.integer(n_two, "n_two", lo=2, hi=64, where=where)
    n_one = v.integer(n_one, "n_one", lo=1, hi=64, where=where)
    client_ttl_s = v.real(client_ttl_s, "client_ttl_s", lo=0.1, hi=60, where=where)
    polls = v.integer(polls, "polls", lo=1, hi=1000, where=where)
    segs = lab.segments
    n0, n1 = segs["node0"], segs["node1"]
    out: dict = {"segments": dict(segs), "client_ttl_s": client_ttl_s, "value_bytes": value_bytes}
    lab.put(["two"], value_bytes, replica_num=2)
    out["two_replica_segments"] = sorted(d["segment"] for d in lab.replica_desc("two", who="writer"))
    # hot-spot replication: read one key repeatedly, note when a second replica appears
    lab.put(["hot", "cold"], value_bytes, replica_num=1, preferred_segment=n0)
    t0, seen = time.perf_counter(), None
    for i in range(hot_reads):
        lab.get(["hot"], value_bytes, check=False)
        if i % 10 == 9 and seen is None and _n_replicas(lab, "hot") > 1:
            seen = {"reads": i + 1, "seconds": time.perf_counter() - t0}
            break
        time.sleep(0.005)
    out["hot_replicated_after"] = seen
    out["hot_replicas"] = _n_replicas(lab, "hot")
    out["cold_replicas"] = len(json.loads(lab.http("/query_key?key=cold"))["data"])
    # observing is reading: poll the replica list of a key nobody reads
    lab.put(["polled"], value_bytes, replica_num=1, preferred_segment=n0)
    for _ in range(polls):
        lab.replica_desc("polled", who="writer")
        time.sleep(0.03)
    t1, n_polled = time.perf_counter(), 1
    while time.perf_counter() - t1 < 1.5 and n_polled < 2:
        n_polled = len(json.loads(lab.http("/query_key?key=polled"))["data"])
        time.sleep(0.25)
    out["polled"] = {"polls": polls, "replicas": n_polled}
    # failure: single-replica keys on node0, two-replica keys, then SIGKILL node0
    ones = [f"one{i}" for i in range(n_one)]
    twos = [f"two{i}" for i in range(n_two)]
    lab.put(ones, value_bytes, replica_num=1, preferred_segment=n0)
    # half the two-replica keys prefer node0, half node1: the preferred segment holds the replica the
    # master lists first, so both cases are in the table (the order is read back below, not assumed)
    lab.put(twos[0::2], value_bytes, replica_num=2, preferred_segment=n0)
    lab.put(twos[1::2], value_bytes, replica_num=2, preferred_segment=n1)
    listed = {k: [_node_of(segs, d["segment"]) for d in lab.replica_desc(k, who="writer")] for k in ones + twos}
    first_on_dead = {k: listed[k][0] == "node0" for k in twos}
    out["two_first_on_killed"], out["n_two"] = int(sum(first_on_dead.values())), n_two
    before = {k: lab.get_rc(k, value_bytes) for k in ones + twos}
    lab.kill("node0")
    t_kill = time.perf_counter()

    def read_all(keys):
        """Each key once, two reads at a time (writer and reader): code, seconds since the kill, and
        whether the master still listed node0 when the read had ended."""
        def one(i_key):
            i, k = i_key
            rc = lab.get_rc(k, value_bytes, who=("reader", "writer")[i % 2])
            t = time.perf_counter() - t_kill
            return k, {"rc": rc, "t_s": t, "listed": n0 in lab.http("/get_all_segments").split()}
        with ThreadPoolExecutor(2) as pool:
            return dict(pool.map(one, enumerate(keys)))

    def probe(phase, reads):
        listed_now = lab.http("/get_all_segments").split()
        rc = lambda ks: [reads[k]["rc"] for k in ks]   # noqa: E731
        return {"t_s": min(r["t_s"] for r in reads.values()), "phase": phase, "one": rc(ones),
                "two_first_on_killed": rc([k for k in twos if first_on_dead[k]]),
                "two_first_on_survivor": rc([k for k in twos if not first_on_dead[k]]),
                "segments": listed_now, "exist_one": lab.is_exist(ones[:1], who="writer")[0],
                "still_listed_after": all(r["listed"] for r in reads.values())}

    during = read_all(ones + twos)
    timeline = [probe("before client_ttl", during)]
    deadline = t_kill + client_ttl_s + 6
    while time.perf_counter() < deadline:  # wait (bounded) for the master to drop node0
        if n0 not in lab.http("/get_all_segments").split():
            break
        time.sleep(0.2)
    out["node_dropped_after_s"] = time.perf_counter() - t_kill
    after = read_all(ones + twos)
    timeline.append(probe("after client_ttl", after))
    out["timeline"] = timeline
    out["before_kill_ok"] = int(sum(r == value_bytes for r in before.values()))
    out["before_kill"] = {"one": [before[k] for k in ones], "two": [before[k] for k in twos]}
    left = {k: _n_replicas(lab, k) for k in twos}
    out["two_replicas_after"] = sorted(set(left.values()))
    out["keys"] = [{"key": k, "replicas": len(listed[k]), "listed": listed[k], "before_kill": before[k],
                    "after_kill": during[k]["rc"], "after_kill_s": during[k]["t_s"],
                    "after_kill_listed": during[k]["listed"], "after_ttl": after[k]["rc"],
                    "replicas_after": left.get(k, 0) if after[k]["rc"] > 0 else 0} for k in ones + twos]
    out["codes"] = {str(TRANSFER_FAIL): "TRANSFER_FAIL", str(OBJECT_NOT_FOUND): "OBJECT_NOT_FOUND"}
    return out


# ------------------------------------------------------------------------------------------- runs
#: The lab of sections 1 and 3: 2 memory nodes × 64 MiB, a writer and a reader; nodes declared dead
#: 10 s after their last heartbeat (the master's default; long enough for every key's failing read,
#: about 1 s each, two at a time); hot keys replicated (default "off").
MAIN_LAB = {"nodes": 2, "segment_mib": 64, "buffer_mib": 32,
            "master_flags": {"client_ttl": 10, "dynamic_replication_mode": "enforce"}}


def can_run_live() -> tuple[bool, str]:
    """(True, package version) where the real store can run isolated here, else (False, one sentence why)."""
    import os

    from ..store_lab import HOST_NETWORK_ENV, isolation, store_status

    if os.environ.get(MODE_ENV, "").strip().lower() == "recorded":
        return False, f"{MODE_ENV}=recorded asks for the recorded results"
    ok, why = store_status()
    if ok and isolation()[0] is None and os.environ.get(HOST_NETWORK_ENV) != "1":
        return False, f"no private network namespace can be made here ({isolation()[1]})"
    return ok, why


def header(lab=None) -> dict:
    """What a result set records about its run: package, version, date (UTC), machine."""
    from ..store_lab import PACKAGE, store_status

    return {"package": PACKAGE, "version": store_status()[1],
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.system()} {platform.machine()}, {platform.python_implementation()} "
                       f"{platform.python_version()}, {_cpu_count()} CPUs",
            "kv_layer_bytes": KV_LAYER_BYTES, "kv_block_bytes": KV_BLOCK_BYTES,
            "isolated": None if lab is None else lab.isolated}


def start_labs(leases=LEASES) -> tuple:
    """Start the main lab and one eviction lab per lease, all at once: ``(main, {lease: lab})``."""
    from ..store_lab import StoreLab, start_all

    leases = _leases(leases, "start_labs")
    main, evs = StoreLab(**MAIN_LAB), {lease: eviction_lab(lease) for lease in leases}
    start_all([main, *evs.values()])
    return main, evs


def run_all(leases=LEASES) -> dict:
    """Every measurement of the lab on the real store (``run_s`` records how long it took). Raises
    StoreLabError if it cannot run."""
    t0 = time.perf_counter()
    main, evs = start_labs(leases)
    try:
        res = header(main)
        res["start_s"] = time.perf_counter() - t0
        res["roundtrip"] = measure_roundtrip(main)
        res["transfer"] = measure_transfer(main)
        res["eviction"] = []
        for lease, lab in evs.items():
            res["eviction"] += measure_eviction(lab, lease)
            lab.close()
        res["replication"] = measure_replication_failure(main, client_ttl_s=MAIN_LAB["master_flags"]["client_ttl"])
    finally:
        for lab in (main, *evs.values()):
            lab.close()
    res["run_s"] = time.perf_counter() - t0
    return res


def _cpu_count():
    import os

    return os.cpu_count()


def hits_array(bits: str) -> np.ndarray:
    """A recorded hit string ("0110…", one character per access) as a bool array."""
    _bits(bits, "bits", "hits_array")
    return np.frombuffer(bits.encode(), dtype=np.uint8) == ord("1")


def watermark_capacity(row: dict) -> int:
    """Values the pool keeps before it evicts: ``HIGH_WATERMARK`` of its capacity, less the pinned keys."""
    return int(HIGH_WATERMARK * row["capacity_blocks"]) - int(row.get("pins", 0))


def watermark_agreement(res: dict, stream=None) -> list[dict]:
    """Per eviction run: agreement of the store with exact LRU at the nominal capacity and at
    :func:`watermark_capacity` (same stream as the replay; ``stream`` defaults to :func:`zipf_stream`)."""
    check_results(res, ("eviction",), "watermark_agreement")
    stream = zipf_stream() if stream is None else v.int_array(stream, "stream", lo=0, where="watermark_agreement")
    out = []
    for r in res["eviction"]:
        store, cap = hits_array(r["store_hits"]), watermark_capacity(r)
        out.append({"lease": r["lease"], "capacity_blocks": r["capacity_blocks"], "agreement": r["agreement"],
                    "watermark_capacity": cap,
                    "agreement_at_watermark": float((exact_lru_hits(stream, cap) == store).mean())})
    return out


def size_label(n_bytes: int) -> str:
    """A byte count as a reader says it: 2097152 → "2 MiB", 65536 → "64 KiB" (else "1,000 B")."""
    n = v.integer(n_bytes, "n_bytes", lo=0, where="size_label")
    for unit, scale in (("GiB", 2**30), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} B"


def read_label(rc: int) -> str:
    """A read's result as a table says it: "served 2 MiB", "−800 transfer failed", "−704 not found"."""
    names = {TRANSFER_FAIL: "transfer failed", OBJECT_NOT_FOUND: "not found", NO_AVAILABLE_HANDLE: "no space"}
    if rc > 0:
        return f"served {size_label(rc)}"
    return f"\u2212{-rc} {names.get(rc, 'error')}" if rc < 0 else "0 bytes"


def lease_label(lease: str) -> str:
    """A lease TTL as the master takes it, as a reader says it: "1ms" → "1 ms", "10s" → "10 s"."""
    import re

    m = re.fullmatch(r"(\d+)(ms|s)", lease) if isinstance(lease, str) else None
    if m is None:
        raise v.fail("lease", lease, 'a lease TTL such as "1ms" or "10s"', "lease_label")
    return f"{m.group(1)} {m.group(2)}"


#: The per-key table's columns (:func:`key_table`).
KEY_COLUMNS = ("key", "replicas", "listed first", "before the kill", "after the kill (node0 listed)",
               "after client_ttl", "replicas left")


def key_table(res: dict) -> list[dict]:
    """One row per key of the failure run: replicas asked for, the node its replica list names first,
    each read's result (:func:`read_label`) before the kill, after it (the master still listing the
    dead node) and after ``client_ttl``, and the replicas it has left."""
    rep = check_results(res, ("replication",), "key_table")["replication"]
    return [dict(zip(KEY_COLUMNS, (r["key"], r["replicas"], r["listed"][0], read_label(r["before_kill"]),
                                   read_label(r["after_kill"]) + ("" if r["after_kill_listed"] else " (node0 dropped)"),
                                   read_label(r["after_ttl"]), r["replicas_after"])))
            for r in rep["keys"]]


def lease_agreement(res: dict) -> dict[str, float]:
    """Mean share of accesses on which the store and exact LRU agree (hit/miss), per lease TTL."""
    check_results(res, ("eviction",), "lease_agreement")
    out: dict[str, list] = {}
    for r in res["eviction"]:
        out.setdefault(r["lease"], []).append(r["agreement"])
    return {k: float(np.mean(a)) for k, a in out.items()}


# What the figures and dashboards read of a result set: field → check (a value's type and range).
def _rate(x, name, where):
    return v.real(x, name, lo=0, hi=1, where=where)


def _count(x, name, where):
    return v.integer(x, name, lo=0, where=where)


def _rcs(x, name, where):
    if not isinstance(x, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in x):
        raise v.fail(name, x, "a list of return codes (int)", where)


def _lease(x, name, where):
    import re

    if not (isinstance(x, str) and re.fullmatch(r"[1-9][0-9]{0,6}(ms|s)", x)):
        raise v.fail(name, x, "a lease TTL: a whole number of ms or s, e.g. '1ms'", where)


def _bits(x, name, where):
    if not (isinstance(x, str) and x and set(x) <= {"0", "1"}):
        raise v.fail(name, x, "a hit string of '0' (miss) and '1' (hit), one per access", where)


_EVICTION_ROW = {"lease": _lease,
                 "capacity_blocks": lambda x, n, w: v.integer(x, n, lo=1, where=w),
                 "value_bytes": lambda x, n, w: v.integer(x, n, lo=1, where=w),
                 "store_hits": _bits, "lru_hits": _bits, "pins": _count, "pins_kept": _count,
                 **{k: _rate for k in ("store_hit", "lru_hit", "agreement", "store_hit_first_half",
                                       "lru_hit_first_half", "store_hit_second_half", "lru_hit_second_half")}}
_PROBE = {"one": _rcs, "two_first_on_killed": _rcs, "two_first_on_survivor": _rcs}
def _key_rows(x, name, where):
    def key(k, n, w):
        if not (isinstance(k, str) and k):
            raise v.fail(n, k, "a key", w)

    def nodes(ns, n, w):
        if not (isinstance(ns, list) and ns and all(isinstance(s, str) for s in ns)):
            raise v.fail(n, ns, "the nodes of the key's replica list, first listed first", w)

    row = {"key": key, "replicas": lambda x, n, w: v.integer(x, n, lo=1, hi=2, where=w), "listed": nodes,
           "before_kill": _rc, "after_kill": _rc, "after_ttl": _rc, "replicas_after": _count,
           "after_kill_listed": lambda x, n, w: v.flag(x, n, w)}
    if not isinstance(x, list) or not x:
        raise v.fail(name, x, "a non-empty list of per-key rows", where)
    for i, r in enumerate(x):
        _fields(r, row, f"{name}[{i}]", where)


def _rc(x, name, where):
    if not (isinstance(x, int) and not isinstance(x, bool)):
        raise v.fail(name, x, "a return code (int)", where)


_REPLICATION = {"node_dropped_after_s": lambda x, n, w: v.real(x, n, lo=0, where=w),
                "client_ttl_s": lambda x, n, w: v.real(x, n, lo=0, lo_open=True, where=w),
                "two_first_on_killed": _count, "n_two": lambda x, n, w: v.integer(x, n, lo=1, where=w),
                "two_replicas_after": _rcs, "keys": _key_rows}


def _fields(d, spec: dict, name: str, where: str) -> None:
    if not isinstance(d, dict):
        raise v.fail(name, d, f"a dict with {', '.join(spec)}", where)
    for k, check in spec.items():
        if k not in d:
            raise v.fail(name, f"a dict without {k!r}", f"the lab's results (fields {', '.join(spec)})", where)
        check(d[k], f"{name}[{k!r}]", where)


def check_results(res, parts=("eviction", "replication"), where: str = "results", label: str = "res") -> dict:
    """``res`` if it holds what the figures and dashboards read of ``parts`` (each row's fields, types
    and ranges: hit strings of 0/1 as long as the stream, rates in [0, 1], return codes as ints),
    else an :class:`~mooncake_lab.validate.InputError` naming the first bad field (``label`` names
    ``res`` itself, e.g. ``"EvictionDashboard(res=...)"``)."""
    if not isinstance(res, dict) or any(res.get(p) is None for p in parts):
        got = res if not isinstance(res, dict) else f"a dict without {' or '.join(map(repr, parts))}"
        raise v.fail(label, got, f"the lab's results: a dict with {' and '.join(map(repr, parts))} "
                                 "(experiments.lab_store.results()[0]), or None for the recorded run", where)
    if "eviction" in parts:
        rows = res.get("eviction")
        if not isinstance(rows, list) or not rows:
            raise v.fail(f"{label}['eviction']", rows, "a non-empty list of eviction runs", where)
        for i, r in enumerate(rows):
            _fields(r, _EVICTION_ROW, f"{label}['eviction'][{i}]", where)
            if len(r["store_hits"]) != len(r["lru_hits"]) or r["pins_kept"] > r["pins"]:
                raise v.fail(f"{label}['eviction'][{i}]", "store_hits and lru_hits of different lengths, or "
                             "more pins kept than pinned", "one hit per access in both; pins_kept <= pins", where)
    if "replication" in parts:
        rep = res.get("replication")
        _fields(rep, _REPLICATION, f"{label}['replication']", where)
        tl = rep.get("timeline")
        if not isinstance(tl, list) or len(tl) != 2:
            raise v.fail(f"{label}['replication']['timeline']", tl, "two probes (before and after client_ttl)", where)
        for i, t in enumerate(tl):
            _fields(t, _PROBE, f"{label}['replication']['timeline'][{i}]", where)
        _fields(rep.get("before_kill"), {"one": _rcs, "two": _rcs}, f"{label}['replication']['before_kill']", where)
    return res


def load_recorded(path=None) -> dict:
    """The committed recording of :func:`run_all` (or the JSON at ``path``), checked."""
    if path is None:
        text = resources.files("mooncake_lab").joinpath("data", RECORDED).read_text()
    else:
        try:
            text = Path(path).read_text()
        except (OSError, TypeError, UnicodeDecodeError) as err:
            raise v.fail("path", path, f"a readable JSON file of the lab's results ({type(err).__name__})",
                         "load_recorded") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise v.fail("path", path, f"a JSON file ({err})", "load_recorded") from None
    for field in ("version", "date", "machine", "transfer", "eviction", "replication"):
        if not isinstance(data, dict) or field not in data:
            raise v.fail("path", str(path or RECORDED), f"the lab's results, with the field {field!r}", "load_recorded")
    return check_results(data, where=str(path or RECORDED))


def results(live: bool | None = None) -> tuple[dict, str]:
    """(results, where they come from). ``live=None``: run the store if it can run here, else the recording."""
    from ..store_lab import StoreLabError

    if live is not None:
        live = v.flag(live, "live", "results")
    ok, why = can_run_live() if live is not False else (False, "live=False was asked for")
    if ok:
        try:
            return run_all(), f"live: the real Mooncake Store {why}, run just now on this machine"
        except StoreLabError as err:
            if live:
                raise
            why = f"the store failed to run here ({err})"
    elif live:
        raise StoreLabError(why)
    return load_recorded(), recorded_note(why)


def recorded_note(why: str) -> str:
    """The one sentence a notebook shows when it falls back to the recording."""
    if not (isinstance(why, str) and why):
        raise v.fail("why", why, "a sentence saying why the store does not run live", "recorded_note")
    data = load_recorded()
    return (f"Recorded results: {why}, so these are the results of a real run "
            f"({data['package']} {data['version']}, {data['date']}, {data['machine']}).")


def record(path=None) -> Path:
    """Run the store and write the results as the committed recording (``python -m ... record``);
    ``path`` (a ``.json`` file in a folder that exists and can be written) is checked first."""
    import os

    path = Path(__file__).resolve().parents[1] / "data" / RECORDED if path is None else path
    if not isinstance(path, (str, os.PathLike)) or Path(path).suffix != ".json":
        raise v.fail("path", path, "a path ending in .json", "record")
    path = Path(path)
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK) or path.is_dir():
        raise v.fail("path", str(path), "a .json file in a folder that exists and that you can write "
                                        f"({path.parent} {'is not writable' if path.parent.is_dir() else 'does not exist'})",
                     "record")
    data = run_all()
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


if __name__ == "__main__":
    import sys

    print(record(sys.argv[1] if len(sys.argv) > 1 else None))
