"""Speed of student prefill policies (prints numbers and ratios; no assertions).

    MOONCAKE_LAB_DATA=/path/to/mooncake_traces python benchmarks/bench_student_policy.py [--cold]

* per run, 8P+8D with caches: the built-in ``kvcentric`` vs the same decisions made by a student's
  ``argmin(view.ttft_s)`` compiled by numba, and run as plain Python (a policy numba cannot compile);
* what a student waits for: compiling a new policy function (in-process), and a fresh process with
  a warm numba cache (import + compile the policy + first simulation of the conversation trace);
* ``--cold``: the same fresh process with an empty numba cache (the once-per-install compile of
  the kernel variant, plus the built-in kernel), in a temporary NUMBA_CACHE_DIR.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

from mooncake_lab import sim
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import load_trace_or_synthetic

_LOG: dict = {}


def least_ttft(req, view):
    return int(np.argmin(view.ttft_s))


def least_ttft_python(req, view):
    _LOG[0] = req.index  # a dict: numba cannot compile this one, it runs as Python
    return int(np.argmin(view.ttft_s))


def best_of(fn, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


FRESH = """
import time; t = time.perf_counter()
import numpy as np
from mooncake_lab import sim
from mooncake_lab.traces import load_trace_or_synthetic
tr = load_trace_or_synthetic("conversation", download=False)
t_import = time.perf_counter() - t
def least_ttft(req, view):
    return int(np.argmin(view.ttft_s))
t1 = time.perf_counter(); pol = sim.compile_policy(least_ttft); t_pol = time.perf_counter() - t1
t1 = time.perf_counter(); sim.simulate(tr, sim.ClusterConfig(prefill_policy=least_ttft)); t_run = time.perf_counter() - t1
print(t_import, t_pol, t_run, time.perf_counter() - t)
"""


def fresh_process(env) -> list[float]:
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", FRESH], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(r.stderr[-1500:])
        return [float("nan")] * 4
    return [float(x) for x in r.stdout.split()]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="also time a fresh process with an empty numba cache")
    args = ap.parse_args(argv)

    conv = load_trace_or_synthetic("conversation", download=False)
    tool = synthetic_trace("toolagent-like")
    cfg = sim.ClusterConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)
        for p in ("kvcentric", least_ttft, least_ttft_python):  # compile / load every kernel variant
            sim.simulate(conv.head(50), cfg.replace(prefill_policy=p))
    print(f"{'trace':34s} {'policy':26s} {'ms/run':>8s} {'vs kvcentric':>13s} {'µs/request extra':>17s}")
    for tr in (conv, tool):
        label = f"{tr.name} ({len(tr):,})"
        base = best_of(lambda: sim.simulate(tr, cfg), args.repeat)
        print(f"{label:34s} {'kvcentric (built-in)':26s} {base * 1e3:8.1f} {1.0:13.2f} {'-':>17s}")
        for name, p in (("argmin ttft_s, numba", least_ttft), ("argmin ttft_s, python", least_ttft_python)):
            c = cfg.replace(prefill_policy=p)
            t = best_of(lambda: sim.simulate(tr, c), args.repeat if "numba" in name else 2)
            same = (sim.simulate(tr, c).arrays["prefill_inst"] == sim.simulate(tr, cfg).arrays["prefill_inst"]).all()
            print(f"{label:34s} {name:26s} {t * 1e3:8.1f} {t / base:13.2f} {(t - base) / len(tr) * 1e6:17.2f}"
                  f"{'' if same else '  (decisions differ!)'}")

    ns = {"np": np}
    t = time.perf_counter()
    for k in range(3):  # a new function object each time, as when a student re-runs its cell
        exec(f"def policy_{k}(req, view):\n    return int(np.argmin(view.ttft_s + {k} * view.wait_s))", ns)
        sim.compile_policy(ns[f"policy_{k}"])
    print(f"\ncompiling a new policy function: {(time.perf_counter() - t) / 3:.2f} s")
    imp, pol, run, tot = fresh_process(dict(os.environ))
    print(f"fresh process, warm numba cache: import + trace {imp:.2f} s, compile policy {pol:.2f} s, "
          f"first simulation {run:.2f} s, total {tot:.2f} s")
    if args.cold:
        with tempfile.TemporaryDirectory() as d:
            imp, pol, run, tot = fresh_process(dict(os.environ, NUMBA_CACHE_DIR=d))
        print(f"fresh process, EMPTY numba cache: import + trace {imp:.2f} s (compiles the built-in kernel's "
              f"helpers), compile policy {pol:.2f} s, first simulation {run:.2f} s (the kernel variant), "
              f"total {tot:.2f} s")


if __name__ == "__main__":
    main()
