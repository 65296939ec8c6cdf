"""Connection order under prompt-cache affinity (spec 02 §5, 03 §4.1): equal-priority
connections of one provider go by rendezvous score on the cache key ``K``, in direct
slots, in a combo's unpinned targets and in its expanded targets alike."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from gateway.dialects.base import endpoint_url
from gateway.kernel.chain import connection_order, plan_targets
from gateway.kernel.rendezvous import rendezvous_order
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts
from tests.engine.conftest import build_table

NOW = 1_700_000_000.0
KEYS = [f"conversation-{i}" for i in range(24)]
TWINS = {"pa": {"models": ["m1"], "connections": {"main": 0, "backup": 0, "slow": 1}}}


def _by_rendezvous(key: str) -> list[str]:
    equal = rendezvous_order(key, ["pa/m1@backup", "pa/m1@main"])
    return [*equal, "pa/m1@slow"]


def test_the_key_spreads_over_both_orders() -> None:
    # the cases below are only worth something if K really reorders connections
    firsts = {_by_rendezvous(key)[0] for key in KEYS}
    assert firsts == {"pa/m1@backup", "pa/m1@main"}


def test_direct_slot_orders_equal_priorities_by_rendezvous(make_slot) -> None:
    table = build_table(TWINS)
    slot = make_slot(table, "pa/m1")
    for key in KEYS:
        targets = plan_targets(table, slot, [], key)
        assert [t.key for t in targets] == _by_rendezvous(key), key


def test_without_a_key_the_order_is_priority_then_name(make_slot) -> None:
    table = build_table(TWINS)
    targets = plan_targets(table, make_slot(table, "pa/m1"), [])
    assert [t.key for t in targets] == ["pa/m1@backup", "pa/m1@main", "pa/m1@slow"]


def test_providers_stay_grouped_by_slug_before_affinity(make_slot) -> None:
    table = build_table(
        {
            "zz": {"models": ["m"], "connections": {"a": 0, "b": 0}},
            "aa": {"models": ["m"], "connections": {"x": 0}},
        }
    )
    targets = plan_targets(table, make_slot(table, "m"), [])
    for key in KEYS:
        ordered = [t.key for t in connection_order(targets, key)]
        assert ordered[0] == "aa/m@x"
        assert ordered[1:] == rendezvous_order(key, ["zz/m@a", "zz/m@b"])


def test_expanded_combo_targets_follow_the_same_order() -> None:
    table = build_table(TWINS, combos={"team": {"targets": ["pa/m1"]}})
    team = dataclasses.replace(
        table.combos["team"], config={"connectionAwareExpansion": True}
    )
    table = dataclasses.replace(table, combos=MappingProxyType({"team": team}))
    for key in KEYS:
        facts = RequestFacts(r_in=10, max_out=None, cache_key=key)
        plan = plan_combo(table, team, facts, NOW)
        assert [t.key for t in plan.targets] == _by_rendezvous(key), key


def test_affinity_off_keeps_name_order_in_a_combo() -> None:
    settings = dataclasses.replace(build_table().settings, promptcache_affinity=False)
    table = build_table(
        TWINS, combos={"team": {"targets": ["pa/m1"]}}, settings=settings
    )
    for key in KEYS[:4]:
        facts = RequestFacts(r_in=10, max_out=None, cache_key=key)
        plan = plan_combo(table, table.combos["team"], facts, NOW)
        assert [t.key for t in plan.targets] == [
            "pa/m1@backup",
            "pa/m1@main",
            "pa/m1@slow",
        ]


def test_a_base_url_without_a_path_gets_the_v1_prefix() -> None:
    assert endpoint_url("https://api.anthropic.com", "/messages") == (
        "https://api.anthropic.com/v1/messages"
    )
    assert endpoint_url("http://127.0.0.1:8080/", "/chat/completions") == (
        "http://127.0.0.1:8080/v1/chat/completions"
    )
    assert endpoint_url("https://api.openai.com/v1/", "/chat/completions") == (
        "https://api.openai.com/v1/chat/completions"
    )
    assert endpoint_url("https://host/proxy", "/messages") == (
        "https://host/proxy/messages"
    )
