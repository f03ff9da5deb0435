"""mooncake_lab — the package behind the Mooncake course notebooks.

Data flows one way: hardware/models (specs) → roofline (costs) → traces (workload)
→ prefix_cache / sim (simulation) → experiments (tidy results) → plots / dashboards.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .exercises import check  # noqa: E402
from .plots import style  # noqa: E402

__all__ = ["check", "style", "__version__"]
