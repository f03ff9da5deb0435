"""Lecture 09 (KV-aware routers after Mooncake): the worked request (rules by hand, reference ≡ kernel),
the leaderboards, the belief audit and sweep, the docs box, the history's dates, bad inputs, the
notebook's dashboard cell, and the glossary.

Runs use the conversation trace (real when ../shared/data has it, else its stand-in), memoised per process.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from matplotlib.figure import Figure

from mooncake_lab.experiments import l09_routers as l09
from mooncake_lab.sim import routers_reference as ref
from mooncake_lab.sim.routers import ROUTERS, RouterConfig
from mooncake_lab.validate import InputError

pytestmark = pytest.mark.usefixtures("offline_traces")  # never download (tests/conftest.py)
ROOT = Path(__file__).resolve().parents[1]
#: The course's router notes, in the repository (lecture 09 links to them): rules, defaults, sources, dates.
NOTES = ROOT / "notebooks" / "routers.md"


# ----------------------------------------------------------------------------- the worked request
def test_worked_request_choices_by_hand():
    w = l09.worked_request()
    assert list(w.index) == list(ROUTERS)
    assert (w["choice"] == w["route (numba)"]).all()
    # by hand from WORKED_STATE (L = 4096, B = 512, coupled: the decode term counts):
    # dynamo cost_2 = (4096 + 20000 + 4096) / 512; sglang balanced (13 ≤ 64) → deepest match, lowest index 0;
    # llm-d 3·2/8 + 2·1 + 2·0.76 = 4.27 on 1; rr 5 mod 4 = 1; prefix: random among {0, 3}, start floor(0.3·4) = 1 → 3;
    # kv: hit 3072 ≥ 4096 − 2000 → 0; aibrix: 14 − 1 > 8 → candidates {2}, no match → 2; preble: exploit {0, 3},
    # cost 12 + 10·45·0.15 = 79.5 < 20 + 14·6.75 → 0.
    assert dict(w["choice"]) == {"dynamo": 2, "sglang": 0, "llmd": 1, "prodstack_rr": 1, "prodstack_prefix": 3,
                                 "prodstack_kv": 0, "aibrix": 2, "preble": 0}
    rp = RouterConfig().resolve("dynamo", False, 10 ** 6, 512)
    cost = ref.rule_scores(rp, l09.worked_inputs(), 4096, 8, 512, 250_000.0)["cost_blocks"]
    assert cost[2] == pytest.approx((4096 + 20_000 + 4096) / 512)
    assert cost[0] == pytest.approx((6000 + 4096 - 3072 + 150_000 + 4096) / 512)
    rp = RouterConfig().resolve("llmd", False, 10 ** 6, 512)
    assert ref.rule_scores(rp, l09.worked_inputs(), 4096, 8, 512, 250_000.0)["score"][1] == \
        pytest.approx(3 * 2 / 8 + 2 * 1 + 2 * (1 - 60_000 / 250_000))
    assert "4 different instances" in l09.describe_worked(w) and "agrees" in l09.describe_worked(w)


@pytest.mark.parametrize("name,fn,field", [("dynamo", "dynamo_cost", None), ("llmd", "llmd_score", None),
                                           ("preble", "preble_cost", None)])
def test_the_rule_uses_the_scores_the_lecture_shows(monkeypatch, name, fn, field):
    """The per-instance functions are the ones route_reference uses: change one and the choice follows."""
    rp = RouterConfig().resolve(name, False, 10 ** 6, 512)
    ri = l09.worked_inputs()
    before = ref.route_reference(rp, ri, 4096, 8, 512, 0.3, 5, 250_000.0)
    better = lambda *a, **k: [0.0 if i == 3 else 1.0 for i in range(4)]        # noqa: E731  (argmin → 3)
    if name == "llmd":
        better = lambda *a, **k: [1.0 if i == 3 else 0.0 for i in range(4)]    # noqa: E731  (argmax → 3)
    monkeypatch.setattr(ref, fn, better)
    after = ref.route_reference(rp, ri, 4096, 8, 512, 0.3, 5, 250_000.0)
    assert before != 3 and after == 3


def test_sglang_and_aibrix_helpers_by_hand():
    rp = RouterConfig().resolve("sglang", False, 10 ** 6, 512)
    assert not ref.sglang_imbalanced(rp, [10, 3, 1, 14])          # 13 ≤ 64
    assert ref.sglang_imbalanced(rp, [100, 0, 0, 0])              # 100 > 64 and 100 > 1.5·0
    rp = RouterConfig().resolve("aibrix", False, 10 ** 6, 512)
    load = [10, 3, 1, 14]
    mu = sum(load) / 4
    assert ref.aibrix_bound(rp, load) == pytest.approx(mu + np.std(load))


# ----------------------------------------------------------------------------- exercise 1: a changed state
def test_exercise_1_changed_state_is_the_worked_one_with_one_number_changed():
    ch = l09.changed_state()
    diff = {(f, i) for f in ch for i in range(4) if ch[f][i] != l09.WORKED_STATE[f][i]}
    assert diff == {("matched_blocks", 1)} and ch["matched_blocks"][1] == 7
    assert l09.WORKED_STATE["matched_blocks"][1] == 2                 # the worked state is left as it was
    t = l09.state_change()
    assert list(t.index) == [(l09.STATE_LABELS["matched_blocks"], 1)] and list(t.iloc[0]) == [2, 7]


def test_exercise_1_answers_are_the_rules_on_the_changed_state_not_the_worked_table():
    """The expected answers are what route_reference and the compiled route give on the changed state, and
    at least one of the routers asked moves away from the worked table's choice — copying the table fails."""
    from mooncake_lab.exercises import list_exercises
    from mooncake_lab.sim.routers import route

    ex = {e.id: e for e in list_exercises("09.changed_")}
    assert set(ex) == {f"09.changed_{r}" for r in l09.EXERCISE_ROUTERS}
    ri, q = l09.worked_inputs(l09.changed_state()), l09.WORKED_REQUEST
    worked = l09.worked_request()["choice"]
    moved = []
    for r in l09.EXERCISE_ROUTERS:
        rp = RouterConfig().resolve(r, False, 10 ** 6, 512)
        args = (rp, ri, q["L"], q["n_blocks"], 512, q["u"], q["rr"], q["kv_cap"])
        expected = ex[f"09.changed_{r}"].answer()
        assert expected == ref.route_reference(*args) == int(route(*args))
        moved.append(expected != int(worked[r]))
    assert any(moved), "exercise 1's change leaves every asked router's choice as in the worked table"
    # by hand: SGLang balanced (13 ≤ 64) → the deepest match is now instance 1 alone (7 blocks, 0.875 > 0.3);
    # AIBrix: 14 − 1 = 13 > 8 keeps only the least loaded {2}, which matches nothing → 2, as in the worked table
    assert (ex["09.changed_sglang"].answer(), int(worked["sglang"])) == (1, 0)
    assert (ex["09.changed_aibrix"].answer(), int(worked["aibrix"])) == (2, 2)


