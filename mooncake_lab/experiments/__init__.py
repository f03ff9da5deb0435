"""The named experiments that notebooks, dashboards and the ``reproduce`` CLI share.

One module per lecture; each returns tidy DataFrames and registers its headline metrics and
figures with :mod:`mooncake_lab.reproduce`. Importing this package registers them all, in
lecture order.
"""
from __future__ import annotations

import importlib

LECTURE_MODULES = [
    "l00_welcome",
    "l01_roofline",
    "l02_storage",
    "l03_traces",
    "l03_cache",
    "l04_scheduling",
    "l05_prefill",
    "l06_goodput",
    "l07_overload",
    "l08_capstone",
    "l09_routers",
]

for _name in LECTURE_MODULES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as err:  # a lecture not written yet
        if err.name != f"{__name__}.{_name}":
            raise
