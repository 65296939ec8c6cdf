"""weighted and quota-weighted (spec 03 §5.3, §5.14, §10 examples 6 and 7)."""

import random
from collections import Counter

import pytest

from gateway.planning.strategies import REGISTRY
from gateway.planning.strategies.weighted import NO_PIN, quota_weight, weighted_pick

M1, M2, M3 = "pa/m1@main", "pb/m2@main", "pc/m3@main"
SESSION = "s" * 32


def keys(ordering):
    return [c.key for c in ordering.order]


def weighted_input(make_candidate, make_order_input, weights, rng, **fields):
    survivors = [
        make_candidate(key, index, weight=weight)
        for index, (key, weight) in enumerate(weights.items())
        if weight != "filtered"
    ]
    return make_order_input(*survivors, configured=tuple(weights), rng=rng, **fields)


def primaries_of(make_candidate, make_order_input, weights, requests=1000, seed=6):
    rng = random.Random(seed)
    orders = [
        keys(
            REGISTRY["weighted"].order(
                weighted_input(make_candidate, make_order_input, weights, rng)
            )
        )
        for _ in range(requests)
    ]
    return Counter(order[0] for order in orders), orders


# --- §10 example 6 ----------------------------------------------------------------


def test_weighted_70_30_makes_m1_primary_about_70_percent_of_the_time(
    make_candidate, make_order_input
):
    counts, orders = primaries_of(make_candidate, make_order_input, {M1: 70, M2: 30})

    assert 650 <= counts[M1] <= 750
    assert all(order in ([M1, M2], [M2, M1]) for order in orders)


def test_weighted_never_draws_a_zero_weight_while_another_is_positive(
    make_candidate, make_order_input
):
    counts, _ = primaries_of(make_candidate, make_order_input, {M1: 100, M2: 0})

    assert counts == {M1: 1000}


def test_weighted_serves_the_survivor_when_the_heavy_target_is_open(
    make_candidate, make_order_input
):
    counts, _ = primaries_of(
        make_candidate, make_order_input, {M1: "filtered", M2: 30}, requests=50
    )

    assert counts == {M2: 50}


@pytest.mark.parametrize("weights", [{M1: 0, M2: 0}, {M1: None, M2: None}])
def test_weighted_with_all_weights_zero_picks_uniformly(
    weights, make_candidate, make_order_input
):
    counts, _ = primaries_of(make_candidate, make_order_input, weights)

    assert 450 <= counts[M1] <= 550


def test_weighted_orders_the_fallbacks_by_weight_descending(
    make_candidate, make_order_input
):
    weights = {M1: 10, M2: 50, M3: 40}
    _, orders = primaries_of(make_candidate, make_order_input, weights, requests=200)

    by_weight = [M2, M3, M1]
    for order in orders:
        assert order[1:] == [k for k in by_weight if k != order[0]]


def test_weighted_pick_skips_a_leading_zero_weight():
    rng = random.Random(0)

    assert {weighted_pick([0.0, 1.0, 0.0], rng) for _ in range(500)} == {1}


def test_weighted_pick_survives_a_draw_at_the_top_of_the_range():
    class Top(random.Random):
        def random(self):
            return 1.0 - 1e-17  # rounds to the total

    assert weighted_pick([0.1, 0.2, 0.0], Top()) == 1


# --- §10 example 7: stickyWeightedLimit ----------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_sticky_weighted_keeps_the_drawn_target_for_3_successes_then_draws_again(
    seed, make_candidate, make_order_input, replay
):
    rng = random.Random(seed)
    sticky = {"stickyWeightedLimit": 3}

    def make(state):
        return weighted_input(
            make_candidate,
            make_order_input,
            {M1: 50, M2: 50},
            rng,
            config=sticky,
            state=state,
        )

    primaries, state = replay(REGISTRY["weighted"], 30, make)

    for batch in range(10):
        assert len(set(primaries[batch * 3 : batch * 3 + 3])) == 1
    assert set(primaries) == {M1, M2}  # fresh draws happen after every batch
    assert state == NO_PIN


@pytest.mark.parametrize(
    ("pin", "served", "expected"),
    [
        (None, M1, {"key": M1, "count": 1}),
        ({"key": M1, "count": 1}, M1, {"key": M1, "count": 2}),
        ({"key": M1, "count": 2}, M1, NO_PIN),  # reaching L clears
        ({"key": M1, "count": 2}, M2, {"key": M2, "count": 1}),  # pin failed, T won
        ({"key": None, "count": 0}, M2, {"key": M2, "count": 1}),
    ],
)
def test_sticky_weighted_success_counts_for_the_pin_or_repins(
    pin, served, expected, make_candidate, make_order_input
):
    given = weighted_input(
        make_candidate,
        make_order_input,
        {M1: 50, M2: 50},
        random.Random(0),
        config={"stickyWeightedLimit": 3},
        state=pin,
    )

    ordering = REGISTRY["weighted"].order(given)

    assert ordering.on_success(pin, served) == expected


