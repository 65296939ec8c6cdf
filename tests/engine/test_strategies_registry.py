"""Every ordering strategy keeps the contract of spec 03 §4.3 (``strategies.base``).

A strategy returns a permutation of the survivors, nothing for an empty pool, the one
survivor as is, and state records a shared JSON store can hold, whatever (possibly
stale or malformed) record it is handed.
"""

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.kernel.types import ConnectionInfo, ModelInfo
from gateway.planning.strategies import REGISTRY, SPECS
from gateway.planning.strategies.base import Candidate, OrderInput, Quota, Stats

NOW = 1_700_000_000.0
NOT_ORDERING = {"auto", "adaptive", "fusion", "pipeline"}
POOL = ("pa/m1@main", "pa/m1@backup", "pb/m2@main", "pc/m3@*", "combo:B")


def test_the_registry_holds_the_17_ordering_strategies_under_their_spec_names():
    expected = sorted(s for s in SPECS if s not in NOT_ORDERING)

    assert sorted(REGISTRY) == expected
    assert len(REGISTRY) == 17
    assert all(strategy.name == name for name, strategy in REGISTRY.items())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_an_empty_pool_orders_to_nothing_and_remembers_nothing(name, make_order_input):
    given_ = make_order_input(session_key="s" * 32, cache_key="k", state=None)

    ordering = REGISTRY[name].order(given_)

    assert ordering.order == ()
    assert ordering.state_before is None


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_single_survivor_is_returned_as_is(name, make_candidate, make_order_input):
    only = make_candidate("pa/m1@main", 1, remaining=0.0, exhausted=True)
    given_ = make_order_input(
        only,
        configured=("pb/m2@main", "pa/m1@main"),
        session_key="s" * 32,
        cache_key="k",
    )

    assert REGISTRY[name].order(given_).order == (only,)


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("round-robin", {}),
        ("weighted", {"stickyWeightedLimit": 3}),
        ("quota-weighted", {}),
        ("context-relay", {}),
    ],
)
def test_a_single_survivor_still_records_its_state_on_success(
    name, config, make_order_input
):
    given_ = make_order_input("pa/m1@main", config=config, session_key="s" * 32)

    ordering = REGISTRY[name].order(given_)

    assert ordering.on_success is not None
    assert ordering.on_success(None, "pa/m1@main") is not None


# --- property: a permutation, JSON-able state, any state in ---------------------

_maybe_unit = st.none() | st.floats(0, 1)
_facts = st.fixed_dictionaries(
    {
        "weight": st.none() | st.floats(0, 1000),
        "half_open": st.booleans(),
        "stats": st.builds(
            Stats,
            in_flight=st.integers(0, 5),
            calls=st.integers(0, 50),
            successes=st.integers(0, 20),
            failures=st.integers(0, 20),
            success_latency_ms_sum=st.floats(0, 1e6),
        ),
        "quota": st.builds(
            Quota,
            remaining=_maybe_unit,
            resets_at=st.none() | st.floats(NOW - 1e4, NOW + 1e5),
            window_s=st.none() | st.floats(0, 1e5),
            exhausted=st.booleans(),
        ),
        "input_cost": st.none() | st.floats(0, 100),
        "output_cost": st.none() | st.floats(0, 100),
        "context_window": st.none() | st.integers(1, 2_000_000),
    }
)
_junk_state = (
    st.none()
    | st.integers(-3, 10)
    | st.sampled_from(POOL)
    | st.dictionaries(
        st.sampled_from(["next", "sticky", "key", "count", "keys", "deck", "last"]),
        st.none() | st.integers(-2, 9) | st.sampled_from(POOL) | st.lists(st.text()),
    )
)
_config = st.fixed_dictionaries(
    {},
    optional={
        "stickyRoundRobinLimit": st.integers(1, 5),
        "stickyWeightedLimit": st.integers(1, 5),
        "fillFirstReservePercent": st.floats(0, 50),
        "tieBand": st.floats(0, 0.5),
        "resetWindowTieBandMs": st.integers(0, 3_600_000),
    },
)


def _candidate(key: str, index: int, facts: dict) -> Candidate:
    model = connection = None
    if not key.startswith("combo:"):
        model_key, _, pinned = key.partition("@")
        provider, _, model_id = model_key.partition("/")
        model = ModelInfo(
            provider=provider,
            model_id=model_id,
            input_cost=facts["input_cost"],
            output_cost=facts["output_cost"],
            context_window=facts["context_window"],
        )
        if pinned != "*":
            connection = ConnectionInfo(provider=provider, name=pinned)
    return Candidate(
        key=key,
        index=index,
        weight=facts["weight"],
        model=model,
        connection=connection,
        stats=facts["stats"],
        quota=facts["quota"],
        half_open=facts["half_open"],
    )


@st.composite
def _order_inputs(draw: st.DrawFn) -> OrderInput:
    alive = draw(st.lists(st.booleans(), min_size=len(POOL), max_size=len(POOL)))
    survivors = tuple(
        _candidate(key, index, draw(_facts))
        for index, key in enumerate(POOL)
        if alive[index]
    )
    return OrderInput(
        survivors=survivors,
        configured=POOL,
        config=draw(_config),
        r_in=draw(st.integers(0, 1_000_000)),
        max_out=draw(st.none() | st.integers(0, 100_000)),
        cache_key=draw(st.none() | st.text(max_size=8)),
        session_key=draw(st.none() | st.just("s" * 32)),
        now=NOW,
        rng=random.Random(draw(st.integers(0, 2**16))),
        state=draw(_junk_state),
        defaults=draw(st.sampled_from([{}, {"sticky_round_robin_limit": 1}])),
    )


def _keys(candidates: tuple[Candidate, ...]) -> list[str]:
    return sorted(c.key for c in candidates)


def _json_roundtrip(value: object) -> object:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("name", sorted(REGISTRY))
@settings(max_examples=30, deadline=None, database=None)
@given(given_=_order_inputs(), served_at=st.integers(0, 4))
def test_every_strategy_returns_a_permutation_and_json_state(name, given_, served_at):
    strategy = REGISTRY[name]

    ordering = strategy.order(given_)

    assert _keys(ordering.order) == _keys(given_.survivors)
    assert len(ordering.order) == len(given_.survivors)
    state = given_.state
    if ordering.state_before is not None:
        assert _json_roundtrip(ordering.state_before) == ordering.state_before
        state = ordering.state_before
    if ordering.on_success is not None and ordering.order:
        served = ordering.order[served_at % len(ordering.order)].key
        state = ordering.on_success(state, served)
        assert _json_roundtrip(state) == state
    again = strategy.order(
        OrderInput(**{**_fields(given_), "state": state, "rng": random.Random(1)})
    )
    assert _keys(again.order) == _keys(given_.survivors)


def _fields(given_: OrderInput) -> dict:
    return {name: getattr(given_, name) for name in OrderInput.__dataclass_fields__}