def test_exercise_1_answer_follows_the_change(monkeypatch):
    """Nothing is typed in: another change gives another answer (instance 3 swamped → SGLang balances)."""
    from mooncake_lab import check

    monkeypatch.setattr(l09, "EXERCISE_CHANGE", {"inflight": {3: 100}})
    assert check("09.changed_sglang", 2) and not check("09.changed_sglang", 1)
    assert "imbalanced (both hold)" not in check("09.changed_sglang", 2).message   # the words of the branch
    assert "both hold, so the cluster is imbalanced" in check("09.changed_sglang", 2).message


def test_exercise_1_feedback_works_the_rule_with_its_numbers():
    from mooncake_lab import check

    right = check("09.changed_sglang", 1)
    assert right and "→ instance 1" in right.message
    for part in ("14 − 1 = 13", "abs = 64", "1.5 × 1 = 1.5", "balanced", "m = (6, 7, 0, 6)",
                 "3,584 / 4,096 = 0.875", "threshold"):
        assert part in right.message, part
    copied = check("09.changed_sglang", 0)                         # the worked table's answer
    assert not copied and "m_0 = 6 blocks, fewer than the deepest match" in copied.message
    assert "worked table's choice" in copied.message and "→ instance" not in copied.message
    assert "Hint:" in copied.message
    other = check("09.changed_sglang", 3)
    assert "m_3 = 6" in other.message and "worked table" not in other.message
    a_right = check("09.changed_aibrix", 2)
    assert a_right and "C = {2}" in a_right.message and "abs = 8" in a_right.message
    assert "m_1 = 7" in a_right.message and "never count" in a_right.message
    assert "above the load bound: n_0 = 10 > mean n + k_σ·σ(n) = 9.611" in \
        l09.explain_choice("aibrix", _state(inflight=(10, 3, 5, 9)), given=0)
    a_wrong = check("09.changed_aibrix", 1)
    assert not a_wrong and "not a candidate: n_1 = 3 > min n = 1" in a_wrong.message and "m_1 = 7" in a_wrong.message
    assert "numbered 0 to 3" in check("09.changed_aibrix", 2.5).message
    assert "numbered 0 to 3" in check("09.changed_aibrix", 7).message


def _state(**kw):
    return {**l09.WORKED_STATE, **kw}


@pytest.mark.parametrize("router,state,branch", [
    ("sglang", l09.WORKED_STATE, "the deepest is 6 blocks, on instances {0, 3} (a tie"),
    ("sglang", _state(inflight=(100, 3, 1, 14)), "both hold, so the cluster is imbalanced"),
    ("sglang", _state(matched_blocks=(1, 1, 0, 0), deepest_entered=(5.0, 1.0, 0.0, 0.0)),
     "is not above the threshold, too little to follow"),
    ("aibrix", l09.WORKED_STATE, "no candidate matches the prompt (m_2 = 0)"),
    # 10 − 3 ≤ 8: all are candidates; 3 (m 6, n 9) before 0 (m 6, n 10); bound 6.75 + σ = 9.61 → 3
    ("aibrix", _state(inflight=(10, 3, 5, 9)), "the first within the bound → instance 3"),
    # 0 and 3 tie in m and n: the draw's start floor(0.3 · 4) = 1 makes 3 first (AIBrix's shuffle, then stable sort)
    ("aibrix", _state(inflight=(5, 3, 5, 5), matched_blocks=(6, 0, 0, 6)), "in the order m descending, n ascending: 3"),
])
def test_explain_choice_covers_each_branch(router, state, branch):
    text = l09.explain_choice(router, state)
    assert branch in text
    assert re.findall(r"→ instance (\d)", text) == [str(l09.worked_request(state).loc[router, "choice"])]


def test_explain_choice_agrees_with_the_rule_on_random_states():
    """explain_choice walks the rule itself; it raises if its instance differs from route_reference / route."""
    rng = np.random.default_rng(9)
    for _ in range(40):
        st = {"matched_blocks": tuple(rng.integers(0, 9, 4)), "tree_blocks": tuple(rng.integers(0, 999, 4)),
              "pending_tokens": tuple(rng.uniform(0, 1e4, 4)), "live_kv_tokens": tuple(rng.uniform(0, 2e5, 4)),
              "inflight": tuple(rng.integers(0, int(rng.choice([4, 12, 100])), 4)),
              "queued": tuple(rng.integers(0, 5, 4)), "recent_requests": tuple(rng.integers(0, 30, 4)),
              "recent_prefill_s": tuple(rng.uniform(0, 20, 4)), "deepest_entered": tuple(rng.choice([0.0, 10.0], 4))}
        req = {**l09.WORKED_REQUEST, "u": float(rng.uniform())}
        for r in l09.EXPLAINED:
            choice = int(l09.worked_request(st, req).loc[r, "choice"])
            assert re.findall(r"→ instance (\d)", l09.explain_choice(r, st, req)) == [str(choice)]
            for g in set(range(4)) - {choice}:
                assert f"instance {g} " in l09.explain_choice(r, st, req, given=g).lower()


