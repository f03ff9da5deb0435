"""Student prefill policies: write ``policy(req, view) -> int``, simulate it, rank it.

::

    import numpy as np
    from mooncake_lab import sim

    def least_ttft(req, view):
        \"\"\"Send each request where its estimated TTFT is smallest.\"\"\"
        return int(np.argmin(view.ttft_s))

    res = sim.simulate(trace, sim.ClusterConfig(prefill_policy=least_ttft))
    sim.leaderboard(trace, least_ttft)       # yours vs random / load / cache_aware / kvcentric

**The contract.** At every arrival the Conductor calls ``policy(req, view)`` and sends the request
to the prefill instance it returns: an ``int`` in 0 … n − 1 (n = ``len(view.wait_s)``, the prefill
instances; CPP groups with ``cpp_group_size`` > 1). ``req`` and ``view`` are named tuples of
numbers and per-instance arrays, documented in :mod:`.conductor_view` (wait, local prefix,
prefill time, fetch decision, estimated TTFT, …). The policy chooses the instance p; the
Conductor then fetches the pool's best prefix to p if ``view.fetch[p]`` is True — pre-set by
Algorithm 1's rule, and the one field the policy may overwrite (veto or force the fetch). The
decode instance is the least loaded one, and ``admission`` applies as usual. So
``np.argmin(view.ttft_s)`` *is* ``"kvcentric"``; with ``view.fetch[:] = False`` first,
``np.argmin(view.wait_s)`` is ``"load"`` and ``np.argmin(view.wait_s + view.prefill_s)`` is
``"cache_aware"``. With ``network_contention`` the view also shows each instance's link backlog
(``view.send_backlog_s``, ``view.recv_backlog_s``: seconds of transfers already reserved on its
send / receive links, :mod:`.links`), and ``view.fetch_s`` includes the wait for those links, so a
policy can steer away from a hot holder whose send link is congested. The load the routers of
:mod:`.routers` see is there too (``view.pending_tokens``, ``live_kv_tokens``, ``kv_util``,
``inflight``, ``queued_requests``), so e.g. ``np.argmin(view.inflight)`` is a least-requests gateway
(without the fetch unless ``view.fetch[:] = False``).

**Compiled when it can be.** The function is compiled with numba (``boundscheck=True``, 0.3–1 s
once per function) when it only uses numbers, arrays and numpy, and the simulator calls it as a
first-class function from a kernel variant compiled once per machine and cached on disk (that
first time: the usual kernel compile, 16–50 s). A compiled policy adds ~1–4 µs per request to a
run (the view costs more than ``kvcentric``'s own estimate: 1.1–1.3× its run time). Anything
else (dicts, prints, classes, state kept between calls) still works: it then runs as plain
Python called from the compiled simulator at each arrival, with a :class:`PolicyCompileWarning`
saying why; that adds ~10–25 µs per request (≈ 0.3 s for 23,608 requests). Numbers measured by
``benchmarks/bench_student_policy.py`` on the 2-core course VM. numba freezes the global
*numbers* a policy reads when it compiles it; they are part of the memo key here, so changing
one and re-running recompiles. ``engine="reference"`` calls the policy in plain Python too.

**Errors** name the request and the value. When the config is built: not a function →
``ValueError``, a function that does not take two arguments, an ``async def`` or a generator
function → ``TypeError``. While simulating (the run stops at the first bad request), the same in
both engines: a return value that is not an integer — a float even if whole (``1.0``), NaN, inf,
``None``, a bool (``True`` / ``np.True_``: a switch, not an index), an array, a coroutine, a
generator — → ``TypeError`` (:class:`PolicyReturnTypeError`); an integer (``int`` or any numpy
integer) outside 0 … n − 1 (negative, ``2**70``, ``np.uint64(2**64 - 1)``), or an exception inside
the policy (``int(nan)`` raises ``ValueError`` in both engines: the compiled policy's conversions are
made as strict as Python's, :mod:`.policy_guard`) → ``ValueError`` (:class:`PolicyChoiceError`, the
original exception chained). Integer arithmetic that overflows 64 bits wraps in a compiled policy
but not in Python: a policy using an integer constant beyond 64 bits runs as plain Python.

**Stopping a run.** Ctrl-C (Jupyter's "Interrupt kernel") stops any run, even a compiled policy
stuck in ``while True``: its loops are rewritten to check a stop flag (:mod:`.policy_guard`; an
atomic load per iteration, nothing measurable), and its kernel runs in a worker thread while the
caller waits in short, interruptible waits. The run raises ``KeyboardInterrupt`` naming the request
being decided, and no thread keeps running. (A compiled ``@njit`` helper whose source cannot be read
is the one thing that cannot be stopped; the error then says so.)

**Randomness.** A policy that calls ``np.random`` or ``random`` makes other choices on every run:
results are not reproducible, two engines cannot be compared and a leaderboard changes when re-run.
It still runs, with a :class:`PolicyRandomWarning`; use ``req.uniform`` (the request's own U[0, 1)
draw, seeded by ``ClusterConfig.seed``) or ``np.random.default_rng(req.index)`` instead.

**Threads.** Each run keeps its policy to itself (thread-local), so runs in parallel threads, each
with its own plain-Python policy, never call each other's.
"""
from __future__ import annotations

