"""The auto pipeline end to end over plain data (spec 04 §4, §11 examples 2-6, 10).

Pool P lives in a real ``RoutingTable``; health, quota and statistics come from the
injected ``Environment``, exactly as ``gateway.auto.live`` builds it from live state.
"""

from __future__ import annotations

import json
import random
from types import MappingProxyType
from typing import Any

import pytest

from gateway.auto.engine.decide import AutoRequest, Environment, Stats, decide
from gateway.auto.engine.pool import AutoRoute, for_combo, servable
from gateway.kernel.types import (
    ComboInfo,
    ComboTargetInfo,
    ConnectionInfo,
    GatewaySettings,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    RoutingTable,
    Target,
)

A, B, C = (
    "openai/gpt-5-nano@main",
    "anthropic/claude-sonnet-4@main",
    "google/gemini-2.5-flash@free",
)
KEY = KeyPolicy(id=1, name="k", prefix="sk-or-k")


def _provider(slug, model_id, conn, account_tier, **model_fields):
    model = ModelInfo(provider=slug, model_id=model_id, **model_fields)
    return ProviderInfo(
        slug=slug,
        kind="openai",
        base_url=f"http://{slug}.test/v1",
        connections=(
            ConnectionInfo(provider=slug, name=conn, api_key="sk-x", tier=account_tier),
        ),
        models=MappingProxyType({model_id: model}),
    )


def pool_p_table(**settings: Any) -> RoutingTable:
    big = {"context_window": 200_000}
    providers = {
        "openai": _provider(
            "openai",
            "gpt-5-nano",
            "main",
            "pro",
            input_cost=0.05,
            output_cost=0.40,
            capabilities=frozenset({"tools", "json"}),
            tier="budget",
            **big,
        ),
        "anthropic": _provider(
            "anthropic",
            "claude-sonnet-4",
            "main",
            "ultra",
            input_cost=3.0,
            output_cost=15.0,
            capabilities=frozenset({"tools", "reasoning", "json"}),
            **big,
        ),
        "google": _provider(
            "google",
            "gemini-2.5-flash",
            "free",
            "free",
            input_cost=0.30,
            output_cost=2.50,
            capabilities=frozenset({"tools", "json"}),
            **big,
        ),
    }
    return RoutingTable(
        version=1,
        providers=MappingProxyType(providers),
        settings=GatewaySettings(**{"exploration_rate": 0.0, **settings}),
    )


STATS = {
    A: Stats(p95_ms=2000, std_ms=500, failure_rate=0.0, good_rate=1.0),
    B: Stats(p95_ms=1600, std_ms=200, failure_rate=0.0, good_rate=1.0),
    C: Stats(p95_ms=800, std_ms=400, failure_rate=0.0, good_rate=1.0),
}
QUOTA = {A: 40.0, B: 100.0, C: 90.0}
CIRCUIT = {A: "closed", B: "closed", C: "half_open"}


def env_for(table: RoutingTable, **overrides: Any) -> Environment:
    circuit = overrides.pop("circuit", CIRCUIT)
    unreachable = overrides.pop("unreachable", {})
    healing = overrides.pop("healing", {})
    return Environment(
        table_settings=table.settings,
        reachable=lambda t: unreachable.get(t.key),
        circuit=lambda t: circuit.get(t.key, "closed"),
        quota=lambda t: (QUOTA.get(t.key), None, None),
        in_flight=lambda _t: 0,
        stats=lambda t: STATS.get(t.key),
        healing_entry=lambda key: healing.get(key),
        **overrides,
    )


def coding_body() -> dict[str, Any]:
    """One user message with a Python fence, json.dumps(messages) 2000 chars."""
    head = "```python\nprint(1)\n```\n"
    messages = [{"role": "user", "content": head}]
    pad = 2000 - len(json.dumps(messages))
    messages[0]["content"] = head + "x" * pad
    assert len(json.dumps(messages)) == 2000
    return {"messages": messages, "max_tokens": 1000}


