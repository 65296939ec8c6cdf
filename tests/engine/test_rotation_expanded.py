"""round-robin over expanded connections (spec 03 §4.1, §5.4): with
``connectionAwareExpansion`` the rotation runs over one position per connection."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers.health import board
from providers.state_store import LocalStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board, "store", LocalStore())


def _table(expand: bool):
    table = build_table(
        {
            "pa": {"models": ["m1"], "connections": {"main": 0, "backup": 0}},
            "pb": ["m2"],
        },
        combos={"rr": {"targets": ["pa/m1", "pb/m2"], "strategy": "round-robin"}},
    )
    combo = dataclasses.replace(
        table.combos["rr"],
        config={"stickyRoundRobinLimit": 1, "connectionAwareExpansion": expand},
    )
    return dataclasses.replace(table, combos=MappingProxyType({"rr": combo}))


def _firsts(table, count: int, key: str | None = None) -> list[str]:
    facts = RequestFacts(r_in=10, max_out=None, cache_key=key)
    return [
        plan_combo(table, table.combos["rr"], facts, NOW).targets[0].key
        for _ in range(count)
    ]


def test_each_expanded_connection_gets_its_turn() -> None:
    assert (
        _firsts(_table(expand=True), 6)
        == [
            "pa/m1@backup",
            "pa/m1@main",
            "pb/m2@main",
        ]
        * 2
    )


def test_positions_stay_put_whatever_the_cache_key() -> None:
    table = _table(expand=True)
    firsts = [_firsts(table, 1, key=f"k{i}")[0] for i in range(6)]
    assert firsts == ["pa/m1@backup", "pa/m1@main", "pb/m2@main"] * 2


def test_without_expansion_the_rotation_is_over_the_configured_targets() -> None:
    assert [k.split("@")[0] for k in _firsts(_table(expand=False), 4)] == [
        "pa/m1",
        "pb/m2",
    ] * 2
