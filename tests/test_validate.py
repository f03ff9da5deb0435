"""The shared input checks (mooncake_lab/validate.py): each names the field, the value and what is allowed."""
import math

import numpy as np
import pytest

from mooncake_lab import validate as v


def test_integer_accepts_whole_numbers_and_rejects_the_rest():
    assert v.integer(8, "n") == 8 and v.integer(np.int64(3), "n") == 3 and v.integer(4.0, "n") == 4
    for bad in (True, 2.5, math.nan, math.inf, "3", None, [1], 10**400):
        with pytest.raises(v.InputError, match=r"^Cfg\.n: got .*; allowed: an integer"):
            v.integer(bad, "n", hi=10**6, where="Cfg")
    with pytest.raises(v.InputError, match=r"^n: got 0; allowed: an integer in \[1, 4096\]"):
        v.integer(0, "n", lo=1, hi=4096)


def test_huge_values_are_shortened_in_the_message():
    with pytest.raises(v.InputError, match=r"^n: got ~10\*\*400; allowed: "):
        v.integer(10**400, "n", hi=5)


def test_real_rejects_nan_overflow_bool_and_strings():
    assert v.real(np.float32(0.5), "x") == 0.5
    assert v.real(math.inf, "x", allow_inf=True) == math.inf
    for bad in (math.nan, math.inf, 10**400, True, np.bool_(False), "1", None, 1 + 2j):
        with pytest.raises(v.InputError, match=r"^x: got .*; allowed: a finite number"):
            v.real(bad, "x")
    with pytest.raises(v.InputError, match=r"^x: got 0\.0; allowed: a finite number > 0"):
        v.real(0.0, "x", lo=0, lo_open=True)


def test_choice_and_flag():
    assert v.choice("lru", "policy", ("lru", "lfu")) == "lru"
    for bad in ("k", ["lru"], np.array(["lru"]), None):
        with pytest.raises(v.InputError, match=r"^policy: got .*; allowed: one of 'lru', 'lfu'"):
            v.choice(bad, "policy", ("lru", "lfu"))
    assert v.flag(np.True_, "on") is True
    for bad in (1, "True", None):
        with pytest.raises(v.InputError, match=r"^on: got .*; allowed: True or False"):
            v.flag(bad, "on")


def test_arrays_name_the_first_bad_element():
    assert v.int_array([1, 2.0], "len").dtype == np.int64
    with pytest.raises(v.InputError, match=r"^len\[1\]: got 600\.7; allowed: "):
        v.int_array([1, 600.7], "len")
    with pytest.raises(v.InputError, match=r"^len\[0\]: got 1e\+30; allowed: integers <= 1000000000"):
        v.int_array([10**30], "len", hi=10**9)
    with pytest.raises(v.InputError, match=r"^len\[2\]: got -1; allowed: integers >= 0"):
        v.int_array([1, 2, -1], "len", lo=0)
    with pytest.raises(v.InputError, match=r"^t\[1\]: got nan; allowed: "):
        v.real_array([0.0, math.nan], "t")
    with pytest.raises(v.InputError, match=r"^t: got \[\[1\.0\]\]; allowed: a one-dimensional"):
        v.real_array([[1.0]], "t")
    with pytest.raises(v.InputError, match=r"^t\[1\]: got None; allowed: "):
        v.real_array([1.0, None], "t")
