"""Bad input gets a clear error naming what is wrong and where — never a deep traceback, silent garbage or a
hang: the doctor's data folder, ``check()``'s numbers as its own feedback prints them and its whole-number
answers, lecture 09's routers at their boundary (lists, no instance, no router), the plain-Python engines'
bound, and the bad inputs found around them (routers, links, preemption, CLI-facing config, ``check()``)."""
from __future__ import annotations

import io
import math
import signal
from contextlib import contextmanager

import numpy as np
import pytest

from mooncake_lab import check, sim
from mooncake_lab.exercises import _REGISTRY, Exercise, exercise
from mooncake_lab.experiments import l09_routers as l09
from mooncake_lab.sim.links import LinkCalendar, fit_all
from mooncake_lab.sim.routers import (ROUTERS, DecodeInputs, RouterConfig, RouterInputs, new_decode_inputs,
                                      new_router_inputs, route, route_decode)
from mooncake_lab.sim.routers_reference import ReferenceBelief, route_decode_reference, route_reference, rule_scores
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

NAN, INF = math.nan, math.inf


@contextmanager
def within(seconds: int):
    """Fail (instead of hanging) if the block takes longer than ``seconds``."""
    def stop(*_):
        raise TimeoutError(f"took more than {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ 1. doctor: $MOONCAKE_LAB_DATA
@pytest.fixture
def doctor_env(isolated_trace_lookup, monkeypatch):
    from mooncake_lab import doctor

    monkeypatch.setattr(doctor, "_numba_check", lambda: (True, "not checked in this test"))
    monkeypatch.setattr(doctor, "_version", lambda name: "(not checked in this test)")
    return isolated_trace_lookup


@pytest.mark.parametrize("kind, says", [("file", "is a file, not a folder"), ("missing", "does not exist")])
def test_doctor_reports_a_data_variable_that_names_no_folder(doctor_env, monkeypatch, tmp_path, kind, says):
    from mooncake_lab.doctor import run_doctor

    target = tmp_path / ("conversation_trace.jsonl" if kind == "file" else "no/such/folder")
    if kind == "file":
        target.write_text("{}\n")
    monkeypatch.setenv("MOONCAKE_LAB_DATA", str(target))
    out = io.StringIO()
    assert run_doctor(out=out) == 1
    text = out.getvalue()
    assert f"FAIL $MOONCAKE_LAB_DATA = {str(target)!r} {says}" in text      # what it holds, what is wrong
    assert "Set it to the folder holding the trace files" in text and "unset MOONCAKE_LAB_DATA" in text  # what to do
    assert "all good" not in text and "1 problem(s) found" in text


def test_doctor_is_quiet_about_a_good_data_folder(doctor_env):
    from mooncake_lab.doctor import run_doctor

    out = io.StringIO()
    assert run_doctor(out=out) == 0
    assert "ok   $MOONCAKE_LAB_DATA" in out.getvalue() and "all good" in out.getvalue()


# ------------------------------------------------------------------ 2. check(): numbers as printed, whole numbers
@pytest.fixture
def demos():
    made = [exercise(Exercise("99.code", "Which return code?", answer=lambda: -800, rel_tol=0.0)),
            exercise(Exercise("99.inst", "Which instance?", answer=lambda: 1, rel_tol=0.0, unit="instance")),
            exercise(Exercise("99.bytes", "KV bytes per token?", answer=lambda: 327_680, unit="B", rel_tol=0.01))]
    yield
    for e in made:
        _REGISTRY.pop(e.id)


@pytest.mark.parametrize("ex_id, answer", [
    ("99.code", "\u2212800"), ("99.code", "\u2212800.0"), ("99.code", " \u22128e2 "), ("99.code", "-800"),
    ("99.bytes", "327\u202f680"), ("99.bytes", "327\u2009680 B"), ("99.bytes", "327,680"), ("99.bytes", "327_680"),
    ("99.inst", 1.0), ("99.inst", "1.0"), ("99.inst", 1)])
def test_numbers_written_as_the_feedback_prints_them_are_accepted(demos, ex_id, answer):
    v = check(ex_id, answer)
    assert v, v.message


def test_the_lab_code_answer_with_a_minus_sign():
    v = check("lab.code_before_ttl", "\u2212800")     # as its own feedback writes it: "−800 is TRANSFER_FAIL"
    assert v and "TRANSFER_FAIL" in v.message


@pytest.mark.parametrize("ex_id, answer, says", [
    ("99.inst", 1.0000000000001, "An instance number is a whole number: you gave 1.0000000000001"),
    ("99.inst", 1.5, "An instance number is a whole number: you gave 1.5"),
    ("99.inst", "1.00000000000000000001", "An instance number is a whole number"),   # exact, not through float
    ("99.code", -800.5, "This answer is a whole number: you gave -800.5"),
    ("99.code", "\u2013800", "'\u2013' is a dash, not a minus sign: write -800"),
    ("99.bytes", "327,6800", "Group digits by three"),
    ("99.bytes", "1,5", "Group digits by three"),                  # not 15: a decimal comma is not a group
    ("99.bytes", "3,27,680", "Group digits by three"),
])
def test_numbers_that_are_not_answers_say_why(demos, ex_id, answer, says):
    v = check(ex_id, answer)
    assert not v and says in v.message, v.message


def test_an_instance_answer_off_by_a_rounding_error_is_not_instance_1():
    v = check("09.changed_sglang", 1.0000000000001)     # the right answer is instance 1
    assert not v and "An instance number is a whole number" in v.message and "numbered 0 to 3" in v.message
    assert check("09.changed_sglang", 1) and check("09.changed_sglang", 1.0)


def test_a_long_answer_is_read_in_linear_time(demos):
    with within(10):    # was ≈ 80 s: "(.*?)\s*$" backtracked over the blanks
        v = check("99.bytes", "1x" + " " * 200_000 + "y")
    assert not v and "Give the number in B: 'x " in v.message and "is not B nor a unit that converts" in v.message


# ------------------------------------------------------------------ 3. lecture 09's routers at the boundary
BT = 512
RP = RouterConfig().resolve("dynamo", False, 100, BT)


def _ri(n=3, **fields):
    ri = new_router_inputs(n)
    return ri._replace(**fields)


@pytest.mark.parametrize("name", list(ROUTERS))
@pytest.mark.parametrize("fn", [route, route_reference], ids=["route", "route_reference"])
def test_no_instance_is_refused_the_same_way_by_both(name, fn):
    rp = RouterConfig().resolve(name, False, 100, BT)
    with pytest.raises(InputError, match=rf"^{fn.__name__}\.RouterInputs\.matched_blocks: got array\(\[\], "
                                         r"dtype=int64\); allowed: one entry per instance, at least one"):
        fn(rp, new_router_inputs(0), 4096, 8, BT, 0.3, 5, 250_000.0)


def test_route_takes_lists_as_route_reference_does():
    ri = l09.worked_inputs()
    lists = RouterInputs(*(a.tolist() for a in ri))
    for name in ROUTERS:
        rp = RouterConfig().resolve(name, False, 10 ** 6, BT)
        assert route(rp, lists, 4096, 8, BT, 0.3, 5, 250_000.0) == route(rp, ri, 4096, 8, BT, 0.3, 5, 250_000.0) \
            == route_reference(rp, lists, 4096, 8, BT, 0.3, 5, 250_000.0)
    di = DecodeInputs([1, 0], [0, 2], [0, 0], [0.0, 0.0], [10.0, 0.0])
    assert route_decode(1, di, 0.3, 8, 0, 1e5, 32.0, 2048.0) == route_decode_reference(1, di, 0.3, 8, 0, 1e5, 32.0,
                                                                                         2048.0) == 0


@pytest.fixture(scope="module")
def small_runs():
    tr = synthetic_trace("conversation-like", seed=1).head(30)
    base = dict(n_prefill=2, n_decode=2)
    return {"kvcentric": sim.simulate(tr, sim.ClusterConfig(**base)),
            "sglang_true": sim.simulate(tr, sim.ClusterConfig(**base, prefill_policy="sglang",
                                                              router=RouterConfig(knowledge="true")))}


def test_belief_audit_of_a_run_without_a_router_is_refused(small_runs):
    with pytest.raises(InputError, match=r"^l09\.belief_audit\.res\.config\.prefill_policy: got 'kvcentric'; allowed: "
                                         r"a router .*this run has no router.*l09\.run\(trace, 'sglang'"):
        l09.belief_audit(small_runs["kvcentric"])
    with pytest.raises(InputError, match=r"^l09\.belief_audit\.res\.config\.router\.knowledge: got 'true'; allowed: "
                                         r"'belief'.*RouterConfig\(knowledge='belief'\)"):
        l09.belief_audit(small_runs["sglang_true"])


# ------------------------------------------------------------------ 4. the plain-Python engines' bound
def _long_outputs(out=20_000_000, n=2):
    return trace_from_requests(np.arange(n) * 1.0, [1000] * n, [out] * n, [2] * n, list(range(2 * n)))


@pytest.mark.parametrize("mode", [{}, {"engine_mode": "coupled", "n_coupled": 1}], ids=["disaggregated", "coupled"])
def test_reference_engine_refuses_what_it_cannot_finish(mode):
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, decode_kv_capacity_tokens=3e7, **mode)
    with within(30):   # was minutes (one decode step at a time, 2 × 2·10⁷ of them)
        with pytest.raises(InputError, match=r"^simulate\(engine='reference'\): 40,000,000 steps \(trace\.output_len "
                                             r"sums to 40,000,000 tokens\); allowed: at most 1,000,000 .*"
                                             r"engine='numba'"):
            sim.simulate(_long_outputs(), cfg, engine="reference")


