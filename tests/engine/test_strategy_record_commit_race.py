"""The compare-and-set of a strategy record before dispatch (spec 03 §5.4) returns the
ordering made on the value it finally wrote over, even when a retry sees the record
back at the value first read (A -> B -> A under concurrent requests)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest

from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers.health import board
from providers.state_store import UNREAD, LocalStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0
STEPPED = {"next": 1, "sticky": None}


class RacingStore(LocalStore):
    """The first compare-and-set of a rotation record loses to another worker (the
    record then held ``STEPPED``); by the retry a third one has moved it back."""

    def update(
        self, key: str, fn: Any, ttl_s: float | None, *, known: Any = UNREAD
    ) -> Any:
        if key.startswith("state:rr:"):
            fn(STEPPED)  # the lost attempt
        return super().update(key, fn, ttl_s)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> RacingStore:
    racing = RacingStore()
    monkeypatch.setattr(board, "store", racing)
    return racing


def test_the_ordering_matches_the_step_written_after_an_aba_retry(store):
    table = build_table(
        {"pa": ["m1"], "pb": ["m2"]},
        combos={"c": {"targets": ["pa/m1", "pb/m2"], "strategy": "round-robin"}},
    )
    combo = dataclasses.replace(table.combos["c"], config={"stickyRoundRobinLimit": 1})
    table = dataclasses.replace(table, combos=MappingProxyType({"c": combo}))
    key = f"state:rr:{combo.id}"
    store.set(key, {"next": 0, "sticky": None}, 60)

    plan = plan_combo(table, combo, RequestFacts(r_in=1, max_out=None), NOW)

    # the write that landed was on {"next": 0}: this request takes index 0 and
    # leaves next = 1 for the following one
    assert store.get(key) == {"next": 1, "sticky": None}
    assert plan.targets[0].key == "pa/m1@main"
