"""Load as SLO satisfaction (arXiv §7.1): the one place the admission loads are computed.

Both engines and :meth:`SimResult.timeseries` call these functions, so the formula lives here only.

* **Prefill load** of a request = its predicted TTFT / ``ttft_slo`` — queue on the chosen instance
  + fetch + its own prefill, all from the cost model (the Conductor's estimate is exact here).
* **Decode load** of ``batch`` requests holding ``kv_tokens`` of KV on one decode node =
  ``max(step(batch, kv_tokens) / tbt_slo, kv_tokens / capacity)``: the predicted TBT against its
  SLO, or the KV-memory occupancy, whichever binds. Which one binds depends on the preset: with the
  ``calibrated`` preset a full node (1.47 M tokens) at batch 100 steps in 84 ms (TBT binds only
  for large batches), with ``modern`` in 51 ms (memory binds first). KV tokens count each request's
  whole reservation ``input + output`` (what the decode node reserves on admission), so the step
  time is the one the batch reaches at its largest context: a conservative TBT prediction that
  both engines can compute from counts alone. With ``output_lengths="unknown"`` they count what
  the Conductor can see instead: prompt + 1 for a request not yet decoding, prompt + tokens so far
  for a running or preempted one.
* A **pool** load (``decode_load_metric="tbt_or_memory"``, the default) uses the per-node average:
  ``decode_load(c, B / D, K / D, …)`` — the load of an average instance, not the average load.
* ``decode_load_metric="tbt"`` (arXiv v3 §7.1 load = SLO satisfaction; §7.4 "the average TBT ratio
  of all decoding instances to l_tbt"): :func:`pool_tbt_load` = (1/D) Σ_d :func:`tbt_load` of
  instance d's batch b_d and KV k_d. A request whose decode instance is not known yet (under late
  binding: the candidate and those still in prefill) counts 1/D of itself (batch and KV) on every
  instance. An idle instance contributes 0; memory does not enter the load (it still bounds
  admission physically: a request waits in the decode queue until its KV fits). With every
  request spread this is the TBT term of the pool formula: ``tbt_load(c, B / D, K / D)``.
"""
from __future__ import annotations

from numba import njit

from ..jit import helper_njit
from ..roofline import cm_decode_step_time

__all__ = ["decode_load", "tbt_load", "instance_decode_load", "pool_tbt_load", "prefill_load"]


@njit(cache=True)
def tbt_load(c, batch, kv_tokens, tbt_slo):
    """Predicted TBT over its SLO (dimensionless): ``step(batch, kv_tokens) / tbt_slo``; an empty
    node (``batch`` ≤ 0) has load 0. ``batch`` may be fractional (averages, spread requests)."""
    if batch <= 0.0:
        return 0.0
    return cm_decode_step_time(c, batch, kv_tokens) / tbt_slo


@njit(cache=True)
def decode_load(c, batch, kv_tokens, capacity, tbt_slo):
    """Decode load (dimensionless, 1 = at the SLO or full): max(TBT / tbt_slo, KV / capacity).

    ``batch`` requests (may be a pool average, fractional) holding ``kv_tokens`` tokens of KV;
    ``capacity`` in tokens; ``tbt_slo`` in s/token. An empty node has load 0.
    """
    if batch <= 0.0:
        return 0.0
    tbt = tbt_load(c, batch, kv_tokens, tbt_slo)
    mem = kv_tokens / capacity
    return tbt if tbt > mem else mem


@njit(cache=True)
def instance_decode_load(c, batch, kv_tokens, capacity, tbt_slo, metric):
    """One instance's load under ``metric`` (config.DECODE_LOAD_METRICS: 0 = :func:`decode_load`,
    1 = :func:`tbt_load`)."""
    if metric == 1:
        return tbt_load(c, batch, kv_tokens, tbt_slo)
    return decode_load(c, batch, kv_tokens, capacity, tbt_slo)


@helper_njit  # takes arrays: no reference counting inside the kernel's loop (sim/kernel.py, "Speed")
def pool_tbt_load(c, batch, kv_tokens, spread_batch, spread_kv, tbt_slo, serving):
    """``decode_load_metric="tbt"``: the mean over the D serving instances of :func:`tbt_load`, instance d
    holding ``batch[d] + spread_batch / D`` requests and ``kv_tokens[d] + spread_kv / D`` tokens
    (arrays over the instance numbers; ``serving[d]`` 1.0 for an instance in the decode pool, 0.0 for one
    that is not — a node in the prefill role, rule 14 of :mod:`.reference`; ``spread_*``: the requests not
    bound to an instance yet, spread evenly)."""
    D = 0.0
    for d in range(len(batch)):
        D += serving[d]
    total = 0.0
    for d in range(len(batch)):
        if serving[d] > 0.0:
            total += tbt_load(c, batch[d] + spread_batch / D, kv_tokens[d] + spread_kv / D, tbt_slo)
    return total / D


@njit(cache=True)
def prefill_load(ttft_s, ttft_slo):
    """Prefill load (dimensionless): predicted TTFT (s) / TTFT SLO (s)."""
    return ttft_s / ttft_slo
