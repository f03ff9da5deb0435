"""Synthetic Mooncake-like traces, calibrated to the released traces (deterministic for a seed).

The generator builds *sessions* and lays their requests on a time line:

* a session may start with a **shared prefix** drawn from a pool with Zipf popularity — a system
  prompt shared by every conversation, a document read by many requests, or an agent's tool
  specification;
* it then runs one or more **turns**: turn ``j``'s prompt = the shared prefix + every earlier turn's
  user message and answer + its own new message, so later turns re-use the earlier turns' block
  chain (multi-turn chat, or a tool/agent loop appending tool results);
* sessions start as a Poisson process (or a *bursty* one whose rate changes every minute), and the
  turns of a session follow each other after exponential think times.

Block ids are prefix-chained exactly like the released traces: full 512-token blocks of the shared
prefix are shared by every session that uses it, full blocks of the session's own context are
shared by its later turns, and the last, partial block of a prompt is unique to that request. Ids
are remapped to dense ints in order of first appearance.

Presets (``PRESETS``) reproduce the released traces' request count, duration, mean input and
output lengths and infinite-cache hit ratio to within 10% (tests/test_synthetic.py); the targets and
their sources are in ``TARGETS``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .traces import BLOCK_TOKENS, MAX_BLOCKS, MAX_REQUESTS, MAX_TOKENS, Trace, trace_from_requests
from .validate import InputError, choice, integer, real

__all__ = ["SessionModel", "PRESETS", "TARGETS", "STAND_IN", "synthetic_trace"]


@dataclass(frozen=True)
class SessionModel:
    """Parameters of the session generator (lengths in tokens, times in seconds).

    Lengths are lognormal: ``median`` and ``sigma`` (of the log), clipped to ``[lo, hi]``.
    Every value was fitted by hand so the preset meets ``TARGETS`` (see the module docstring).
    """

    n_requests: int             # default trace size
    duration_s: float           # default duration (last arrival), s
    p_shared: float             # probability a session starts with a shared prefix
    shared_pool_per_session: float  # pool size = max(shared_pool_min, this × number of sessions)
    shared_pool_min: int
    shared_zipf: float          # popularity of pool item k ∝ 1 / k**shared_zipf
    shared_median: float        # shared-prefix length (lognormal; sigma 0 ⇒ fixed)
    shared_sigma: float
    shared_hi: int
    p_continue: float           # probability of one more turn (number of turns is geometric)
    max_turns: int
    first_median: float         # first user message
    first_sigma: float
    first_lo: int
    next_median: float          # later user messages / tool results
    next_sigma: float
    p_short_out: float          # share of answers drawn from the "short" lognormal
    short_out_median: float
    short_out_sigma: float
    out_median: float
    out_sigma: float
    out_hi: int
    think_mean_s: float         # mean gap between turns of a session, s
    max_input: int              # prompts longer than this end their session (tokens)
    bucket_s: float = 0.0       # round arrivals down to multiples of this (0: ms resolution)
    burst_cv: float = 0.3       # "bursty": CV of the per-minute rate (index of dispersion of per-minute counts ≈ 1 + 0.09 × requests per minute; the real synthetic trace: ≈ 13)


#: Longest synthetic trace, s: 10**7 s (116 days; the released traces span under an hour). Keeps the
#: per-minute rate arrays of the generator small.
MAX_DURATION_S = 1e7
_DAY_S = 86_400.0

# Allowed range of every SessionModel field (kind, lo, hi): lengths within MAX_TOKENS, probabilities in
# [0, 1], log-sigmas ≤ 5 (e**5 ≈ 150× the median at one sigma), times within a day, counts bounded so
# the generator's arrays stay bounded.
_FIELD_BOUNDS: dict[str, tuple[str, float, float]] = {
    "n_requests": ("int", 1, MAX_REQUESTS), "duration_s": ("real", 1e-3, MAX_DURATION_S),
    "p_shared": ("real", 0, 1), "shared_pool_per_session": ("real", 0, 10), "shared_pool_min": ("int", 1, 10**6),
    "shared_zipf": ("real", 0, 10), "shared_median": ("real", 1, MAX_TOKENS), "shared_sigma": ("real", 0, 5),
    "shared_hi": ("int", 1, MAX_TOKENS), "p_continue": ("real", 0, 0.999), "max_turns": ("int", 1, 1000),
    "first_median": ("real", 1, MAX_TOKENS), "first_sigma": ("real", 0, 5), "first_lo": ("int", 1, MAX_TOKENS),
    "next_median": ("real", 1, MAX_TOKENS), "next_sigma": ("real", 0, 5), "p_short_out": ("real", 0, 1),
    "short_out_median": ("real", 1, MAX_TOKENS), "short_out_sigma": ("real", 0, 5),
    "out_median": ("real", 1, MAX_TOKENS), "out_sigma": ("real", 0, 5), "out_hi": ("int", 1, MAX_TOKENS),
    "think_mean_s": ("real", 0, _DAY_S), "max_input": ("int", 1, MAX_TOKENS), "bucket_s": ("real", 0, 3600),
    "burst_cv": ("real", 0.01, 10),
}


def _check_model(m: SessionModel, where: str) -> SessionModel:
    """``m`` with every field checked against ``_FIELD_BOUNDS`` (InputError naming the field)."""
    vals = {}
    for f in fields(SessionModel):
        kind, lo, hi = _FIELD_BOUNDS[f.name]
        v = getattr(m, f.name)
        vals[f.name] = (integer(v, f.name, lo=int(lo), hi=int(hi), where=where) if kind == "int"
                        else real(v, f.name, lo=lo, hi=hi, where=where))
    return SessionModel(**vals)


# Targets: conversation and synthetic = measured on the released files at trace_data.PINNED_COMMIT
# (tests/test_synthetic.py recomputes them from the files); toolagent = FAST'25 Table 2 (23,608 requests
# in one hour, avg input 8,596, avg output 182, cache ratio 59%). Ratios are fractions.
TARGETS: dict[str, dict[str, float]] = {
    "conversation-like": {"requests": 12_031, "duration_s": 3_537, "mean_input": 12_035, "mean_output": 343,
                          "cache_ratio": 0.374, "median_input": 6_909, "p99_input": 85_400},
    "synthetic-like": {"requests": 3_993, "duration_s": 1_022, "mean_input": 15_325, "mean_output": 149,
                       "cache_ratio": 0.651, "median_input": 11_587, "p99_input": 66_456},
    "toolagent-like": {"requests": 23_608, "duration_s": 3_600, "mean_input": 8_596, "mean_output": 182,
                       "cache_ratio": 0.59},
}

PRESETS: dict[str, SessionModel] = {
    # One 512-token system prompt shared by every request (block 0 of every line of the real file);
    # 38.7% of real requests continue an earlier chat (they hit more than block 0); the shortest real
    # prompt is 891 tokens = 512 (system) + 379 (first_lo).
    "conversation-like": SessionModel(
        n_requests=12_031, duration_s=3_537, p_shared=1.0, shared_pool_per_session=0.0, shared_pool_min=1,
        shared_zipf=0.0, shared_median=512, shared_sigma=0.0, shared_hi=512,
        p_continue=0.37, max_turns=12, first_median=4_600, first_sigma=1.3, first_lo=379,
        next_median=1_500, next_sigma=1.3,
        p_short_out=0.12, short_out_median=8, short_out_sigma=1.0, out_median=330, out_sigma=0.55, out_hi=2_000,
        think_mean_s=120.0, max_input=128_000, bucket_s=3.0),
    # Long documents read by several requests (44% of real requests re-use almost their whole
    # prompt) and many tiny prompts (a quarter of the real ones are under 280 tokens).
    "synthetic-like": SessionModel(
        n_requests=3_993, duration_s=1_022, p_shared=0.7, shared_pool_per_session=0.16, shared_pool_min=1,
        shared_zipf=0.4, shared_median=16_500, shared_sigma=0.7, shared_hi=190_000,
        p_continue=0.0, max_turns=1, first_median=250, first_sigma=1.6, first_lo=5,
        next_median=250, next_sigma=1.6,
        p_short_out=0.5, short_out_median=10, short_out_sigma=1.0, out_median=245, out_sigma=0.6, out_hi=900,
        think_mean_s=30.0, max_input=200_000),
    # Agents: a tool specification shared by the sessions of one agent, then loops appending tool
    # results. Only Table 2's averages of the real toolagent trace are published; this shape is our
    # assumption, fitted to those averages.
    "toolagent-like": SessionModel(
        n_requests=23_608, duration_s=3_600, p_shared=0.9, shared_pool_per_session=0.0, shared_pool_min=100,
        shared_zipf=1.0, shared_median=2_500, shared_sigma=0.3, shared_hi=16_000,
        p_continue=0.47, max_turns=20, first_median=2_150, first_sigma=1.2, first_lo=20,
        next_median=1_000, next_sigma=1.1,
        p_short_out=0.2, short_out_median=15, short_out_sigma=0.8, out_median=175, out_sigma=0.7, out_hi=2_000,
        think_mean_s=8.0, max_input=128_000),
}

#: Which preset stands in for each released trace when the real file is unavailable. The arXiv
#: trace has the toolagent trace's size and lengths (23,608 requests, ≈ 8,590 / 182 tokens) but a
#: lower cache ratio (≈ 50% vs 59%: measured on the released arXiv file; FAST'25 Table 2).
STAND_IN = {"conversation": "conversation-like", "synthetic": "synthetic-like",
            "toolagent": "toolagent-like", "arxiv": "toolagent-like"}


def _lognormal(rng, n, median, sigma, lo, hi):
    x = median * np.exp(sigma * rng.standard_normal(n)) if sigma > 0 else np.full(n, float(median))
    return np.clip(np.rint(x), lo, hi).astype(np.int64)


def _session_starts(rng, rate, t0, t1, arrivals, burst_cv):
    """Start times of sessions in [t0, t1): Poisson at ``rate``/s, or bursty (rate × Gamma per minute)."""
    period = 60.0  # s; the bursty rate changes once a minute (real traces are summarised per minute)
    n_per = int(math.ceil((t1 - t0) / period))
    lam = np.full(n_per, rate * period)
    if arrivals == "bursty":
        k = 1.0 / burst_cv**2
        lam = lam * rng.gamma(k, 1.0 / k, n_per)
    counts = rng.poisson(lam)
    starts = t0 + period * (np.repeat(np.arange(n_per), counts) + rng.random(counts.sum()))
    starts = starts[starts < t1]
    return np.sort(starts)


def _resolve_size(m: SessionModel, n_requests, duration_s, rate):
    w = "synthetic_trace"
    if n_requests is not None:
        n_requests = integer(n_requests, "n_requests", lo=1, hi=MAX_REQUESTS, where=w)
    if duration_s is not None:
        duration_s = real(duration_s, "duration_s", lo=1e-3, hi=MAX_DURATION_S, where=w)
    if rate is not None:
        rate = real(rate, "rate", lo=0, lo_open=True, hi=MAX_REQUESTS, where=w)
    given = {k: v for k, v in (("n_requests", n_requests), ("duration_s", duration_s), ("rate", rate))
             if v is not None}
    if len(given) == 3:
        raise InputError("give at most two of n_requests, duration_s and rate (the third follows: "
                         f"n_requests = rate × duration_s); got all three: {given}")
    default_rate = m.n_requests / m.duration_s
    if n_requests is not None:
        n = n_requests
        d = duration_s if duration_s is not None else n / (rate if rate is not None else default_rate)
    else:
        d = duration_s if duration_s is not None else (m.duration_s if rate is None else m.n_requests / rate)
        n = int(round(d * (rate if rate is not None else default_rate)))
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError(f"{w}: the requested trace would have {n:,} requests; allowed: 1 to {MAX_REQUESTS:,} "
                         f"(n_requests = rate × duration_s)")
    if not 1e-3 <= d <= MAX_DURATION_S:
        raise InputError(f"{w}: the requested trace would last {d:.4g} s; allowed: 0.001 to {MAX_DURATION_S:.0e} s "
                         f"(duration_s = n_requests / rate)")
    return n, d


def synthetic_trace(preset: str = "conversation-like", n_requests: int | None = None,
                    duration_s: float | None = None, rate: float | None = None, seed: int = 0,
                    arrivals: str = "poisson", **overrides) -> Trace:
    """A synthetic trace from a calibrated preset (deterministic for a ``seed``).

    Parameters
    ----------
    preset : ``"conversation-like"``, ``"synthetic-like"`` or ``"toolagent-like"`` (see ``PRESETS``).
    n_requests, duration_s, rate : size (requests), time span (s, first to last arrival) and rate
        (requests/s); give at most two, the third follows. Defaults: the preset's (the real trace's)
        size and duration. The trace has exactly ``n_requests`` requests, and its arrival times are
        scaled so the last one arrives at ``duration_s``.
    seed : seed of ``np.random.default_rng``; the same seed gives identical arrays.
    arrivals : ``"poisson"`` (sessions start as a Poisson process) or ``"bursty"`` (its rate is
        multiplied every minute by a Gamma factor of mean 1 and CV ``burst_cv``).
    **overrides : any :class:`SessionModel` field, e.g. ``p_continue=0.6`` or ``bucket_s=0``.

    Returns
    -------
    Trace named ``"synthetic:<preset>"`` whose ``source`` names the generator, preset and seed.
    """
    w = "synthetic_trace"
    preset = choice(preset, "preset", PRESETS, where=w)
    arrivals = choice(arrivals, "arrivals", ("poisson", "bursty"), where=w)
    known = {f.name for f in fields(SessionModel)}
    bad = sorted(set(overrides) - known)
    if bad:
        raise InputError(f"unknown SessionModel field(s) {bad}; allowed: {sorted(known)}")
    m = PRESETS[preset]
    if overrides:
        from dataclasses import replace
        m = _check_model(replace(m, **overrides), w)
    seed = integer(seed, "seed", lo=0, hi=2**63 - 1, where=w)
    n, d = _resolve_size(m, n_requests, duration_s, rate)

    # Sessions whose first turns fall before 0 s are generated too (a warm-up of a few session
    # lengths) so the trace starts in steady state, like a window cut from a live service.
    mean_turns = (1 - m.p_continue ** m.max_turns) / (1 - m.p_continue)
    warmup = 3 * mean_turns * m.think_mean_s
    factor = 1.3
    # requests generated in the last attempt ≈ n × (warm-up + horizon) / duration: keep it bounded
    drawn = n * (warmup + factor * 1.6**5 * d) / d
    if drawn > 50 * MAX_REQUESTS:
        raise InputError(f"{w}: think_mean_s={m.think_mean_s:g} s with {mean_turns:.3g} turns per session needs a "
                         f"warm-up of {warmup:.3g} s before a {d:.3g} s trace (≈ {drawn:.2g} requests drawn, more "
                         f"than {50 * MAX_REQUESTS:,}); shorten think_mean_s or lengthen duration_s")
    for attempt in range(6):  # grow the horizon until at least n requests arrive after 0 s
        rng = np.random.default_rng([seed, attempt])
        tr = _generate(rng, m, n, d, warmup, factor, arrivals, mean_turns)
        if tr is not None:
            break
        factor *= 1.6
    else:  # e.g. first_lo > max_input: every session is dropped
        raise InputError(f"{w}: could not generate {n:,} requests with these overrides "
                         f"({', '.join(f'{k}={v}' for k, v in sorted(overrides.items()))}); "
                         f"check that the lengths fit max_input")
    arrival, inp, out, counts, raw = tr
    name = f"synthetic:{preset}"
    src = f"mooncake_lab.synthetic preset={preset} seed={seed} arrivals={arrivals}"
    if overrides:
        src += " overrides=" + ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return trace_from_requests(arrival, inp, out, counts, raw, name=name, source=src)


def _generate(rng, m: SessionModel, n: int, d: float, warmup: float, factor: float, arrivals: str,
              mean_turns: float):
    B = BLOCK_TOKENS
    session_rate = n / d / mean_turns
    starts = _session_starts(rng, session_rate, -warmup, factor * d, arrivals, m.burst_cv)
    S = len(starts)
    # turns per session: geometric, capped
    turns = np.minimum(rng.geometric(1 - m.p_continue, S) if m.p_continue > 0 else np.ones(S, np.int64),
                       m.max_turns).astype(np.int64)
    R = int(turns.sum())
    sess = np.repeat(np.arange(S), turns)
    first_of = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(turns, out=first_of[1:])
    j = np.arange(R) - first_of[sess]            # turn index within the session
    # shared prefixes
    pool = max(m.shared_pool_min, int(round(m.shared_pool_per_session * S)))
    pop = 1.0 / np.arange(1, pool + 1) ** m.shared_zipf
    has = rng.random(S) < m.p_shared
    pref = np.where(has, rng.choice(pool, S, p=pop / pop.sum()), -1)
    pref_len = _lognormal(rng, pool, m.shared_median, m.shared_sigma, B, m.shared_hi)
    L = np.where(pref >= 0, pref_len[np.maximum(pref, 0)], 0)
    # lengths
    u = np.where(j == 0, _lognormal(rng, R, m.first_median, m.first_sigma, m.first_lo, m.max_input),
                 _lognormal(rng, R, m.next_median, m.next_sigma, 1, m.max_input))
    short = rng.random(R) < m.p_short_out
    o = np.where(short, _lognormal(rng, R, m.short_out_median, m.short_out_sigma, 1, m.out_hi),
                 _lognormal(rng, R, m.out_median, m.out_sigma, 1, m.out_hi))
    step = u + o
    csum = np.cumsum(step)
    before = csum - step - (csum - step)[first_of[sess]]  # Σ_{i<j} (u_i + o_i) within the session
    inp = L[sess] + before + u
    gaps = rng.exponential(m.think_mean_s, R)
    gaps[j == 0] = 0.0
    g = np.cumsum(gaps)
    t = starts[sess] + g - g[first_of[sess]]
    keep = (inp <= m.max_input) & (t >= 0)
    # order by arrival (stable: a session's turns keep their order on ties)
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(t[idx], kind="stable")]
    if len(idx) < n:
        return None
    idx = idx[:n]
    t_sel = t[idx]
    span = t_sel[-1] - t_sel[0]
    arrival = (t_sel - t_sel[0]) * (d / span if span > 0 else 1.0)
    if m.bucket_s > 0:
        arrival = np.floor(arrival / m.bucket_s) * m.bucket_s
    arrival = np.round(arrival * 1000.0) / 1000.0   # ms resolution, like the released files
    inp_s, out_s = inp[idx], o[idx]
    # block ids: shared-prefix blocks, session blocks, and one unique partial last block
    counts = -(-inp_s // B)
    tot = int(counts.sum())
    if tot > MAX_BLOCKS:
        raise InputError(f"synthetic_trace: {n:,} requests of mean input {inp_s.mean():,.0f} tokens would hold "
                         f"{tot:,} blocks, more than {MAX_BLOCKS:,}; ask for fewer requests (n_requests) or shorter "
                         f"inputs (max_input)")
    req = np.repeat(np.arange(n), counts)
    pos = np.arange(tot) - np.repeat(np.cumsum(counts) - counts, counts)
    s_of = sess[idx][req]
    n_shared = (L // B)[s_of]
    full = pos < (inp_s // B)[req]
    maxb = m.max_input // B + 2
    raw = np.where(pos < n_shared, np.maximum(pref, 0)[s_of] * maxb + pos,
                   (pool + s_of) * maxb + pos)
    raw = np.where(full, raw, (pool + S) * maxb + req)
    return arrival, inp_s, out_s, counts, raw
