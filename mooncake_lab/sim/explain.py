"""Why a request went where it went: ``explain(result, request)``.

The simulator is run again with the same inputs and told to record, at that request's arrival, the
numbers the choice was made from (rule 2d of :mod:`.reference`): per prefill instance the Conductor's
terms (queue, prefill with the local prefix, fetch and prefill with the best prefix, the TTFT estimate)
and a router's inputs. :class:`Decision` puts them in a table and says in a sentence why the winner won.
The run is deterministic, so the re-run makes the same choices; ``explain`` checks that it did.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..validate import InputError, fail
from .config import OUTCOMES, REJECTED_AFTER_PREFILL, REJECTED_AT_ARRIVAL, REJECTED_TOO_LARGE
from .conductor_view import PROBE_ROWS
from .result import SimResult
from .routers import ROUTER_CODES, RouterInputs

__all__ = ["explain", "Decision", "TABLE_COLUMNS"]

#: The table's columns (one row per prefill instance): the Conductor's terms, units in the names.
TABLE_COLUMNS = ("queue (s)", "local prefix (tokens)", "prefill (s)", "fetch", "fetch (s)",
                 "prefill after fetch (s)", "TTFT estimate (s)", "send backlog (s)", "receive backlog (s)")
_ROW = {name: k for k, name in enumerate(PROBE_ROWS)}
#: Per router code: the score that decides and which way (sim/routers.py; routers_reference.rule_scores).
_DECIDES = {5: ("cost_blocks", "lowest"), 6: ("match_rate", "highest"), 7: ("score", "highest"),
            9: ("matched_blocks", "highest"), 10: ("matched_blocks", "highest"), 11: ("score", "lowest"),
            12: ("cost_s", "lowest")}


@dataclass(frozen=True)
class Decision:
    """What request ``request`` saw at its arrival and where it went.

    ``table``: one row per prefill instance (:data:`TABLE_COLUMNS`, plus a router's scores and, when roles
    switch, whether the node took prefill requests then); ``chosen``: the instance it went to (−1: none);
    ``conductor_pick``: the instance Algorithm 1 (``kvcentric``) would have chosen from the same numbers;
    ``why``: the reason in a sentence or two."""

    request: int
    arrival_s: float
    input_tokens: int
    policy: str
    chosen: int
    conductor_pick: int
    outcome: str
    table: pd.DataFrame
    why: str

    def __str__(self) -> str:
        head = (f"Request {self.request} (arrives {self.arrival_s:.3f} s, {self.input_tokens:,} prompt tokens), "
                f"policy {self.policy}: {self.why}")
        return head if self.table.empty else head + "\n" + self.table.to_string(float_format=lambda x: f"{x:.3f}")

    def _repr_html_(self) -> str:
        import html
        head = (f"<p><b>Request {self.request}</b> (arrives {self.arrival_s:.3f} s, {self.input_tokens:,} prompt "
                f"tokens), policy <code>{html.escape(self.policy)}</code>: {html.escape(self.why)}</p>")
        if self.table.empty:
            return head
        sty = self.table.style.format(precision=3, thousands=",")
        if self.chosen >= 0:
            sty = sty.apply(lambda r: ["font-weight: bold" if r.name == self.chosen else "" for _ in r], axis=1)
        return head + sty.to_html()


def _policy_name(config) -> str:
    p = config.prefill_policy
    return p if isinstance(p, str) else f"your function {getattr(p, '__name__', 'policy')}"


def _terms(t: pd.DataFrame, p: int) -> str:
    r = t.loc[p]
    if r["fetch"]:
        return (f"queue {r['queue (s)']:.3f} s + fetch {r['fetch (s)']:.3f} s + prefill "
                f"{r['prefill after fetch (s)']:.3f} s = {r['TTFT estimate (s)']:.3f} s")
    return (f"queue {r['queue (s)']:.3f} s + prefill {r['prefill (s)']:.3f} s with {int(r['local prefix (tokens)']):,} "
            f"cached tokens = {r['TTFT estimate (s)']:.3f} s")


def _argmin(values: np.ndarray, on: np.ndarray) -> int:
    """The first instance with the least value among those that take prefill requests (the engines' tie-break)."""
    v = np.where(on, values, np.inf)
    return int(np.argmin(v)) if on.any() else -1


def _runner_up(values: np.ndarray, on: np.ndarray, p: int) -> int:
    v = np.where(on, values, np.inf)
    v[p] = np.inf
    q = int(np.argmin(v))
    return q if np.isfinite(v[q]) else -1


def explain(result: SimResult, request: int) -> Decision:
    """Why request ``request`` (its index in ``result.trace``) went to the prefill instance it went to:
    the per-instance terms of the choice at its arrival, from the simulator's own numbers (a re-run of the
    same inputs, ≈ one run's time: tens of ms on a whole trace)."""
    from .run import simulate_probed

    where = "explain"
    if not isinstance(result, SimResult):
        raise fail("result", result, "a SimResult (what mooncake_lab.sim.simulate returns)", where)
    n = len(result.trace)
    if isinstance(request, bool) or not isinstance(request, int | np.integer) or not 0 <= request < n:
        raise fail("request", request, f"a request index, an int 0 … {n - 1}", where)
    request = int(request)
    cfg = result.config
    if cfg.coupled:
        raise InputError("explain: result is a coupled run (ClusterConfig.coupled): its nodes have no prefill "
                         "pool for a Conductor to choose from, so there is no choice to explain; run the "
                         "disaggregated cluster (n_prefill, n_decode) to see the Conductor's view")
    tr = result.trace
    a, L = float(tr.arrival_s[request]), int(tr.input_len[request])
    outcome = OUTCOMES.get(int(result.arrays["outcome"][request]), "unfinished")
    policy = _policy_name(cfg)
    base = dict(request=request, arrival_s=a, input_tokens=L, policy=policy, outcome=outcome.replace("_", " "))
    code = int(result.arrays["outcome"][request])
    if code == REJECTED_TOO_LARGE:
        cap = result.decode_kv_capacity
        return Decision(**base, chosen=-1, conductor_pick=-1, table=pd.DataFrame(),
                        why=(f"it never reached a prefill instance: its prompt and output "
                             f"({L + int(tr.output_len[request]):,} tokens) exceed a decode instance's KV capacity "
                             f"({cap:,.0f} tokens), so it was rejected as too large at arrival."))
    res = simulate_probed(tr, cfg, "numba", probe=request)
    rows = res.probe["rows"]
    if np.isnan(rows).all():  # no prefill choice: the paper's hybrid ran it on a decode node (rule 2c)
        d = int(result.arrays["decode_inst"][request])
        on = f" {d}" if d >= 0 else ""
        return Decision(**base, chosen=-1, conductor_pick=-1, table=pd.DataFrame(),
                        why=(f"no prefill instance: its prompt fits one chunk and decode instance{on} had room, "
                             f"so it ran its prefill inside a decode step (the paper's hybrid, "
                             f"ClusterConfig.inline_prefill; rule 2c)."))
    chosen, ran_on = res.probe["chosen"], int(result.arrays["prefill_inst"][request])
    if ran_on not in (-1, chosen) or int(res.arrays["prefill_inst"][request]) != ran_on:
        raise InputError(f"explain: the re-run sent request {request} to instance {chosen}, the result to "
                         f"{ran_on}; result must be what simulate(result.trace, result.config) returns, unchanged")
    on = rows[_ROW["prefill_node"]] == 1.0
    table = pd.DataFrame({col: np.where(on, rows[k], np.nan) for k, col in enumerate(TABLE_COLUMNS)})
    table["local prefix (tokens)"] = table["local prefix (tokens)"].astype("Int64")  # <NA>: not a prefill node
    table["fetch"] = table["fetch"].astype("boolean")
    if cfg.switches_roles:  # nodes are numbered across both pools; a decode node's terms are <NA>
        table["prefill node"] = on
    table.index.name = "instance"
    ttft = rows[_ROW["ttft_s"]]
    pick = _argmin(ttft, on)
    why = _why(cfg, res, table, rows, on, chosen, pick, request)
    if code == REJECTED_AT_ARRIVAL:
        why += (f" Admission control ({cfg.admission!r}) then rejected it at arrival, so it ran nowhere "
                f"(the table is what it would have met).")
    elif code == REJECTED_AFTER_PREFILL:
        why += f" Admission control ({cfg.admission!r}) rejected it after its prefill."
    return Decision(**base, chosen=chosen, conductor_pick=pick, table=table, why=why)


def _why(cfg, res, t, rows, on, chosen, pick, i) -> str:
    """The sentence: the policy's own rule with the winner's terms, and Algorithm 1's pick beside it."""
    name = cfg.prefill_policy
    best = res.probe["best_blocks"] * res.trace.block_tokens
    prefix = (f"The longest cached prefix, ≈ {best:,} tokens, is on instance {res.probe['holder']}. "
              if res.probe["holder"] >= 0 else "No instance holds any of its prefix. ")
    beside = "" if pick == chosen or pick < 0 else (
        f" Algorithm 1 (kvcentric) would have picked instance {pick}: {_terms(t, pick)}.")
    if name == "kvcentric":
        q = _runner_up(rows[_ROW["ttft_s"]], on, chosen)
        second = "" if q < 0 else f"; the next best, instance {q}: {_terms(t, q)}"
        return (prefix + f"kvcentric takes the least TTFT estimate: instance {chosen}, {_terms(t, chosen)}{second}.")
    if name == "cache_aware":
        est = rows[_ROW["wait_s"]] + rows[_ROW["prefill_s"]]
        return (prefix + f"cache_aware takes the least queue + prefill with the instance's own prefix, no fetch: "
                f"instance {chosen}, {est[chosen]:.3f} s." + beside)
    if name == "load":
        return (prefix + f"load takes the shortest queue: instance {chosen}, {rows[_ROW['wait_s']][chosen]:.3f} s."
                + beside)
    if name == "random":
        return prefix + f"random drew instance {chosen} (one seeded uniform draw per request)." + beside
    if callable(name):
        return prefix + f"Your function returned instance {chosen}." + beside
    return prefix + _router_why(cfg, res, t, rows, chosen, i) + beside


def _router_why(cfg, res, t, rows, chosen, i) -> str:
    """A router's rule: its scores (added to the table) from the inputs the run filled (rule 2a)."""
    from .routers_reference import rule_scores

    rc = cfg.resolve()
    rp = rc.router
    ints = {"matched_blocks", "tree_blocks", "inflight", "queued", "recent_requests"}
    ri = RouterInputs(*[rows[_ROW[f]].astype(np.int64 if f in ints else np.float64) for f in RouterInputs._fields])
    n_blocks = len(res.trace.blocks_of(i))
    scores = rule_scores(rp, ri, int(res.trace.input_len[i]), n_blocks, int(res.trace.block_tokens),
                         rc.decode_kv_capacity * rc.cpp_group_size)
    for k, v in scores.items():
        t[k] = v
    router = ROUTER_CODES[rp.code]
    key, way = _DECIDES.get(rp.code, (None, ""))  # AIBrix: its PD router (explain runs no coupled cluster)
    if key in scores:
        return (f"{router}'s rule sent it to instance {chosen}: its {key} = {scores[key][chosen]:.3g} "
                f"({way} wins; ties and thresholds as sim/routers.py says).")
    return f"{router}'s rule sent it to instance {chosen} (round robin: its turn)."