import dis
import inspect
import numbers
import random as _random_module
import threading
import time
import types as pytypes
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numba
import numpy as np
import pandas as pd
from numba import njit, objmode, types

from ..validate import InputError, choice, describe, fail
from .conductor_view import POLICY_SIGNATURE, REQUEST_TYPE, VIEW_TYPE
from .policy_guard import PolicyInterrupted, instrument, new_stop_flag, uninstrumented_risk

__all__ = ["StudentPolicy", "compile_policy", "leaderboard", "BASELINES", "PolicyCompileWarning",
           "PolicyRandomWarning", "PolicyReturnTypeError", "PolicyChoiceError", "check_policy_signature",
           "LEADERBOARD_SORT_BY"]

#: The built-in policies a leaderboard compares against by default.
BASELINES = ("random", "load", "cache_aware", "kvcentric")
#: Leaderboard columns (from :meth:`SimResult.summary`) and whether larger is better.
LEADERBOARD_METRICS = {"ttft_mean_s": False, "ttft_p90_s": False, "ttft_p99_s": False,
                       "slo_attainment": True, "hit_ratio": True, "fetched_ratio": True, "completed": True}
#: The one leaderboard order (``sim.leaderboard`` and lecture 08's): SLO attainment, the paper's
#: measure of a scheduler (arXiv §8: requests served within both SLOs), best first; ties broken by
#: mean TTFT (lower first).
LEADERBOARD_SORT_BY = "slo_attainment"
_TIE_BREAK = "ttft_mean_s"
_PYTHON_COST = "≈ 10–25 µs per request"  # measured by benchmarks/bench_student_policy.py (2-core course VM)
#: After Ctrl-C, how long the caller waits for a compiled policy to reach its next stop check, s.
STOP_WAIT_S = 5.0


class PolicyCompileWarning(UserWarning):
    """A student policy could not be compiled by numba and runs as plain Python (slower, still exact)."""


class PolicyRandomWarning(UserWarning):
    """A student policy draws random numbers of its own: its runs are not reproducible."""


class PolicyReturnTypeError(TypeError):
    """A student policy returned something that is not an integer instance index."""


class PolicyChoiceError(ValueError):
    """A student policy chose an instance that does not exist, or raised an exception."""


