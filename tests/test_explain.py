"""sim.explain: what a request saw at its arrival, from the simulator's own numbers (rule 2d)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import sim
from mooncake_lab.sim.conductor_view import PROBE_ROWS
from mooncake_lab.sim.explain import TABLE_COLUMNS
from mooncake_lab.sim.routers import ROUTERS
from mooncake_lab.sim.run import simulate_probed
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

from test_sim_engines import configs, prefix_traces, small_traces
from test_sim_roles import SIMPLE, role_configs
from test_sim_roles import trace as role_trace

ROW = {name: k for k, name in enumerate(PROBE_ROWS)}

# the engines' probe over the settings that change what a request sees: links, CPP groups, roles, routers
probe_configs = st.one_of(
    configs,
    configs.map(lambda c: c.replace(network_contention=False)),
    configs.map(lambda c: c.replace(cpp_group_size=2, n_prefill=2 * c.n_prefill)),
    configs.map(lambda c: c.replace(prefill_policy="kvcentric")),
    st.builds(lambda c, r: c.replace(prefill_policy=r, admission="none"), configs, st.sampled_from(list(ROUTERS))),
)


def _probe_request(trace, data):
    return data.draw(st.integers(0, len(trace) - 1), label="request")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=probe_configs, data=st.data())
def test_kernel_and_reference_record_the_same_view(trace, config, data):
    i = _probe_request(trace, data)
    a = simulate_probed(trace, config, "numba", probe=i)
    b = simulate_probed(trace, config, "reference", probe=i)
    np.testing.assert_allclose(a.probe["rows"], b.probe["rows"], rtol=1e-9, atol=1e-9, equal_nan=True)
    assert [a.probe[k] for k in ("best_blocks", "holder", "chosen")] == [b.probe[k] for k in ("best_blocks", "holder", "chosen")]
    if not np.isnan(a.probe["rows"]).all() and a.arrays["prefill_inst"][i] >= 0:
        assert a.probe["chosen"] == a.arrays["prefill_inst"][i]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=probe_configs, data=st.data())
def test_the_probe_changes_nothing_in_the_run(trace, config, data):
    i = _probe_request(trace, data)
    plain = sim.simulate(trace, config)
    probed = simulate_probed(trace, config, "numba", probe=i)
    assert plain.probe is None
    for k, v in plain.arrays.items():
        np.testing.assert_array_equal(v, probed.arrays[k], err_msg=k)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=configs, data=st.data())
def test_the_conductor_picks_the_least_ttft_estimate_it_shows(trace, config, data):
    config = config.replace(prefill_policy="kvcentric")
    i = _probe_request(trace, data)
    res = sim.simulate(trace, config)
    d = sim.explain(res, i)
    if d.table.empty:
        return  # too large (no prefill choice)
    ttft = d.table["TTFT estimate (s)"].to_numpy()
    assert d.chosen == int(np.argmin(ttft)) == d.conductor_pick
    assert f"instance {d.chosen}" in d.why
    # the estimate is its terms' sum (no noise: exactly)
    if config.estimator_noise == 0:
        t = d.table
        total = np.where(t["fetch"], t["queue (s)"] + t["fetch (s)"] + t["prefill after fetch (s)"],
                         t["queue (s)"] + t["prefill (s)"])
        np.testing.assert_allclose(total, ttft, rtol=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=configs, data=st.data())
def test_cache_aware_and_load_pick_by_the_terms_they_read(trace, config, data):
    i = _probe_request(trace, data)
    for policy, terms in (("cache_aware", ("queue (s)", "prefill (s)")), ("load", ("queue (s)",))):
        res = sim.simulate(trace, config.replace(prefill_policy=policy))
        d = sim.explain(res, i)
        if d.table.empty:
            continue
        est = sum(d.table[c].to_numpy() for c in terms)
        assert est[d.chosen] == pytest.approx(est.min(), rel=1e-12, abs=1e-12)


def _hot_prefix_trace():
    """Four requests: the first two share 3 blocks; the third shares them too and arrives while instance 0
    is busy; the fourth is too large for a decode node."""
    return trace_from_requests([0.0, 0.01, 0.02, 0.03], [1536, 1536, 2048, 1024], [4, 4, 4, 10_000_000],
                               [3, 3, 4, 2], [0, 1, 2, 0, 1, 2, 0, 1, 2, 8, 20, 21], name="hot")


def test_a_hand_worked_choice_names_its_terms():
    tr = trace_from_requests([0.0, 0.5], [2048, 2048], [4, 4], [4, 4], [0, 1, 2, 3, 0, 1, 2, 5], name="two")
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, preset="ideal")
    res = sim.simulate(tr, cfg)
    d = sim.explain(res, 1)
    # request 0 ran on instance 0 and left its 4 blocks there; request 1 shares 3 of them
    assert d.table.loc[0, "local prefix (tokens)"] == 3 * 512
    assert d.table.loc[1, "local prefix (tokens)"] == 0
    assert res.arrays["cached_tok"][1] == 3 * 512 and d.chosen == 0
    assert "longest cached prefix, ≈ 1,536 tokens, is on instance 0" in d.why
    assert list(d.table.columns) == list(TABLE_COLUMNS)
    assert "queue (s)" in d._repr_html_() and "Request 1" in str(d)


def test_a_request_too_large_is_named_and_has_no_table():
    tr = trace_from_requests([0.0], [8192], [4000], [16], list(range(16)), name="big")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=1, n_decode=1, decode_kv_capacity_tokens=10_000.0))
    d = sim.explain(res, 0)
    assert d.table.empty and d.chosen == -1 and "too large" in d.why and "10,000 tokens" in d.why


def test_an_inlined_prefill_is_named():
    tr = trace_from_requests([0.0], [300], [5], [1], [0], name="short")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=2, preset="ideal", inline_prefill=True))
    d = sim.explain(res, 0)
    assert d.table.empty and "hybrid" in d.why


def test_routers_show_their_scores_and_the_conductors_pick():
    tr = trace_from_requests(np.arange(12) * 0.05, [2048] * 12, [8] * 12, [4] * 12,
                             [b for r in range(12) for b in (0, 1, 2, 100 + r)], name="shared")
    for router, key in (("dynamo", "cost_blocks"), ("llmd", "score"), ("preble", "cost_s"), ("sglang", "match_rate"),
                        ("aibrix", "score")):
        res = sim.simulate(tr, sim.ClusterConfig(n_prefill=3, n_decode=1, prefill_policy=router))
        d = sim.explain(res, 11)
        assert key in d.table.columns, router
        assert router in d.why and f"instance {d.chosen}" in d.why
        assert 0 <= d.conductor_pick < 3
    rr = sim.simulate(tr, sim.ClusterConfig(n_prefill=3, n_decode=1, prefill_policy="prodstack_rr"))
    assert "round robin" in sim.explain(rr, 4).why


def test_a_student_policy_is_explained_beside_the_conductor():
    tr = trace_from_requests(np.arange(6) * 0.05, [2048] * 6, [8] * 6, [4] * 6,
                             [b for r in range(6) for b in (0, 1, 2, 100 + r)], name="shared")

    def last(req, view):
        return len(view.wait_s) - 1

    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=3, n_decode=1, prefill_policy=last))
    d = sim.explain(res, 5)
    assert d.chosen == 2 and "Your function returned instance 2" in d.why
    assert d.table.loc[2, "local prefix (tokens)"] == 3 * 512  # its own earlier requests left the prefix


def test_roles_mark_the_nodes_that_took_no_prefills():
    # test_sim_roles' second case: at 5 s prefill node 0 leaves for the full decode pool; r2 goes to node 1
    tr = role_trace([0, 0, 5.0], [3000, 3000, 1000], [2000, 2000, 5])
    cfg = sim.ClusterConfig(**SIMPLE, n_prefill=2, n_decode=1, decode_kv_capacity_tokens=10_000,
                            role_switch_ratio=2.0, role_switch_interval_s=4.0, role_switch_s=2.0)
    res = sim.simulate(tr, cfg)
    assert len(res.role_switches) == 1
    d = sim.explain(res, 2)
    # nodes are numbered across both pools (node 2 starts as the decode node); a decode node's terms are <NA>
    assert d.table["prefill node"].tolist() == [False, True, False] and d.chosen == 1 == d.conductor_pick
    assert d.table.loc[[0, 2], "TTFT estimate (s)"].isna().all() and d.table.loc[1].notna().all()
    assert sim.explain(res, 0).table["prefill node"].tolist() == [True, True, False]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=prefix_traces(max_gap_s=1.0), config=role_configs, data=st.data())
def test_kernel_and_reference_record_the_same_view_when_roles_switch(trace, config, data):
    i = _probe_request(trace, data)
    a = simulate_probed(trace, config, "numba", probe=i)
    b = simulate_probed(trace, config, "reference", probe=i)
    np.testing.assert_allclose(a.probe["rows"], b.probe["rows"], rtol=1e-9, atol=1e-9, equal_nan=True)
    assert a.probe["chosen"] == b.probe["chosen"]


@pytest.mark.parametrize("request_, msg", [(-1, "0 … 3"), (4, "0 … 3"), (1.5, "an int"), (True, "an int")])
def test_bad_request_index_is_named(request_, msg):
    res = sim.simulate(_hot_prefix_trace(), sim.ClusterConfig(n_prefill=2, n_decode=1))
    with pytest.raises(InputError, match=r"explain\.request") as e:
        sim.explain(res, request_)
    assert msg in str(e.value)


def test_not_a_result_and_a_coupled_run_are_named():
    with pytest.raises(InputError, match=r"explain\.result"):
        sim.explain("a run", 0)
    res = sim.simulate(_hot_prefix_trace(), sim.ClusterConfig(engine_mode="coupled", n_coupled=2))
    with pytest.raises(InputError, match="coupled"):
        sim.explain(res, 0)


def test_the_timeline_explains_the_selected_request_in_each_run():
    from mooncake_lab.timeline import timeline

    tr = _hot_prefix_trace()
    a = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=1))
    b = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=1, prefill_policy="cache_aware"))
    c = sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=2))
    view = timeline(a, b, c, labels=["A", "B", "C"])
    panel = view.why()
    assert "Click a request" in panel.value
    view.selected = 2
    assert "<h4>A</h4>" in panel.value and "<h4>B</h4>" in panel.value and "kvcentric" in panel.value
    assert "cache_aware" in panel.value and "coupled node" in panel.value
    view.selected = 3
    assert "too large" in panel.value
