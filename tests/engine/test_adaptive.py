"""Adaptive routing (spec 05 §3; examples E3, E4, E6, E8 of §4)."""

import math
import random
from collections import Counter

import pytest

from gateway.kernel.adaptive import (
    DEFAULT_LATENCY_MS,
    AdaptiveCandidate,
    LatencyEstimator,
    all_cooling_choice,
    better,
    choose,
    draw_pair,
    first_draw_probabilities,
    load,
    observe,
    plan_order,
    pool_default,
    price_factors,
    select,
    weights,
)

A, B, C = "pa/a@main", "pb/b@main", "pc/c@main"
NOW = 1_000.0


class Draws(random.Random):
    """An RNG whose ``random()`` returns the given values, in order, and no more."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        assert self.values, "more draws than expected"
        return self.values.pop(0)


class NoDraw(random.Random):
    """An RNG that fails the test when asked for a number."""

    def random(self) -> float:
        raise AssertionError("no draw expected")


def cand(key, index, **fields):
    return AdaptiveCandidate(key=key, index=index, **fields)


def weigh(cands, *, objective="balanced", fraction=0.05, warm_key=None, default=None):
    return weights(
        cands,
        objective=objective,
        min_weight_fraction=fraction,
        warm_key=warm_key,
        warm_weight=8.0,
        default_latency=default if default is not None else DEFAULT_LATENCY_MS,
    )


def rounded(values, places=3):
    return [round(v, places) for v in values]


# --- E3: P2C -----------------------------------------------------------------------


@pytest.fixture
def e3():
    return [
        cand(A, 0, latency_ms=400.0, in_flight=3),
        cand(B, 1, latency_ms=800.0),
        cand(C, 2, latency_ms=1600.0),
    ]


def test_e3_weights_are_the_fastest_estimate_over_each_estimate(e3):
    assert weigh(e3, objective="latency") == [1.0, 0.5, 0.25]


def test_e3_loads_are_estimate_times_in_flight_plus_one(e3):
    assert [load(c, DEFAULT_LATENCY_MS) for c in e3] == [1600.0, 800.0, 1600.0]


def test_e3_a_is_drawn_first_with_probability_one_over_one_point_seven_five(e3):
    probabilities = first_draw_probabilities(weigh(e3, objective="latency"))

    assert round(probabilities[0], 3) == 0.571
    assert probabilities[0] == pytest.approx(1 / 1.75)


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        (0, 1, 1),  # (A, B) -> B: lower load
        (0, 2, 0),  # (A, C) -> tie at 1 600, the higher weight wins: A
        (2, 0, 0),  # ... whichever of the two was drawn first
        (1, 2, 1),  # (B, C) -> B
        (2, 1, 1),
    ],
)
def test_e3_pairwise_rule(e3, first, second, winner):
    w = weigh(e3, objective="latency")

    chosen = better(
        e3[first],
        e3[second],
        weight_a=w[first],
        weight_b=w[second],
        default_latency=DEFAULT_LATENCY_MS,
    )

    assert chosen is e3[winner]


@pytest.mark.parametrize(
    ("u1", "u2", "pair", "winner"),
    [
        # Σw = 1.75; A covers u1·Σ < 1, B < 1.5, C < 1.75
        (0.1, 0.1, (0, 1), B),  # rest B, C: Σ = 0.75, B covers u2·Σ < 0.5
        (0.1, 0.9, (0, 2), A),
        (0.7, 0.9, (1, 2), B),  # rest A, C: Σ = 1.25, C covers 1 ≤ u2·Σ
        (0.95, 0.1, (2, 0), A),
    ],
)
def test_e3_draws_follow_the_cumulative_sums_in_declaration_order(
    e3, u1, u2, pair, winner
):
    w = weigh(e3, objective="latency")

    assert draw_pair(w, Draws(u1, u2)) == pair
    chosen, reason = select(e3, w, Draws(u1, u2))
    assert (chosen.key, reason) == (winner, "p2c")


def test_a_tie_in_load_and_weight_goes_to_the_first_drawn():
    x, y = cand(A, 0, latency_ms=500.0), cand(B, 1, latency_ms=500.0)

    assert better(x, y, weight_a=1.0, weight_b=1.0, default_latency=1.0) is x
    assert better(y, x, weight_a=1.0, weight_b=1.0, default_latency=1.0) is y


# --- E4: price objectives ----------------------------------------------------------


@pytest.fixture
def e4():
    return [
        cand(key, index, latency_ms=500.0, price=price)
        for index, (key, price) in enumerate(((A, 0.5), (B, 1.0), (C, 4.0)))
    ]


@pytest.mark.parametrize(
    ("objective", "before_floor", "after_floor", "first_draw"),
    [
        ("cost", [1, 0.25, 0.015625], [1, 0.25, 0.05], [0.769, 0.192, 0.038]),
        ("balanced", [1, 0.5, 0.125], [1, 0.5, 0.125], [0.615, 0.308, 0.077]),
        ("latency", [1, 1, 1], [1, 1, 1], [0.333, 0.333, 0.333]),
    ],
)
def test_e4_price_objectives(e4, objective, before_floor, after_floor, first_draw):
    assert weigh(e4, objective=objective, fraction=0.0) == before_floor
    after = weigh(e4, objective=objective)
    assert after == pytest.approx(after_floor)
    assert rounded(first_draw_probabilities(after)) == first_draw


def test_e4_twice_the_price_and_twice_as_fast_weighs_the_same_under_balanced():
    cands = [
        cand(A, 0, latency_ms=1000.0, price=1.0),
        cand(B, 1, latency_ms=500.0, price=2.0),
    ]

    assert weigh(cands) == [0.5, 0.5]


# --- E6: peak-EWMA -----------------------------------------------------------------


def test_e6_peak_ewma():
    estimator = LatencyEstimator()

    estimator.sample(A, 500.0, 0.0)
    assert estimator.estimate(A, 0.0) == 500.0

    estimator.sample(A, 2000.0, 1.0)  # a peak replaces L
    assert estimator.estimate(A, 1.0) == 2000.0

    estimator.sample(A, 400.0, 6.0)  # w = e^-0.5
    w = math.exp(-0.5)
    assert round(w, 5) == 0.60653
    assert estimator.estimate(A, 6.0) == pytest.approx(2000 * w + 400 * (1 - w))
    assert round(estimator.estimate(A, 6.0), 2) == 1370.45

    estimator.error_sample(A, 50.0, 7.0)  # a 502 after 50 ms: max(50, L)
    assert round(estimator.estimate(A, 7.0), 2) == 1370.45

    assert estimator.estimate(A, 37.0) is not None  # exactly 30 s: still fresh
    assert estimator.estimate(A, 37.001) is None  # more than 30 s: unknown
    assert pool_default([]) == 1000.0  # ... so D is used


def test_an_error_raises_the_estimate_but_never_lowers_it():
    estimator = LatencyEstimator()

    estimator.error_sample(A, 300.0, 0.0)  # no L yet: the duration
    assert estimator.estimate(A, 0.0) == 300.0
    estimator.error_sample(A, 100.0, 1.0)
    assert estimator.estimate(A, 1.0) == 300.0
    estimator.error_sample(A, 900.0, 2.0)
    assert estimator.estimate(A, 2.0) == 900.0


def test_an_unsampled_key_is_unknown_and_idle():
    estimator = LatencyEstimator()
    estimator.started(A, NOW)

    assert estimator.estimate(A, NOW) is None
    assert estimator.estimate(B, NOW) is None
    assert estimator.in_flight(B) == 0


def test_an_out_of_order_sample_does_not_move_freshness_back():
    estimator = LatencyEstimator()
    estimator.sample(A, 500.0, 10.0)

    estimator.sample(A, 100.0, 5.0)

    assert estimator.estimate(A, 39.0) == 500.0


def test_in_flight_counts_up_and_down_and_never_below_zero():
    estimator = LatencyEstimator()
    estimator.started(A, NOW)
    estimator.started(A, NOW)
    assert estimator.in_flight(A) == 2

    for _ in range(3):
        estimator.finished(A)
    estimator.finished(B)  # never started

    assert (estimator.in_flight(A), estimator.in_flight(B)) == (0, 0)
    estimator.started(A, NOW)
    assert estimator.in_flight(A) == 1


# --- E8: warm cache and all-cooling ------------------------------------------------


def test_e8_warm_cache_boosts_the_target_that_served_the_session():
    cands = [cand(A, 0), cand(B, 1)]

    w = weigh(cands, warm_key=A)

    assert w == [8.0, 1.0]
    assert first_draw_probabilities(w)[0] == pytest.approx(8 / 9)


def test_a_warm_key_outside_the_eligible_set_boosts_nothing():
    assert weigh([cand(A, 0), cand(B, 1)], warm_key=C) == [1.0, 1.0]


def test_e8_all_cooling_chooses_the_one_that_recovers_first():
    pairs = [(cand(A, 0), NOW + 12), (cand(B, 1), NOW + 40)]

    assert all_cooling_choice(pairs).key == A


@pytest.mark.parametrize(
    ("weight_a", "weight_b", "expected"),
    [(1.0, 2.0, B), (None, 1.0, A), (3.0, 3.0, A)],
)
def test_all_cooling_ties_go_to_higher_weight_then_declaration_order(
    weight_a, weight_b, expected
):
    pairs = [
        (cand(B, 1, base_weight=weight_b), NOW + 12),
        (cand(A, 0, base_weight=weight_a), NOW + 12),
    ]

    assert all_cooling_choice(pairs).key == expected


# --- standby, prices, pool default -------------------------------------------------


def test_standby_stays_at_zero_and_is_chosen_without_a_draw_beside_one_target():
    cands = [cand(A, 0, latency_ms=5000.0), cand(B, 1, base_weight=0, latency_ms=10.0)]

    w = weigh(cands)

    # the standby is faster, so it sets L_min (it is eligible), yet the floor does
    # not lift it and it is never drawn
    assert w == [pytest.approx(10 / 5000), 0.0]
    assert select(cands, w, NoDraw()) == (cands[0], "single")


def test_standby_is_never_drawn_while_a_positive_weight_is_eligible():
    cands = [cand(A, 0), cand(B, 1), cand(C, 2, base_weight=0.0)]
    w = weigh(cands, warm_key=C)
    rng = random.Random(5)

    drawn = Counter(key for _ in range(2000) for key in draw_pair(w, rng))

    assert w[2] == 0.0
    assert drawn[2] == 0


def test_only_standby_candidates_weigh_as_if_configured_with_weight_one():
    cands = [
        cand(A, 0, base_weight=0, latency_ms=500.0),
        cand(B, 1, base_weight=0, latency_ms=1000.0),
    ]

    assert weigh(cands) == [1.0, 0.5]


def test_standby_is_tried_after_the_positive_weight_targets():
    cands = [cand(A, 0, base_weight=0), cand(B, 1)]

    order = plan_order(
        cands,
        estimator=None,
        now=NOW,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8.0,
        rng=NoDraw(),
    )

    assert [(c.key, reason) for c, reason in order] == [
        (B, "single"),
        (A, "failover"),
    ]


def test_an_unpriced_candidate_is_charged_the_highest_known_price():
    cands = [cand(A, 0, price=0.5), cand(B, 1), cand(C, 2, price=1.0)]

    assert weigh(cands) == [1.0, 0.5, 0.5]


def test_with_no_known_price_the_price_factor_is_one():
    cands = [cand(A, 0), cand(B, 1)]

    assert weigh(cands, objective="cost") == [1.0, 1.0]


def test_prices_below_one_cent_count_as_one_cent():
    cands = [cand(A, 0, price=0.0), cand(B, 1, price=0.02)]

    assert weigh(cands, objective="cost", fraction=0.0) == [1.0, 0.25]


def test_unknown_estimates_count_as_the_pool_default():
    cands = [cand(A, 0), cand(B, 1, latency_ms=500.0)]

    assert weigh(cands, default=500.0) == [1.0, 1.0]
    assert weigh(cands, default=1000.0) == [0.5, 1.0]


@pytest.mark.parametrize(
    ("fresh", "expected"),
    [
        ([], 1000.0),
        ([700.0], 700.0),
        ([300.0, 100.0, 200.0], 200.0),
        ([400.0, 100.0, 300.0, 200.0], 200.0),  # even count: the lower median
    ],
)
def test_pool_default_is_the_lower_median_of_fresh_estimates(fresh, expected):
    assert pool_default(fresh) == expected


def test_select_computes_the_pool_default_from_the_candidates():
    # D = lower median of (500, 900) = 500, so A (unknown) has load 500 < 900
    cands = [cand(A, 0), cand(B, 1, latency_ms=500.0), cand(C, 2, latency_ms=900.0)]
    pair_a_c = Draws(0.0, 0.99)

    chosen, _ = select(cands, [1.0, 1.0, 1.0], pair_a_c)

    assert chosen.key == A


# --- the draw, the floor, one candidate --------------------------------------------


def test_first_draw_frequencies_match_the_weights():
    w = [1.0, 0.25, 0.05, 0.5]
    rng = random.Random(20_000)
    draws = 20_000

    pairs = [draw_pair(w, rng) for _ in range(draws)]
    firsts = Counter(a for a, _ in pairs)

    assert all(a != b for a, b in pairs)
    for index, weight in enumerate(w):
        assert firsts[index] / draws == pytest.approx(weight / sum(w), abs=0.01)


def test_a_single_candidate_is_chosen_without_a_draw():
    only = cand(A, 0, latency_ms=123.0)

    assert select([only], [1.0], NoDraw()) == (only, "single")


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [(0.0, [1.0, 0.25, 0.015625]), (0.5, [1.0, 0.5, 0.5])],
)
def test_min_weight_fraction_bounds(e4, fraction, expected):
    assert weigh(e4, objective="cost", fraction=fraction) == expected


@pytest.mark.parametrize("fraction", [-0.01, 0.51])
def test_min_weight_fraction_outside_its_range_is_rejected(e4, fraction):
    with pytest.raises(ValueError, match="min_weight_fraction"):
        weigh(e4, fraction=fraction)


def test_an_unknown_objective_is_rejected(e4):
    with pytest.raises(ValueError, match="objective"):
        weigh(e4, objective="fastest")


def test_the_floor_applies_after_the_warm_boost():
    cands = [cand(A, 0, latency_ms=100.0), cand(B, 1, latency_ms=10_000.0)]

    # A: 1 × 8 = 8; B: 0.01, lifted to 0.05 × 8
    assert weigh(cands, warm_key=A) == [8.0, 0.4]


# --- the whole order ---------------------------------------------------------------


def test_plan_order_reads_the_estimator_and_lists_every_candidate_once():
    estimator = LatencyEstimator()
    estimator.sample(A, 400.0, NOW - 1)
    estimator.sample(B, 800.0, NOW - 1)
    estimator.sample(C, 1600.0, NOW - 1)
    for _ in range(3):  # running for 1 s, past A's 400 ms estimate
        estimator.started(A, NOW - 1)
    estimator.started(A, NOW - 0.1)  # within it: not counted
    cands = [cand(A, 0), cand(B, 1), cand(C, 2)]

    order = plan_order(
        cands,
        estimator=estimator,
        now=NOW,
        objective="latency",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8.0,
        rng=Draws(0.1, 0.1, 0.1, 0.9),  # (A, B) -> B; then (A, C) -> A; then C
    )

    assert [(c.key, reason) for c, reason in order] == [
        (B, "p2c"),
        (A, "failover"),
        (C, "failover"),
    ]
    assert (order[1][0].latency_ms, order[1][0].in_flight) == (400.0, 3)


def test_plan_order_equals_choosing_lazily_after_each_failure():
    cands = [
        cand(key, index, latency_ms=latency, price=price, base_weight=weight)
        for index, (key, latency, price, weight) in enumerate(
            [
                (A, 300.0, 2.0, 1),
                (B, None, None, 2),
                (C, 900.0, 0.5, None),
                ("combo:D", 450.0, 1.0, 0),
            ]
        )
    ]
    options = {
        "objective": "cost",
        "min_weight_fraction": 0.05,
        "warm_key": C,
        "warm_weight": 8.0,
    }

    planned = plan_order(
        cands, estimator=None, now=NOW, rng=random.Random(9), **options
    )
    lazy, remaining, rng = [], list(cands), random.Random(9)
    while remaining:
        chosen, _ = choose(remaining, rng=rng, **options)
        lazy.append(chosen)
        remaining.remove(chosen)

    assert [c for c, _ in planned] == lazy
    assert sorted(c.key for c in lazy) == sorted(c.key for c in cands)
    assert lazy[-1].key == "combo:D"  # the standby comes last


# --- E4b: price in the comparison (§3.5 step 3, amended) -----------------------------


def e4b(a_latency=50.0, a_in_flight=0):
    return [
        cand("A", 0, latency_ms=a_latency, price=0.6, in_flight=a_in_flight),
        cand("B", 1, latency_ms=40.0, price=9.0),
    ]


@pytest.mark.parametrize(
    ("objective", "a_latency", "a_in_flight", "winner"),
    [
        ("latency", 50.0, 0, "B"),  # 50 vs 40
        ("balanced", 50.0, 0, "A"),  # 50 x 1 vs 40 x 15 = 600
        ("cost", 50.0, 0, "A"),  # 50 vs 40 x 225
        ("balanced", 1500.0, 0, "B"),  # A slowed: 1 500 vs 600
        ("balanced", 50.0, 20, "B"),  # A queued: 50 x 21 = 1 050 vs 600
    ],
)
def test_e4b_the_comparison_weighs_price_by_the_objective(
    objective, a_latency, a_in_flight, winner
):
    cands = e4b(a_latency, a_in_flight)
    for seed in range(20):  # every draw of two candidates draws both
        chosen, reason = choose(
            cands,
            objective=objective,
            min_weight_fraction=0.05,
            warm_key=None,
            warm_weight=8,
            rng=random.Random(seed),
        )
        assert (chosen.key, reason) == (winner, "p2c")


def test_e4b_loads_carry_the_price_factor():
    cands = e4b()
    assert price_factors(cands, "latency") == [1.0, 1.0]
    assert rounded(price_factors(cands, "balanced")) == [1.0, 15.0]
    assert rounded(price_factors(cands, "cost")) == [1.0, 225.0]
    assert load(cands[1], 1000.0, 15.0) == 600.0


# --- the trickle (§3.5 step 5, amended) ----------------------------------------------


def test_a_trickle_draw_serves_b_without_the_comparison():
    cands = e4b()  # balanced: A wins every comparison
    # u1 = 0.1 draws A as a, u2 B as b; u3 = 0.01 < 0.02 serves b, the loser
    chosen, reason = choose(
        cands,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=Draws(0.1, 0.5, 0.01),
        trickle_fraction=0.02,
    )
    assert (chosen.key, reason) == ("B", "trickle")
    chosen, reason = choose(
        cands,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=Draws(0.1, 0.5, 0.03),
        trickle_fraction=0.02,
    )
    assert (chosen.key, reason) == ("A", "p2c")


def test_without_a_trickle_fraction_a_draw_takes_two_random_numbers():
    rng = Draws(0.1, 0.5)  # a third draw would fail
    choose(
        e4b(),
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=rng,
    )
    assert rng.values == []


def test_the_trickle_share_follows_the_fraction_with_a_seeded_source():
    cands = e4b()
    rng = random.Random(1234)
    served = Counter(
        choose(
            cands,
            objective="balanced",
            min_weight_fraction=0.05,
            warm_key=None,
            warm_weight=8,
            rng=rng,
            trickle_fraction=0.1,
        )[1]
        for _ in range(5000)
    )
    assert served["trickle"] == pytest.approx(500, rel=0.15)
    assert served["p2c"] == 5000 - served["trickle"]


def test_a_plan_trickles_only_its_first_pick():
    order = plan_order(
        e4b(),
        estimator=None,
        now=0.0,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=Draws(0.1, 0.5, 0.01),
        trickle_fraction=0.2,
    )
    assert [(c.key, reason) for c, reason in order] == [
        ("B", "trickle"),
        ("A", "failover"),
    ]


@pytest.mark.parametrize("fraction", [-0.1, 0.3])
def test_a_trickle_fraction_out_of_range_is_refused(fraction):
    with pytest.raises(ValueError, match="trickle_fraction"):
        select(e4b(), [1.0, 1.0], random.Random(0), trickle_fraction=fraction)


# --- amended (issue #17): n counts the attempts running past L; the trickle skips a
# --- b measured within the last τ --------------------------------------------------


def test_e4b_attempts_within_the_estimate_are_not_queueing():
    estimator = LatencyEstimator()
    estimator.sample("A", 50.0, NOW - 1)
    estimator.sample("B", 40.0, NOW - 1)
    for _ in range(20):  # 20 attempts on A, started 30 ms ago: within its 50 ms
        estimator.started("A", NOW - 0.03)
    cands = observe(e4b(), estimator, NOW)
    assert cands[0].in_flight == 0
    chosen, _ = choose(
        cands,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=random.Random(7),
    )
    assert chosen.key == "A"  # 50 x 1 vs 600
    # 60 ms later they all run past A's estimate: 50 x 21 = 1 050 vs 600 -> B
    later = observe(e4b(), estimator, NOW + 0.06)
    assert later[0].in_flight == 20
    chosen, _ = choose(
        later,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=random.Random(7),
    )
    assert chosen.key == "B"


def test_overdue_counts_attempts_past_the_estimate_and_all_when_unknown():
    estimator = LatencyEstimator()
    for started in (NOW - 2.0, NOW - 0.5, NOW - 0.1):
        estimator.started(A, started)
    assert estimator.overdue(A, NOW) == 3  # no estimate: every attempt counts
    estimator.sample(A, 300.0, NOW - 1)
    assert (estimator.overdue(A, NOW), estimator.in_flight(A)) == (2, 3)
    assert estimator.overdue(A, NOW + 31) == 3  # the estimate went unknown


def test_finished_removes_the_start_nearest_to_the_one_given():
    estimator = LatencyEstimator()
    estimator.sample(A, 300.0, NOW - 1)
    for started in (NOW - 2.0, NOW - 0.5, NOW - 0.1):
        estimator.started(A, started)
    estimator.finished(A, NOW - 0.12)  # the attempt started 0.1 s ago ended
    assert estimator.overdue(A, NOW) == 2
    estimator.finished(A)  # no start given: the oldest
    assert estimator.overdue(A, NOW) == 1
    estimator.finished(A, NOW + 5)
    estimator.finished(A, NOW + 5)  # nothing left: no error
    assert estimator.in_flight(A) == 0


def test_a_trickle_draw_compares_a_b_sampled_within_tau():
    fresh = [
        cand("A", 0, latency_ms=50.0, price=0.6),
        cand("B", 1, latency_ms=40.0, price=9.0, recently_sampled=True),
    ]
    rng = Draws(0.1, 0.5, 0.01)  # the trickle draw is under the fraction
    chosen, reason = choose(
        fresh,
        objective="balanced",
        min_weight_fraction=0.05,
        warm_key=None,
        warm_weight=8,
        rng=rng,
        trickle_fraction=0.02,
    )
    assert (chosen.key, reason) == ("A", "p2c")
    assert rng.values == []  # still three draws


def test_observe_marks_targets_sampled_within_tau():
    estimator = LatencyEstimator()
    estimator.sample(A, 100.0, NOW - 9.5)
    estimator.sample(B, 100.0, NOW - 10.5)
    observed = observe([cand(A, 0), cand(B, 1), cand(C, 2)], estimator, NOW)
    assert [c.recently_sampled for c in observed] == [True, False, False]


def test_the_trickle_re_measures_each_dear_target_about_once_per_tau():
    """Seeded: 40 req/s for 60 s over E4b's pair under `cost`, each pick finishing
    after its latency. A never loses a comparison, so B is served only by the
    trickle, and only while its last sample is older than τ: a handful of times,
    not 2 % of 2 400."""
    rng = random.Random(17)
    estimator = LatencyEstimator()
    now, served = NOW, Counter()
    estimator.sample("A", 50.0, now)
    estimator.sample("B", 40.0, now)
    pending: list[tuple[float, str, float]] = []
    for _ in range(2400):
        now += 1 / 40
        for done in [p for p in pending if p[0] <= now]:
            pending.remove(done)
            estimator.finished(done[1], done[2])
            estimator.sample(done[1], 50.0 if done[1] == "A" else 40.0, done[0])
        cands = observe(e4b(), estimator, now)
        chosen, reason = choose(
            cands,
            objective="cost",
            min_weight_fraction=0.05,
            warm_key=None,
            warm_weight=8,
            rng=rng,
            trickle_fraction=0.02,
        )
        served[chosen.key, reason] += 1
        estimator.started(chosen.key, now)
        pending.append((now + (0.05 if chosen.key == "A" else 0.04), chosen.key, now))
    assert served["B", "p2c"] == 0
    assert 3 <= served["B", "trickle"] <= 8  # about one per 10 s of the 60
