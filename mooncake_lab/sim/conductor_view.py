"""What a student prefill policy sees at each arrival: the request and the Conductor's view.

A student policy is ``policy(req, view) -> int`` (:mod:`.student_policy`). Both arguments are
named tuples, built by the simulator (numba kernel or plain-Python reference, same values):

``req`` (:class:`Request`), the arriving request:
    ``index`` (its row in the trace, arrival order), ``arrival_s`` (s), ``input_tokens``,
    ``output_tokens``, ``best_prefix_tokens`` (prompt tokens the longest prefix cached anywhere in
    the prefill pool would save), ``best_instance`` (the instance holding it, −1 if none),
    ``uniform`` (a U[0, 1) draw of this request: the one ``"random"`` uses, so a randomised
    policy stays reproducible per seed).

``view`` (:class:`View`), one array entry per prefill instance p (0 … n − 1; n = ``len(view.wait_s)``),
describing what happens *if the request is sent to p*:
    ``wait_s`` — queue: seconds until p can start it (0 if idle);
    ``prefix_tokens`` — prompt tokens p's own cache saves;
    ``prefill_s`` — prefill seconds on p with that local prefix;
    ``fetch`` — True if the Conductor then fetches the pool's best prefix to p (Algorithm 1's
    rule: best > local and best / local ≥ ``kvcache_balancing_threshold``, local 0 ⇒ ∞). The one
    field a policy may write: the chosen p's entry, as the policy leaves it, decides the fetch
    (``view.fetch[:] = False`` never fetches; True fetches whenever the pool has more than p);
    ``fetch_s`` — seconds of that fetch (0 where ``fetch`` is False; with ``network_contention``
    including the wait for the source's send and p's receive links);
    ``fetch_prefill_s`` — prefill seconds on p after that fetch (= ``prefill_s`` where no fetch);
    ``ttft_s`` — estimated TTFT = wait + fetch + prefill: the number ``"kvcentric"`` minimises;
    ``send_backlog_s`` / ``recv_backlog_s`` — with ``network_contention``: seconds of transfers
    (prefix fetches, KV streams to decode) already reserved on p's send / receive links after
    now (a CPP group: its busiest node's; :mod:`.links`); 0 without contention. A fetch from
    the holder p waits behind p's send backlog, which ``fetch_s`` (and so ``ttft_s``) includes.

What the routers of :mod:`.routers` see of p's load (the same numbers as their
:class:`~.routers.RouterInputs`, at the arrival, an event at exactly that time having happened):
    ``pending_tokens`` — prompt tokens still to compute (prompt − cached) of the requests sent to p
    whose prefill has not ended, each in full until it ends (Dynamo's P_i), tokens;
    ``live_kv_tokens`` — prompt tokens of the requests p is prefilling now (started, not ended), tokens;
    ``kv_util`` — ``live_kv_tokens`` / the KV a node holds (``decode_kv_capacity_tokens``, × the
    ``cpp_group_size`` nodes of a CPP group): the fraction of p's KV memory in use (llm-d's scorer);
    ``inflight`` — requests sent to p whose prefill has not ended (the gateways' in-flight counters);
    ``queued_requests`` — requests sent to p that have not started.

Times are the Conductor's estimates: with ``estimator_noise`` > 0 each instance's times are
multiplied by the same noise factor the built-in policies use (the load fields are exact). The arrays are refilled at every
arrival; changing them (``fetch`` aside) changes nothing in the simulation.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types

__all__ = ["Request", "View", "new_view", "REQUEST_TYPE", "VIEW_TYPE", "POLICY_SIGNATURE", "STUDENT_POLICY_CODE",
           "PROBE_ROWS"]

#: The arriving request (see the module docstring for the fields and units).
Request = namedtuple("Request", ["index", "arrival_s", "input_tokens", "output_tokens",
                                 "best_prefix_tokens", "best_instance", "uniform"])
#: Per-prefill-instance arrays: what happens if the request goes to instance p.
View = namedtuple("View", ["wait_s", "prefix_tokens", "prefill_s", "fetch", "fetch_s",
                           "fetch_prefill_s", "ttft_s", "send_backlog_s", "recv_backlog_s", "pending_tokens",
                           "live_kv_tokens", "kv_util", "inflight", "queued_requests"])

_f64 = types.float64[::1]
#: numba types of the two arguments and the signature a compiled policy gets.
REQUEST_TYPE = types.NamedTuple((types.int64, types.float64, types.int64, types.int64, types.int64,
                                 types.int64, types.float64), Request)
_i64 = types.int64[::1]
VIEW_TYPE = types.NamedTuple((_f64, _i64, _f64, types.boolean[::1], _f64, _f64, _f64, _f64, _f64,
                              _f64, _f64, _f64, _i64, _i64), View)
POLICY_SIGNATURE = types.int64(REQUEST_TYPE, VIEW_TYPE)

#: The rows the engines record for ``sim.explain`` (:func:`.kernel._probe`), one column per prefill instance:
#: the view's times and tokens, the routers' inputs (0 where the run tracks none) and whether p takes
#: prefill requests now (rule 14).
PROBE_ROWS = ("wait_s", "prefix_tokens", "prefill_s", "fetch", "fetch_s", "fetch_prefill_s", "ttft_s",
              "send_backlog_s", "recv_backlog_s", "matched_blocks", "tree_blocks", "pending_tokens",
              "live_kv_tokens", "inflight", "queued", "recent_requests", "recent_prefill_s", "deepest_entered",
              "prefill_node")

#: Kernel code of "a student's function" (the built-in names are config.PREFILL_POLICIES, 0–3).
STUDENT_POLICY_CODE = 4


def new_view(n_instances: int) -> View:
    """A :class:`View` of zeros for ``n_instances`` prefill instances (the engines fill it)."""
    n = int(n_instances)
    i64 = np.int64
    return View(np.zeros(n), np.zeros(n, dtype=i64), np.zeros(n), np.zeros(n, dtype=np.bool_),
                np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
                np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=i64), np.zeros(n, dtype=i64))