def test_reference_bound_counts_prefill_chunks_too():
    nb = -(-1_000_000 // 512)
    tr = trace_from_requests([0.0, 1.0], [1_000_000] * 2, [2, 2], [nb, nb], list(range(2 * nb)))
    steps, why = sim.run.reference_steps(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=2, chunked_prefill=True,
                                                                 prefill_chunk=1))
    assert steps == 2_000_004 and "prefill_chunk=1" in why
    steps, why = sim.run.reference_steps(tr, sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=2, cpp_chunk=1,
                                                                 model="LLaMA2-7B"))
    assert steps == 4 + 2 * 1_000_000 * 2 * 4 and "cpp_chunk=1" in why
    small = synthetic_trace("conversation-like", seed=3).head(300)   # what the tests and lectures run: far below
    assert sim.run.reference_steps(small, sim.ClusterConfig())[0] < sim.run.MAX_REFERENCE_STEPS / 5


# ------------------------------------------------------------------ the hunt: more bad inputs, each named
_TR = synthetic_trace("conversation-like", seed=1).head(5)
_DI = new_decode_inputs(2)
_NB = -(-1_000_000 // 512)
_HUGE_PROMPTS = trace_from_requests([0.0, 1.0], [1_000_000] * 2, [2, 2], [_NB, _NB], list(range(2 * _NB)))


def _route(ri=None, L=100, n_blocks=1, bt=BT, u=0.1, rr=0, kv_cap=1e6, rp=RP, fn=route):
    return fn(rp, _ri() if ri is None else ri, L, n_blocks, bt, u, rr, kv_cap)


HUNT = [  # (what, call, the message it must start with — the field named —, then what is allowed)
    ("ri a tuple", lambda: _route(ri=tuple(new_router_inputs(3))),
     r"route\.ri: got \(array.*; allowed: a RouterInputs"),
    ("rp None", lambda: _route(rp=None), r"route\.rp: got None; allowed: a RouterParams"),
    ("L 0", lambda: _route(L=0), r"route\.L: got 0; allowed: an integer >= 1"),
    ("L NaN", lambda: _route(L=NAN), r"route\.L: got nan"),
    ("u 1", lambda: _route(u=1.0), r"route\.u: got 1\.0; allowed: a finite number in \[0, 1\)"),
    ("u NaN", lambda: _route(u=NAN), r"route\.u: got nan"),
    ("u a string", lambda: _route(u="0.1"), r"route\.u: got '0\.1'"),
    ("bt 0", lambda: _route(bt=0), r"route\.bt: got 0"),
    ("rr -1", lambda: _route(rr=-1), r"route\.rr: got -1"),
    ("kv_cap 0", lambda: _route(kv_cap=0.0), r"route\.kv_cap: got 0\.0; allowed: a number > 0"),
    ("kv_cap NaN", lambda: _route(kv_cap=NAN), r"route\.kv_cap: got nan"),
    ("lengths differ", lambda: _route(ri=_ri(inflight=np.zeros(2, np.int64))),
     r"route\.RouterInputs\.inflight: got array\(\[0, 0\]\); allowed: 3 entries, one per instance"),
    ("negative in flight", lambda: _route(ri=_ri(inflight=np.array([-1, 0, 0]))),
     r"route\.RouterInputs\.inflight\[0\]: got -1; allowed: integers >= 0"),
    ("NaN pending", lambda: _route(ri=_ri(pending_tokens=np.array([NAN, 0.0, 0.0]))),
     r"route\.RouterInputs\.pending_tokens\[0\]: got nan"),
    ("half a block", lambda: _route(ri=_ri(matched_blocks=[0.5, 0, 0])),
     r"route\.RouterInputs\.matched_blocks\[0\]: got 0\.5"),
    ("a 2-D field", lambda: _route(ri=_ri(queued=np.zeros((3, 1)))), r"route\.RouterInputs\.queued: got array"),
    ("a string field", lambda: _route(ri=_ri(queued="abc")), r"route\.RouterInputs\.queued: got 'abc'"),
    ("more matched than the request's blocks", lambda: _route(ri=_ri(matched_blocks=[5, 0, 0])),
     r"route\.RouterInputs\.matched_blocks\[0\]: got 5; allowed: at most n_blocks = 1"),
    ("reference u 2", lambda: _route(u=2.0, fn=route_reference), r"route_reference\.u: got 2\.0"),
    ("rule_scores, no instance", lambda: rule_scores(RP, new_router_inputs(0), 100, 1, BT, 1e6),
     r"rule_scores\.RouterInputs\.matched_blocks: got array\(\[\]"),
    ("route_decode, no node", lambda: route_decode(2, new_decode_inputs(0), 0.1, 1, 0, 1e5, 32.0, 2048.0),
     r"route_decode\.DecodeInputs\.running: got array\(\[\].*at least one"),
    ("route_decode_reference, no node", lambda: route_decode_reference(2, new_decode_inputs(0), 0.1, 1, 0, 1e5, 32.0,
                                                                       2048.0),
     r"route_decode_reference\.DecodeInputs\.running: got array\(\[\]"),
    ("route_decode kv_cap 0", lambda: route_decode(4, _DI, 0.1, 1, 0, 0.0, 32.0, 2048.0),
     r"route_decode\.kv_cap: got 0\.0"),
    ("route_decode choice a name", lambda: route_decode("least_kv", _DI, 0.1, 1, 0, 1e5, 32.0, 2048.0),
     r"route_decode\.choice: got 'least_kv'; allowed: an integer"),
    ("ReferenceBelief -1 instances", lambda: ReferenceBelief(-1, 0, INF), r"ReferenceBelief\.n_instances: got -1"),
    ("ReferenceBelief 1.5 blocks", lambda: ReferenceBelief(2, 1.5, INF), r"ReferenceBelief\.capacity_blocks: got 1\.5"),
    ("ReferenceBelief TTL 0", lambda: ReferenceBelief(2, 0, 0.0), r"ReferenceBelief\.ttl_s: got 0\.0"),
    ("link fit at NaN", lambda: LinkCalendar().fit(NAN, 1.0), r"LinkCalendar\.fit\.t: got nan"),
    ("link booked backwards", lambda: LinkCalendar().book(2.0, 1.0),
     r"LinkCalendar\.book\.e: got 1\.0; allowed: a finite number >= 2"),
    ("fit_all at NaN (looped forever)", lambda: fit_all([], NAN, 1.0), r"fit_all\.t: got nan"),
    ("fit_all negative duration", lambda: fit_all([LinkCalendar()], 0.0, -1.0), r"fit_all\.d: got -1\.0"),
    ("fit_all not links", lambda: fit_all("ab", 0.0, 1.0),
     r"fit_all\.links: got 'ab'; allowed: a list of LinkCalendar"),
    ("explain_choice given two instances", lambda: l09.explain_choice("sglang", given=np.array([1, 2])),
     r"l09\.explain_choice\.given: got array\(\[1, 2\]\); allowed: None or one instance, a number 0 … 3"),
    ("explain_choice given a string", lambda: l09.explain_choice("sglang", given="1"),
     r"l09\.explain_choice\.given: got '1'"),
    ("explain_choice given a list", lambda: l09.explain_choice("aibrix", given=[1]),
     r"l09\.explain_choice\.given: got \[1\]"),
    ("l09.run speed -1", lambda: l09.run("conversation", "dynamo", speed=-1.0),
     r"l09\.run\.speed: got -1\.0; allowed: a finite number > 0"),
    ("l09.run speed NaN", lambda: l09.run("conversation", "dynamo", speed=NAN), r"l09\.run\.speed: got nan"),
    ("l09.leaderboard speed inf", lambda: l09.leaderboard("conversation", speed=INF),
     r"l09\.leaderboard\.speed: got inf"),
    ("instance_shares of a string", lambda: l09.instance_shares("x"),
     r"l09\.instance_shares\.res: got 'str'; allowed: a SimResult"),
    ("load_imbalance of a string", lambda: l09.load_imbalance("x"), r"l09\.load_imbalance\.res: got 'str'"),
    ("prefill_share_during_decode of None", lambda: l09.prefill_share_during_decode(None),
     r"l09\.prefill_share_during_decode\.res: got 'NoneType'"),
    ("knowledge_cost no routers", lambda: l09.knowledge_cost(routers=[]), r"l09\.knowledge_cost\.routers: got \[\]"),
    ("knowledge_cost a name", lambda: l09.knowledge_cost(routers="sglang"),
     r"l09\.knowledge_cost\.routers: got 'sglang'"),
    ("knowledge_cost unknown router", lambda: l09.knowledge_cost(routers=["sglang", "nope"]),
     r"l09\.knowledge_cost\.routers\[1\]: got 'nope'; allowed: one of 'dynamo'"),
    ("tbt_vs_ttft no routers", lambda: l09.tbt_vs_ttft(routers=[]), r"l09\.tbt_vs_ttft\.routers: got \[\]"),
    ("leaderboard no policies", lambda: l09.leaderboard(policies=[]), r"l09\.leaderboard\.policies: got \[\]"),
    ("leaderboards no traces", lambda: l09.leaderboards(traces=[]), r"l09\.leaderboards\.traces: got \[\]"),
    ("leaderboards a name", lambda: l09.leaderboards(traces="conversation"),
     r"l09\.leaderboards\.traces: got 'conversation'"),
    ("dynamo_weight_sweep a number", lambda: l09.dynamo_weight_sweep(5), r"l09\.dynamo_weight_sweep\.weights: got 5"),
    ("memory_estimate of a string", lambda: sim.run.memory_estimate("x", sim.ClusterConfig()),
     r"memory_estimate\.trace: got str; allowed: a mooncake_lab\.traces\.Trace"),
    ("memory_estimate of a dict", lambda: sim.run.memory_estimate(_TR, {"n_prefill": 2}),
     r"memory_estimate\.config: got dict"),
    ("replace a misspelt field", lambda: sim.ClusterConfig().replace(n_prefil=2),
     r"ClusterConfig\.n_prefil: got 2; allowed: a keyword naming a field of ClusterConfig: n_prefill, "),
    ("reference, coupled chunks of 1 token", lambda: sim.simulate(
        _HUGE_PROMPTS, sim.ClusterConfig(engine_mode="coupled", n_coupled=2, chunked_prefill=True, prefill_chunk=1),
        engine="reference"), r"simulate\(engine='reference'\): 2,000,004 steps .*prefill_chunk=1"),
    ("reference, CPP chunks of 1 token", lambda: sim.simulate(
        _HUGE_PROMPTS, sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=2, cpp_chunk=1, model="LLaMA2-7B"),
        engine="reference"), r"simulate\(engine='reference'\): 16,000,004 steps .*cpp_chunk=1"),
]


@pytest.mark.parametrize("call, named", [h[1:] for h in HUNT], ids=[h[0] for h in HUNT])
def test_bad_input_is_named(call, named):
    with within(60):
        with pytest.raises(InputError, match="^" + named):
            call()


def test_how_many_bad_inputs_are_tried():
    # 54 hunted + 16 without an instance (8 routers × 2 implementations) + 8 numbers check() refuses + 3 doctor
    # + 2 reference bounds + the lab's −800, 09's 1.0000000000001, a long answer, 2 belief audits
    assert len(HUNT) == 54
