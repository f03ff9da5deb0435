"""Any simulated run as a Chrome trace (the Trace Event Format): open it in https://ui.perfetto.dev
or ``chrome://tracing`` and scroll through what every instance and link did.

``chrome_trace(result)`` returns the JSON object; ``write_chrome_trace(result, path)`` writes it;
``validate_chrome_trace(obj)`` checks an object against the format; ``read_prefills(obj)`` reads
the prefill slices back (the round trip the tests check).

Tracks (one process per pool, one thread per instance or link; times in µs since the trace start):

* **Conductor**: one instant event per rejection, named by where it was rejected.
* **Prefill pool** (coupled runs: the nodes): per instance, complete events (``ph: "X"``)
  ``fetch wait``, ``fetch`` and ``prefill`` of every request it served. Overlapping work (a CPP
  group pipelines chunks) goes to a second row of the same instance. A counter per instance:
  requests waiting in its queue.
* **Decode pool** (coupled runs: the same nodes' decode batches): per instance, counters of the batch (requests running) and
  of the KV (tokens: prompt + output of each running request, reserved at admission with known output
  lengths; with ``output_lengths="unknown"`` the prompt plus the tokens made so far, at each change of
  the batch: :func:`mooncake_lab.timeline.lanes`), and one async
  slice per request from its admission to its last token.
* **Network**: per prefill instance, async slices of the KV streams it sends (ending when the KV is
  ready at decode) and of the prefix fetches it receives.

Every event carries the request id and its outcome in ``args``. Format reference: "Trace Event
Format", Google, https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
(the phases used here: X, i, C, b, e, M).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .validate import InputError, fail

__all__ = ["chrome_trace", "write_chrome_trace", "validate_chrome_trace", "read_prefills", "replay_speed",
           "MAX_EVENTS"]

#: Events an export may hold: ≈ 10 per request for the largest trace the course ships (24k requests)
#: with room to spare, ≈ 200 MB of JSON at most — beyond it the export refuses instead of filling memory.
MAX_EVENTS = 2_000_000

_US = 1e6   # µs per s
_PIDS = {"conductor": 1, "prefill": 2, "decode": 3, "network": 4}
_PHASES = {"X", "i", "I", "C", "b", "e", "n", "M", "B", "E"}
_REJECTIONS = {2: "rejected at arrival", 3: "rejected after prefill", 4: "rejected: too large"}


def replay_speed(trace) -> float:
    """The replay speed of ``trace`` (× the recorded arrival rate), read from its source: 1 if never replayed."""
    speed = 1.0
    for s in re.findall(r"replayed at ([0-9.eE+-]+)× speed", getattr(trace, "source", "") or ""):
        speed *= float(s)
    return speed


def _us(t: float) -> float:
    return round(float(t) * _US, 3)


def chrome_trace(result) -> dict:
    """The run ``result`` (a :class:`~mooncake_lab.sim.SimResult`) as a Chrome trace JSON object."""
    from .sim.config import OUTCOMES
    from .sim.result import SimResult

    if not isinstance(result, SimResult):
        raise fail("result", result, "a SimResult (what mooncake_lab.sim.simulate returns)", "chrome_trace")
    a, tr, cfg = result.arrays, result.trace, result.config
    n = len(tr)
    if 12 * n > MAX_EVENTS:
        raise fail("result", f"a run of {n:,} requests", f"a run of at most {MAX_EVENTS // 12:,} requests "
                   f"(≈ 12 events each, MAX_EVENTS = {MAX_EVENTS:,})", "chrome_trace")
    from .timeline.lanes import lanes

    ln = lanes(result)
    coupled, P, D = ln.coupled, ln.n_prefill, ln.n_decode
    outcome = [OUTCOMES[int(k)] for k in a["outcome"]]
    ev: list[dict] = []

    def meta(pid, name, tid=None, sort=None):
        if tid is None:
            ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
            ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}})
        else:
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": sort}})

    pool = "Nodes: prefill (coupled)" if coupled else "Prefill pool"
    meta(_PIDS["conductor"], "Conductor")
    meta(_PIDS["conductor"], "admission", 0, 0)
    meta(_PIDS["prefill"], pool)
    meta(_PIDS["decode"], "Nodes: decode batches (coupled)" if coupled else "Decode pool")
    meta(_PIDS["network"], "Network")

    # -- the Conductor: rejections ------------------------------------------------------------
    for i, at, code in zip(ln.rej_req, ln.rej_t, ln.rej_reason):
        ev.append({"ph": "i", "s": "t", "pid": _PIDS["conductor"], "tid": 0, "ts": _us(at),
                   "name": _REJECTIONS[int(code)], "cat": "admission",
                   "args": {"request": int(i), "outcome": outcome[i], "input_len": int(tr.input_len[i]),
                            "prefill_load": _num(a["prefill_load"][i]), "decode_load": _num(a["decode_load"][i])}})

    # -- prefill instances: fetch wait, fetch, prefill; queue counters ----------------------------
    f_w, f_t = np.nan_to_num(a["fetch_wait"]), a["fetch_time"]   # coupled runs record no fetch wait (NaN)
    rows = ln.rows
    for p in range(P):
        for r in range(int(rows[p])):
            name = f"{'node' if coupled else 'prefill'} {p}" + (f" · row {r + 1}" if r else "")
            meta(_PIDS["prefill"], name, _tid(p, r), _tid(p, r))
    for i, p, r, t_start, t_end in zip(ln.pf_req, ln.pf_lane, ln.pf_row, ln.pf_start, ln.pf_end):
        args = {"request": int(i), "outcome": outcome[i], "input_len": int(tr.input_len[i]),
                "cached_tokens": int(a["cached_tok"][i]), "fetched_tokens": int(a["fetched_tok"][i]),
                "computed_tokens": int(a["computed_tok"][i])}
        t0 = float(t_start)
        for name, dur in (("fetch wait", f_w[i]), ("fetch", f_t[i]), ("prefill", None)):
            t1 = float(t_end) if dur is None else t0 + float(dur)
            if dur is None or dur > 0:   # ends rounded once, so slices that follow each other touch exactly
                ev.append({"ph": "X", "pid": _PIDS["prefill"], "tid": _tid(p, r), "ts": _us(t0),
                           "dur": round(max(0.0, _us(t1) - _us(t0)), 3), "name": name, "cat": "prefill",
                           "args": args})
            t0 = t1
    for p in range(P):   # queue: requests that arrived at p and have not started
        _counter(ev, _PIDS["prefill"], _tid(p, 0), f"queue {p} (requests)", "requests", ln.queue.lane(p))

    # -- decode instances: batch and KV counters, one async slice per request ---------------------
    for d in range(D):
        meta(_PIDS["decode"], f"{'node' if coupled else 'decode'} {d}", d, d)
        _counter(ev, _PIDS["decode"], d, f"batch {d} (requests)", "requests", ln.batch.lane(d))
        _counter(ev, _PIDS["decode"], d, f"KV {d} (tokens)", "tokens", ln.kv.lane(d))
    for i, d, t0, t1 in zip(ln.dc_req, ln.dc_lane, ln.dc_admit, ln.dc_finish):
        args = {"request": int(i), "outcome": outcome[i], "output_len": int(tr.output_len[i]),
                "preemptions": int(a["preemptions"][i])}
        ev.append({"ph": "b", "pid": _PIDS["decode"], "tid": int(d), "ts": _us(t0), "id": int(i),
                   "name": "decode", "cat": "decode", "args": args})
        ev.append({"ph": "e", "pid": _PIDS["decode"], "tid": int(d), "ts": _us(min(t1, ln.end_s)), "id": int(i),
                   "name": "decode", "cat": "decode", "args": {}})

    # -- network: KV streams (prefill → decode) and prefix fetches (holder → prefill) ------------
    for p in range(P):
        meta(_PIDS["network"], f"{'node' if coupled else 'prefill'} {p} NICs", p, p)
    for i, kind, src, dst, t0, t1 in zip(ln.net_req, ln.net_kind, ln.net_src, ln.net_dst, ln.net_start, ln.net_end):
        if kind == 0:
            _async(ev, "stream", i, int(src), t0, t1, {"request": int(i), "outcome": outcome[i], "from_prefill": int(src),
                                                       "to_decode": int(dst), "tokens": int(tr.input_len[i])})
        else:
            _async(ev, "fetch", i, int(dst), t0, t1, {"request": int(i), "outcome": outcome[i], "from_prefill": int(src),
                                                      "to_prefill": int(dst), "tokens": int(a["fetched_tok"][i])})
    if len(ev) > MAX_EVENTS:   # unreachable by the bound above; kept so a future track cannot overflow silently
        raise fail("result", f"{len(ev):,} events", f"at most MAX_EVENTS = {MAX_EVENTS:,}", "chrome_trace")
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"trace": tr.name, "source": tr.source, "replay_speed": replay_speed(tr),
                          "requests": n, "policy": cfg.policy_name, "engine": result.engine,
                          "architecture": "coupled" if coupled else "disaggregated",
                          "prefill_instances": P, "decode_instances": D,
                          "time_unit": "µs of simulated time since the trace start"}}


def _tid(p: int, row: int) -> int:
    return int(p) + 1000 * int(row)


def _num(x) -> float | None:
    return None if not math.isfinite(float(x)) else float(x)


def _counter(ev, pid, tid, name, key, lane) -> None:
    """Counter events of one lane of a :class:`~mooncake_lab.timeline.Steps`: its value at each breakpoint
    (a counter is a step function: a KV that grows between breakpoints is shown at their values)."""
    for t, level in zip(*lane):
        if not math.isfinite(t):   # a request still resident when the run ended leaves at +inf: no event
            continue
        ev.append({"ph": "C", "pid": pid, "tid": tid, "ts": _us(t), "name": name, "args": {key: round(float(level), 6)}})


def _async(ev, cat, i, p, t0, t1, args) -> None:
    pid = _PIDS["network"]
    ev.append({"ph": "b", "pid": pid, "tid": p, "ts": _us(t0), "id": f"{cat}-{i}", "name": cat, "cat": cat,
               "args": args})
    ev.append({"ph": "e", "pid": pid, "tid": p, "ts": _us(max(t0, t1)), "id": f"{cat}-{i}", "name": cat,
               "cat": cat, "args": {}})


def write_chrome_trace(result, path: str | Path) -> Path:
    """Write :func:`chrome_trace` of ``result`` to ``path`` (``.json``); returns the path."""
    p = Path(path)
    if p.suffix != ".json":
        raise fail("path", p.name, "a file name ending in .json (Perfetto and chrome://tracing open JSON traces)",
                   "write_chrome_trace")
    if not p.parent.is_dir():
        raise fail("path", p.name, f"a file in an existing folder; there is no folder {p.parent}", "write_chrome_trace")
    obj = chrome_trace(result)
    p.write_text(json.dumps(obj, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return p


def validate_chrome_trace(obj) -> int:
    """Check ``obj`` (a parsed JSON trace) against the Trace Event Format; returns the number of events.

    Checked: a ``traceEvents`` list of objects; every event has a known ``ph``, integer ``pid`` and
    ``tid`` and a ``name``; every timed event a finite ``ts`` ≥ 0; ``X`` a finite ``dur`` ≥ 0; ``C``
    numeric ``args``; ``i`` a scope ``s`` in g/p/t; async ``b``/``e`` an ``id`` and ``cat``, each ``e``
    closing an open ``b`` of the same (cat, id) at or after its start, none left open; complete events
    of one thread nested (no partial overlap); metadata events named and with ``args``.
    """
    where = "validate_chrome_trace"
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise fail("obj", type(obj).__name__, "a JSON object with a 'traceEvents' list", where)
    open_async: dict = {}
    slices: dict = {}
    for k, e in enumerate(obj["traceEvents"]):
        at = f"{where}: traceEvents[{k}]"
        if not isinstance(e, dict):
            raise InputError(f"{at}: got {type(e).__name__}; allowed: an object")
        ph = e.get("ph")
        if ph not in _PHASES:
            raise InputError(f"{at}.ph: got {ph!r}; allowed: one of {', '.join(sorted(_PHASES))}")
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int) or isinstance(e.get(key), bool):
                raise InputError(f"{at}.{key}: got {e.get(key)!r}; allowed: an integer")
        if not isinstance(e.get("name"), str) or not e["name"]:
            raise InputError(f"{at}.name: got {e.get('name')!r}; allowed: a non-empty string")
        if ph == "M":
            if not isinstance(e.get("args"), dict):
                raise InputError(f"{at}.args: got {e.get('args')!r}; allowed: an object (metadata's value)")
            continue
        ts = e.get("ts")
        if not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts) or ts < 0:
            raise InputError(f"{at}.ts: got {ts!r}; allowed: a finite number of µs ≥ 0")
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, int | float) or isinstance(dur, bool) or not math.isfinite(dur) or dur < 0:
                raise InputError(f"{at}.dur: got {dur!r}; allowed: a finite number of µs ≥ 0")
            slices.setdefault((e["pid"], e["tid"]), []).append((ts, ts + dur, k))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in args.values()):
                raise InputError(f"{at}.args: got {args!r}; allowed: an object of finite numbers (the counter's series)")
        elif ph in ("i", "I"):
            if e.get("s", "t") not in ("g", "p", "t"):
                raise InputError(f"{at}.s: got {e.get('s')!r}; allowed: 'g', 'p' or 't'")
        elif ph in ("b", "e", "n"):
            if "id" not in e or not isinstance(e.get("cat"), str):
                raise InputError(f"{at}: an async event needs an 'id' and a 'cat'; got id={e.get('id')!r}, "
                                 f"cat={e.get('cat')!r}")
            key = (e["cat"], str(e["id"]), e["name"])
            if ph == "b":
                if key in open_async:
                    raise InputError(f"{at}: async slice {key} begins again before it ended "
                                     f"(traceEvents[{open_async[key][1]}])")
                open_async[key] = (ts, k)
            elif ph == "e":
                if key not in open_async:
                    raise InputError(f"{at}: 'e' of async slice {key} that is not open")
                t0, _ = open_async.pop(key)
                if ts < t0:
                    raise InputError(f"{at}.ts: got {ts!r}; allowed: ≥ its begin's ts {t0!r}")
    if open_async:
        key, (_, k) = next(iter(open_async.items()))
        raise InputError(f"{where}: traceEvents[{k}]: async slice {key} begins and never ends "
                         f"({len(open_async)} left open)")
    for (pid, tid), ss in slices.items():   # complete events on a thread nest or follow each other
        ss.sort(key=lambda s: (s[0], -s[1]))
        stack: list = []
        for t0, t1, k in ss:
            while stack and stack[-1][1] <= t0 + 1e-6:
                stack.pop()
            if stack and t1 > stack[-1][1] + 1e-6:
                raise InputError(f"{where}: traceEvents[{k}]: complete event [{t0}, {t1}] µs on pid {pid} tid "
                                 f"{tid} overlaps traceEvents[{stack[-1][2]}] without nesting in it")
            stack.append((t0, t1, k))
    return len(obj["traceEvents"])


def read_prefills(obj) -> pd.DataFrame:
    """The ``prefill`` complete events of an exported trace, one row per request: ``instance``,
    ``start_s`` (prefill start after any fetch), ``end_s``, token counts — what the run recorded."""
    validate_chrome_trace(obj)
    rows = [{"request": e["args"]["request"], "instance": e["tid"] % 1000, "start_s": e["ts"] / _US,
             "end_s": (e["ts"] + e["dur"]) / _US, "cached_tokens": e["args"]["cached_tokens"],
             "computed_tokens": e["args"]["computed_tokens"], "outcome": e["args"]["outcome"]}
            for e in obj["traceEvents"] if e["ph"] == "X" and e["name"] == "prefill"]
    return pd.DataFrame(rows, columns=["request", "instance", "start_s", "end_s", "cached_tokens",
                                       "computed_tokens", "outcome"]).set_index("request").sort_index()
