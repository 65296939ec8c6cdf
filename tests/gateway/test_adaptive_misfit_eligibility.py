"""Adaptive eligibility and the request-shaped filters (spec 05 §3.1).

A target that fails the request filters of 03 §4.2 (context size, capabilities) is
not eligible; the all-cooling exception chooses among the *eligible* candidates only,
so it must neither return a misfit nor prefer one (a misfit has no cooling end). A
pinned target too small for one request is bypassed and keeps its pin (§1.4).
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.kernel.adaptive import LatencyEstimator
from gateway.kernel.types import RoutingTable, Target
from gateway.planning import affinity as combo_session
from gateway.planning import combo as combo_plan
from gateway.planning import reads as combo_reads
from gateway.planning.combo import plan_combo
from gateway.planning.plan import request_facts
from providers import pins as pins_module
from providers.health import Skip
from providers.pins import PinStore
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0
TOO_LARGE = {"messages": [{"role": "user", "content": "x" * 8000}]}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = PinStore()
    monkeypatch.setattr(combo_reads, "pins", fresh)
    monkeypatch.setattr(combo_session, "pins", fresh)
    monkeypatch.setattr(pins_module, "pins", fresh)
    monkeypatch.setattr(combo_session, "latency", LatencyEstimator())


def _cooling(monkeypatch: pytest.MonkeyPatch, waits: dict[str, float]) -> None:
    def check(self: Any, target: Target) -> Skip | None:
        wait = waits.get(target.key)
        return None if wait is None else Skip("cooldown", wait)

    monkeypatch.setattr(combo_plan._Planner, "_check", check)


def _table(combos: dict[str, Any]) -> RoutingTable:
    return build_table(
        {
            "pw": {"models": [{"model_id": "small", "context_window": 1000}]},
            "pb": ["m2"],
        },
        combos=combos,
    )


def test_a_misfit_is_not_eligible_so_the_cooling_one_is_the_all_cooling_choice(
    monkeypatch,
):
    table = _table({"ad": {"strategy": "adaptive", "targets": ["pw/small", "pb/m2"]}})
    _cooling(monkeypatch, {"pb/m2@main": 30.0})

    plan = plan_combo(table, table.combos["ad"], request_facts(TOO_LARGE), NOW)

    # pw/small cannot take the request (a skip item); pb/m2 is the only eligible
    # candidate and it cools: called anyway (the all-cooling exception)
    assert [t.key for t in plan.targets] == ["pb/m2@main"]
    assert plan.forced == {"pb/m2@main"}
    assert ("pw/small@main", "context_too_large") in [
        (t.key, s.reason) for t, s in plan.skips
    ]


def test_a_nested_misfit_never_wins_the_all_cooling_choice(monkeypatch):
    """A misfit skip has no cooling end: read as one it would end "now" and win."""
    table = _table(
        {
            "ad": {"strategy": "adaptive", "targets": ["combo:inner", "pb/m2"]},
            "inner": {"strategy": "priority", "targets": ["pw/small"]},
        }
    )
    _cooling(monkeypatch, {"pb/m2@main": 30.0})

    plan = plan_combo(table, table.combos["ad"], request_facts(TOO_LARGE), NOW)

    assert [t.key for t in plan.targets] == ["pb/m2@main"]
    assert plan.forced == {"pb/m2@main"}


def test_only_misfits_leave_no_candidate_at_all(monkeypatch):
    """No eligible candidate at all is the 503, not a forced call of a misfit."""
    table = _table(
        {
            "ad": {"strategy": "adaptive", "targets": ["combo:inner", "pw/small"]},
            "inner": {"strategy": "priority", "targets": ["pw/small"]},
        }
    )
    _cooling(monkeypatch, {})

    plan = plan_combo(table, table.combos["ad"], request_facts(TOO_LARGE), NOW)

    assert plan.targets == []
    assert plan.forced == set()


def _affinity(combo: str, outcome: str) -> float:
    from prometheus_client import REGISTRY

    labels = {"combo": combo, "outcome": outcome}
    return (
        REGISTRY.get_sample_value("omniroute_routing_session_affinity_total", labels)
        or 0.0
    )


@pytest.mark.parametrize("strategy", ["adaptive", "weighted"])
def test_a_pinned_target_too_small_for_one_request_keeps_its_pin(strategy):
    """§1.4: only a cooldown or a broken target releases a pin; a request the pinned
    target cannot take is served without it (``bypassed``), the pin stays."""
    name = f"fit-{strategy}"
    table = _table({name: {"strategy": strategy, "targets": ["pw/small", "pb/m2"]}})
    combo = table.combos[name]
    scope = f"combo:{combo.id}"
    combo_session.pins.set(
        "S", scope, {"target": "pw/small@main", "last_served_at": NOW}, 3600
    )
    released, bypassed = _affinity(name, "released"), _affinity(name, "bypassed")

    plan = plan_combo(table, combo, request_facts(TOO_LARGE, "S"), NOW)

    assert [t.key for t in plan.targets] == ["pb/m2@main"]
    assert _affinity(name, "released") == released
    assert _affinity(name, "bypassed") == bypassed + 1
    assert combo_session.pins.get("S", scope) is not None
