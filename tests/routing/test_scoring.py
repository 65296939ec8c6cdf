"""Scoring and ranking (spec 04 §3, §11 examples 1, 2, 3, 7 and 8) on Pool P."""

import math

import pytest

from gateway.auto.engine.budget import estimate_cost
from gateway.auto.engine.scoring import price_class, rank, score_pool
from gateway.auto.engine.types import RequestFeatures, Scored
from gateway.auto.engine.weights import DEFAULT_WEIGHTS, FACTORS, MODE_PACKS
from gateway.kernel.rendezvous import rendezvous_order

A, B, C = (
    "openai/gpt-5-nano@main",
    "anthropic/claude-sonnet-4@main",
    "google/gemini-2.5-flash@free",
)
REQ = RequestFeatures(task_type="coding", need_tokens=1500, est_in=500, est_out=1000)


def keys(scored):
    return [s.key for s in scored]


def factors4(scored):
    return {name: round(value, 4) for name, value in scored.factors.items()}


def only(cand, req=REQ, weights=DEFAULT_WEIGHTS):
    """The one Scored of a pool of one."""
    (scored,) = score_pool([cand], weights, req)
    return scored


# --- §11 examples 1-3 -----------------------------------------------------------------


def test_example_1_factors_of_pool_p(pool_p):
    a, b, c = score_pool(pool_p, DEFAULT_WEIGHTS, REQ)

    shared = {
        "tierAffinity": 0.5,
        "specificityMatch": 0.5,
        "resetWindowAffinity": 0.5,
        "contextAffinity": 1.0,
        "sessionAvailability": 1.0,
        "quality": 1.0,
        "reliability": 1.0,
        "connectionDensity": 0.0,
        "cacheAffinity": 0.0,
    }
    assert factors4(a) == {
        **shared,
        "quota": 0.4,
        "health": 1.0,
        "costInv": 0.9756,
        "latencyInv": 0.0,
        "stability": 0.0,
        "tierPriority": 0.67,
        "taskFit": 0.65,
    }
    assert factors4(b) == {
        **shared,
        "quota": 1.0,
        "health": 1.0,
        "costInv": 0.0,
        "latencyInv": 0.2,
        "stability": 0.6,
        "tierPriority": 1.0,
        "taskFit": 0.95,
    }
    assert factors4(c) == {
        **shared,
        "quota": 0.9,
        "health": 0.5,
        "costInv": 0.8487,
        "latencyInv": 0.6,
        "stability": 0.2,
        "tierPriority": 0.0,
        "taskFit": 0.82,
    }
    for scored in (a, b, c):
        assert list(scored.factors) == list(FACTORS)


def test_pool_p_inputs_resolve_to_the_example_costs_and_latencies(pool_p):
    a, b, c = score_pool(pool_p, DEFAULT_WEIGHTS, REQ)

    assert [round(s.cost, 4) for s in (a, b, c)] == [0.19, 7.80, 1.18]
    assert [s.p95 for s in (a, b, c)] == [2000, 1600, 800]
    assert [s.std for s in (a, b, c)] == [500, 200, 400]
    assert [s.error_rate for s in (a, b, c)] == [0.0, 0.0, 0.0]
    assert [s.circuit for s in (a, b, c)] == ["closed", "closed", "half_open"]
    assert [s.window for s in (a, b, c)] == [200_000] * 3
    assert b.capabilities == frozenset({"tools", "reasoning", "json"})
    assert [s.candidate for s in (a, b, c)] == list(pool_p)


def test_example_2_default_scores_and_order_b_c_a(pool_p):
    scored = score_pool(pool_p, DEFAULT_WEIGHTS, REQ)

    assert keys(scored) == [A, B, C]  # input order
    assert [round(s.score, 4) for s in scored] == [0.6113, 0.6476, 0.6435]
    assert [s.default_score for s in scored] == [s.score for s in scored]
    assert keys(rank(scored)) == [B, C, A]


