"""Claims of lecture 04: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`)."""
from __future__ import annotations

from . import claim  # noqa: F401