def check_policy_signature(fn, where: str = "policy") -> None:
    """``TypeError`` unless ``fn`` is callable with exactly two positional arguments (req, view)."""
    if not callable(fn):
        raise TypeError(f"{where}: expected a function policy(req, view) -> int, got {fn!r} "
                        f"({type(fn).__name__})")
    py = getattr(fn, "py_func", fn)
    for test, what in ((inspect.iscoroutinefunction, "an async def (it returns a coroutine)"),
                       (inspect.isasyncgenfunction, "an async generator function"),
                       (inspect.isgeneratorfunction, "a generator function (it yields)")):
        if test(py):
            raise TypeError(f"{where}: {_name(fn)} is {what}; a policy is a plain def that returns a "
                            f"prefill instance index, e.g. def {_name(fn)}(req, view): "
                            f"return int(np.argmin(view.ttft_s))")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let the first call tell
        return
    try:
        sig.bind(None, None)
    except TypeError:
        raise TypeError(f"{where}: {_name(fn)}{sig} must take two arguments (req, view) and return "
                        f"a prefill instance index, e.g. def {_name(fn)}(req, view): "
                        f"return int(np.argmin(view.ttft_s))") from None


def _name(fn) -> str:
    return getattr(getattr(fn, "py_func", fn), "__name__", type(fn).__name__)


def _request_text(index, arrival_s, input_tokens) -> str:
    return f"request {int(index)} (arrival {float(arrival_s):.3f} s, {int(input_tokens):,} input tokens)"