def test_a_surviving_pin_below_the_limit_is_primary_without_a_draw(
    make_candidate, make_order_input
):
    given = weighted_input(
        make_candidate,
        make_order_input,
        {M1: 1000, M2: 0},
        random.Random(0),
        config={"stickyWeightedLimit": 3},
        state={"key": M2, "count": 2},
    )

    ordering = REGISTRY["weighted"].order(given)

    assert keys(ordering) == [M2, M1]
    assert ordering.state_before is None


def test_a_filtered_pin_is_cleared_before_dispatch(make_candidate, make_order_input):
    given = weighted_input(
        make_candidate,
        make_order_input,
        {M1: "filtered", M2: 10, M3: 10},
        random.Random(0),
        config={"stickyWeightedLimit": 3},
        state={"key": M1, "count": 1},
    )

    ordering = REGISTRY["weighted"].order(given)

    assert ordering.state_before == NO_PIN
    assert keys(ordering)[0] in (M2, M3)


def test_without_a_sticky_limit_weighted_keeps_no_state(
    make_candidate, make_order_input
):
    given = weighted_input(
        make_candidate,
        make_order_input,
        {M1: 1, M2: 1},
        random.Random(0),
        state={"key": M2, "count": 1},
    )

    ordering = REGISTRY["weighted"].order(given)

    assert (ordering.state_before, ordering.on_success) == (None, None)


# --- quota-weighted -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "facts", "expected"),
    [
        (M1, {"remaining": 0.8, "in_flight": 1}, 0.4),
        (M1, {"in_flight": 0}, 0.5),  # unknown remaining
        (M1, {"remaining": 0.0, "in_flight": 1}, 0.005),  # floor 0.01
        ("combo:B", {"remaining": 0.9, "in_flight": 4}, 0.5),  # a ref is unknown
    ],
)
def test_quota_weight_is_remaining_over_load(key, facts, expected, make_candidate):
    assert quota_weight(make_candidate(key, 0, **facts)) == pytest.approx(expected)


def quota_input(make_candidate, make_order_input, facts, rng, **fields):
    survivors = [make_candidate(k, i, **f) for i, (k, f) in enumerate(facts.items())]
    return make_order_input(*survivors, rng=rng, **fields)


def test_quota_weighted_draws_in_proportion_to_weight_and_puts_exhausted_last(
    make_candidate, make_order_input
):
    facts = {
        M1: {"remaining": 0.9},
        M2: {"remaining": 0.1},
        M3: {"remaining": 1.0, "exhausted": True},
    }
    rng = random.Random(14)
    orders = [
        keys(
            REGISTRY["quota-weighted"].order(
                quota_input(make_candidate, make_order_input, facts, rng)
            )
        )
        for _ in range(1000)
    ]

    assert 850 <= sum(order[0] == M1 for order in orders) <= 950
    assert {tuple(order) for order in orders} == {(M1, M2, M3), (M2, M1, M3)}


def test_quota_weighted_honours_a_surviving_session_pin(
    make_candidate, make_order_input
):
    facts = {M1: {"remaining": 0.9}, M2: {"remaining": 0.2}, M3: {"remaining": 0.5}}
    given = quota_input(
        make_candidate,
        make_order_input,
        facts,
        random.Random(0),
        session_key=SESSION,
        state=M2,
    )

    ordering = REGISTRY["quota-weighted"].order(given)

    assert keys(ordering) == [M2, M1, M3]
    assert ordering.on_success(M2, M3) == M3  # a success writes the pin


@pytest.mark.parametrize(
    ("session_key", "pin_facts"),
    [
        (SESSION, {"remaining": 0.2, "exhausted": True}),  # exhausted pin
        (None, {"remaining": 0.2}),  # no session: no pin at all
    ],
)
def test_quota_weighted_draws_when_the_pin_cannot_be_honoured(
    session_key, pin_facts, make_candidate, make_order_input
):
    facts = {M1: {"remaining": 1.0}, M2: pin_facts}
    given = quota_input(
        make_candidate,
        make_order_input,
        facts,
        random.Random(0),
        session_key=session_key,
        state=M2,
    )
    draws = Counter(keys(REGISTRY["quota-weighted"].order(given))[0] for _ in range(50))

    assert draws[M1] > draws[M2]


def test_quota_weighted_without_a_session_remembers_nothing(
    make_candidate, make_order_input
):
    given = quota_input(make_candidate, make_order_input, {M1: {}}, random.Random(0))

    assert REGISTRY["quota-weighted"].order(given).on_success is None


def test_quota_weighted_with_everything_exhausted_keeps_declared_order(
    make_candidate, make_order_input
):
    facts = {M1: {"exhausted": True}, M2: {"exhausted": True}}
    given = quota_input(make_candidate, make_order_input, facts, random.Random(0))

    assert keys(REGISTRY["quota-weighted"].order(given)) == [M1, M2]