async def run(
    route_id: str = "auto",
    *,
    table: RoutingTable | None = None,
    env: Environment | None = None,
    **request: Any,
):
    table = table or pool_p_table()
    route = request.pop("route", None) or AutoRoute(route_id=route_id)
    return await decide(
        AutoRequest(
            route=route,
            key=request.pop("key", KEY),
            body=request.pop("body", coding_body()),
            now=1_700_000_000.0,
            **request,
        ),
        env or env_for(table),
        servable(table, route),
    )


def keys(targets: list[Target]) -> list[str]:
    return [t.key for t in targets]


async def test_example_2_auto_serves_b_then_c_then_a():
    decision = await run("auto")
    assert decision.task_type == "coding"
    scores = {s.key: round(s.score, 4) for s in decision.ranked}
    assert scores == {A: 0.6113, B: 0.6476, C: 0.6435}
    assert keys(decision.order) == [B, C, A]
    assert decision.strategy == "rules"  # no LKGP record: rules decides
    assert decision.router_strategy == "lkgp"


@pytest.mark.parametrize(
    ("route_id", "mode", "first"),
    [
        ("auto", "cheap", A),
        ("auto/coding", None, B),
        ("auto/fast", None, B),
    ],
)
async def test_example_3_packs(route_id, mode, first):
    decision = await run(route_id, mode=mode)
    assert keys(decision.order)[0] == first


async def test_the_mode_header_scores_with_its_pack():
    decision = await run("auto", mode="cheap")
    scores = {s.key: round(s.score, 4) for s in decision.ranked}
    assert scores == {A: 0.7354, B: 0.5581, C: 0.6884}
    assert decision.weights_source.startswith("header")


async def test_example_4_exploration_with_a_seeded_rng():
    table = pool_p_table(exploration_rate=0.05)
    explored = await run("auto/coding", table=table, rng=random.Random(43))
    assert explored.explored
    assert keys(explored.order) == [A, B, C]
    kept = await run("auto/coding", table=table, rng=random.Random(42))
    assert not kept.explored
    assert keys(kept.order)[0] == B


async def test_example_5_budget():
    within = await run("auto", budget=0.01)
    assert keys(within.order) == [C, A]
    assert within.budget["outcome"] == "within"
    strict = await run("auto", budget=0.0004, budget_fallback="strict")
    assert strict.refusal is not None
    assert strict.refusal.status == 402
    assert strict.refusal.code == "budget_exceeded"
    assert strict.refusal.message == (
        "No candidate fits the budget of $0.000400 per request "
        "(cheapest: openai/gpt-5-nano@main at $0.000425)"
    )
    cheapest = await run("auto", budget=0.0004)
    assert keys(cheapest.order) == [A, C, B]
    assert cheapest.budget["outcome"] == "cheapest"


async def test_example_6_filters():
    vision = await run("auto/vision")
    assert vision.filtered.filter_fell_open == ["category"]
    assert keys(vision.order)[0] == B
    pro = await run("auto/reasoning:pro")
    assert keys(pro.order) == [B]
    free = await run("auto/reasoning:free")
    assert keys(free.order) == [B]
    assert free.filtered.filter_fell_open == ["tier"]
    hidden = await run("auto", table=pool_p_table(hide_paid_models=True))
    assert hidden.refusal is not None
    assert hidden.refusal.code == "no_healthy_candidate"
    assert hidden.refusal.retry_after_s is None


async def test_unreachable_candidates_are_not_scored_and_nothing_left_is_a_503():
    table = pool_p_table()
    env = env_for(table, unreachable={B: ("circuit_open", 12.0)})
    decision = await run("auto", table=table, env=env)
    assert B not in keys(decision.order)
    everything = dict.fromkeys((A, B, C), ("cooldown", 30.0))
    env = env_for(table, unreachable={**everything, B: ("circuit_open", 12.0)})
    refused = await run("auto", table=table, env=env)
    assert refused.refusal.code == "no_healthy_candidate"
    assert refused.refusal.retry_after_s == 12.0