@pytest.mark.parametrize(
    ("pack", "scores", "order"),
    [
        ("cost-saver", [0.7354, 0.5581, 0.6884], [A, C, B]),
        ("quality-first", [0.5836, 0.8119, 0.6306], [B, C, A]),
        ("ship-fast", [0.5332, 0.6762, 0.6269], [B, C, A]),
    ],
)
def test_example_3_packs(pool_p, pack, scores, order):
    scored = score_pool(pool_p, MODE_PACKS[pack], REQ)

    assert [round(s.score, 4) for s in scored] == scores
    assert keys(rank(scored)) == order
    # the DEFAULT score is computed in the same pass, whatever the weights
    assert [round(s.default_score, 4) for s in scored] == [0.6113, 0.6476, 0.6435]


def test_weights_missing_from_the_map_count_as_zero(pool_p):
    scored = score_pool(pool_p, {"costInv": 1.0}, REQ)

    assert [s.score for s in scored] == [s.factors["costInv"] for s in scored]


def test_scored_items_equal_ones_built_by_the_constructor(pool_p):
    (a, *_) = score_pool(pool_p, DEFAULT_WEIGHTS, REQ)

    rebuilt = Scored(
        key=a.key,
        provider="openai",
        model="gpt-5-nano",
        connection="main",
        order=0,
        score=a.score,
        default_score=a.default_score,
        factors=dict(a.factors),
        cost=a.cost,
        est_cost_usd=a.est_cost_usd,
        p95=2000,
        std=500,
        error_rate=0.0,
        circuit="closed",
        capabilities=frozenset({"tools", "json"}),
        window=200_000,
        candidate=pool_p[0],
    )
    assert a == rebuilt
    with pytest.raises(AttributeError):
        a.score = 1.0  # type: ignore[misc]


# --- §3.6 ranking, §11 example 8 ------------------------------------------------------


def test_example_8_identical_data_ranks_by_configured_order(make_input):
    backup = make_input("openai/gpt-5-nano@backup", 1, input_cost=0.05, p95_ms=900)
    main = make_input("openai/gpt-5-nano@main", 0, input_cost=0.05, p95_ms=900)

    ranked = rank(score_pool([backup, main], DEFAULT_WEIGHTS, REQ))

    assert keys(ranked) == ["openai/gpt-5-nano@main", "openai/gpt-5-nano@backup"]


def test_example_8_equal_priorities_fall_to_name_order(make_input):
    # Configured order is priority, then connection name: "backup" < "main".
    main = make_input("openai/gpt-5-nano@main", 1, input_cost=0.05)
    backup = make_input("openai/gpt-5-nano@backup", 0, input_cost=0.05)

    ranked = rank(score_pool([main, backup], DEFAULT_WEIGHTS, REQ))

    assert keys(ranked)[0] == "openai/gpt-5-nano@backup"


def _scored(key, score, p95, order):
    return Scored(
        key=key,
        provider="p",
        model="m",
        connection="c",
        order=order,
        score=score,
        default_score=score,
        factors={},
        cost=1.0,
        est_cost_usd=0.0,
        p95=p95,
        std=10.0,
        error_rate=None,
        circuit="closed",
        capabilities=None,
        window=None,
        candidate=None,  # type: ignore[arg-type]
    )


def test_scores_equal_to_nine_decimals_tie_and_lower_p95_wins():
    slow = _scored("slow", 0.5000000001, 900.0, 0)
    fast = _scored("fast", 0.5000000000, 800.0, 1)
    clear = _scored("clear", 0.500000002, 2000.0, 2)

    assert keys(rank([slow, fast, clear])) == ["clear", "fast", "slow"]


def test_nan_p95_ranks_after_every_number_at_the_same_score():
    odd = _scored("odd", 0.5, math.nan, 0)
    slow = _scored("slow", 0.5, 9000.0, 1)

    assert keys(rank([odd, slow])) == ["slow", "odd"]


# --- §3.3 pool-relative normalisation -------------------------------------------------


def test_example_7_a_pool_of_one_scores_every_inv_factor_1(make_input):
    scored = only(make_input("p/m@c", input_cost=9.0, p95_ms=5000, std_ms=900))

    assert scored.factors["costInv"] == 1.0
    assert scored.factors["latencyInv"] == 1.0
    assert scored.factors["stability"] == 1.0