def test_exercise_1_hint_code_runs_in_the_notebook():
    """The code the new hints show runs in lecture 09's namespace (tests/test_hints_run.py's helpers; its lecture
    list leaves 09 out: the other hints there replay whole leaderboards)."""
    import ast

    from test_hints_run import _code_snippets, _free_names, _namespace_for
    from mooncake_lab.exercises import list_exercises

    snippets = {s for e in list_exercises("09.changed_") for s in _code_snippets(e.hint)}
    assert {"l09.changed_state()", "l09.state_change()", "l09.parameter_table()"} <= snippets
    for s in snippets:
        tree = ast.parse(s, mode="eval")
        ns = _namespace_for("09", _free_names(tree))
        eval(compile(tree, "<hint>", "eval"), ns)


def test_exercise_1_in_both_notebooks():
    """The lecture shows the changed state and leaves the answers to the student; the solutions compute them."""
    lec = nbformat.read(ROOT / "notebooks" / "09_after_mooncake.ipynb", as_version=4)
    sol = nbformat.read(ROOT / "notebooks" / "solutions" / "09_after_mooncake.ipynb", as_version=4)
    for nb in (lec, sol):
        src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "l09.changed_state()" in src and "l09.state_change()" in src
        assert 'check("09.changed_sglang", answer_1a)' in src and 'check("09.changed_aibrix", answer_1b)' in src
    lec_src = "\n".join(c.source for c in lec.cells if c.cell_type == "code")
    assert "answer_1a = ...   #" in lec_src and "answer_1b = ...   #" in lec_src
    sol_src = "\n".join(c.source for c in sol.cells if c.cell_type == "code")
    assert 'l09.worked_request(changed)' in sol_src and 'wc.loc["aibrix", "choice"]' in sol_src


def test_router_table_names_each_decode_rule():
    """The decode column says what runs on the pools: llm-d's fewest waiting, AIBrix's PD router with its spreads."""
    from mooncake_lab.sim.routers import DECODE_CHOICES

    t = l09.router_table()
    assert set(l09.decode_rules()) == set(DECODE_CHOICES)
    # what each system does on the decode pool, from the router notes' table (not from SYSTEM_DEFAULTS,
    # which router_table reads): Dynamo's decode router is load only; SGLang's old pair selection takes the
    # least-loaded decode pod; llm-d's decode profile, without a prefix on our decode nodes, is the fewest
    # waiting; production-stack's orchestrated P/D is round robin; AIBrix has its PD router; Preble has no
    # P/D: the course uses Mooncake's least KV there
    words = {"least KV": "least_kv", "fewest requests": "least_requests", "fewest waiting": "least_queued",
             "round robin": "round_robin", "the PD router": "aibrix_pd"}
    documented = {}
    for names, rule in _notes_table("What each system does on the decode pool"):
        (code,) = [c for w, c in words.items() if rule.startswith(w)]
        documented.update({n.strip(" `"): code for n in names.split(",")})
    assert t.decode_choice.to_dict() == documented
    assert t.loc["llmd", "decode_choice"] == "least_queued" and "fewest waiting" in t.loc["llmd", "decode_rule"]
    assert t.loc["aibrix", "decode_choice"] == "aibrix_pd"
    assert "≥ 32 " in t.loc["aibrix", "decode_rule"] and "> 2048 tok/s" in t.loc["aibrix", "decode_rule"]
    assert "pd_disaggregation.go @ 01692761" in t.loc["aibrix", "source"]
    assert "pd-epp-config.yaml" in t.loc["llmd", "source"]


# ----------------------------------------------------------------------------- leaderboards
@pytest.fixture(scope="module")
def board():
    return l09.leaderboard("conversation", "disaggregated", "lecture 04")


def test_leaderboard_rows_and_ranges(board):
    assert set(board.index) == set(ROUTERS) | set(l09.CONDUCTOR)
    assert board.slo_attainment.between(0, 1).all() and board.hit_ratio.between(0, 1).all()
    assert board.slo_attainment.is_monotonic_decreasing
    assert (board.load_imbalance >= 1 - 1e-12).all()
    assert (board.loc[list(ROUTERS), "fetched_tokens"] == 0).all()     # routers never fetch
    assert board.loc["kvcentric", "fetched_tokens"] > 0


def test_prefix_router_with_a_shared_first_block_loads_one_instance(board):
    hot = l09.hot_first_block("conversation")
    # every prompt starts with the same block, in the released conversation trace and in its stand-in
    # (block 0, the shared system prompt: tests/test_traces.py, tests/test_synthetic.py) — the premise
    # of this test, asserted rather than assumed: so the longest match alone sends everything to one
    # of the 8 prefill instances, max / mean load = 8
    assert hot["share"] == 1.0 and hot["sharing_first_block"] == hot["requests"] > 0
    assert board.loc["prodstack_prefix", "load_imbalance"] == pytest.approx(8.0)


def test_describe_leaderboards_names_each_board(board):
    text = l09.describe_leaderboards({("conversation", "disaggregated", "lecture 04"): board})
    assert f"`{board.index[0]}`" in text and f"{board.slo_attainment.iloc[0]:.3f}" in text


