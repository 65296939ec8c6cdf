"""cost-, context- and cache-optimized (spec 03 §5.9, §5.10, §5.15, §10 examples 9
and 10)."""

import hashlib

import pytest

from gateway.kernel.rendezvous import rendezvous_order
from gateway.planning.strategies import REGISTRY
from gateway.planning.strategies.fit import expected_cost_usd

M1, M2, M3 = "pa/m1@main", "pb/m2@main", "pc/m3@main"
MAIN, BACKUP = "pa/m1@main", "pa/m1@backup"


def keys(ordering):
    return [c.key for c in ordering.order]


# --- cost-optimized -------------------------------------------------------------------


def test_example_9_orders_by_expected_cost_of_this_request(
    make_candidate, make_order_input
):
    m2 = make_candidate(M2, 0, input_cost=0.15, output_cost=0.60)
    m1 = make_candidate(M1, 1, input_cost=0.05, output_cost=0.40)

    ordering = REGISTRY["cost-optimized"].order(
        make_order_input(m2, m1, r_in=1000, max_out=100)
    )

    assert expected_cost_usd(m1, 1000, 100) == pytest.approx(0.00009)
    assert expected_cost_usd(m2, 1000, 100) == pytest.approx(0.00021)
    assert keys(ordering) == [M1, M2]


@pytest.mark.parametrize(("max_out", "expected_out"), [(None, 256), (0, 256), (10, 10)])
def test_expected_output_defaults_to_256_tokens(max_out, expected_out, make_candidate):
    candidate = make_candidate(M1, 0, input_cost=0.0, output_cost=1.0)

    assert expected_cost_usd(candidate, 500, max_out) == pytest.approx(
        expected_out / 1e6
    )


def test_unknown_prices_and_refs_come_after_every_priced_target(
    make_candidate, make_order_input
):
    survivors = [
        make_candidate("combo:B", 0),
        make_candidate(M1, 1, input_cost=1.0),  # no output price
        make_candidate(M2, 2, input_cost=9.0, output_cost=9.0),
        make_candidate(M3, 3, input_cost=1.0, output_cost=1.0),
    ]

    ordering = REGISTRY["cost-optimized"].order(make_order_input(*survivors, r_in=100))

    assert keys(ordering) == [M3, M2, "combo:B", M1]


# --- context-optimized ----------------------------------------------------------------


def test_context_optimized_prefers_the_tightest_comfortable_window(
    make_candidate, make_order_input
):
    windows = {
        "p/big@c": 128_000,  # comfortable
        "p/unknown@c": None,
        "p/snug@c": 1_100,  # R ≤ W < 1.25 R
        "p/edge@c": 1_250,  # exactly 1.25 R: comfortable
        "p/tight@c": 1_200,  # R ≤ W < 1.25 R
        "p/small@c": 8_000,  # comfortable
        "combo:B": None,
    }
    survivors = [
        make_candidate(key, index, context_window=window)
        for index, (key, window) in enumerate(windows.items())
    ]

    ordering = REGISTRY["context-optimized"].order(
        make_order_input(*survivors, r_in=900, max_out=100)  # R = 1000
    )

    assert keys(ordering) == [
        "p/edge@c",
        "p/small@c",
        "p/big@c",
        "p/tight@c",
        "p/snug@c",
        "p/unknown@c",
        "combo:B",
    ]


def test_context_optimized_counts_no_output_when_max_tokens_is_absent(
    make_candidate, make_order_input
):
    survivors = [
        make_candidate("p/a@c", 0, context_window=1_000),
        make_candidate("p/b@c", 1, context_window=1_300),
    ]

    ordering = REGISTRY["context-optimized"].order(
        make_order_input(*survivors, r_in=1000)
    )

    assert keys(ordering) == ["p/b@c", "p/a@c"]  # 1300 ≥ 1250, then the snug one


# --- cache-optimized ------------------------------------------------------------------


def score(cache_key, key):
    digest = hashlib.sha256((cache_key + "\x00" + key).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=False)


def test_rendezvous_order_is_score_descending(make_order_input):
    connections = [f"pa/m1@c{i}" for i in range(8)]

    ranked = rendezvous_order("abc", connections)

    assert ranked == sorted(connections, key=lambda k: score("abc", k), reverse=True)


def test_cache_optimized_without_a_cache_key_keeps_declared_order(make_order_input):
    ordering = REGISTRY["cache-optimized"].order(make_order_input(BACKUP, MAIN))

    assert keys(ordering) == [BACKUP, MAIN]


def test_example_10_the_same_conversation_keeps_its_connection(make_order_input):
    cache_key = "0123456789abcdef0123456789abcdef"  # 32 hex of the fingerprint F
    primaries = {
        keys(
            REGISTRY["cache-optimized"].order(
                make_order_input(MAIN, BACKUP, cache_key=cache_key, seed=n)
            )
        )[0]
        for n in range(20)
    }

    assert len(primaries) == 1


def test_example_10_a_prompt_cache_key_picks_its_rendezvous_winner(make_order_input):
    ordering = REGISTRY["cache-optimized"].order(
        make_order_input(MAIN, BACKUP, cache_key="abc")
    )

    assert keys(ordering) == sorted([MAIN, BACKUP], key=lambda k: -score("abc", k))


def test_adding_a_connection_moves_only_the_conversations_that_hash_to_it():
    before = [MAIN, BACKUP]
    after = [MAIN, BACKUP, "pa/m1@third"]

    for n in range(300):
        cache_key = f"conversation-{n}"
        old, new = (
            rendezvous_order(cache_key, before)[0],
            rendezvous_order(cache_key, after)[0],
        )
        assert new in (old, "pa/m1@third")