def test_equal_values_across_the_pool_score_1_for_all(make_input):
    pool = [make_input(f"p/m{i}@c", i, input_cost=2.0, p95_ms=700) for i in range(3)]

    scored = score_pool(pool, DEFAULT_WEIGHTS, REQ)

    assert {s.factors["costInv"] for s in scored} == {1.0}
    assert {s.factors["latencyInv"] for s in scored} == {1.0}


def test_floors_keep_tiny_values_from_dominating(make_input):
    # max cost 0.0005 < floor 0.001: M = 0.001
    pool = [
        make_input("p/a@c", 0, input_cost=0.0),
        make_input("p/b@c", 1, input_cost=0.0005),
    ]

    a, b = score_pool(pool, DEFAULT_WEIGHTS, REQ)

    assert a.factors["costInv"] == 1.0
    assert b.factors["costInv"] == pytest.approx(0.5)


def test_unknown_inputs_take_the_section_3_1_defaults(make_input):
    unknown = make_input("p/u@c", 0)
    known = make_input("p/k@c", 1, input_cost=2.0, p95_ms=3000, std_ms=600)

    u, k = score_pool([unknown, known], DEFAULT_WEIGHTS, REQ)

    assert (u.cost, u.p95, u.std) == (1.0, 1500.0, 150.0)
    assert u.factors["costInv"] == pytest.approx(0.5)
    assert u.factors["latencyInv"] == pytest.approx(0.5)
    assert u.factors["stability"] == pytest.approx(0.75)
    assert u.error_rate is None
    assert k.factors["costInv"] == 0.0


def test_std_of_a_fast_model_without_data_is_at_least_10_ms(make_input):
    scored = only(make_input("p/m@c", p95_ms=40))

    assert scored.std == 10.0


@pytest.mark.parametrize(
    ("input_cost", "output_cost", "cost"),
    [(2.0, 4.0, 2.8), (2.0, None, 2.0), (None, 4.0, 4.0), (None, None, 1.0)],
)
def test_blended_cost_uses_the_known_prices(make_input, input_cost, output_cost, cost):
    scored = only(make_input("p/m@c", input_cost=input_cost, output_cost=output_cost))

    assert scored.cost == pytest.approx(cost)


def test_a_non_finite_input_zeroes_only_its_own_inv_factor(make_input):
    pool = [
        make_input("p/bad@c", 0, input_cost=math.nan, p95_ms=math.inf),
        make_input("p/a@c", 1, input_cost=1.0, p95_ms=1000),
        make_input("p/b@c", 2, input_cost=2.0, p95_ms=500),
    ]

    bad, a, b = score_pool(pool, DEFAULT_WEIGHTS, REQ)

    assert bad.factors["costInv"] == bad.factors["latencyInv"] == 0.0
    assert a.factors["costInv"] == pytest.approx(0.5)
    assert b.factors["latencyInv"] == pytest.approx(0.5)
    assert 0.0 <= bad.score <= 1.0


# --- §3.2 the other factors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("circuit", "health"),
    [("closed", 1.0), ("half_open", 0.5), ("open", 0.0)],
)
def test_health_follows_the_circuit(make_input, circuit, health):
    assert only(make_input("p/m@c", circuit=circuit)).factors["health"] == health


@pytest.mark.parametrize(
    ("tier", "priority"),
    [("ultra", 1.0), ("pro", 0.67), ("standard", 0.33), ("free", 0.0), ("odd", 0.33)],
)
def test_tier_priority_follows_the_account_tier(make_input, tier, priority):
    scored = only(make_input("p/m@c", account_tier=tier))

    assert scored.factors["tierPriority"] == priority


@pytest.mark.parametrize(
    ("input_cost", "output_cost", "expected"),
    [
        (0.0, 0.0, "free"),
        (0.0, None, "free"),
        (0.0, 0.5, "cheap"),
        (1.0, 30.0, "cheap"),
        (1.01, None, "premium"),
        (None, 0.0, "unknown"),
        (None, None, "unknown"),
    ],
)
def test_price_class(input_cost, output_cost, expected):
    assert price_class(input_cost, output_cost) == expected