@dataclass(eq=False)
class StudentPolicy:
    """A student's function prepared for the simulator.

    ``mode`` is ``"numba"`` (compiled, called natively) or ``"python"`` (called from the kernel
    through numba's object mode); ``reason`` says why it is not compiled; ``compile_s`` seconds.
    """

    function: object
    name: str
    mode: str
    compiled: object = None
    reason: str = ""
    compile_s: float = 0.0
    stop_flag: object = None   # compiled and rewritten: the flag its loops check (policy_guard)
    _users: list = field(default_factory=lambda: [0, threading.Lock()], repr=False)

    def choose(self, req, view) -> int:
        """Call the policy in Python and check its answer (the reference engine and python mode)."""
        v = self.function(req, view)
        n = len(view.wait_s)
        if type(v) is not int and (isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral)):
            raise PolicyReturnTypeError(
                f"prefill policy {self.name!r} returned {v!r} ({type(v).__name__}) for "
                f"{_request_text(req.index, req.arrival_s, req.input_tokens)}; it must return an int, the "
                f"index of a prefill instance 0 … {n - 1} (e.g. int(np.argmin(view.ttft_s)))")
        if not 0 <= v < n:
            raise self.range_error(req.index, req.arrival_s, req.input_tokens, v, n)
        return int(v)

    def range_error(self, index, arrival_s, input_tokens, value, n) -> PolicyChoiceError:
        return PolicyChoiceError(f"prefill policy {self.name!r} chose instance {value} for "
                                 f"{_request_text(index, arrival_s, input_tokens)}; there are {n} "
                                 f"prefill instances: return 0 … {n - 1}")

    @contextmanager
    def errors(self, diag, trace, view):
        """Run an engine on ``view`` (its arrays); turn what the policy did wrong (``diag[4:7]``,
        exceptions) into errors naming the request and the value."""
        prev = getattr(_LOCAL, "active", None)
        _LOCAL.active = (self, view)
        try:
            yield
        except (PolicyReturnTypeError, PolicyChoiceError) as e:
            raise type(e)(str(e)) from None  # already names the request and the value
        except (KeyboardInterrupt, PolicyInterrupted) as e:
            i = int(diag[4])
            at = _request_text(i, trace.arrival_s[i], trace.input_len[i]) if len(trace) else "no request"
            raise KeyboardInterrupt(f"simulation interrupted while prefill policy {self.name!r} was choosing "
                                    f"an instance for {at}{e.args[0] if e.args else ''}") from None
        except Exception as e:
            i = int(diag[4])
            raise PolicyChoiceError(
                f"prefill policy {self.name!r} raised {type(e).__name__}: {e} while choosing an instance "
                f"for {_request_text(i, trace.arrival_s[i], trace.input_len[i])}") from e
        finally:
            _LOCAL.active = prev
        if diag[5]:
            i = int(diag[4])
            raise self.range_error(i, trace.arrival_s[i], trace.input_len[i], int(diag[6]),
                                   len(view.wait_s)) from None

    def kernel_function(self):
        """What the kernel calls: the compiled policy, or the object-mode trampoline to Python."""
        return self.compiled if self.mode == "numba" else _python_trampoline()

    def run_kernel(self, kernel, args) -> None:
        """``kernel(*args)``, interruptible by Ctrl-C (module doc, "Stopping a run"): a compiled,
        rewritten policy's kernel runs in a worker thread; the calling (main) thread waits in short
        waits, and on ``KeyboardInterrupt`` raises the policy's stop flag and waits for the worker
        to stop (≤ :data:`STOP_WAIT_S`). Python-mode policies and runs outside the main thread (no
        signal reaches them) run in the calling thread."""
        if self.stop_flag is None or threading.current_thread() is not threading.main_thread():
            kernel(*args)
            return
        users = self._users
        with users[1]:
            if users[0] == 0:
                self.stop_flag[0] = 0
            users[0] += 1
        box: dict = {}

        def work():
            try:
                kernel(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e

        worker = threading.Thread(target=work, name=f"mooncake-lab policy {self.name}", daemon=True)
        try:
            worker.start()
            try:
                while worker.is_alive():
                    worker.join(0.1)
            except KeyboardInterrupt:
                self.stop_flag[0] = 1
                worker.join(STOP_WAIT_S)
                if worker.is_alive():
                    raise KeyboardInterrupt(
                        f" (its thread did not stop within {STOP_WAIT_S:g} s: it runs compiled code the "
                        f"simulator could not rewrite, e.g. an @njit helper without readable source; "
                        f"restart the kernel to stop it)") from None
                raise KeyboardInterrupt() from None
        finally:
            with users[1]:
                users[0] -= 1
        if "error" in box:
            e = box["error"]
            raise (KeyboardInterrupt() if isinstance(e, PolicyInterrupted) else e)


# ------------------------------------------------------------------ python mode: object-mode trampoline
_LOCAL = threading.local()  # .active: (StudentPolicy, View) of this thread's run (set by StudentPolicy.errors)


def _call_active(req):
    policy, view = _LOCAL.active
    return policy.choose(req, view)


def _trampoline(req, view):
    # only req crosses into Python: the kernel fills the arrays of the View the Python side holds
    with objmode(pi="int64"):
        pi = _call_active(req)
    return pi


_TRAMPOLINE: list = []


def _python_trampoline():
    """A numba function of the policy signature that calls the active policy in Python (compiled once, cached)."""
    if not _TRAMPOLINE:
        _TRAMPOLINE.append(njit(POLICY_SIGNATURE, cache=True)(_trampoline))
    return _TRAMPOLINE[0]


# ------------------------------------------------------------------ compiling
_MEMO: OrderedDict = OrderedDict()
_MEMO_MAX = 64


def _frozen_numbers(fn) -> tuple:
    """The global and closure numbers/strings ``fn`` reads (numba freezes them): part of the memo key."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    simple = (numbers.Number, str, bool)
    g = getattr(fn, "__globals__", {})
    out = [(k, g[k]) for k in code.co_names if k in g and isinstance(g[k], simple)]
    for k, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(v, simple):
            out.append((k, v))
    return tuple(out)


def _short_reason(e: Exception) -> str:
    """The informative line(s) of a numba compile error."""
    skip = ("Failed in", "During:", "File ", "^", "Use of unsupported", "This error may have been")
    lines = [ln.strip() for ln in str(e).splitlines()]
    keep = [ln for ln in lines if ln and not ln.startswith(skip) and not set(ln) <= set("^ ")]
    text = " ".join(keep[:2]) if keep else type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _compile(target):
    """``(reason, compiled)``: ``target`` compiled for the policy signature, or why not."""
    args = (REQUEST_TYPE, VIEW_TYPE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numba.NumbaWarning)
            disp = njit(boundscheck=True)(target)
            disp.compile(args)
            rt = disp.overloads[args].signature.return_type
            if rt == types.int64:
                return "", disp
            if isinstance(rt, types.Integer) and (rt.signed or rt.bitwidth < 64):
                return "", njit(POLICY_SIGNATURE, boundscheck=True)(target)
            return (f"numba infers it returns {rt}, not a 64-bit signed integer (Python mode checks every "
                    f"returned value and names the first bad one)"), None
    except Exception as e:  # numba's TypingError, UnsupportedError, ... : run it as Python
        return _short_reason(e), None


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            yield from _codes(c)


def _big_integer(py):
    """An integer constant of ``py`` outside int64 (e.g. ``2**70``, folded by Python), or None."""
    for code in _codes(py.__code__):
        for c in code.co_consts:
            if isinstance(c, int) and not isinstance(c, bool) and not -2**63 <= c < 2**63:
                return c
    return None


_SEEDED = {"default_rng", "Generator", "SeedSequence", "PCG64", "Philox", "Random"}  # given a seed: fine


def _random_use(py) -> str:
    """How ``py`` reaches an unseeded random generator (``np.random.rand``, ``random.random``, a function
    imported from them), or "". ``np.random.default_rng(seed)`` / ``random.Random(seed)`` are fine."""
    code = getattr(py, "__code__", None)
    if code is None:
        return ""
    g = getattr(py, "__globals__", {})
    for c in _codes(code):
        ins = list(dis.get_instructions(c))
        attr = [x.argval if isinstance(x.argval, str) else None for x in ins] + [None, None]
        for k, x in enumerate(ins):
            if x.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
                continue
            v = g.get(x.argval)
            if v is _random_module or v is np.random:
                if attr[k + 1] not in _SEEDED:
                    return f"{x.argval}.{attr[k + 1]}"
            elif isinstance(v, pytypes.ModuleType) and getattr(v, "random", None) is np.random:
                if attr[k + 1] == "random" and attr[k + 2] not in _SEEDED:
                    return f"{x.argval}.random.{attr[k + 2]}"
            elif callable(v) and x.argval not in _SEEDED:
                mod = getattr(v, "__module__", None) or ""
                if mod == "random" or mod.startswith("numpy.random"):
                    return f"{x.argval}()"
    return ""


def compile_policy(fn) -> StudentPolicy:
    """Prepare ``fn(req, view) -> int`` for the simulator: numba-compiled if possible, else Python
    (with a :class:`PolicyCompileWarning` saying why). Memoised per function and the global
    numbers it reads. An already ``@njit``-decorated function is compiled from its Python source."""
    if isinstance(fn, StudentPolicy):
        return fn
    check_policy_signature(fn)
    py = getattr(fn, "py_func", fn)
    try:
        key = (py, _frozen_numbers(py))
        hit = _MEMO.get(key)
    except TypeError:  # unhashable callable object
        key, hit = None, None
    if hit is not None:
        _MEMO.move_to_end(key)
        return hit
    t0 = time.perf_counter()
    name = _name(fn)
    compiled, reason, flag = None, "", None
    if numba.config.DISABLE_JIT:
        reason = "NUMBA_DISABLE_JIT is set"
    elif not inspect.isfunction(py):
        reason = f"numba compiles plain functions, not {type(py).__name__} objects"
    elif _big_integer(py) is not None:
        reason = (f"it uses the integer {describe(_big_integer(py))}, beyond the 64 bits of compiled code "
                  f"(numba would wrap it; Python keeps it exact)")
    else:
        flag, check = new_stop_flag()
        target = instrument(py, check)
        if target is None:  # no readable source: compile it as it is only if it cannot spin
            risk = uninstrumented_risk(py)
            if risk:
                reason = (f"its source cannot be read (made by exec, or a lambda sharing its line) and {risk}: "
                          f"compiled unchanged it could not be interrupted nor convert NaN like Python; "
                          f"write it as a def in a cell or file to compile it")
            target, flag = py, None
        big = getattr(target, "_mooncake_big_integer", None)
        if big is not None:
            reason = (f"it computes the integer {describe(big)}, beyond the 64 bits of compiled code "
                      f"(numba would wrap it; Python keeps it exact)")
        if not reason:
            reason, compiled = _compile(target)
        if compiled is None:
            flag = None
    pol = StudentPolicy(function=py, name=name, mode="numba" if compiled is not None else "python",
                        compiled=compiled, reason=reason, compile_s=time.perf_counter() - t0, stop_flag=flag)
    if compiled is None:
        warnings.warn(f"prefill policy {name!r} runs as plain Python, called from the compiled simulator "
                      f"at each arrival ({_PYTHON_COST}): numba could not compile it: {reason}",
                      PolicyCompileWarning, stacklevel=3)
    rnd = _random_use(py)
    if rnd:
        warnings.warn(f"prefill policy {name!r} draws random numbers ({rnd}): its choices change from run to "
                      f"run, so results are not reproducible, the numba and reference engines disagree and "
                      f"a leaderboard changes when re-run. Use req.uniform (this request's own U[0, 1) draw, "
                      f"seeded by ClusterConfig.seed) or a generator seeded from the request, "
                      f"np.random.default_rng(req.index)", PolicyRandomWarning, stacklevel=3)
    if key is not None:
        _MEMO[key] = pol
        while len(_MEMO) > _MEMO_MAX:
            _MEMO.popitem(last=False)
    return pol


_KERNELS: dict = {}


def student_kernel(args: tuple, view):
    """The simulator kernel compiled for the types of ``args``, a policy of :data:`POLICY_SIGNATURE`
    as a first-class function, and ``view``: one variant, compiled once, cached on disk."""
    from .kernel import _kernel

    argtypes = tuple(numba.typeof(a) for a in args) + (types.FunctionType(POLICY_SIGNATURE), VIEW_TYPE)
    k = _KERNELS.get(argtypes)
    if k is None:
        py = getattr(_kernel, "py_func", _kernel)
        k = _KERNELS[argtypes] = njit([argtypes], cache=True, nogil=True)(py)  # nogil: Ctrl-C reaches the waiting caller
    return k


# ------------------------------------------------------------------ leaderboard
def _entries(policies, baselines) -> dict:
    """``{row name: (policy or built-in name, kind)}`` from ``leaderboard``'s arguments, checked."""
    from .config import PREFILL_POLICIES
    from .routers import ROUTERS

    builtin = {**PREFILL_POLICIES, **ROUTERS}
    w = "leaderboard"
    allowed = ("a function policy(req, view) -> int, a built-in policy name, a list of them or a dict "
               "name → function")
    if policies is None or isinstance(policies, (bytes, np.ndarray)):
        raise fail("policies", policies, allowed, w)
    if callable(policies) or isinstance(policies, str):
        policies = [policies]
    if isinstance(policies, dict):
        items = list(policies.items())
        for k, _ in items:
            if not isinstance(k, str) or not k.strip():
                raise fail("policies", k, "dict keys that are row names (non-empty strings)", w)
    elif isinstance(policies, (list, tuple)):
        items = [(p if isinstance(p, str) else _name(p), p) for p in policies]
    else:
        raise fail("policies", policies, allowed, w)
    if not items:
        raise fail("policies", policies, "at least one policy (the built-ins alone: "
                   "leaderboard(trace, ['kvcentric', 'load'], baselines=()))", w)
    names = [k for k, _ in items]
    for k in names:
        if names.count(k) > 1:
            raise fail("policies", policies, f"policies with distinct names: two are named {k!r}; pass a dict "
                       f"{{name: function}} to name them", w)
    if baselines is None:
        baselines = ()
    elif isinstance(baselines, str):
        baselines = (baselines,)  # one name
    elif not isinstance(baselines, (list, tuple)):
        raise fail("baselines", baselines, "a built-in policy name or a list of them: " + ", ".join(map(repr, BASELINES)), w)
    base = list(dict.fromkeys(choice(b, "baselines", builtin, w) for b in baselines))
    entries = {}
    for k, p in items:
        if isinstance(p, str):
            entries[k] = (choice(p, f"policies[{k!r}]", builtin, w), "router" if p in ROUTERS else "built-in")
        elif callable(p):
            if k in base:
                raise InputError(f"leaderboard.policies: your policy is named {k!r}, the name of a built-in "
                                 f"row; rename it (a dict key: {{'my_{k}': {_name(p)}}}) or leave {k!r} out of "
                                 f"baselines")
            check_policy_signature(p, f"leaderboard.policies[{k!r}]")
            entries[k] = (p, "yours")
        else:
            raise fail(f"policies[{k!r}]", p, "a function policy(req, view) -> int or a built-in policy name", w)
    for b in base:
        entries.setdefault(b, (b, "router" if b in ROUTERS else "built-in"))
    return entries


def _ranks(df: pd.DataFrame, keys: list) -> np.ndarray:
    """1 + the rows strictly before: rows equal in every key (NaN = NaN) share the smallest rank."""
    vals = [tuple("nan" if pd.isna(v) else v for v in row) for row in df[keys].itertuples(index=False)]
    ranks = np.arange(1, len(vals) + 1)
    for i in range(1, len(vals)):
        if vals[i] == vals[i - 1]:
            ranks[i] = ranks[i - 1]
    return ranks


def leaderboard(trace, policies, config=None, baselines=BASELINES, sort_by: str = LEADERBOARD_SORT_BY,
                engine: str = "numba") -> pd.DataFrame:
    """Rank policies on one trace and cluster: one row per policy, best first.

    ``policies``: a function, a built-in policy name (the Conductor's or a router's,
    :data:`.routers.ROUTERS`), a list of them, or a dict row name → function (or built-in name); a list names rows by the functions' ``__name__`` (two equal names are refused:
    use a dict). ``baselines``: built-in policy names added as rows (default all four; one name as a
    string; ``()`` none). A function may not take a built-in row's name (refused: rename it or drop
    that baseline). ``config``: the cluster (default :class:`ClusterConfig`); its ``prefill_policy``
    is replaced row by row.

    **Order** (the same for lecture 08's leaderboard): by ``sort_by`` (default
    :data:`LEADERBOARD_SORT_BY`, SLO attainment, higher first; lower first for the TTFT columns), then
    by mean TTFT (lower first); NaN last. ``rank``: rows equal in both share the smallest rank
    (1, 1, 3, …). Columns: the :data:`LEADERBOARD_METRICS` of :meth:`SimResult.summary` (TTFT in s,
    attainment and cache ratios as fractions), ``kind`` (yours / built-in / router), ``mode`` (numba / python
    / built-in), ``wall_s``.
    """
    from .config import ClusterConfig
    from .run import ENGINES, simulate

    w = "leaderboard"
    choice(sort_by, "sort_by", LEADERBOARD_METRICS, w)
    choice(engine, "engine", ENGINES, w)
    if config is None:
        config = ClusterConfig()
    if not isinstance(config, ClusterConfig):
        raise fail("config", config, "a sim.ClusterConfig or None", w)
    rows = {}
    for name, (p, kind) in _entries(policies, baselines).items():
        mode = "built-in"
        if not isinstance(p, str):
            sp = compile_policy(p)
            mode, p = sp.mode, sp.function
        res = simulate(trace, config.replace(prefill_policy=p), engine=engine)
        s = res.summary()
        rows[name] = {**{k: s[k] for k in LEADERBOARD_METRICS}, "kind": kind, "mode": mode, "wall_s": res.wall_s}
    df = pd.DataFrame.from_dict(rows, orient="index")
    keys = [sort_by] + ([_TIE_BREAK] if sort_by != _TIE_BREAK else [])
    df = df.sort_values(keys, ascending=[not LEADERBOARD_METRICS[k] for k in keys], kind="stable",
                        na_position="last")
    df.index.name = "policy"
    df.insert(0, "rank", _ranks(df, keys))
    return df
