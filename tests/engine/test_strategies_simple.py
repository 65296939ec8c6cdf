"""priority, fill-first, random and strict-random (spec 03 §5.1, §5.2, §5.5, §5.6, §10
example 8)."""

import random

import pytest

from gateway.planning.strategies import REGISTRY
from gateway.planning.strategies.simple import new_deck

M1, M2, M3 = "pa/m1@main", "pb/m2@main", "pc/m3@main"
ALL = (M1, M2, M3)


def keys(ordering):
    return [c.key for c in ordering.order]


# --- priority ---------------------------------------------------------------------


def test_priority_keeps_declared_order_whatever_the_cache_or_session_keys(
    make_order_input,
):
    given = make_order_input(M3, M1, M2, cache_key="abc", session_key="s" * 32)

    assert keys(REGISTRY["priority"].order(given)) == [M3, M1, M2]


# --- fill-first -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quotas", "reserve_percent", "expected"),
    [
        # every account has quota: declared order
        ({}, None, [M1, M2, M3]),
        # exhausted goes last
        ({M1: {"exhausted": True}}, None, [M2, M3, M1]),
        # remaining 0 is drained even with no reserve
        ({M1: {"remaining": 0.0}}, None, [M2, M3, M1]),
        # at/below the reserve goes last; declared order among the drained ones
        (
            {M1: {"remaining": 0.2}, M2: {"remaining": 0.1}, M3: {"remaining": 0.21}},
            20,
            [M3, M1, M2],
        ),
        # unknown remaining counts as available
        ({M1: {"remaining": 0.05}}, 10, [M2, M3, M1]),
    ],
)
def test_fill_first_puts_drained_targets_last_in_declared_order(
    quotas, reserve_percent, expected, make_candidate, make_order_input
):
    survivors = [make_candidate(k, i, **quotas.get(k, {})) for i, k in enumerate(ALL)]
    config = (
        {} if reserve_percent is None else {"fillFirstReservePercent": reserve_percent}
    )

    ordering = REGISTRY["fill-first"].order(make_order_input(*survivors, config=config))

    assert keys(ordering) == expected


def test_fill_first_never_drains_a_combo_ref(make_candidate, make_order_input):
    ref = make_candidate("combo:B", 0, remaining=0.0, exhausted=True)
    given = make_order_input(ref, make_candidate(M1, 1, exhausted=True))

    assert keys(REGISTRY["fill-first"].order(given)) == ["combo:B", M1]


# --- random -----------------------------------------------------------------------


def test_random_is_a_fisher_yates_shuffle_of_the_injected_rng(make_order_input):
    expected = list(make_order_input(*ALL).survivors)
    random.Random(7).shuffle(expected)

    ordering = REGISTRY["random"].order(make_order_input(*ALL, seed=7))

    assert ordering.order == tuple(expected)


def test_random_gives_every_target_a_turn_as_primary(make_order_input):
    rng = random.Random(3)
    primaries = {
        REGISTRY["random"].order(make_order_input(*ALL, rng=rng)).order[0].key
        for _ in range(60)
    }

    assert primaries == set(ALL)


# --- strict-random ----------------------------------------------------------------


def deck_input(make_order_input, state, rng, survivors=ALL, configured=ALL):
    return make_order_input(*survivors, configured=configured, state=state, rng=rng)


@pytest.mark.parametrize("seed", range(30))
def test_strict_random_serves_each_target_once_per_deck_never_twice_across_decks(
    seed, make_order_input, replay
):
    rng = random.Random(seed)

    primaries, _ = replay(
        REGISTRY["strict-random"],
        9,
        lambda state: deck_input(make_order_input, state, rng),
    )

    for deck in (primaries[0:3], primaries[3:6], primaries[6:9]):
        assert sorted(deck) == sorted(ALL)
    assert primaries[3] != primaries[2]
    assert primaries[6] != primaries[5]


def test_strict_random_takes_the_first_surviving_card_and_keeps_the_others(
    make_order_input,
):
    state = {"keys": list(ALL), "deck": [M1, M2, M3], "last": None}
    given = deck_input(make_order_input, state, random.Random(0), survivors=(M2, M3))

    ordering = REGISTRY["strict-random"].order(given)

    assert keys(ordering)[0] == M2
    assert ordering.state_before == {"keys": list(ALL), "deck": [M1, M3], "last": M2}


def test_strict_random_reshuffles_when_no_card_survives(make_order_input):
    state = {"keys": list(ALL), "deck": [M3], "last": M2}
    given = deck_input(make_order_input, state, random.Random(0), survivors=(M1, M2))

    ordering = REGISTRY["strict-random"].order(given)

    record = ordering.state_before
    assert keys(ordering)[0] in (M1, M2)
    assert record["last"] == keys(ordering)[0]
    assert sorted([*record["deck"], record["last"]]) == sorted(ALL)


def test_strict_random_discards_the_deck_when_the_key_set_changes(make_order_input):
    state = {"keys": [M1, M2], "deck": [M2], "last": M1}
    given = deck_input(make_order_input, state, random.Random(0))

    record = REGISTRY["strict-random"].order(given).state_before

    assert record["keys"] == list(ALL)
    assert len(record["deck"]) == 2
    assert record["last"] not in record["deck"]


@pytest.mark.parametrize("seed", range(50))
def test_a_new_deck_never_starts_with_the_last_card_taken(seed):
    deck = new_deck(ALL, M2, random.Random(seed))

    assert sorted(deck) == sorted(ALL)
    assert deck[0] != M2


def test_a_one_card_deck_repeats_its_only_card():
    assert new_deck([M1], M1, random.Random(0)) == [M1]


def test_strict_random_shuffles_the_rest(make_order_input):
    rests = {
        tuple(
            keys(
                REGISTRY["strict-random"].order(
                    deck_input(
                        make_order_input,
                        {"keys": list(ALL), "deck": [M1], "last": None},
                        random.Random(seed),
                    )
                )
            )[1:]
        )
        for seed in range(20)
    }

    assert rests == {(M2, M3), (M3, M2)}
