"""round-robin (spec 03 §5.4, §10 example 5)."""

import pytest

from gateway.planning.strategies import REGISTRY

M1, M2, M3 = "pa/m1@main", "pb/m2@main", "pc/m3@main"
ALL = (M1, M2, M3)
RR = REGISTRY["round-robin"]


def keys(ordering):
    return [c.key for c in ordering.order]


def rr_input(make_order_input, state=None, survivors=ALL, **fields):
    return make_order_input(*survivors, configured=ALL, state=state, **fields)


# --- §10 example 5 -------------------------------------------------------------------


def test_round_robin_with_the_default_limit_serves_batches_of_three(
    make_order_input, replay
):
    primaries, _ = replay(RR, 10, lambda state: rr_input(make_order_input, state))

    assert primaries == [M1, M1, M1, M2, M2, M2, M3, M3, M3, M1]


def test_round_robin_with_limit_one_rotates_every_request(make_order_input, replay):
    config = {"stickyRoundRobinLimit": 1}

    primaries, _ = replay(
        RR, 4, lambda state: rr_input(make_order_input, state, config=config)
    )

    assert primaries == [M1, M2, M3, M1]


@pytest.mark.parametrize(
    ("config", "defaults", "batch"),
    [
        ({}, {"sticky_round_robin_limit": 2}, 2),  # the gateway setting
        (
            {"stickyRoundRobinLimit": 4},
            {"sticky_round_robin_limit": 2},
            4,
        ),  # combo wins
        ({}, {}, 3),  # the built-in default
    ],
)
def test_round_robin_limit_comes_from_config_then_setting_then_three(
    config, defaults, batch, make_order_input, replay
):
    primaries, _ = replay(
        RR,
        batch + 1,
        lambda state: rr_input(
            make_order_input, state, config=config, defaults=defaults
        ),
    )

    assert primaries == [M1] * batch + [M2]


# --- L = 1: the counter moves before dispatch -----------------------------------------


def test_limit_one_takes_next_and_writes_the_following_index_before_dispatch(
    make_order_input,
):
    given = rr_input(
        make_order_input,
        {"next": 2, "sticky": None},
        config={"stickyRoundRobinLimit": 1},
    )

    ordering = RR.order(given)

    assert keys(ordering) == [M3, M1, M2]
    assert ordering.state_before == {"next": 0, "sticky": None}
    assert ordering.on_success is None


def test_filtered_targets_are_dropped_from_the_rotation(make_order_input):
    given = rr_input(
        make_order_input,
        {"next": 1, "sticky": None},
        survivors=(M1, M3),
        config={"stickyRoundRobinLimit": 1},
    )

    ordering = RR.order(given)

    assert keys(ordering) == [M3, M1]  # starts at index 1 (m2, filtered): m3 next
    assert ordering.state_before == {"next": 2, "sticky": None}


# --- L > 1: sticky batches ------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "survivors", "expected"),
    [
        # the sticky target survives with count < L: it leads
        ({"next": 0, "sticky": {"key": M2, "count": 2}}, ALL, [M2, M3, M1]),
        # the sticky target is filtered: start at next
        ({"next": 0, "sticky": {"key": M2, "count": 1}}, (M1, M3), [M1, M3]),
        # a malformed record reads as a fresh one
        ({"next": "x", "sticky": 5}, ALL, [M1, M2, M3]),
        (None, ALL, [M1, M2, M3]),
    ],
)
def test_a_batch_starts_at_the_sticky_target_else_at_next(
    state, survivors, expected, make_order_input
):
    ordering = RR.order(rr_input(make_order_input, state, survivors=survivors))

    assert keys(ordering) == expected
    assert ordering.state_before is None


@pytest.mark.parametrize(
    ("state", "served", "expected"),
    [
        (None, M1, {"next": 0, "sticky": {"key": M1, "count": 1}}),
        (
            {"next": 0, "sticky": {"key": M1, "count": 1}},
            M1,
            {"next": 0, "sticky": {"key": M1, "count": 2}},
        ),
        # reaching L moves next past the served index and clears the sticky target
        (
            {"next": 0, "sticky": {"key": M1, "count": 2}},
            M1,
            {"next": 1, "sticky": None},
        ),
        (
            {"next": 0, "sticky": {"key": M3, "count": 2}},
            M3,
            {"next": 0, "sticky": None},
        ),
        # the primary failed and a fallback served: it becomes sticky
        (
            {"next": 0, "sticky": {"key": M1, "count": 2}},
            M2,
            {"next": 0, "sticky": {"key": M2, "count": 1}},
        ),
    ],
)
def test_a_success_counts_for_the_sticky_target_or_makes_a_new_one(
    state, served, expected, make_order_input
):
    ordering = RR.order(rr_input(make_order_input, state))

    assert ordering.on_success(state, served) == expected


def test_a_fallback_success_starts_the_next_batch_there(make_order_input, replay):
    served = iter([M2, M2, M2, M3])  # m1 fails on the first request

    primaries, state = replay(
        RR,
        4,
        lambda state: rr_input(make_order_input, state),
        served=lambda ordering: next(served),
    )

    assert primaries == [M1, M2, M2, M3]
    assert state == {"next": 2, "sticky": {"key": M3, "count": 1}}
