"""One place for checking inputs at the course's public entry points.

Every check names what is wrong and where — ``"ClusterConfig.n_prefill: got 10**18; allowed: an integer
in [1, 4096]"`` — and raises :class:`InputError` (a ``ValueError``), so a bad value never reaches a kernel,
never becomes silent garbage (a truncated float, a NaN cast to an int) and never fails deep inside.

    >>> integer(8, "n_prefill", lo=1, hi=4096, where="ClusterConfig")
    8
    >>> real("0.5", "speed", lo=0, where="replay")
    Traceback (most recent call last):
    ...
    mooncake_lab.validate.InputError: replay.speed: got '0.5'; allowed: a finite number >= 0
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

import numpy as np

__all__ = ["InputError", "fail", "integer", "real", "choice", "option", "flag", "int_array", "real_array",
           "describe", "memory", "reals", "items", "MEMORY_BUDGET_BYTES"]

#: What one computation may allocate, bytes: 2 GiB, a quarter of a course laptop's 8 GB (the notebook
#: server, the browser and the other lectures' state share it; two simulations may run in parallel).
MEMORY_BUDGET_BYTES = 2 * 2**30


class InputError(ValueError):
    """A value a public entry point cannot use; the message names the field, the value and what is allowed."""


def _label(name: str, where: str) -> str:
    return f"{where}.{name}" if where else name


def describe(value: Any, limit: int = 60) -> str:
    """``repr`` of a value, shortened (a huge int or a long list must not flood the message)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = len(str(abs(value))) - 1
        return f"{'-' if value < 0 else ''}~10**{digits}"
    try:
        s = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        s = f"<{type(value).__name__}>"
    return s if len(s) <= limit else s[: limit - 1] + "…"


def fail(name: str, value: Any, allowed: str, where: str = "", index: int | None = None) -> InputError:
    """The error to raise: ``where.name: got value; allowed: allowed``.

    The error also carries ``value``, ``allowed`` and ``index`` (the position of the first bad element
    of an array, else None), so a caller can re-word it, e.g. name a file's line instead of an index.
    """
    err = InputError(f"{_label(name, where)}: got {describe(value)}; allowed: {allowed}")
    err.value, err.allowed, err.index = value, allowed, index
    return err


def _num(x) -> str:
    """A bound as written in a message: whole numbers below 10**16 in full (1048576, not 1.04858e+06)."""
    if isinstance(x, numbers.Real) and math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return f"{x:g}"


def _interval(lo, hi, lo_open=False, hi_open=False) -> str:
    if lo is None or lo == -math.inf:
        if hi is None or hi == math.inf:
            return ""
        return f" {'<' if hi_open else '<='} {_num(hi)}"
    if hi is None or hi == math.inf:
        return f" {'>' if lo_open else '>='} {_num(lo)}"
    return f" in {'(' if lo_open else '['}{_num(lo)}, {_num(hi)}{')' if hi_open else ']'}"


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def integer(value: Any, name: str, *, lo: int | None = None, hi: int | None = None, where: str = "") -> int:
    """A whole number (int, numpy integer, or an integer-valued float) in [lo, hi]; returns ``int``."""
    allowed = "an integer" + _interval(lo, hi)
    if not _is_real(value):
        raise fail(name, value, allowed, where)
    if isinstance(value, numbers.Integral):
        v = int(value)
    else:
        f = float(value)
        if not math.isfinite(f) or f != math.floor(f):
            raise fail(name, value, allowed, where)
        v = int(f)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise fail(name, value, allowed, where)
    return v


def real(value: Any, name: str, *, lo: float = -math.inf, hi: float = math.inf, lo_open: bool = False,
         hi_open: bool = False, allow_inf: bool = False, where: str = "") -> float:
    """A real number (not NaN; infinite only if ``allow_inf``) in the interval; returns ``float``."""
    allowed = ("a number" if allow_inf else "a finite number") + _interval(lo, hi, lo_open, hi_open)
    if not _is_real(value):
        raise fail(name, value, allowed, where)
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        raise fail(name, value, allowed, where) from None
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise fail(name, value, allowed, where)
    if v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        raise fail(name, value, allowed, where)
    return v


def choice(value: Any, name: str, options: Iterable[Any], where: str = "") -> Any:
    """One of ``options`` (compared with ``==``; unhashable values are simply not among them)."""
    opts = tuple(options)
    for o in opts:
        try:
            if type(value) is type(o) and value == o:
                return o
        except Exception:  # noqa: BLE001 - e.g. an array compared to a string
            pass
    raise fail(name, value, "one of " + ", ".join(map(repr, opts)), where)