def test_describe_leaderboards_noise_and_lighter_branches(board):
    """By hand from one real board: a coupled lecture-07 board better than its lecture-04 one is called lighter
    (and why); a board whose best policy stays under NOISE_SLO is called noise; neither otherwise."""
    heavy = board.copy()
    light = board.copy()
    light["slo_attainment"] = (light.slo_attainment + 0.01).clip(upper=1.0)
    text = l09.describe_leaderboards({("conversation", "coupled", "lecture 04"): heavy,
                                      ("conversation", "coupled", "lecture 07"): light})
    assert text.count("lighter at lecture 07's stress than at lecture 04's") == 1
    assert f"against {heavy.slo_attainment.max():.3f})" in text
    text = l09.describe_leaderboards({("conversation", "coupled", "lecture 04"): light,
                                      ("conversation", "coupled", "lecture 07"): heavy})
    assert "lighter" not in text
    low = board.copy()
    low["slo_attainment"] = low.slo_attainment * (0.99 * l09.NOISE_SLO / low.slo_attainment.max())
    text = l09.describe_leaderboards({("conversation", "disaggregated", "lecture 07"): low})
    assert "the order of the board is noise" in text and "even a fifth" in text
    assert "noise" not in l09.describe_leaderboards({("conversation", "disaggregated", "lecture 07"): heavy}) \
        or heavy.slo_attainment.max() < l09.NOISE_SLO


# ----------------------------------------------------------------------------- belief
def test_unbounded_belief_never_believes_less_than_the_cache():
    """An unbounded, never-expiring belief lists every block sent to an instance, a superset of what the
    instance can hold: the audit finds no request whose true prefix exceeds the believed one."""
    res = l09.run("conversation", "prodstack_prefix", "coupled", router=RouterConfig(knowledge="belief"))
    a = l09.belief_audit(res)
    assert a["under_share"] == 0.0
    assert a["believed_hit_ratio"] >= a["true_hit_ratio"] == pytest.approx(res.summary()["hit_ratio"])


def test_belief_sweep_stale_only_above_the_cache_and_exact_mirror_is_the_cache():
    cb = l09.SWEEP_CACHE_BLOCKS
    sweep = l09.belief_sweep("sglang", (16, cb, 0), cache_blocks=cb)
    assert list(sweep.index) == [16, cb, 0, "true"] and (sweep.cache_blocks == cb).all()
    assert sweep.loc[16, "stale_share"] == 0.0 and sweep.loc[cb, "stale_share"] == 0.0
    assert sweep.loc[0, "stale_share"] > 0 and sweep.loc[0, "missed_tokens_share"] > 0   # evicted prefixes
    assert sweep.loc["true", "stale_share"] == 0.0
    assert sweep.loc[0, "hit_ratio"] > sweep.loc[16, "hit_ratio"]
    # coupled: the belief touches its LRU when the engine touches its cache, so the same size is the same cache
    cols = ["slo_attainment", "ttft_mean_s", "hit_ratio"]
    assert sweep.loc[cb, cols].astype(float).tolist() == pytest.approx(sweep.loc["true", cols].astype(float).tolist())
    text = l09.describe_belief_sweep(sweep)
    assert "matches the true-cache run" in text and f"{100 * sweep.loc[0, 'stale_share']:.1f} %" in text


def test_knowledge_cost_rows():
    kc = l09.knowledge_cost(arch="coupled", routers=["sglang"])
    assert list(kc.index) == ["sglang"]
    assert kc.ttft_ratio.iloc[0] == pytest.approx(kc.ttft_mean_belief_s.iloc[0] / kc.ttft_mean_true_s.iloc[0])


# ----------------------------------------------------------------------------- docs box, history
def test_dynamo_weight_maps_as_config_rs_says():
    assert l09.dynamo_weight_config(0) == RouterConfig(dynamo_prefill_scale=0.0, dynamo_overlap_credit=0.0)
    assert l09.dynamo_weight_config(2) == RouterConfig(dynamo_prefill_scale=2.0, dynamo_overlap_credit=1.0)
    assert l09.dynamo_weight_config(1) == RouterConfig()


def test_docs_box_states_the_measurements(board):
    dyn = l09.dynamo_weight_sweep((0.0, 1.0))
    var = l09.default_variants()
    box = l09.docs_box(dyn, var, {("conversation", "disaggregated", "lecture 04"): board})
    assert box.count("\n|") == 5   # header rule + four rows
    assert f"{dyn.ttft_mean_s.loc[0.0]:.2f}" in box and f"{board.loc['prodstack_prefix', 'load_imbalance']:.2f}" in box
    assert set(var.index.get_level_values(0)) == {"aibrix", "sglang"}


def _notes_table(heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table under ``## heading`` in the router notes."""
    text = NOTES.read_text(encoding="utf-8")
    part = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in part.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]


def test_history_dates_and_commits_are_the_notes():
    """Every date and commit HISTORY shows is the notes' history table's, on the same system's row."""
    rows = _notes_table("A short history")
    assert len(rows) == len(l09.HISTORY)
    for (system, what, when, source), row in zip(l09.HISTORY, rows):
        assert row[0] == system, (system, row)
        assert re.findall(r"\d{4}-\d\d-\d\d", when) == re.findall(r"\d{4}-\d\d-\d\d", row[2]), (system, when, row)
        commit = re.search(r"@ ([0-9a-f]{8})", source)
        assert commit is None or commit.group(1) in row[3], (system, source, row)
        assert re.search(r"\d{4}-\d\d-\d\d", when) or "no date in our notes" in when or "arXiv" in when


