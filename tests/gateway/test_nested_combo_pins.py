"""A session pinned to a nested combo pins ``combo:<name>`` (spec 05: a nested-combo
target is one candidate): the next turn runs the nested combo whole, so its own
strategy brings the session back to its recovered primary."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from gateway.kernel.breaker import HealthConfig
from gateway.planning import affinity as combo_session
from gateway.planning import reads as combo_reads
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers import pins as pins_module
from providers.health import board
from providers.pins import PinStore
from providers.state_store import LocalStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0
SESSION = RequestFacts(r_in=10, max_out=None, session_key="S" * 32)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> PinStore:
    store = PinStore()
    monkeypatch.setattr(board, "store", LocalStore())
    for module in (combo_reads, combo_session, pins_module):
        monkeypatch.setattr(module, "pins", store)
    return store


def _table():
    table = build_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={
            "outer": {"targets": ["combo:inner", "pc/m3"], "strategy": "round-robin"},
            "inner": {"targets": ["pa/m1", "pb/m2"], "strategy": "priority"},
        },
    )
    outer = dataclasses.replace(
        table.combos["outer"], config={"stickyRoundRobinLimit": 1}
    )
    return dataclasses.replace(
        table, combos=MappingProxyType({**table.combos, "outer": outer})
    )


def _serve(table, key: str, now: float = NOW) -> list[str]:
    plan = plan_combo(table, table.combos["outer"], SESSION, now)
    keys = [t.key for t in plan.targets]
    served = next(t for t in plan.targets if t.key == key)
    plan.succeeded(served)
    return keys


def test_the_pin_names_the_nested_combo_and_its_strategy_runs_again(fresh):
    table = _table()

    first = _serve(table, "pb/m2@main")  # pa/m1 failed, the fallback served
    pin = fresh.get(SESSION.session_key, f"combo:{table.combos['outer'].id}")

    assert first[:2] == ["pa/m1@main", "pb/m2@main"]
    assert pin is not None
    assert pin["target"] == "combo:inner"
    # the next turn: the nested combo, whole and in its own (priority) order first
    second = _serve(table, "pa/m1@main")
    assert second == ["pa/m1@main", "pb/m2@main", "pc/m3@main"]


def test_a_nested_combo_pin_survives_its_primary_cooling(fresh):
    table = _table()
    _serve(table, "pa/m1@main")
    for _ in range(5):
        board.record(
            "pa@main", "m1", "server_error", None, now=NOW, config=HealthConfig()
        )

    keys = [
        t.key for t in plan_combo(table, table.combos["outer"], SESSION, NOW).targets
    ]

    assert keys == ["pb/m2@main", "pc/m3@main"]  # still the pinned nested combo first
