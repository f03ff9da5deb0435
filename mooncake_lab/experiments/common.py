"""Helpers every simulation lecture shares: resolving a trace by name, and one memoised run.

A notebook cell, a dashboard and the ``reproduce`` CLI that ask the same question (trace, replay
speed, cluster config) share one simulation instead of each running it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from .. import sim
from ..traces import Trace, as_trace

__all__ = ["as_trace", "simulate_at_speed", "simulate_all", "memo_key", "Prefetch", "release_memory"]

#: Memoised runs, least recently used first, kept up to _MEMO_BYTES of per-request arrays in total
#: (≈ 1.9 MB a run on the conversation trace, 3.7 MB on toolagent-like: ≈ 100 runs).
_RUNS: "OrderedDict[tuple, tuple]" = OrderedDict()
_MEMO_BYTES = 256 * 2**20
#: Bytes of evicted runs after which the freed memory is handed back to the OS (:func:`release_memory`).
_TRIM_BYTES = 32 * 2**20
_evicted = 0       # bytes evicted since the last release_memory
_PENDING: dict = {}  # memo key → Future of a run some thread is computing now
_LOCK = threading.Lock()  # guards _RUNS and _PENDING (simulate_all may run in several threads)


def simulate_at_speed(trace: Trace | str, speed: float, config: sim.ClusterConfig) -> sim.SimResult:
    """``sim.simulate`` of ``trace`` replayed at ``speed`` (×) on ``config``, memoised per process."""
    return simulate_all([(trace, speed, config)])[0]


def memo_key(tr: Trace, speed: float, config: sim.ClusterConfig) -> tuple:
    """The memo key of one run (the trace by identity: an entry keeps its trace, so the id stays unique)."""
    return (id(tr), float(speed), tuple(sorted(config.as_dict().items())))


def _remember(key: tuple, tr: Trace, res: sim.SimResult) -> bool:
    """Memoise ``res`` (under _LOCK), dropping the least recently used runs beyond _MEMO_BYTES; True
    when _TRIM_BYTES were evicted since memory was last released."""
    global _evicted
    _RUNS[key] = (tr, res, sum(a.nbytes for a in res.arrays.values()))  # the trace keeps its id unique
    total = sum(entry[2] for entry in _RUNS.values())
    while total > _MEMO_BYTES and len(_RUNS) > 1:
        dropped = _RUNS.popitem(last=False)[1][2]
        total -= dropped
        _evicted += dropped
    if _evicted >= _TRIM_BYTES:
        _evicted = 0
        return True
    return False


def _libc():
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
        return lib if lib is not None and hasattr(lib, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc() if os.name == "posix" else None


def release_memory() -> bool:
    """Hand the memory freed by evicted runs back to the OS (glibc's ``malloc_trim``; elsewhere a
    no-op returning False). Why: a run's per-request arrays (≈ 0.1–0.4 MB each) come from the C
    heap of whichever thread ran it, and freed ones leave holes that glibc keeps; without this a
    long session's resident memory grows far past the memo's cap (``benchmarks/bench_dashboard_memory.py``,
    1,000 moves of the lecture-07 comparison dashboard: 278 → 977 MB and still growing without this,
    278 → 675 MB and flat from move 100 on with it).
    Called after every _TRIM_BYTES of evictions (≈ 10 runs; ≈ 2 ms each time)."""
    if _LIBC is None:
        return False
    _LIBC.malloc_trim(0)
    return True


def simulate_all(jobs, workers: int | None = None) -> list:
    """:func:`simulate_at_speed` of each ``(trace, speed, config)`` in ``jobs``, in order. The runs
    not memoised go in parallel threads (at most ``workers``, default one per core; the kernels
    release the GIL); a run another thread is already computing (e.g. a :class:`Prefetch`) is waited
    for, not repeated. Same results as one by one."""
    checked = []
    for trace, speed, config in jobs:  # all checked before any is started
        if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
            raise ValueError(f"speed must be a replay factor > 0 (×), got {speed!r}")
        tr = as_trace(trace)
        checked.append((tr, float(speed), config))
    todo: dict = {}    # memo key → (trace, speed, config, positions in jobs): run here
    waits: dict = {}   # memo key → (Future, positions in jobs): run by another thread
    out: list = [None] * len(checked)
    with _LOCK:
        for i, (tr, speed, config) in enumerate(checked):
            key = memo_key(tr, speed, config)
            hit = _RUNS.get(key)
            if hit is not None and hit[0] is tr:
                _RUNS.move_to_end(key)
                out[i] = hit[1]
            elif key in todo:
                todo[key][3].append(i)
            elif key in _PENDING:
                waits.setdefault(key, (_PENDING[key], []))[1].append(i)
            else:
                _PENDING[key] = Future()
                todo[key] = (tr, speed, config, [i])

    def one(item):
        key, (tr, speed, config, where) = item
        res = sim.simulate(tr.replay(speed) if speed != 1 else tr, config)
        with _LOCK:
            trim = _remember(key, tr, res)
            _PENDING.pop(key).set_result(res)
        for k in where:
            out[k] = res
        if trim:
            release_memory()

    try:
        n = min(len(todo), workers or os.cpu_count() or 1)
        if n <= 1:
            for item in todo.items():
                one(item)
        elif todo:
            with ThreadPoolExecutor(n) as pool:
                list(pool.map(one, todo.items()))
    except BaseException as err:  # waiters on the runs not finished here get the error too
        with _LOCK:
            for key in todo:
                fut = _PENDING.pop(key, None)
                if fut is not None:
                    fut.set_exception(err)
        raise
    for fut, where in waits.values():
        res = fut.result()
        for k in where:
            out[k] = res
    return out


class Prefetch:
    """Runs :func:`simulate_all` on ``jobs`` (a list of ``(trace, speed, config)`` — or of functions
    without arguments, e.g. loading a trace — or a function returning such a list, called in the
    background), one at a time, in a background thread at the lowest
    CPU priority (where the OS allows), so that later moves of a dashboard find them memoised. A
    move that needs a run in progress waits for it instead of repeating it; :meth:`cancel` stops
    before the next job; :meth:`wait` blocks until all are done (tests, benchmarks). A job that
    fails is skipped (its error kept in :attr:`errors`): the move that needs it raises it itself."""

    def __init__(self, jobs):
        self._jobs = jobs
        self.jobs: list = []
        self.n_done = 0
        self.errors: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="mooncake-lab prefetch", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:  # Linux: a thread is a task with its own nice value; elsewhere this is a no-op
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):
            pass
        try:
            self.jobs = list(self._jobs() if callable(self._jobs) else self._jobs)
        except Exception as err:  # noqa: BLE001 (kept for the caller; nothing to do ahead)
            self.errors.append(err)
            return
        for job in self.jobs:
            if self._stop.is_set():
                return
            try:
                job() if callable(job) else simulate_all([job], workers=1)
            except Exception as err:  # noqa: BLE001
                self.errors.append(err)
            self.n_done += 1

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def cancel(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every job ran (or ``timeout`` s passed); True when done."""
        self._thread.join(timeout)
        return self.done
