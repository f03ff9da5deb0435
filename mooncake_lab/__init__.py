"""mooncake_lab — the package behind the Mooncake course notebooks.

Data flows one way: hardware/models (specs) → roofline (costs) → traces (workload)
→ prefix_cache / sim (simulation) → experiments (tidy results) → plots / dashboards.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .kernel_cache import drop_stale as _drop_stale_kernels  # noqa: E402

_drop_stale_kernels()  # before any kernel loads: cached machine code must match today's source

from .exercises import check  # noqa: E402


def style(name: str = "notebook") -> None:
    """Switch every later figure to ``"notebook"`` (default) or ``"projector"`` (big text, thick lines).

    (Imported lazily so that ``import mooncake_lab`` does not load matplotlib for headless use.)
    """
    from .plots import style as _style

    _style(name)

__all__ = ["check", "style", "__version__"]
