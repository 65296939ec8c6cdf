"""The ``adaptive`` strategy in the combo planner (spec 05 §1.4, §3.1, §3.4, §3.8): the
all-cooling choice (ties to the higher weight; its success pins and warms the session),
failover selections in ``omniroute_routing_selections_total``, the latency gauge, and
the pin release of E7 when the pinned target cools mid-request."""

from __future__ import annotations

import dataclasses
import random
from types import MappingProxyType
from typing import Any

import pytest
from prometheus_client import REGISTRY

from gateway.kernel.adaptive import LatencyEstimator
from gateway.kernel.types import RoutingTable, Target
from gateway.planning import affinity as combo_session
from gateway.planning import combo as combo_plan
from gateway.planning import reads as combo_reads
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from providers import pins as pins_module
from providers.health import Skip
from providers.pins import PinStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0


def _table(targets: list[Any], name: str, **config: Any) -> RoutingTable:
    table = build_table(
        {"pa": ["m1"], "pb": ["m2"], "pc": ["m3"]},
        combos={name: {"targets": targets, "strategy": "adaptive"}},
    )
    combo = dataclasses.replace(table.combos[name], config=config)
    return dataclasses.replace(table, combos=MappingProxyType({name: combo}))


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> PinStore:
    fresh = PinStore()
    monkeypatch.setattr(combo_reads, "pins", fresh)
    monkeypatch.setattr(combo_session, "pins", fresh)
    monkeypatch.setattr(pins_module, "pins", fresh)
    monkeypatch.setattr(combo_session, "latency", LatencyEstimator())
    return fresh


def _cooling(monkeypatch: pytest.MonkeyPatch, waits: dict[str, float]) -> None:
    """Targets named in ``waits`` are in a cooldown ending after that many seconds."""

    def check(self: Any, target: Target) -> Skip | None:
        wait = waits.get(target.key)
        return None if wait is None else Skip("cooldown", wait)

    monkeypatch.setattr(combo_plan._Planner, "_check", check)


