"""Properties of scoring and weights for arbitrary inputs (spec 04 §3)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.auto.engine.scoring import rank, score_pool
from gateway.auto.engine.types import CandidateInput, RequestFeatures
from gateway.auto.engine.weights import FACTORS, normalize_scoring_weights

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
MAYBE_FLOAT = st.none() | ANY_FLOAT
CIRCUITS = ("open", "half_open", "closed")  # worst to best
TIERS = ("free", "standard", "pro", "ultra")  # worst to best
FEW = settings(max_examples=150, deadline=None, database=None)


@st.composite
def candidates(draw, order=0):
    return CandidateInput(
        key=f"p{order}/m@c",
        provider=f"p{order}",
        model="m",
        connection="c",
        order=order,
        input_cost=draw(MAYBE_FLOAT),
        output_cost=draw(MAYBE_FLOAT),
        p95_ms=draw(MAYBE_FLOAT),
        std_ms=draw(MAYBE_FLOAT),
        failure_rate=draw(MAYBE_FLOAT),
        good_rate=draw(MAYBE_FLOAT),
        circuit=draw(st.sampled_from((*CIRCUITS, "weird"))),
        quota_pct=draw(MAYBE_FLOAT),
        resets_at=draw(MAYBE_FLOAT),
        window_s=draw(MAYBE_FLOAT),
        account_tier=draw(st.sampled_from((*TIERS, "weird"))),
        context_window=draw(st.none() | st.integers(-10, 10**7)),
        n_conn=draw(st.integers(-5, 50)),
        in_flight=draw(st.integers(-5, 50)),
        max_concurrency=draw(st.integers(-5, 50)),
        fitness=draw(MAYBE_FLOAT),
    )


@st.composite
def pools(draw):
    size = draw(st.integers(1, 6))
    return [draw(candidates(order=i)) for i in range(size)]


requests = st.builds(
    RequestFeatures,
    need_tokens=st.integers(0, 10**6),
    est_in=st.integers(0, 10**6),
    est_out=st.integers(0, 10**5),
    cache_key=st.none() | st.text(max_size=8),
    tier_hint=st.sampled_from((None, "free", "cheap", "premium", "odd")),
    complexity_aware=st.booleans(),
    complexity=st.sampled_from(("low", "medium", "high", "odd")),
    now=ANY_FLOAT,
)
weight_values = st.floats(0, 1e6) | st.integers(0, 10**6)
partial_weights = st.dictionaries(st.sampled_from(FACTORS), weight_values, max_size=16)
raw_weights = st.dictionaries(
    st.sampled_from(FACTORS), st.floats(0, 10, allow_nan=False), max_size=16
)


@FEW
@given(pools(), raw_weights, requests)
def test_every_factor_and_score_stays_in_0_1(pool, weights, req):
    scored = score_pool(pool, weights, req)

    assert [s.key for s in scored] == [c.key for c in pool]
    for item in scored:
        assert list(item.factors) == list(FACTORS)
        for value in item.factors.values():
            assert 0.0 <= value <= 1.0
        assert 0.0 <= item.score <= 1.0
        assert 0.0 <= item.default_score <= 1.0
    assert sorted(s.key for s in rank(scored)) == sorted(c.key for c in pool)


@FEW
@given(partial_weights)
def test_normalized_weights_sum_to_1_over_all_16_factors(partial):
    weights = normalize_scoring_weights(partial)

    assert set(weights) == set(FACTORS)
    assert math.fsum(weights.values()) == pytest.approx(1.0)
    assert all(value >= 0 for value in weights.values())


# --- dominance: better on every input never ranks lower -------------------------------

unit = st.floats(0, 1)
shrink = st.floats(0, 0.99)  # the better candidate's share of the worse value


@st.composite
def dominating_pair(draw):
    """(worse, better): better is at least as good on every input, and strictly
    better on cost, p95 and std."""
    in_cost = draw(st.floats(0.01, 50))
    out_cost = draw(st.floats(0.01, 100))
    p95 = draw(st.floats(1, 20_000))
    std = draw(st.floats(0.01, 5000))
    failure = draw(unit)
    good = draw(unit)
    quota = draw(st.floats(0, 100))
    fit = draw(unit)
    circuit = draw(st.integers(0, 2))
    tier = draw(st.integers(0, 3))
    window = draw(st.integers(1, 10**6))
    limit = draw(st.integers(0, 20))
    in_flight = draw(st.integers(0, 20))
    n_conn = draw(st.integers(1, 12))
    worse = CandidateInput(
        key="w/m@c",
        provider="w",
        model="m",
        connection="c",
        order=draw(st.integers(0, 9)),
        input_cost=in_cost,
        output_cost=out_cost,
        p95_ms=p95,
        std_ms=std,
        failure_rate=failure,
        good_rate=good,
        circuit=CIRCUITS[circuit],
        quota_pct=quota,
        account_tier=TIERS[tier],
        context_window=window,
        max_concurrency=limit,
        in_flight=in_flight,
        n_conn=n_conn,
        fitness=fit,
    )
    better = CandidateInput(
        key="b/m@c",
        provider="b",
        model="m",
        connection="c",
        order=draw(st.integers(0, 9)),
        input_cost=in_cost * draw(shrink),
        output_cost=out_cost * draw(shrink),
        p95_ms=p95 * draw(shrink),
        std_ms=std * draw(shrink),
        failure_rate=failure * draw(unit),
        good_rate=draw(st.floats(good, 1)),
        circuit=CIRCUITS[draw(st.integers(circuit, 2))],
        quota_pct=draw(st.floats(quota, 100)),
        account_tier=TIERS[draw(st.integers(tier, 3))],
        context_window=window + draw(st.integers(0, 10**6)),
        max_concurrency=limit,
        in_flight=draw(st.integers(0, in_flight)),
        n_conn=n_conn + draw(st.integers(0, 5)),
        fitness=draw(st.floats(fit, 1)),
    )
    return worse, better


@FEW
@given(dominating_pair(), st.lists(candidates(order=20), max_size=3), raw_weights)
def test_a_candidate_better_on_every_input_never_ranks_lower(pair, others, weights):
    worse, better = pair
    others = [
        CandidateInput(**{**_fields(c), "key": f"o{i}/m@c", "order": 10 + i})
        for i, c in enumerate(others)
    ]
    req = RequestFeatures(need_tokens=1500, est_in=500, now=0.0)

    ranked = [s.key for s in rank(score_pool([worse, *others, better], weights, req))]

    assert ranked.index(better.key) < ranked.index(worse.key)


def _fields(candidate):
    return {name: getattr(candidate, name) for name in CandidateInput.__slots__}
