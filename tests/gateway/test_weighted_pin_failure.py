"""``weighted`` with ``stickyWeightedLimit``: a failed pin is cleared (spec 03 §5.3),
a failure of another target leaves it."""

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
FACTS = RequestFacts(r_in=10, max_out=None)


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(board, "store", LocalStore())
    built = build_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={"w": {"targets": ["pa/m1", "pb/m2"], "strategy": "weighted"}},
    )
    combo = dataclasses.replace(built.combos["w"], config={"stickyWeightedLimit": 5})
    return dataclasses.replace(built, combos=MappingProxyType({"w": combo}))


def _record(table):
    return board.store.get(f"state:wsticky:{table.combos['w'].id}")


def _unit(plan, key):
    return next(t for t in plan.targets if t.key == key)


def test_a_failed_pin_is_cleared_and_another_failure_leaves_it(table):
    plan = plan_combo(table, table.combos["w"], FACTS, NOW)
    first = plan.targets[0]
    plan.succeeded(first)
    assert _record(table) == {"key": first.key.replace("@main", "@*"), "count": 1}

    plan = plan_combo(table, table.combos["w"], FACTS, NOW)
    assert plan.targets[0].key == first.key  # the pin holds
    other = next(t for t in plan.targets if t.key != first.key)
    plan.failed(other)
    assert _record(table)["count"] == 1  # someone else's failure: unchanged

    plan.failed(_unit(plan, first.key))
    assert _record(table) == {"key": None, "count": 0}