def flag(value: Any, name: str, where: str = "") -> bool:
    """``True`` or ``False`` (numpy booleans too); nothing else is taken for a switch."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise fail(name, value, "True or False", where)


def _array(values: Any, name: str, where: str) -> np.ndarray:
    try:
        a = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        raise fail(name, values, "a one-dimensional array of numbers", where) from None
    if a.ndim != 1:
        raise fail(name, values, "a one-dimensional array of numbers", where)
    if a.dtype == object:
        # Python ints beyond int64, mixed types, None: check element by element, then convert
        for i, x in enumerate(a):
            if not _is_real(x):
                raise fail(f"{name}[{i}]", x, "a number", where, index=i)
        try:
            a = a.astype(np.float64)
        except OverflowError:
            raise fail(name, values, "numbers within float range", where) from None
    elif a.dtype.kind not in "iuf" and a.size:
        raise fail(name, values, "a one-dimensional array of numbers", where)
    return a


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def int_array(values: Any, name: str, *, lo: int | None = None, hi: int | None = None,
              where: str = "") -> np.ndarray:
    """A 1-D array of whole numbers in [lo, hi] (integer-valued floats accepted); returns int64."""
    a = _array(values, name, where)
    allowed = "integers" + _interval(lo, hi)
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.floor(a))
        if bad.any():
            i = _first_bad(bad)
            raise fail(f"{name}[{i}]", a[i].item(), allowed, where, index=i)
    lo_ = -math.inf if lo is None else lo
    hi_ = math.inf if hi is None else hi
    if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
        hi_ = min(hi_, np.iinfo(np.int64).max)
    bad = (a < lo_) | (a > hi_)
    if a.dtype.kind == "f":
        bad |= np.abs(a) >= 2.0**63
    if bad.any():
        i = _first_bad(bad)
        raise fail(f"{name}[{i}]", a[i].item(), allowed, where, index=i)
    return a.astype(np.int64)


def real_array(values: Any, name: str, *, lo: float = -math.inf, hi: float = math.inf,
               where: str = "") -> np.ndarray:
    """A 1-D array of finite numbers in [lo, hi]; returns float64."""
    a = _array(values, name, where).astype(np.float64)
    bad = ~np.isfinite(a) | (a < lo) | (a > hi)
    if bad.any():
        i = _first_bad(bad)
        raise fail(f"{name}[{i}]", a[i].item(), "finite numbers" + _interval(lo, hi), where, index=i)
    return a


def option(value: Any, name: str, options: Iterable[Any], where: str = "") -> Any:
    """One of ``options``, returned as listed there: a string equal to a string option, or a number
    equal to a numeric one whatever its type (``2``, ``2.0``, ``np.float64(2)`` all pick ``2.0``;
    floats within 1e-9 relative). Booleans, NaN and anything else are not options."""
    opts = tuple(options)
    if _is_real(value):
        try:
            v = float(value)
        except OverflowError:
            v = math.nan
        for o in opts:
            if _is_real(o) and (v == o or math.isclose(v, float(o), rel_tol=1e-9)):
                return o
    elif isinstance(value, str):
        for o in opts:
            if isinstance(o, str) and value == o:
                return o
    else:
        for o in opts:
            if type(value) is type(o) and not _is_real(o):
                try:
                    if value == o:
                        return o
                except Exception:  # noqa: BLE001
                    pass
    raise fail(name, value, "one of " + ", ".join(map(repr, opts)), where)


def memory(nbytes: float, what: str, where: str = "") -> int:
    """``nbytes`` if within :data:`MEMORY_BUDGET_BYTES`, else an error saying what needs how much."""
    if not nbytes <= MEMORY_BUDGET_BYTES:
        try:
            size = f"{nbytes / 2**30:,.1f} GiB"
        except (OverflowError, TypeError):  # an int beyond float range
            size = f"{describe(nbytes)} B"
        raise InputError(f"{where + ': ' if where else ''}would allocate ≈ {size} for {what}, "
                         f"more than the {MEMORY_BUDGET_BYTES / 2**30:.0f} GiB one computation may use")
    return int(nbytes)


def reals(values: Any, name: str, *, lo: float = -math.inf, hi: float = math.inf, lo_open: bool = False,
          where: str = "") -> float | np.ndarray:
    """A number (see :func:`real`) or a 1-D array of them (see :func:`real_array`); a 0-d array is a number."""
    if isinstance(values, np.ndarray) and values.ndim == 0:
        values = values.item()
    if _is_real(values):
        return real(values, name, lo=lo, hi=hi, lo_open=lo_open, where=where)
    a = real_array(values, name, lo=lo, hi=hi, where=where)
    if lo_open and (a == lo).any():
        i = _first_bad(a == lo)
        raise fail(f"{name}[{i}]", a[i].item(), "finite numbers" + _interval(lo, hi, lo_open), where, index=i)
    return a


#: Most elements a list argument (lengths, models, speeds ...) may have: each is a row or a run.
MAX_ITEMS = 10_000


def items(values: Any, name: str, *, where: str = "", max_len: int = MAX_ITEMS) -> tuple:
    """A non-empty collection (list, tuple, range, 1-D array, Series, generator ...) of at most ``max_len``
    elements, as a tuple; a string, a mapping or a number is not one (each element is checked by the caller)."""
    allowed = f"a non-empty list of at most {max_len:,} values"
    if isinstance(values, (str, bytes, dict)) or (isinstance(values, np.ndarray) and values.ndim != 1):
        raise fail(name, values, allowed, where)
    try:
        it = iter(values)
    except TypeError:
        raise fail(name, values, allowed, where) from None
    out = []
    for x in it:
        if len(out) == max_len:
            raise fail(name, values, allowed, where)
        out.append(x.item() if isinstance(x, np.generic) else x)
    if not out:
        raise fail(name, values, allowed, where)
    return tuple(out)