@pytest.mark.parametrize(
    ("hint", "prices", "affinity"),
    [
        ("free", (0.0, 0.0), 1.0),
        ("free", (0.5, 1.0), 0.7),
        ("free", (3.0, 15.0), 0.3),
        ("premium", (0.0, None), 0.3),
        ("cheap", (3.0, 15.0), 0.7),
        ("cheap", (None, None), 0.5),
        (None, (0.0, 0.0), 0.5),
    ],
)
def test_tier_affinity_is_the_distance_on_free_cheap_premium(
    make_input, hint, prices, affinity
):
    cand = make_input("p/m@c", input_cost=prices[0], output_cost=prices[1])

    scored = only(cand, RequestFeatures(tier_hint=hint))

    assert scored.factors["tierAffinity"] == affinity


@pytest.mark.parametrize(
    ("complexity", "free", "cheap", "premium"),
    [("low", 0.9, 0.4, 0.3), ("medium", 0.2, 0.9, 0.3), ("high", 0.2, 0.4, 0.9)],
)
def test_specificity_match_when_complexity_aware(
    make_input, complexity, free, cheap, premium
):
    pool = [
        make_input("p/free@c", 0, input_cost=0.0),
        make_input("p/cheap@c", 1, input_cost=0.5),
        make_input("p/premium@c", 2, input_cost=5.0),
        make_input("p/unknown@c", 3),
    ]
    req = RequestFeatures(complexity_aware=True, complexity=complexity)

    scored = score_pool(pool, DEFAULT_WEIGHTS, req)

    assert [s.factors["specificityMatch"] for s in scored] == [
        free,
        cheap,
        premium,
        0.5,
    ]


def test_specificity_match_is_neutral_when_complexity_awareness_is_off(make_input):
    scored = only(
        make_input("p/m@c", input_cost=0.0),
        RequestFeatures(complexity_aware=False, complexity="low"),
    )

    assert scored.factors["specificityMatch"] == 0.5


@pytest.mark.parametrize(
    ("window", "need", "affinity"),
    [
        (None, 1500, 0.5),
        (200_000, 1500, 1.0),
        (4000, 3000, 0.5),
        (4000, 4000, 0.0),
        (4000, 0, 1.0),
        (0, 1500, 0.0),
        (-5, 0, 0.0),
    ],
)
def test_context_affinity(make_input, window, need, affinity):
    scored = only(
        make_input("p/m@c", context_window=window), RequestFeatures(need_tokens=need)
    )

    assert scored.factors["contextAffinity"] == pytest.approx(affinity)


@pytest.mark.parametrize(
    ("in_flight", "limit", "availability"),
    [(0, 0, 1.0), (5, 0, 1.0), (1, 4, 0.75), (4, 4, 0.0), (9, 4, 0.0)],
)
def test_session_availability(make_input, in_flight, limit, availability):
    cand = make_input("p/m@c", in_flight=in_flight, max_concurrency=limit)

    assert only(cand).factors["sessionAvailability"] == availability


@pytest.mark.parametrize(
    ("n_conn", "density"), [(1, 0.0), (3, 0.2), (11, 1.0), (40, 1.0)]
)
def test_connection_density(make_input, n_conn, density):
    scored = only(make_input("p/m@c", n_conn=n_conn))

    assert scored.factors["connectionDensity"] == pytest.approx(density)


@pytest.mark.parametrize(
    ("resets_at", "window_s", "affinity"),
    [
        (None, None, 0.5),
        (1000 + 4500, None, 0.75),  # W defaults to 18 000 s
        (1000 + 30, 60, 0.5),
        (999, 60, 1.0),  # already past
        (1000 + 9e9, None, 0.0),
        (1000 + 30, 0, 1 - 30 / 18_000),  # a zero window is no window
    ],
)
def test_reset_window_affinity(make_input, resets_at, window_s, affinity):
    cand = make_input("p/m@c", resets_at=resets_at, window_s=window_s)

    scored = only(cand, RequestFeatures(now=1000.0))

    assert scored.factors["resetWindowAffinity"] == pytest.approx(affinity)


