"""Watch a run: every prefill instance, decode instance and link of a simulated run as lanes on a clock
that plays and scrubs in the browser.

``timeline(result)`` (or ``timeline(a, b)``: two runs on one clock) returns the widget; ``lanes(result)``
the arrays behind it, which :mod:`mooncake_lab.trace_export` writes as a Chrome trace.
"""
from .lanes import Lanes, Steps, lanes, steps
from .widget import Timeline, timeline

__all__ = ["timeline", "Timeline", "lanes", "Lanes", "Steps", "steps"]