async def test_context_fit_refuses_when_every_window_is_too_small():
    body = {"messages": [{"role": "user", "content": "x" * 900_000}]}
    decision = await run("auto", body=body)
    assert decision.refusal.code == "context_length_exceeded"
    assert decision.refusal.param == "messages"


async def test_allow_list_with_provider_globs_limits_the_pool():
    key = KeyPolicy(id=2, name="o", prefix="p", allowed_models=("openai/*", "auto*"))
    decision = await run("auto", key=key)
    assert keys(decision.order) == [A]
    auto_only = KeyPolicy(id=3, name="a", prefix="p", allowed_models=("auto*",))
    assert len((await run("auto", key=auto_only)).order) == 3
    none = KeyPolicy(id=4, name="n", prefix="p", allowed_models=("mistral/*",))
    assert (await run("auto", key=none)).refusal.status == 403


async def test_overrides_exclude_and_fail_open():
    table = pool_p_table()
    decision = await run("auto", env=env_for(table, excluded=frozenset({B})))
    assert B not in keys(decision.order)
    everything = frozenset({A, B, C})
    opened = await run("auto", env=env_for(table, excluded=everything))
    assert opened.filtered.overrides_ignored
    assert len(opened.order) == 3


async def test_example_10_incident_mode():
    circuit = {A: "open", B: "open", C: "closed"}
    table = pool_p_table(exploration_rate=1.0)

    class NoRandom(random.Random):
        def random(self):  # pragma: no cover - must not be called
            raise AssertionError("the RNG was consulted in incident mode")

    unreachable = {A: ("circuit_open", 5.0), B: ("circuit_open", 5.0)}
    env = env_for(table, circuit=circuit, unreachable=unreachable)
    decision = await run("auto", table=table, env=env, mode="cheap", rng=NoRandom())
    assert decision.incident_mode
    assert decision.weights_source == "incident"
    assert keys(decision.order) == [C]


async def test_self_healing_exclusion_then_probe():
    table = pool_p_table()
    now = 1_700_000_000.0
    excluded = {
        B: {
            "level": 1,
            "excluded_until": now + 60,
            "probe_pending": True,
            "probe_in_flight": False,
        }
    }
    decision = await run("auto", table=table, env=env_for(table, healing=excluded))
    assert B not in keys(decision.order)
    assert not decision.probes
    expired = {B: {**excluded[B], "excluded_until": now - 1}}
    probed = await run("auto", table=table, env=env_for(table, healing=expired))
    assert keys(probed.order)[0] == B
    assert probed.probes == {B}
    in_flight = {B: {**expired[B], "probe_in_flight": True}}
    busy = await run("auto", table=table, env=env_for(table, healing=in_flight))
    assert B not in keys(busy.order)


async def test_healing_fails_open_when_everything_is_excluded():
    table = pool_p_table()
    entry = {
        "level": 1,
        "excluded_until": 1_800_000_000.0,
        "probe_pending": True,
        "probe_in_flight": False,
    }
    healing = {A: entry, B: entry, C: entry}
    decision = await run("auto", table=table, env=env_for(table, healing=healing))
    assert len(decision.order) == 3


async def test_persisted_auto_combo_uses_its_targets_and_config():
    table = pool_p_table()
    combo = ComboInfo(
        id=7,
        name="my-auto",
        strategy="auto",
        targets=(
            ComboTargetInfo(model="openai/gpt-5-nano"),
            ComboTargetInfo(model="google/gemini-2.5-flash"),
        ),
        config={"auto": {"modePack": "cost-saver", "maxAttempts": 1}},
    )
    decision = await run(table=table, route=for_combo(combo))
    assert keys(decision.order) == [A]
    assert decision.weights_source == "combo:cost-saver"


async def test_record_names_the_decision():
    decision = await run("auto")
    record = decision.record()
    assert record["route"] == "auto"
    assert record["strategy"] == "rules"
    assert record["candidates_considered"] == 3
    assert record["top"][0] == {"key": B, "score": 0.6476}
