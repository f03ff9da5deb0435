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
* A **pool** load uses the per-node average: ``decode_load(c, B / D, K / D, …)``.
"""
from __future__ import annotations

from numba import njit

from ..roofline import cm_decode_step_time

__all__ = ["decode_load", "prefill_load"]


@njit(cache=True)
def decode_load(c, batch, kv_tokens, capacity, tbt_slo):
    """Decode load (dimensionless, 1 = at the SLO or full): max(TBT / tbt_slo, KV / capacity).

    ``batch`` requests (may be a pool average, fractional) holding ``kv_tokens`` tokens of KV;
    ``capacity`` in tokens; ``tbt_slo`` in s/token. An empty node has load 0.
    """
    if batch <= 0.0:
        return 0.0
    tbt = cm_decode_step_time(c, batch, kv_tokens) / tbt_slo
    mem = kv_tokens / capacity
    return tbt if tbt > mem else mem


@njit(cache=True)
def prefill_load(ttft_s, ttft_slo):
    """Prefill load (dimensionless): predicted TTFT (s) / TTFT SLO (s)."""
    return ttft_s / ttft_slo
