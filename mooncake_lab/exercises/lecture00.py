"""Lecture 00 exercises (answers computed from the package)."""
from __future__ import annotations

from .. import roofline
from ..hardware import A800_NODE
from ..models import get_model
from . import Exercise, exercise

exercise(Exercise(
    "00.prefill_32k", "Ideal-preset prefill time of a 32,000-token LLaMA2-70B prompt on one 8×A800 node, in seconds.",
    answer=lambda: roofline.prefill_time(get_model("llama2-70b"), A800_NODE, 32_000, preset="ideal"),
    unit="s", rel_tol=0.05,
    hint="`roofline.prefill_time(models.get_model('llama2-70b'), hardware.A800_NODE, 32_000)`",
    why="About 5.7 PFLOP (4.4 in the matmuls, 1.3 in attention) at 2.5 PFLOP/s of peak: prefill is compute-bound, and attention makes it superlinear."))


def _stall_ratio() -> float:
    from ..experiments.l00_welcome import coupled_stall
    df = coupled_stall([32_000])
    return float(df["stalled_gap_s"].iloc[0] / 0.1)


exercise(Exercise(
    "00.stall_ratio", "Gap before the next token during a 32k co-located prefill, as a multiple of the 0.1 s TBT SLO.",
    answer=_stall_ratio, unit="× SLO", rel_tol=0.05,
    hint="the stalled gap of the 32,000-token row of `stall` over the SLO: "
         "`stall.set_index('prompt_tokens').loc[32_000, 'stalled_gap_s'] / 0.1`",
    why="The whole prefill sits between two decode steps of every request in the batch."))


def _level() -> int:
    from ..experiments.l00_welcome import MOONCAKE_LEVEL
    return MOONCAKE_LEVEL


exercise(Exercise(
    "00.level", "Level of P/D disaggregation of Mooncake (prefill and decode on separate same-type nodes, RDMA).",
    answer=_level, unit="", rel_tol=0.0,
    hint="−1 fused, 0 same GPUs, 1 same node, 2 separate nodes, 3 heterogeneous hardware",
    why="Separate nodes of the same GPU type on one RDMA network: level 2."))