def _value(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_all_cooling_ties_go_to_the_higher_configured_weight(store, monkeypatch):
    """§3.1: the cooling that ends soonest; ties: higher weight, then declaration."""
    table = _table(
        [{"model": "pa/m1", "weight": 1}, {"model": "pb/m2", "weight": 3}], "tied"
    )
    _cooling(monkeypatch, {"pa/m1@main": 30.0, "pb/m2@main": 30.0})

    plan = plan_combo(
        table, table.combos["tied"], RequestFacts(r_in=1, max_out=None), NOW
    )

    assert [t.key for t in plan.targets] == ["pb/m2@main"]
    assert plan.forced == {"pb/m2@main"}


def test_all_cooling_ties_in_weight_go_to_declaration_order(store, monkeypatch):
    table = _table(["pa/m1", "pb/m2"], "plain")
    _cooling(monkeypatch, {"pa/m1@main": 30.0, "pb/m2@main": 30.0})
    plan = plan_combo(
        table, table.combos["plain"], RequestFacts(r_in=1, max_out=None), NOW
    )
    assert [t.key for t in plan.targets] == ["pa/m1@main"]


def test_a_success_of_the_all_cooling_choice_pins_the_session(store, monkeypatch):
    """§1.4: after a successful attempt in the combo the pin is set to the target
    that served, the all-cooling choice included."""
    table = _table(["pa/m1", "pb/m2"], "cool")
    _cooling(monkeypatch, {"pa/m1@main": 12.0, "pb/m2@main": 40.0})

    plan = plan_combo(
        table,
        table.combos["cool"],
        RequestFacts(r_in=1, max_out=None, session_key="S"),
        NOW,
    )
    (chosen,) = plan.targets
    assert chosen.key == "pa/m1@main"
    plan.succeeded(chosen)

    pin = store.get("S", f"combo:{table.combos['cool'].id}")
    assert pin is not None
    assert pin["target"] == "pa/m1@main"


def test_a_success_of_the_all_cooling_choice_warms_the_session(store, monkeypatch):
    """§3.4: with affinity off, the target that served gets the warm boost next."""
    table = _table(["pa/m1", "pb/m2"], "warm", sessionAffinity=False)
    _cooling(monkeypatch, {"pa/m1@main": 12.0, "pb/m2@main": 40.0})

    plan = plan_combo(
        table,
        table.combos["warm"],
        RequestFacts(r_in=1, max_out=None, session_key="S"),
        NOW,
    )
    plan.succeeded(plan.targets[0])

    record = store.get("S", f"warm:{table.combos['warm'].id}")
    assert record is not None
    assert record["candidate"] == "pa/m1@main"


def test_a_failover_selection_that_serves_is_counted_as_failover(store, monkeypatch):
    """§3.8: ``reason`` takes ``failover`` for the repeated selection of §3.5 step 4."""
    table = _table(["pa/m1", "pb/m2"], "fo")
    monkeypatch.setattr(combo_session, "_rng", random.Random(7))
    plan = plan_combo(
        table, table.combos["fo"], RequestFacts(r_in=1, max_out=None), NOW
    )
    _, second = plan.targets
    labels = {"combo": "fo", "target": second.key, "reason": "failover"}
    before = _value("omniroute_routing_selections_total", labels)

    plan.succeeded(second)  # the first pick failed over to the second

    assert _value("omniroute_routing_selections_total", labels) == before + 1


def test_the_first_pick_serving_counts_no_failover(store, monkeypatch):
    table = _table(["pa/m1", "pb/m2"], "fo2")
    plan = plan_combo(
        table, table.combos["fo2"], RequestFacts(r_in=1, max_out=None), NOW
    )
    first, second = plan.targets
    labels = {"combo": "fo2", "target": second.key, "reason": "failover"}
    before = _value("omniroute_routing_selections_total", labels)
    plan.succeeded(first)
    assert _value("omniroute_routing_selections_total", labels) == before


def test_after_an_honoured_pin_fails_the_next_pick_is_a_failover(store, monkeypatch):
    table = _table(["pa/m1", "pb/m2"], "pinfo")
    scope = f"combo:{table.combos['pinfo'].id}"
    store.set("S", scope, {"target": "pa/m1@main", "last_served_at": NOW}, 3600)
    plan = plan_combo(
        table,
        table.combos["pinfo"],
        RequestFacts(r_in=1, max_out=None, session_key="S"),
        NOW,
    )
    pinned, tail = plan.targets
    assert pinned.key == "pa/m1@main"
    labels = {"combo": "pinfo", "target": tail.key, "reason": "failover"}
    before = _value("omniroute_routing_selections_total", labels)
    plan.succeeded(tail)
    assert _value("omniroute_routing_selections_total", labels) == before + 1
    assert store.get("S", scope)["target"] == tail.key  # type: ignore[index]


def test_the_latency_gauge_shows_the_pool_default_when_unknown(store, monkeypatch):
    """§3.8: ``omniroute_routing_latency_estimate_ms`` is ``L``, ``D`` when unknown."""
    estimator = LatencyEstimator()
    estimator.sample("pa/m1@main", 400.0, NOW - 1)
    estimator.sample("pb/m2@main", 900.0, NOW - 40)  # stale: unknown
    monkeypatch.setattr(combo_session, "latency", estimator)
    table = _table(["pa/m1", "pb/m2"], "gauge")

    plan_combo(table, table.combos["gauge"], RequestFacts(r_in=1, max_out=None), NOW)

    name = "omniroute_routing_latency_estimate_ms"
    assert _value(name, {"target": "pa/m1@main"}) == 400.0
    assert _value(name, {"target": "pb/m2@main"}) == 400.0  # D: the fresh median


def _affinity(combo: str, outcome: str) -> float:
    return _value(
        "omniroute_routing_session_affinity_total", {"combo": combo, "outcome": outcome}
    )


@pytest.mark.parametrize("strategy", ["adaptive", "round-robin"])
def test_e7_a_pinned_target_cooling_mid_request_releases_the_pin(
    store, monkeypatch, strategy
):
    """E7: the pinned A answers 429 and cools, the pin is released, the failover
    attempt on B succeeds and the pin becomes B."""
    name = f"e7-{strategy}"
    table = _table(["pa/m1", "pb/m2"], name)
    combo = dataclasses.replace(table.combos[name], strategy=strategy)
    table = dataclasses.replace(table, combos=MappingProxyType({name: combo}))
    scope = f"combo:{combo.id}"
    store.set("S", scope, {"target": "pa/m1@main", "last_served_at": NOW}, 3600)
    facts = RequestFacts(r_in=1, max_out=None, session_key="S")
    plan = plan_combo(table, combo, facts, NOW)
    pinned, other = plan.targets[:2]
    assert pinned.key == "pa/m1@main"
    honored, released = _affinity(name, "honored"), _affinity(name, "released")

    monkeypatch.setattr(
        combo_session.board,
        "skip_reason",
        lambda conn, *_: Skip("cooldown", 30.0) if conn == "pa@main" else None,
    )
    plan.succeeded(other)

    assert _affinity(name, "released") == released + 1
    assert _affinity(name, "honored") == honored
    assert store.get("S", scope)["target"] == other.key  # type: ignore[index]


def test_a_pinned_target_failing_without_cooling_just_moves_the_pin(store, monkeypatch):
    table = _table(["pa/m1", "pb/m2"], "moved")
    combo = table.combos["moved"]
    scope = f"combo:{combo.id}"
    store.set("S", scope, {"target": "pa/m1@main", "last_served_at": NOW}, 3600)
    plan = plan_combo(
        table, combo, RequestFacts(r_in=1, max_out=None, session_key="S"), NOW
    )
    released = _affinity("moved", "released")
    monkeypatch.setattr(combo_session.board, "skip_reason", lambda *_: None)
    plan.succeeded(plan.targets[1])
    assert _affinity("moved", "released") == released
    assert store.get("S", scope)["target"] == "pb/m2@main"  # type: ignore[index]