def test_router_sources_are_the_notes():
    """Each file @ commit of ROUTER_INFO is listed in the notes' sources table, on the router's row."""
    rows = _notes_table("Sources")
    for r, (_, _, src) in l09.ROUTER_INFO.items():
        for file, commit in re.findall(r"([\w./-]+) @ ([0-9a-f]{8})", src):
            assert any(r in row[0] and Path(file).name in row[2] and commit in row[3] for row in rows), (r, file, commit)


# ----------------------------------------------------------------------------- §8 Mooncake in today's stacks
def test_stacks_rows_name_their_flag_and_a_pinned_source_that_the_notes_list():
    """Each §8 row says how to turn it on (a flag or config in code) and where we read it: a documentation
    page and repository @ 8-hex commit : file, also listed in the notes' table (issue 26 §4)."""
    t, src = l09.stacks_table(), l09.stacks_sources()
    assert list(t.columns) == ["what it uses from Mooncake", "how to turn it on", "source"]
    rows = _notes_table("Mooncake in today's stacks")
    for system, (_, how, page, file) in zip(t.index, ((w, h, s, f) for _, w, h, s, f in l09.STACKS)):
        assert "`" in how and page, system
        repo, commit, path = re.fullmatch(r"([\w.-]+/[\w.-]+) @ ([0-9a-f]{8}) : (\S+)", file).groups()
        assert any(row[0] == system and repo in row[2] and path in row[2] and row[3] == commit
                   for row in rows), (system, file)
    how = " ".join(t["how to turn it on"])
    for flag in ('"kv_connector":"MooncakeConnector"', '"kv_connector":"MooncakeStoreConnector"',
                 "--disaggregation-transfer-backend mooncake", "--enable-hierarchical-cache --hicache-storage-backend mooncake",
                 "--shared-cache-type hicache"):
        assert flag in how, flag
    assert list(src.columns) == ["source", "file"] and len(src) == len(t) == len(l09.STACKS)


def test_transfer_rates_are_the_papers_and_the_recording_and_never_start_the_store(monkeypatch):
    """FAST'25's rows come from paper.py (share of line rate, time for 40 GB), the lab's row from its committed
    recording; neither starts the store. The 40 GB are the KV of 128k LLaMA3-70B tokens (320 KiB each)."""
    from mooncake_lab import paper, store_lab
    from mooncake_lab.experiments import lab_store as L

    def refuse(*a, **k):
        raise AssertionError("lecture 09 must not start the store")
    monkeypatch.setattr(L, "run_all", refuse)
    monkeypatch.setattr(store_lab, "StoreLab", refuse)
    t = l09.transfer_rates()
    assert t["GB/s"].tolist()[:2] == ["87", "190"] and t["share of line rate"].tolist()[:2] == ["87%", "48%"]
    assert t["40 GB take (s)"].tolist()[:2] == ["0.46", "0.21"]
    rec = L.load_recorded()
    rates = [r[f"{k}_gbps"] for r in rec["transfer"] for k in ("put", "get")]
    assert t["GB/s"].iloc[2] == f"{min(rates):.2f} – {max(rates):.2f}"
    assert t["40 GB take (s)"].iloc[2] == f"{40 / max(rates):.0f} at the fastest"
    assert rec["version"] in l09.describe_transfer_rates() and f"{87 / max(rates):,.0f}×" in l09.describe_transfer_rates()
    assert paper.KV_PER_TOKEN_KB * paper.FAST25_TE_TOKENS / 2**20 == paper.FAST25_TE_GB   # 40 GiB, "40 GB"
    assert L.FAST25_RDMA_GBPS == {"4×200 Gbps RDMA": 87.0, "8×400 Gbps RDMA": 190.0}   # one source: paper.py
    with pytest.raises(InputError):
        l09.transfer_rates({"transfer": "not a recording"})


