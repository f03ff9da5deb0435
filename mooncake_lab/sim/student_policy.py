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
``"cache_aware"``.

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
``ValueError``, a function that does not take two arguments → ``TypeError``. While simulating
(the run stops at the first bad request): a return value that is not an integer →
``TypeError`` (:class:`PolicyReturnTypeError`); an instance outside 0 … n − 1, or an exception
inside the policy → ``ValueError`` (:class:`PolicyChoiceError`, the original exception chained).
"""
from __future__ import annotations

import inspect
import numbers
import time
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
from numba import njit, objmode, types

from .conductor_view import POLICY_SIGNATURE, REQUEST_TYPE, VIEW_TYPE

__all__ = ["StudentPolicy", "compile_policy", "leaderboard", "BASELINES", "PolicyCompileWarning",
           "PolicyReturnTypeError", "PolicyChoiceError", "check_policy_signature"]

#: The built-in policies a leaderboard compares against by default.
BASELINES = ("random", "load", "cache_aware", "kvcentric")
#: Leaderboard columns (from :meth:`SimResult.summary`) and whether larger is better.
LEADERBOARD_METRICS = {"ttft_mean_s": False, "ttft_p90_s": False, "ttft_p99_s": False,
                       "slo_attainment": True, "hit_ratio": True, "fetched_ratio": True, "completed": True}
_PYTHON_COST = "≈ 10–25 µs per request"  # measured by benchmarks/bench_student_policy.py (2-core course VM)


class PolicyCompileWarning(UserWarning):
    """A student policy could not be compiled by numba and runs as plain Python (slower, still exact)."""


class PolicyReturnTypeError(TypeError):
    """A student policy returned something that is not an integer instance index."""


class PolicyChoiceError(ValueError):
    """A student policy chose an instance that does not exist, or raised an exception."""


def check_policy_signature(fn, where: str = "policy") -> None:
    """``TypeError`` unless ``fn`` is callable with exactly two positional arguments (req, view)."""
    if not callable(fn):
        raise TypeError(f"{where}: expected a function policy(req, view) -> int, got {fn!r} "
                        f"({type(fn).__name__})")
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
        prev = _ACTIVE[0]
        _ACTIVE[0] = (self, view)
        try:
            yield
        except (PolicyReturnTypeError, PolicyChoiceError) as e:
            raise type(e)(str(e)) from None  # already names the request and the value
        except Exception as e:
            i = int(diag[4])
            raise PolicyChoiceError(
                f"prefill policy {self.name!r} raised {type(e).__name__}: {e} while choosing an instance "
                f"for {_request_text(i, trace.arrival_s[i], trace.input_len[i])}") from e
        finally:
            _ACTIVE[0] = prev
        if diag[5]:
            i = int(diag[4])
            raise self.range_error(i, trace.arrival_s[i], trace.input_len[i], int(diag[6]),
                                   len(view.wait_s)) from None

    def kernel_function(self):
        """What the kernel calls: the compiled policy, or the object-mode trampoline to Python."""
        return self.compiled if self.mode == "numba" else _python_trampoline()


# ------------------------------------------------------------------ python mode: object-mode trampoline
_ACTIVE: list = [None]  # (StudentPolicy, View) of the running simulation (set by StudentPolicy.errors)


def _call_active(req):
    policy, view = _ACTIVE[0]
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
    compiled, reason = None, ""
    if numba.config.DISABLE_JIT:
        reason = "NUMBA_DISABLE_JIT is set"
    elif not inspect.isfunction(py):
        reason = f"numba compiles plain functions, not {type(py).__name__} objects"
    else:
        args = (REQUEST_TYPE, VIEW_TYPE)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", numba.NumbaWarning)
                disp = njit(boundscheck=True)(py)
                disp.compile(args)
                rt = disp.overloads[args].signature.return_type
                if rt == types.int64:
                    compiled = disp
                elif isinstance(rt, types.Integer):
                    compiled = njit(POLICY_SIGNATURE, boundscheck=True)(py)
                else:
                    reason = (f"numba infers it returns {rt}, not an integer (Python mode checks every "
                              f"returned value and names the first bad one)")
        except Exception as e:  # numba's TypingError, UnsupportedError, ... : run it as Python
            reason = _short_reason(e)
    pol = StudentPolicy(function=py, name=name, mode="numba" if compiled is not None else "python",
                        compiled=compiled, reason=reason, compile_s=time.perf_counter() - t0)
    if compiled is None:
        warnings.warn(f"prefill policy {name!r} runs as plain Python, called from the compiled simulator "
                      f"at each arrival ({_PYTHON_COST}): numba could not compile it: {reason}",
                      PolicyCompileWarning, stacklevel=3)
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
        k = _KERNELS[argtypes] = njit([argtypes], cache=True)(py)
    return k


# ------------------------------------------------------------------ leaderboard
def leaderboard(trace, policies, config=None, baselines=BASELINES, sort_by: str = "ttft_mean_s",
                engine: str = "numba") -> pd.DataFrame:
    """Rank policies on one trace and cluster: one row per policy, best first.

    ``policies``: a function, a list of functions, or a dict name → function (or built-in name).
    ``baselines``: built-in policy names added as rows (default all four). ``config``: the cluster
    (default :class:`ClusterConfig`); its ``prefill_policy`` is replaced row by row. Columns: the
    :data:`LEADERBOARD_METRICS` of :meth:`SimResult.summary` (TTFT in s, attainment and cache ratios
    as fractions), ``kind`` (yours / built-in), ``mode`` (numba / python / built-in), ``wall_s``.
    """
    from .config import ClusterConfig
    from .run import simulate

    if sort_by not in LEADERBOARD_METRICS:
        raise ValueError(f"sort_by must be one of {list(LEADERBOARD_METRICS)}, got {sort_by!r}")
    if config is None:
        config = ClusterConfig()
    if callable(policies) or isinstance(policies, str):
        policies = [policies]
    if not isinstance(policies, dict):
        policies = {p if isinstance(p, str) else _name(p): p for p in policies}
    entries = {name: (p, "yours") for name, p in policies.items()}
    for b in baselines:
        entries.setdefault(b, (b, "built-in"))
    rows = {}
    for name, (p, kind) in entries.items():
        mode = "built-in"
        if not isinstance(p, str):
            sp = compile_policy(p)
            mode, p = sp.mode, sp.function
        res = simulate(trace, config.replace(prefill_policy=p), engine=engine)
        s = res.summary()
        rows[name] = {**{k: s[k] for k in LEADERBOARD_METRICS}, "kind": kind, "mode": mode, "wall_s": res.wall_s}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df = df.sort_values(sort_by, ascending=not LEADERBOARD_METRICS[sort_by], kind="stable")
    df.index.name = "policy"
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df
