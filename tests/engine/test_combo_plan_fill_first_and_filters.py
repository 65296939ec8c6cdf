"""The combo planner (``gateway.planning.combo``) against spec 03 §4-§5: fill-first
orders the connections inside a target by the same rule as the targets (§5.2) and
ignores prompt-cache affinity (§4.1); the request-shaped filters (§4.2: context
window, capabilities) run before ordering, so a misfit is a skip item and is never
drawn."""

from __future__ import annotations

import dataclasses
import random
from types import MappingProxyType
from typing import Any

import pytest

from gateway.kernel.ratelimits import quota_key
from gateway.kernel.types import RoutingTable
from gateway.planning import combo as combo_plan
from gateway.planning import reads as combo_reads
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts, request_facts
from providers import pins as pins_module
from providers.health import board
from providers.pins import PinStore
from providers.state_store import LocalStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> LocalStore:
    store = LocalStore()
    monkeypatch.setattr(board, "store", store)
    fresh = PinStore()
    monkeypatch.setattr(combo_reads, "pins", fresh)
    monkeypatch.setattr(pins_module, "pins", fresh)
    from gateway.planning import affinity as combo_session

    monkeypatch.setattr(combo_session, "pins", fresh)
    return store


def _table(strategy: str, targets: list[Any], **config: Any) -> RoutingTable:
    table = build_table(
        {
            "pa": {"models": ["m1"], "connections": {"main": 0, "backup": 1}},
            "pb": ["m2"],
        },
        combos={"c": {"targets": targets, "strategy": strategy}},
    )
    combo = dataclasses.replace(table.combos["c"], config=config)
    return dataclasses.replace(table, combos=MappingProxyType({"c": combo}))


def _reading(store: LocalStore, connection: str, remaining: float) -> None:
    store.set(
        quota_key(connection),
        {"remaining": remaining, "resets_at": None, "at": NOW - 1},
        600,
    )


def _keys(table: RoutingTable, facts: RequestFacts | None = None) -> list[str]:
    facts = facts or RequestFacts(r_in=10, max_out=None)
    return [t.key for t in plan_combo(table, table.combos["c"], facts, NOW).targets]


def test_fill_first_tries_an_exhausted_connection_of_a_target_last(fresh_state):
    """§5.2: "the same rule orders the connections inside a target"."""
    _reading(fresh_state, "pa@main", 0.0)
    table = _table("fill-first", ["pa/m1", "pb/m2"])
    assert _keys(table) == ["pa/m1@backup", "pa/m1@main", "pb/m2@main"]


def test_fill_first_reserve_applies_to_connections_too(fresh_state):
    _reading(fresh_state, "pa@main", 0.1)
    table = _table("fill-first", ["pa/m1", "pb/m2"], fillFirstReservePercent=20)
    assert _keys(table) == ["pa/m1@backup", "pa/m1@main", "pb/m2@main"]
    _reading(fresh_state, "pa@main", 0.3)
    assert _keys(table) == ["pa/m1@main", "pa/m1@backup", "pb/m2@main"]


def test_fill_first_puts_a_target_with_every_connection_drained_last(fresh_state):
    """An unpinned target is exhausted when each of its connections is."""
    _reading(fresh_state, "pa@main", 0.0)
    _reading(fresh_state, "pa@backup", 0.05)
    table = _table("fill-first", ["pa/m1", "pb/m2"], fillFirstReservePercent=10)
    assert _keys(table) == ["pb/m2@main", "pa/m1@main", "pa/m1@backup"]


def test_fill_first_keeps_a_target_with_one_fresh_connection_first(fresh_state):
    _reading(fresh_state, "pa@main", 0.0)
    table = _table("fill-first", ["pa/m1", "pb/m2"])
    assert _keys(table)[0] == "pa/m1@backup"


def test_fill_first_ignores_prompt_cache_affinity(fresh_state):
    """§4.1: never rendezvous order for fill-first; priority, then name."""
    table = _table("fill-first", ["pa/m1"])
    for key in ("a", "b", "c", "d", "e"):
        facts = RequestFacts(r_in=10, max_out=None, cache_key=key)
        assert _keys(table, facts) == ["pa/m1@main", "pa/m1@backup"]


# --- §4.2: request-shaped filters run before ordering ---------------------------------


def _windowed(strategy: str, targets: list[Any]) -> RoutingTable:
    return build_table(
        {
            "pw": {
                "models": [
                    {"model_id": "small", "context_window": 1000},
                    {"model_id": "big", "context_window": 100_000},
                    {"model_id": "plain", "capabilities": frozenset({"vision"})},
                ]
            },
        },
        combos={"c": {"targets": targets, "strategy": strategy}},
    )


def test_a_window_too_small_is_filtered_and_listed_when_planned():
    """§4.2: the context filter removes the target before ordering; its skip item is
    listed in declared order, even when the strategy would have put it last."""
    table = _windowed("context-optimized", ["pw/small", "pw/big"])
    body = {"messages": [{"role": "user", "content": "x" * 8000}]}
    plan = plan_combo(table, table.combos["c"], request_facts(body), NOW)
    assert [t.key for t in plan.targets] == ["pw/big@main"]
    assert [(t.key, s.reason) for t, s in plan.skips] == [
        ("pw/small@main", "context_too_large")
    ]


def test_a_missing_capability_is_filtered_with_its_request_field():
    table = _windowed("priority", ["pw/plain", "pw/big"])
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "ls"}}],
    }
    plan = plan_combo(table, table.combos["c"], request_facts(body), NOW)
    # never ordered: a skip item in declared order, naming the request field
    assert [t.key for t in plan.targets] == ["pw/big@main"]
    assert [(t.key, s.reason, s.unmet_param) for t, s in plan.skips] == [
        ("pw/plain@main", "capability_mismatch", "tools")
    ]


def test_a_capability_misfit_takes_no_part_in_the_ordering(monkeypatch):
    monkeypatch.setattr(combo_plan, "_rng", random.Random(3))
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_object"},
    }
    table = build_table(
        {
            "pw": {
                "models": [
                    {"model_id": "plain", "capabilities": frozenset({"vision"})},
                    {"model_id": "big", "capabilities": frozenset({"json"})},
                    {"model_id": "other", "capabilities": frozenset({"json"})},
                ]
            },
        },
        combos={
            "c": {
                "strategy": "weighted",
                "targets": [
                    {"model": "pw/other", "weight": 1},
                    {"model": "pw/plain", "weight": 100},
                    {"model": "pw/big", "weight": 50},
                ],
            }
        },
    )
    facts = request_facts(body)
    for _ in range(30):
        keys = [t.key for t in plan_combo(table, table.combos["c"], facts, NOW).targets]
        # the misfit is a skip item (never called); the draw is over the others
        assert sorted(keys) == ["pw/big@main", "pw/other@main"]


def test_weighted_draws_only_among_targets_that_fit():
    """§5.3 draws over survivors: a filtered heavy target is never the primary."""
    table = _windowed(
        "weighted",
        [{"model": "pw/small", "weight": 100}, {"model": "pw/big", "weight": 1}],
    )
    body = {"messages": [{"role": "user", "content": "x" * 8000}]}
    facts = request_facts(body)
    for _ in range(20):
        plan = plan_combo(table, table.combos["c"], facts, NOW)
        assert [t.key for t in plan.targets] == ["pw/big@main"]