def test_quality_reliability_quota_and_task_fit_defaults(make_input):
    scored = only(make_input("p/m@c"))

    assert scored.factors["quality"] == 0.5
    assert scored.factors["reliability"] == 1.0
    assert scored.factors["quota"] == 1.0
    assert scored.factors["taskFit"] == 0.5


def test_quality_reliability_quota_and_task_fit_from_data(make_input):
    cand = make_input(
        "p/m@c", good_rate=0.8, failure_rate=0.25, quota_pct=35, fitness=0.9
    )

    scored = only(cand)

    assert scored.factors["quality"] == 0.8
    assert scored.factors["reliability"] == 0.75
    assert scored.factors["quota"] == pytest.approx(0.35)
    assert scored.factors["taskFit"] == 0.9
    assert scored.error_rate == 0.25


def test_cache_affinity_goes_to_the_first_rendezvous_key_of_the_pool(make_input):
    pool = [make_input(f"p/m@c{i}", i) for i in range(5)]
    req = RequestFeatures(cache_key="conversation-1")
    first = rendezvous_order("conversation-1", [c.key for c in pool])[0]

    scored = score_pool(pool, DEFAULT_WEIGHTS, req)

    assert {s.key: s.factors["cacheAffinity"] for s in scored} == {
        c.key: (1.0 if c.key == first else 0.0) for c in pool
    }


@pytest.mark.parametrize(
    "req",
    [
        RequestFeatures(cache_key=None),
        RequestFeatures(cache_key="conversation-1", promptcache_affinity=False),
    ],
)
def test_cache_affinity_is_0_without_a_key_or_with_the_setting_off(make_input, req):
    pool = [make_input(f"p/m@c{i}", i) for i in range(3)]

    scored = score_pool(pool, DEFAULT_WEIGHTS, req)

    assert [s.factors["cacheAffinity"] for s in scored] == [0.0, 0.0, 0.0]


# --- §5.2 estimated cost --------------------------------------------------------------


@pytest.mark.parametrize(
    ("input_cost", "output_cost"),
    [(0.05, 0.40), (3.0, None), (None, 2.0), (None, None), (0.0, 0.0)],
)
def test_est_cost_is_the_budget_estimate(make_input, input_cost, output_cost):
    cand = make_input("p/m@c", input_cost=input_cost, output_cost=output_cost)

    scored = only(cand)

    assert scored.est_cost_usd == pytest.approx(
        estimate_cost(REQ.est_in, REQ.est_out, input_cost, output_cost)
    )


# --- degenerate inputs ----------------------------------------------------------------

DEGENERATE = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308, -1e308]


@pytest.mark.parametrize("bad", DEGENERATE)
def test_degenerate_inputs_keep_every_factor_and_score_in_range(make_input, bad):
    weird = make_input(
        "p/weird@c",
        0,
        input_cost=bad,
        output_cost=bad,
        p95_ms=bad,
        std_ms=bad,
        failure_rate=bad,
        good_rate=bad,
        quota_pct=bad,
        resets_at=bad,
        window_s=bad,
        context_window=0,
        fitness=bad,
        n_conn=-3,
        in_flight=-2,
        max_concurrency=1,
    )
    normal = make_input("p/normal@c", 1, input_cost=1.0, p95_ms=900, std_ms=50)
    req = RequestFeatures(
        need_tokens=1500, now=bad, tier_hint="cheap", complexity_aware=True
    )

    for weights in (DEFAULT_WEIGHTS, *MODE_PACKS.values()):
        for scored in score_pool([weird, normal], weights, req):
            assert set(scored.factors) == set(FACTORS)
            for value in scored.factors.values():
                assert 0.0 <= value <= 1.0
            assert 0.0 <= scored.score <= 1.0
            assert 0.0 <= scored.default_score <= 1.0


def test_non_finite_factor_inputs_become_0_not_1(make_input):
    scored = only(
        make_input("p/m@c", quota_pct=math.inf, fitness=math.nan, good_rate=math.inf)
    )

    assert scored.factors["quota"] == 0.0
    assert scored.factors["taskFit"] == 0.0
    assert scored.factors["quality"] == 0.0


def test_an_empty_pool_scores_to_an_empty_list():
    assert score_pool([], DEFAULT_WEIGHTS, REQ) == []
    assert rank([]) == []
