"""Combo planning reads the shared state in batches (spec 08 §3.2) and writes a
strategy's record before dispatch by compare-and-set, so two workers racing on a
round-robin rotation still spread (spec 03 §5.4)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

from gateway.kernel.types import ComboInfo, ComboTargetInfo, RoutingTable
from gateway.planning import combo as combo_plan
from gateway.planning import reads as combo_reads
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers import pins as pins_module
from providers.health import board
from providers.pins import PinStore
from providers.state_mirror import SNAPSHOT_SCRIPT, MirroredStore, is_mirrored
from providers.state_store import LocalStore
from providers.target_stats_redis import SharedTargetStats
from tests.engine.conftest import build_table
from tests.providers.shared_state_helpers import Links, require_redis

NOW = 1_700_000_000.0


def _table(**configs: dict[str, Any]) -> RoutingTable:
    table = build_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={
            "outer": {"targets": ["combo:rr", "pc/m3@main"], "strategy": "priority"},
            "rr": {"targets": ["pa/m1", "pb/m2", "pc/m3"], "strategy": "round-robin"},
            "cheap": {"targets": ["pa/m1", "pb/m2"], "strategy": "least-used"},
        },
    )
    combos = {
        name: dataclasses.replace(combo, config=configs.get(name, {}))
        for name, combo in table.combos.items()
    }
    return dataclasses.replace(table, combos=MappingProxyType(combos))


def _facts(session: str | None = None) -> RequestFacts:
    return RequestFacts(r_in=10, max_out=None, session_key=session)


def _first(table: RoutingTable, combo: ComboInfo, facts: RequestFacts) -> str:
    return plan_combo(table, combo, facts, NOW).targets[0].key


class CountingStore(LocalStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []
        self.batches: list[list[str]] = []

    def get(self, key: str) -> Any:
        self.gets.append(key)
        return super().get(key)

    def get_many(self, keys: Any) -> list[Any]:
        keys = list(keys)
        self.batches.append(keys)
        return super().get_many(keys)


class CountingPins(PinStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.batches = 0

    def get(self, session_key: str, scope: str) -> Any:
        self.gets += 1
        return super().get(session_key, scope)

    def get_many(self, refs: Any) -> list[Any]:
        self.batches += 1
        return super().get_many(refs)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> tuple[CountingStore, CountingPins]:
    store, pins = CountingStore(), CountingPins()
    monkeypatch.setattr(board, "store", store)
    monkeypatch.setattr(combo_reads, "pins", pins)
    monkeypatch.setattr(pins_module, "pins", pins)
    from gateway.planning import affinity as combo_session

    monkeypatch.setattr(combo_session, "pins", pins)
    return store, pins


def test_a_nested_plan_reads_records_and_pins_in_one_batch_each(counting):
    store, pins = counting
    table = _table(outer={"connectionAwareExpansion": True})

    plan = plan_combo(table, table.combos["outer"], _facts("S1"), NOW)

    assert [t.key for t in plan.targets][:3] == [
        "pa/m1@main",
        "pb/m2@main",
        "pc/m3@main",
    ]
    assert [k for k in store.gets if not is_mirrored(k)] == []  # health: the mirror
    shared = [b for b in store.batches if not all(is_mirrored(k) for k in b)]
    assert shared == [["state:rr:2", "quota:pc@main"]]  # quota: the pinned target
    assert (pins.gets, pins.batches) == (0, 1)


def test_without_a_session_no_pin_is_read(counting):
    _, pins = counting
    table = _table()
    plan_combo(table, table.combos["outer"], _facts(), NOW)
    assert (pins.gets, pins.batches) == (0, 0)


def test_the_rotation_still_advances_one_step_per_request(counting):
    table = _table(rr={"stickyRoundRobinLimit": 1})
    rr = table.combos["rr"]
    firsts = [_first(table, rr, _facts()) for _ in range(4)]
    assert firsts == ["pa/m1@main", "pb/m2@main", "pc/m3@main", "pa/m1@main"]


# --- two workers on one Redis ---------------------------------------------------------


@pytest.fixture
def two_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    links = Links(require_redis())
    stores = (MirroredStore(links()), MirroredStore(links()))
    monkeypatch.setattr(combo_reads, "pins", PinStore())
    yield stores
    links.close()


def test_a_worker_that_read_a_stale_rotation_takes_the_next_step(
    two_workers, monkeypatch: pytest.MonkeyPatch
):
    one, two = two_workers
    table = _table(rr={"stickyRoundRobinLimit": 1})
    rr = table.combos["rr"]

    monkeypatch.setattr(board, "store", one)
    slow = combo_plan._Planner(table, _facts(), NOW)
    slow.prefetch(rr)  # worker one has read the rotation ...

    monkeypatch.setattr(board, "store", two)
    assert _first(table, rr, _facts()) == "pa/m1@main"  # ... worker two takes step 0

    monkeypatch.setattr(board, "store", one)
    assert slow.order(rr)[0].key == "pb/m2@main"  # one's write conflicts: step 1
    assert _first(table, rr, _facts()) == "pc/m3@main"
    monkeypatch.setattr(board, "store", two)
    assert _first(table, rr, _facts()) == "pa/m1@main"


class Commands:
    """The real client, recording the commands sent through it (but not the health
    mirror's resync script, which its subscriber thread may run at any moment)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.client, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            if not (name == "eval" and args and args[0] == SNAPSHOT_SCRIPT):
                self.sent.append(name)
            return found(*args, **kwargs)

        return call


def test_a_plan_costs_one_read_and_one_write_on_redis(two_workers, monkeypatch):
    one, _ = two_workers
    one.start()
    commands = one.link.client = Commands(one.link.client)
    monkeypatch.setattr(board, "store", one)
    table = _table(
        rr={"stickyRoundRobinLimit": 1}, outer={"connectionAwareExpansion": True}
    )

    plan_combo(table, table.combos["outer"], _facts(), NOW)

    assert commands.sent == ["mget", "eval"]


def test_records_and_shared_target_stats_come_in_one_pipeline(two_workers, monkeypatch):
    one, two = two_workers
    one.start()
    mine, theirs = SharedTargetStats(one.link), SharedTargetStats(two.link)
    monkeypatch.setattr(combo_reads, "stats", mine)
    monkeypatch.setattr(board, "store", one)
    table = _table()
    table = dataclasses.replace(
        table,
        combos=MappingProxyType(
            {
                **table.combos,
                "outer": dataclasses.replace(
                    table.combos["outer"],
                    targets=(
                        ComboTargetInfo(ref="cheap"),
                        ComboTargetInfo(model="pc/m3", connection="main"),
                    ),
                ),
            }
        ),
    )
    theirs.started("pa/m1@main", NOW)  # a call in flight on the other worker
    assert theirs.flush()
    commands = one.link.client = Commands(one.link.client)
    try:
        plan = plan_combo(table, table.combos["outer"], _facts(), NOW)
    finally:
        one.link.client = commands.client
        mine.stop()
        theirs.stop()

    assert commands.sent == ["pipeline"]
    assert [t.key for t in plan.targets] == ["pb/m2@main", "pa/m1@main", "pc/m3@main"]