def test_section_8_code_reads_the_recording_only():
    """§8's code cells call the recording's readers, never the store lab's starters."""
    for path in (ROOT / "notebooks" / "09_after_mooncake.ipynb", ROOT / "notebooks" / "solutions" / "09_after_mooncake.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        (i,) = [k for k, c in enumerate(cells) if c.source.startswith("## 8 · Mooncake in today's stacks")]
        j = next(k for k in range(i, len(cells)) if cells[k].source.startswith("## Exercises"))
        code = "\n".join(c.source for c in cells[i:j] if c.cell_type == "code")
        assert "l09.stacks_table()" in code and "l09.transfer_rates()" in code, path
        assert not re.search(r"StoreLab|run_all|start_labs|results\(|lab_store", code), path


def test_the_lecture_links_the_notes_and_cites_nothing_outside_the_repository():
    """Lecture 09 links notebooks/routers.md (the solutions one folder up); no cell cites ../shared or
    reference/ files, which a student's clone does not have."""
    assert NOTES.exists()
    for path, link in ((ROOT / "notebooks" / "09_after_mooncake.ipynb", "](routers.md)"),
                       (ROOT / "notebooks" / "solutions" / "09_after_mooncake.ipynb", "](../routers.md)")):
        md = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        assert md.count(link) >= 3, path
        assert (path.parent / link[2:-1]).resolve() == NOTES.resolve()
        assert "reference/" not in md and "../shared" not in md and "/work/" not in md, path


# ----------------------------------------------------------------------------- bad inputs
BAD = [   # (call, the field the message must name as wrong — "l09.<function>.<field>: got …" —, what it allows)
    (lambda: l09.worked_inputs({"matched_blocks": (1,)}), "worked_inputs.state", "a dict with exactly the keys"),
    (lambda: l09.worked_inputs({**l09.WORKED_STATE, "inflight": (1, 2)}), "worked_inputs.state",
     "one value per instance, the same number"),
    (lambda: l09.worked_inputs({**l09.WORKED_STATE, "queued": (1, -2, 0, 0)}), r"worked_inputs.queued\[1\]", ""),
    (lambda: l09.worked_request(request={**l09.WORKED_REQUEST, "u": 1.0}), "worked_request.u", ""),
    (lambda: l09.worked_request(request={**l09.WORKED_REQUEST, "n_blocks": 3}), "worked_request.n_blocks", ""),
    (lambda: l09.worked_request(request={"L": 10}), "worked_request.request", "a dict with the keys"),
    (lambda: l09.changed_state({"inflight_x": {1: 2}}), "changed_state.change", "a field of the state"),
    (lambda: l09.changed_state({"inflight": {4: 2}}), r"changed_state.change\['inflight'\]", "an instance 0 … 3"),
    (lambda: l09.changed_state({"inflight": {True: 2}}), r"changed_state.change\['inflight'\]", "an instance 0 … 3"),
    (lambda: l09.changed_state({"matched_blocks": {1: -1}}), r"worked_inputs.matched_blocks\[1\]", ""),
    (lambda: l09.changed_state({}), "changed_state.change", "a non-empty dict"),
    (lambda: l09.changed_state({"inflight": 3}), r"changed_state.change\['inflight'\]", ".*instance → new value"),
    (lambda: l09.explain_choice("dynamo"), "explain_choice.router", "one of 'sglang', 'aibrix'"),
    (lambda: l09.leaderboard("conversation", "hybrid"), "leaderboard.arch", ""),
    (lambda: l09.leaderboards(stresses=("lecture 99",)), "leaderboards.stress", ""),
    (lambda: l09.belief_sweep("prodstack_rr"), "belief_sweep.router", ""),
    (lambda: l09.belief_sweep("sglang", ()), "belief_sweep.capacities", "at least one capacity"),
    (lambda: l09.belief_sweep("sglang", (-1,)), r"belief_sweep.capacities\[0\]", ""),
    (lambda: l09.belief_sweep("sglang", cache_blocks=0), "belief_sweep.cache_blocks", ""),
    (lambda: l09.dynamo_weight_config(-1.0), "dynamo_weight_config.overlap_score_weight", ""),
    (lambda: l09.dynamo_weight_sweep(()), "dynamo_weight_sweep.weights", "at least one weight"),
    (lambda: l09.belief_audit("not a run"), "belief_audit.res", "a SimResult"),
    (lambda: l09.cluster("fastest"), "cluster.policy", ""),
]


@pytest.mark.parametrize("call,field,allowed", BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_inputs_name_what_is_wrong(call, field, allowed):
    with pytest.raises(InputError, match=rf"^l09\.{field}: got .*; allowed: {allowed}"):
        call()


# ----------------------------------------------------------------------------- plots, notebook, glossary
def _labelled(fig: Figure):
    assert isinstance(fig, Figure)
    assert any(ax.get_title() for ax in fig.axes) or (fig._suptitle is not None and fig._suptitle.get_text())
    assert all(any(a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax))   # a twin shares its x label
               for ax in fig.axes if ax.get_visible())


def test_figures_have_titles_and_axes(board):
    from mooncake_lab.plots import routers as rp

    _labelled(rp.leaderboard_bars({("conversation", "disaggregated", "lecture 04"): board}))
    _labelled(rp.belief_sweep(l09.belief_sweep("sglang", (16, 0))))
    _labelled(rp.dynamo_weight(l09.dynamo_weight_sweep((0.0, 1.0))))


def test_notebook_shows_the_router_dashboard():
    """The dashboard cell is in the lecture and builds the dashboard (mooncake_lab/dashboards/routers.py)."""
    nb = nbformat.read(ROOT / "notebooks" / "09_after_mooncake.ipynb", as_version=4)
    cell = [c.source for c in nb.cells if "RouterDashboard" in c.source]
    assert len(cell) == 1 and "from mooncake_lab.dashboards.routers import RouterDashboard" in cell[0]
    from mooncake_lab.dashboards.routers import RouterDashboard
    d = RouterDashboard()            # as the cell builds it: one picture drawn, current, nothing refused
    assert d.n_draws == 1 and d.png.startswith(b"\x89PNG\r\n\x1a\n") and d.background_is_current()
    assert not d.notice.value and d.controls["router"].value in ROUTERS


def test_glossary_has_lecture_09_terms():
    from mooncake_lab.glossary import glossary

    terms = set(glossary("09")["term"])
    assert {"KV-aware router", "stale belief", "load imbalance", "KV events"} <= terms
    assert all(isinstance(z, str) and z for z in glossary("09")["中文"])


def test_architectures_use_the_same_nodes():
    d, c = l09.ARCHITECTURES["disaggregated"], l09.ARCHITECTURES["coupled"]
    assert d["n_prefill"] + d["n_decode"] == c["n_coupled"]


# ----------------------------------------------------------------------------- TTFT vs TBT on coupled nodes
def _stub(inst, start, end, finish, cached=None, prompt=None, n=1):
    from types import SimpleNamespace

    k = len(inst)
    arrays = {"prefill_inst": np.array(inst), "prefill_start": np.array(start, float),
              "prefill_end": np.array(end, float), "finish": np.array(finish, float),
              "cached_tok": np.array(cached if cached is not None else [0] * k, float)}
    trace = SimpleNamespace(input_len=np.array(prompt if prompt is not None else [1] * k))
    return SimpleNamespace(arrays=arrays, config=SimpleNamespace(n_prefill_instances=n), trace=trace)


def test_prefill_share_during_decode_by_hand():
    """One node: A prefills [0, 2] and decodes to 10; B prefills [4, 6] and C [5, 7] (overlapping: their
    union is [4, 7]); B decodes [6, 8], C [7, 9]; D on node 1 never decodes (finish = prefill end).
    A's decode has 3 s of the union in 8 s → 0.375; B 1 s in 2 → 0.5; C none → 0; D NaN."""
    res = _stub([0, 0, 0, 1], [0, 4, 5, 0], [2, 6, 7, 3], [10, 8, 9, 3], n=2)
    got = l09.prefill_share_during_decode(res)
    assert got[:3] == pytest.approx([0.375, 0.5, 0.0]) and math.isnan(got[3])


def test_prefill_share_during_decode_equals_a_direct_count_on_a_run():
    res = l09.run("conversation", "dynamo", arch="coupled")
    a = res.arrays
    got = l09.prefill_share_during_decode(res)
    rng = np.random.default_rng(0)
    for j in rng.choice(np.flatnonzero(np.isfinite(got)), 40, replace=False):
        e, t0, t1 = a["prefill_inst"][j], a["prefill_end"][j], a["finish"][j]
        on = np.flatnonzero(a["prefill_inst"] == e)
        # the node prefills one prompt at a time here: the overlap is a plain sum
        ov = np.clip(np.minimum(a["prefill_end"][on], t1) - np.maximum(a["prefill_start"][on], t0), 0, None).sum()
        assert got[j] == pytest.approx(ov / (t1 - t0), abs=1e-9)


def test_tbt_vs_ttft_rows_and_sentence():
    df = l09.tbt_vs_ttft()
    assert list(df.index) == list(l09.TBT_ROUTERS)
    for r in df.index:
        s = l09.run("conversation", r, arch="coupled").summary()
        assert df.loc[r, "ttft_slo"] == s["ttft_slo_attainment"] and df.loc[r, "tbt_slo"] == s["tbt_slo_attainment"]
        assert df.loc[r, "slo_attainment"] <= min(df.loc[r, "ttft_slo"], df.loc[r, "tbt_slo"]) + 1e-12
    text = l09.describe_tbt_vs_ttft(df)
    worst = df.tbt_slo.idxmin()
    assert f"`{worst}` keeps the fewest within the TBT SLO ({df.tbt_slo.min():.3f})" in text
    assert f"{df.ttft_slo.min():.3f}–{df.ttft_slo.max():.3f}" in text
    explained = df.loc[worst, "prefill_share_during_decode"] > df.drop(index=worst).prefill_share_during_decode.max()
    assert ("does not explain it" in text) != explained


def test_describe_tbt_vs_ttft_both_branches_by_hand():
    import pandas as pd

    df = pd.DataFrame({"ttft_slo": [0.9, 0.8], "tbt_slo": [0.3, 0.6], "slo_attainment": [0.3, 0.5],
                       "hit_ratio": [0.2, 0.4], "prefill_share_during_decode": [0.4, 0.2]}, index=["a", "b"])
    assert l09.describe_tbt_vs_ttft(df) == (
        "TBT separates the policies here: within the TTFT SLO they keep 0.800–0.900 of the requests, within the "
        "TBT SLO 0.300–0.600. `a` keeps the fewest within the TBT SLO (0.300); its requests spend 40% of their "
        "decode time beside a prefill (20%–20% with the others). Ordered by hit ratio, the policies are ordered by "
        "TBT SLO share too.")
    df.loc["a", "prefill_share_during_decode"] = 0.1
    assert "here the prefill share does not explain it" in l09.describe_tbt_vs_ttft(df)
    df.loc["a", "hit_ratio"] = 0.5                      # hit order b, a; TBT order a, b
    df.loc["a", "ttft_slo"] = 0.1                       # TTFT spread 0.7 > TBT spread 0.3
    text = l09.describe_tbt_vs_ttft(df)
    assert "Their order by hit ratio is not their order by TBT SLO share." in text
    assert text.startswith("TBT does not separate the policies more than TTFT")


def test_instance_shares_by_hand():
    """Three requests on instance 0 (prompts 10, 10, 20; cached 5, 0, 15), one on 1 (prompt 10, cached 0),
    one rejected (instance −1)."""
    res = _stub([0, 0, 0, 1, -1], [0] * 5, [0] * 5, [0] * 5, cached=[5, 0, 15, 0, 0], prompt=[10, 10, 20, 10, 99], n=3)
    df = l09.instance_shares(res)
    assert df.share.tolist() == pytest.approx([0.75, 0.25, 0.0])
    assert df.hit_ratio.tolist() == pytest.approx([0.5, 0.0, 0.0])
    assert l09.describe_instance_shares(df, "x") == (
        "With `x`, instance 0 takes 75% of the requests (an even share is 33%) at a hit ratio of 0.500; the other "
        "instances 0%–25% each, at 0.000–0.000.")


# ----------------------------------------------------------------------------- the prose's unnumbered statements
def test_what_the_prose_says_of_the_runs_holds(board):
    """Statements the lecture makes without a number, on the trace it runs (released or stand-in): every prompt
    shares the first block (§3, §6's box, exercise 2's feedback); the Conductor's kvcentric leads the pools'
    board (the summary); on coupled nodes TBT separates the policies and Dynamo keeps the fewest within it
    (§3's "Why Dynamo", the summary); an unbounded belief goes stale only for prodstack_prefix, which loads one
    instance (§4)."""
    assert l09.hot_first_block("conversation")["share"] == 1.0
    assert board.index[0] == "kvcentric"
    tv = l09.tbt_vs_ttft()
    assert tv.tbt_slo.idxmin() == "dynamo" and np.ptp(tv.tbt_slo) > np.ptp(tv.ttft_slo)
    kc = l09.knowledge_cost(arch="coupled")
    spread = kc.drop(index="prodstack_prefix")
    assert kc.loc["prodstack_prefix", "stale_share_belief"] > 0.05 > 0.01 > spread.stale_share_belief.max()


def test_every_leaderboard_bar_carries_its_value_zero_ones_too(board):
    """Each bar of the leaderboard figure is labelled with its value; an exact zero reads "0"."""
    from mooncake_lab.plots import routers as rp

    b = board.copy()
    b.loc["prodstack_prefix", "slo_attainment"] = 0.0
    fig = rp.leaderboard_bars({("conversation", "disaggregated", "lecture 04"): b})
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == len(b) and labels == [rp.bar_value(v) for v in b.slo_attainment]
    assert "0" in labels and rp.bar_value(0.0) == "0" and rp.bar_value(0.0012) == "0.001"


def test_the_notebook_tables_are_for_people():
    """The tables the lecture shows: labels instead of raw column names, counts as integers, no cut cells."""
    t = l09.state_table()
    assert t["m: matched blocks"].dtype.kind == "i" and t["D: live KV tokens"].tolist() == ["150,000", "60,000", "20,000", "200,000"]
    assert l09.parameters().loc["llmd_max_prefix_tokens", "default"] == "131,072"
    kc = l09.readable(l09.knowledge_cost(arch="coupled", routers=["sglang"]))
    assert "sent on a stale belief (%)" in kc.columns and "stale_share_belief" not in kc.columns
    raw = l09.knowledge_cost(arch="coupled", routers=["sglang"])
    assert kc["sent on a stale belief (%)"].iloc[0] == round(100 * raw.stale_share_belief.iloc[0], 1)   # one unit: %
    sw = l09.sweep_table(l09.belief_sweep("sglang", (16, 0), cache_blocks=l09.SWEEP_CACHE_BLOCKS))
    assert list(sw.index) == ["16", "unbounded", "true cache (KV events)"]
    assert list(l09.weight_table(l09.dynamo_weight_sweep((0.0, 1.0))).index) == ["0", "1"]
    assert set(l09.worked_table(l09.worked_request(), compiled=True).columns) >= {"instance 0", "choice, compiled"}
    assert "choice, compiled" not in l09.worked_table(l09.worked_request()).columns   # describe_worked says they agree
    # round robin reads no cache and keeps no belief; only kvaware and Preble read a rate window
    assert l09.overview().loc["prodstack_rr", "knows the caches by"].startswith("none")
    bs = l09.belief_settings()
    assert (bs.loc["prodstack_rr"].iloc[:2] == "—").all() and bs.loc["dynamo", "rate window (s)"] == "—"
    assert bs.loc["preble", "rate window (s)"] == "180"
    # every letter of §1's rules is paired with its parameter once
    assert {"s", "κ", "ρ", "k_σ", "abs", "rel", "threshold", "w_p", "w_q", "w_kv"} <= set(l09.parameters()["symbol in §1"])
    # tables as markdown: text left-aligned, numbers right-aligned, a box collapsible
    md = l09.md_table(l09.readable(l09.knowledge_cost(arch="coupled")))
    assert "| :--- | :--- |" in md and "---:" in md and "37919.95" not in md
    assert l09.boxed("x", "y").startswith("<details><summary>x</summary>\n\n") and l09.boxed("x", "y").endswith("\n\n</details>")
    hot = l09.hot_first_block("conversation")
    assert l09.describe_hot_first_block(hot).startswith(f"{hot['sharing_first_block']:,} of {hot['requests']:,}")


def test_the_notes_numbers_are_the_simulators_defaults():
    """The rule parameters the router notes state are the ones the simulator runs (RouterConfig,
    SYSTEM_DEFAULTS): each snippet, with its number computed from the code, occurs in the notes."""
    from mooncake_lab.sim.routers import SYSTEM_DEFAULTS

    rc = RouterConfig()
    pd_, co = rc.resolve("llmd", True, 1, 512), rc.resolve("llmd", False, 1, 512)
    g = "{:g}".format
    text = " ".join(NOTES.read_text(encoding="utf-8").split())
    snippets = [
        f"κ = {g(rc.dynamo_overlap_credit)}, the prefill scale s = {g(rc.dynamo_prefill_scale)}, the request weight "
        f"ρ = {g(rc.dynamo_request_weight)} and the temperature T = {g(rc.dynamo_temperature)}",
        f"with a {g(SYSTEM_DEFAULTS['dynamo'][2])} s time-to-live",
        f"threshold {g(rc.sglang_cache_threshold)}, absolute bound {rc.sglang_balance_abs} and relative bound "
        f"{g(rc.sglang_balance_rel)}",
        f"prefix {g(co.llmd_w_prefix)}, queue {g(co.llmd_w_queue)}, KV utilisation {g(co.llmd_w_kv)}",
        f"use prefix {g(pd_.llmd_w_prefix)} and queue {g(pd_.llmd_w_queue)}",
        f"capped at llm-d's match limit ({rc.llmd_max_prefix_tokens:,} tokens)",
        f"`kv_aware_threshold` = {rc.prodstack_kv_threshold} tokens",
        f"(lowest QPS, a {g(SYSTEM_DEFAULTS['prodstack_kv'][3])} s window)",
        f"`IMBALANCE_ABS` = {rc.aibrix_imbalance_abs}",
        f"with k_σ = {g(rc.aibrix_std_factor)}",
        f"(about {SYSTEM_DEFAULTS['aibrix'][1]} blocks of 512 tokens) with a {g(SYSTEM_DEFAULTS['aibrix'][2] / 60)}-minute",
        f"if the in-flight spread exceeds {rc.aibrix_pd_prefill_imbalance}",
        f"running spread of at least {g(rc.aibrix_decode_max_request)}",
        f"a throughput spread above {rc.aibrix_decode_max_throughput:,.0f} tokens/s",
        f"window {g(SYSTEM_DEFAULTS['preble'][3] / 60)} minutes, decode length {g(rc.preble_decode_len)} tokens, "
        f"{g(rc.preble_tpot_s)} s per token",
    ]
    for s in snippets:
        assert s in text, s
