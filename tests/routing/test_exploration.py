"""Bandit exploration and the attempt order (spec 04 §4 step 7, §7, §11 example 4)."""

import random

import pytest

from gateway.auto.engine.exploration import attempt_order, explore
from gateway.auto.engine.weights import MODE_PACKS

QUALITY_FIRST = MODE_PACKS["quality-first"]


class NoDraws:
    """An RNG that fails the test if anyone asks it for a number."""

    def random(self):
        raise AssertionError("the RNG must not be consulted")


class Draws:
    """Returns the given draws in order and records how many were taken."""

    def __init__(self, *values):
        self.values = list(values)
        self.taken = 0

    def random(self):
        self.taken += 1
        return self.values.pop(0)


def keys(items):
    return [s.key.split("/")[0] for s in items]  # provider is enough in Pool P


@pytest.fixture
def coding(ranked_p):
    """Pool P ranked for ``auto/coding`` (quality-first): B, C, A."""
    return ranked_p(QUALITY_FIRST)


def test_example_4_seed_43_explores_to_a_and_orders_a_b_c(coding):
    primary = coding[0]
    rng = random.Random(43)

    first, explored = explore(coding, primary, 0.05, rng, whole_list=False)

    assert keys(coding) == ["anthropic", "google", "openai"]
    assert explored is True
    assert keys([first]) == ["openai"]
    assert keys(attempt_order(coding, first, 3)) == ["openai", "anthropic", "google"]


def test_example_4_seed_43_draws_are_the_documented_ones():
    rng = random.Random(43)

    u1, u2 = rng.random(), rng.random()

    assert round(u1, 5) == 0.03855
    assert round(u2, 5) == 0.69622
    assert int(u2 * 2) == 1  # alternatives [C, A] -> A


def test_example_4_seed_42_does_not_explore_and_serves_b(coding):
    rng = random.Random(42)

    first, explored = explore(coding, coding[0], 0.05, rng, whole_list=False)

    assert explored is False
    assert keys([first]) == ["anthropic"]
    assert keys(attempt_order(coding, first, 3)) == ["anthropic", "google", "openai"]


def test_exploring_takes_exactly_two_draws_and_not_exploring_one(coding):
    exploring, staying = Draws(0.01, 0.0), Draws(0.5)

    explore(coding, coding[0], 0.05, exploring, whole_list=False)
    explore(coding, coding[0], 0.05, staying, whole_list=False)

    assert (exploring.taken, staying.taken) == (2, 1)


def test_u1_equal_to_the_rate_does_not_explore(coding):
    first, explored = explore(coding, coding[0], 0.25, Draws(0.25), whole_list=False)

    assert (first, explored) == (coding[0], False)


@pytest.mark.parametrize("rate", [0.0, -0.1, float("nan")])
def test_a_rate_of_zero_never_consults_the_rng(coding, rate):
    assert explore(coding, coding[0], rate, NoDraws(), whole_list=False) == (
        coding[0],
        False,
    )


def test_a_single_eligible_candidate_never_consults_the_rng(coding):
    only = coding[:1]

    assert explore(only, only[0], 1.0, NoDraws(), whole_list=True) == (only[0], False)


def test_alternatives_leave_out_the_primary_even_when_it_is_not_first(coding):
    # The primary from another strategy (cost) is A; the alternatives are [B, C].
    primary = coding[2]

    first, _ = explore(coding, primary, 1.0, Draws(0.0, 0.99), whole_list=False)

    assert keys([first]) == ["google"]


@pytest.mark.parametrize(("u2", "pick"), [(0.0, "anthropic"), (0.5, "google")])
def test_the_score_strategy_samples_the_whole_list(coding, u2, pick):
    first, explored = explore(coding, coding[0], 1.0, Draws(0.0, u2), whole_list=True)

    assert explored is True
    assert keys([first]) == [pick]


def test_attempt_order_is_cut_to_max_attempts(coding):
    assert keys(attempt_order(coding, coding[1], 2)) == ["google", "anthropic"]
    assert keys(attempt_order(coding, coding[1], 0)) == ["google"]
    assert keys(attempt_order(coding, coding[1], 10)) == [
        "google",
        "anthropic",
        "openai",
    ]


# --- amended (issue #17): a cost-first route explores by price ------------------------

COST_SAVER = MODE_PACKS["cost-saver"]


def test_only_cost_first_weights_explore_by_price():
    from gateway.auto.engine.exploration import is_cost_first
    from gateway.auto.engine.weights import DEFAULT_WEIGHTS

    assert is_cost_first(COST_SAVER)
    assert not is_cost_first(QUALITY_FIRST)
    assert not is_cost_first(DEFAULT_WEIGHTS)  # quota ties costInv, health leads


def test_a_cost_first_draw_weighs_alternatives_by_inverse_price_squared(ranked_p):
    ranked = ranked_p(COST_SAVER)
    primary, alternatives = ranked[0], ranked[1:]
    floor = min(s.cost for s in alternatives)
    shares = [(floor / s.cost) ** 2 for s in alternatives]
    expected = {
        s.key: 4000 * w / sum(shares) for s, w in zip(alternatives, shares, strict=True)
    }
    rng = random.Random(17)
    counts = {s.key: 0 for s in alternatives}
    for _ in range(4000):
        first, explored = explore(
            ranked, primary, 1.0, rng, whole_list=False, cost_first=True
        )
        assert explored
        counts[first.key] += 1
    for key, n in counts.items():
        assert n == pytest.approx(expected[key], rel=0.1, abs=30)


def test_a_cost_first_draw_takes_the_same_two_numbers():
    prices = (("p", 1.0), ("a", 2.0), ("b", 20.0))
    items = [type("S", (), {"key": k, "cost": c})() for k, c in prices]
    # explore; then (1/2)² = .25 vs (1/20)² = .0025: .79 × .2525 < .25 -> a
    rng = Draws(0.01, 0.79)
    first, explored = explore(
        items, items[0], 0.05, rng, whole_list=False, cost_first=True
    )
    assert (first.key, explored, rng.taken) == ("a", True, 2)
    rng = Draws(0.01, 0.995)
    first, _ = explore(items, items[0], 0.05, rng, whole_list=False, cost_first=True)
    assert first.key == "b"
