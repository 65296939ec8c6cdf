"""p2c and least-used (spec 03 §5.7, §5.8)."""

import random

import pytest

from gateway.planning.strategies import REGISTRY
from gateway.planning.strategies.load import p2c_score

M1, M2, M3, M4 = "pa/m1@main", "pa/m1@backup", "pb/m2@main", "pc/m3@main"


def keys(ordering):
    return [c.key for c in ordering.order]


class FixedDraw(random.Random):
    """An RNG whose two-of-n sample is fixed, to test who wins a given pair."""

    def __init__(self, first: int, second: int) -> None:
        super().__init__(0)
        self.pair = [first, second]

    def sample(self, population, k, *, counts=None):
        assert k == 2
        return list(self.pair)


@pytest.mark.parametrize(
    ("key", "facts", "expected"),
    [
        # spec examples: 90 %, 990 ms -> 0.9 + 1/3; no data; HALF_OPEN without data
        (M1, {"successes": 9, "failures": 1, "success_latency_ms_sum": 8910}, 1.2333),
        (M1, {}, 0.75),
        (M1, {"half_open": True}, 0.5),
        # fewer than 5 outcomes: neutral success rate, latency still counts
        (M1, {"successes": 4, "success_latency_ms_sum": 3960}, 0.8333),
        # no success in the window: 0.25 for latency
        (M1, {"failures": 5}, 0.25),
        # a ref's stats are unknown
        ("combo:B", {"successes": 9, "failures": 1}, 0.75),
    ],
)
def test_p2c_score(key, facts, expected, make_candidate):
    assert p2c_score(make_candidate(key, 0, **facts)) == pytest.approx(
        expected, abs=1e-4
    )


def p2c_input(make_candidate, make_order_input, rng, healthy=None):
    survivors = [
        make_candidate(
            key,
            index,
            **(
                {"successes": 10, "success_latency_ms_sum": 1000}
                if key == healthy
                else {}
            ),
        )
        for index, key in enumerate((M1, M2, M3, M4))
    ]
    return make_order_input(*survivors, rng=rng)


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        # the second drawn wins only when strictly better
        ((0, 2), [M3, M1, M2, M4]),
        ((2, 0), [M3, M1, M2, M4]),
        # a tie keeps the first drawn
        ((3, 1), [M4, M1, M2, M3]),
        ((1, 3), [M2, M1, M3, M4]),
    ],
)
def test_p2c_puts_the_better_of_two_first_and_the_rest_declared(
    pair, expected, make_candidate, make_order_input
):
    given = p2c_input(make_candidate, make_order_input, FixedDraw(*pair), healthy=M3)

    assert keys(REGISTRY["p2c"].order(given)) == expected


def test_p2c_draws_two_distinct_survivors_uniformly(make_candidate, make_order_input):
    rng = random.Random(5)
    primaries = [
        keys(REGISTRY["p2c"].order(p2c_input(make_candidate, make_order_input, rng)))[0]
        for _ in range(400)
    ]

    # equal scores: the first drawn wins, so each is primary about a quarter
    assert all(70 <= primaries.count(key) <= 130 for key in (M1, M2, M3, M4))


def test_p2c_never_picks_the_worst_of_the_pool(make_candidate, make_order_input):
    worst = {"failures": 10}
    survivors = [
        make_candidate(M1, 0, **worst),
        make_candidate(M2, 1),
        make_candidate(M3, 2),
    ]
    rng = random.Random(2)

    primaries = {
        keys(REGISTRY["p2c"].order(make_order_input(*survivors, rng=rng)))[0]
        for _ in range(200)
    }

    assert primaries == {M2, M3}


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        # in flight ascending
        ({M1: (2, 0), M2: (0, 9), M3: (1, 0)}, [M2, M3, M1]),
        # then calls started ascending
        ({M1: (1, 30), M2: (1, 10), M3: (0, 50)}, [M3, M2, M1]),
        # then declared order
        ({M1: (0, 5), M2: (0, 5), M3: (0, 5)}, [M1, M2, M3]),
    ],
)
def test_least_used_orders_by_in_flight_then_calls_then_declared(
    loads, expected, make_candidate, make_order_input
):
    survivors = [
        make_candidate(key, index, in_flight=in_flight, calls=calls)
        for index, (key, (in_flight, calls)) in enumerate(loads.items())
    ]

    assert keys(REGISTRY["least-used"].order(make_order_input(*survivors))) == expected


def test_least_used_puts_refs_after_known_load(make_candidate, make_order_input):
    survivors = [
        make_candidate("combo:B", 0),
        make_candidate(M1, 1, in_flight=3),
        make_candidate("combo:C", 2),
        make_candidate(M2, 3, in_flight=1),
    ]

    ordering = REGISTRY["least-used"].order(make_order_input(*survivors))

    assert keys(ordering) == [M2, M1, "combo:B", "combo:C"]
