"""Router strategies of the auto engine (spec 04 §8, §7 exploration flags, §11
example 11): built-ins, Nadir with an injected poster, custom strategies."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
import textwrap
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from gateway.auto.engine import routers as strategies
from gateway.auto.engine.nadir import nadir_base_url
from gateway.auto.engine.routers import (
    Choice,
    RouterStrategy,
    canonical_name,
    choose,
    get_router_strategy,
    is_known_strategy,
    load_strategy_modules,
    register_router_strategy,
    reset_nadir_skips,
    sla_rows,
)
from gateway.auto.engine.types import CandidateInput, RouterContext, Scored

NADIR_ENV = ("OMNIROUTE_NADIR_API_KEY", "OMNIROUTE_NADIR_BASE_URL")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    """Each test starts with no custom strategy, no Nadir skip and no Nadir env."""
    monkeypatch.setattr(strategies, "_CUSTOM", {})
    for name in NADIR_ENV:
        monkeypatch.delenv(name, raising=False)
    reset_nadir_skips()
    yield
    reset_nadir_skips()


def make_scored(
    key: str,
    *,
    order: int = 0,
    score: float = 0.5,
    cost: float = 1.0,
    p95: float = 1500.0,
    std: float = 150.0,
    error_rate: float | None = None,
    circuit: str = "closed",
    factors: Mapping[str, float] | None = None,
) -> Scored:
    """A pool item from its key (``provider/model@connection``) and its numbers."""
    provider, rest = key.split("/", 1)
    model, connection = rest.split("@", 1)
    return Scored(
        key=key,
        provider=provider,
        model=model,
        connection=connection,
        order=order,
        score=score,
        default_score=score,
        factors=MappingProxyType(dict(factors or {"health": 1.0})),
        cost=cost,
        est_cost_usd=cost * 1500 / 1e6,
        p95=p95,
        std=std,
        error_rate=error_rate,
        circuit=circuit,
        capabilities=None,
        window=None,
        candidate=CandidateInput(
            key=key, provider=provider, model=model, connection=connection, order=order
        ),
    )


def make_ctx(**overrides: Any) -> RouterContext:
    return RouterContext(route_id="combo:test", **overrides)


A = make_scored("pa/m1@main", order=0)
B = make_scored("pb/m2@main", order=1)
C = make_scored("pc/m3@main", order=2)


# --- rules, score, cost, latency, chaos, lkgp --------------------------------------


async def test_rules_takes_the_top_of_the_ranking():
    choice = await choose("rules", [B, A, C], make_ctx())

    assert choice == Choice(primary=B, strategy="rules", explorable=True)


async def test_an_empty_pool_is_a_value_error():
    with pytest.raises(ValueError, match="non-empty"):
        await choose("rules", [], make_ctx())


async def test_score_takes_the_highest_score_wherever_it_ranks():
    low = make_scored("pa/m1@main", order=0, score=0.4)
    high = make_scored("pb/m2@main", order=1, score=0.6)

    choice = await choose("score", [low, high], make_ctx())

    assert choice.primary is high
    assert choice.strategy == "score"


async def test_score_ties_go_to_configured_order_and_ignore_p95():
    # rules would rank the fast one first (tie on score, then lower p95)
    fast = make_scored("pa/m1@main", order=2, score=0.5, p95=100)
    slow = make_scored("pb/m2@main", order=1, score=0.5, p95=900)
    noisy = make_scored("pc/m3@main", order=0, score=0.5 - 1e-12, p95=50)

    choice = await choose("score", [fast, slow, noisy], make_ctx())

    # 0.5 - 1e-12 equals 0.5 at the ranking's 9 decimals, so configured order wins
    assert choice.primary is noisy
    choice = await choose("score", [fast, slow], make_ctx())
    assert choice.primary is slow


async def test_cost_takes_the_lowest_cost_with_ties_by_rank():
    dear = make_scored("pa/m1@main", order=0, cost=7.8)
    cheap_second = make_scored("pb/m2@main", order=2, cost=0.19)
    cheap_third = make_scored("pc/m3@main", order=1, cost=0.19)

    choice = await choose("cost", [dear, cheap_second, cheap_third], make_ctx())

    assert choice.primary is cheap_second
    assert choice.strategy == "cost"


async def test_latency_adds_a_thousand_ms_per_unit_of_error_rate_example_11():
    x = make_scored("px/x@main", order=0, p95=300, error_rate=0.5)  # 800
    y = make_scored("py/y@main", order=1, p95=600, error_rate=None)  # 650

    choice = await choose("latency", [x, y], make_ctx())

    assert choice.primary is y
    assert choice.strategy == "latency"


async def test_latency_ties_go_to_rank():
    first = make_scored("pa/m1@main", order=1, p95=650, error_rate=0.0)
    second = make_scored("pb/m2@main", order=0, p95=600, error_rate=None)

    assert (await choose("latency", [first, second], make_ctx())).primary is first


@pytest.mark.parametrize(
    ("alias", "canonical"), [("eco", "cost"), ("fast", "latency"), ("sla", "sla-aware")]
)
async def test_an_alias_decides_and_reports_as_its_canonical_strategy(alias, canonical):
    choice = await choose(alias, [A, B], make_ctx())

    assert choice.strategy == canonical
    assert canonical_name(alias) == canonical


async def test_chaos_selects_like_rules_and_reports_chaos():
    choice = await choose("chaos", [B, A], make_ctx())

    assert choice == Choice(primary=B, strategy="chaos", explorable=False)


async def test_lkgp_hit_serves_the_recorded_candidate_without_exploration():
    choice = await choose("lkgp", [A, B, C], make_ctx(lkgp_record=C.key))

    assert choice == Choice(primary=C, strategy="lkgp", explorable=False)


@pytest.mark.parametrize("record", [None, "", "pz/gone@main"])
async def test_lkgp_miss_falls_back_to_explorable_rules(record):
    choice = await choose("lkgp", [A, B, C], make_ctx(lkgp_record=record))

    assert choice == Choice(primary=A, strategy="rules", explorable=True)


async def test_an_unknown_name_at_runtime_is_rules_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        choice = await choose("vanished", [A, B], make_ctx())

    assert choice.primary is A
    assert choice.strategy == "rules"
    assert choice.explorable is True
    assert "vanished" in caplog.text


@pytest.mark.parametrize(
    ("name", "strategy", "explorable", "whole_list"),
    [
        ("rules", "rules", True, False),
        ("score", "score", True, True),
        ("cost", "cost", True, False),
        ("latency", "latency", True, False),
        ("sla-aware", "sla-aware", True, False),
        ("chaos", "chaos", False, False),
        ("lkgp", "rules", True, False),  # a miss
        ("nadir", "rules", True, False),  # no poster
    ],
)
async def test_exploration_flags_follow_spec_04_section_7(
    name, strategy, explorable, whole_list
):
    choice = await choose(name, [A, B], make_ctx())

    assert (choice.strategy, choice.explorable, choice.whole_list) == (
        strategy,
        explorable,
        whole_list,
    )


# --- sla-aware (example 11) ---------------------------------------------------------


def pool_inv(values):
    top = max(0.001, *values)
    return (
        [1.0] * len(values) if len(set(values)) == 1 else [1 - v / top for v in values]
    )


def sla_pool(*, with_factors: bool = True):
    raw = [
        ("pf/fast-flaky@main", 800, 0.2, 2.0, 200),
        ("ps/steady@main", 1400, 0.01, 6.0, 100),
        ("pc/cheap-slow@main", 3500, 0.01, 0.2, 150),
    ]
    stability = pool_inv([r[4] for r in raw])
    cost_inv = pool_inv([r[3] for r in raw])
    # health 1 everywhere; inv(std) over [200, 100, 150] with M = 200
    assert stability == [0.0, 0.5, 0.25]
    return [
        make_scored(
            key,
            order=i,
            p95=p95,
            error_rate=err,
            cost=cost,
            std=std,
            factors=(
                {"health": 1.0, "stability": stability[i], "costInv": cost_inv[i]}
                if with_factors
                else {}
            ),
        )
        for i, (key, p95, err, cost, std) in enumerate(raw)
    ]


async def test_sla_aware_scores_example_11_and_serves_steady():
    pool = sla_pool()
    sla = {"slaMaxCostPer1MTokens": 10}

    rows = {r.candidate.model: (r.score, r.violation) for r in sla_rows(pool, sla)}
    choice = await choose("sla-aware", pool, make_ctx(sla=sla))

    assert rows["steady"] == (pytest.approx(0.975), pytest.approx(0.0))
    assert rows["cheap-slow"] == (pytest.approx(0.8125), pytest.approx(0.75))
    assert rows["fast-flaky"] == (pytest.approx(0.6875), pytest.approx(3.0))
    assert choice == Choice(primary=pool[1], strategy="sla-aware", explorable=True)


async def test_sla_aware_computes_missing_factors_over_the_pool():
    pool = sla_pool(with_factors=False)
    sla = {"slaMaxCostPer1MTokens": 10}

    scores = [r.score for r in sla_rows(pool, sla)]

    assert scores == pytest.approx([0.6875, 0.975, 0.8125])


async def test_sla_aware_hard_constraints_order_by_violation_and_note_it():
    pool = sla_pool()
    sla = {
        "slaTargetP95Ms": 500,
        "slaMaxErrorRate": 0.005,
        "slaMaxCostPer1MTokens": 1,
        "slaHardConstraints": True,
    }

    violations = {r.candidate.model: r.violation for r in sla_rows(pool, sla)}
    choice = await choose("sla-aware", pool, make_ctx(sla=sla))

    assert violations == {
        "cheap-slow": pytest.approx(7.0),
        "steady": pytest.approx(7.8),
        "fast-flaky": pytest.approx(40.6),
    }
    assert choice.primary is pool[2]
    assert choice.note == "no candidate met all SLA constraints"


async def test_sla_aware_without_hard_constraints_orders_by_score_even_if_violating():
    pool = sla_pool()
    sla = {"slaTargetP95Ms": 500, "slaMaxErrorRate": 0.005, "slaMaxCostPer1MTokens": 1}

    choice = await choose("sla-aware", pool, make_ctx(sla=sla))

    scores = [r.score for r in sla_rows(pool, sla)]
    assert choice.primary is pool[scores.index(max(scores))]
    assert choice.note == "no candidate met all SLA constraints"


async def test_sla_aware_defaults_and_unknown_error_rate():
    # t 2000, e .05, no c: C = costInv; no error data counts as 0.05 (ratio 1)
    only = make_scored(
        "pa/m1@main",
        p95=1000,
        error_rate=None,
        factors={"health": 0.5, "stability": 1.0, "costInv": 1.0},
    )

    (row,) = sla_rows([only], {})

    assert row.score == pytest.approx(0.35 + 0.35 + 0.075 + 0.10 + 0.05)
    assert row.violation == 0.0


def test_sla_violation_with_a_zero_error_budget_is_the_error_rate():
    flaky = make_scored("pa/m1@main", p95=100, error_rate=0.02)

    (row,) = sla_rows([flaky], {"slaMaxErrorRate": 0})

    assert row.violation == pytest.approx(0.02)


async def test_sla_aware_ties_fall_back_to_rank():
    twin_a = make_scored("pa/m1@main", order=5, p95=900, error_rate=0.0)
    twin_b = make_scored("pb/m1@main", order=0, p95=900, error_rate=0.0)

    choice = await choose("sla-aware", [twin_a, twin_b], make_ctx())

    assert choice.primary is twin_a
    assert choice.note is None


# --- nadir --------------------------------------------------------------------------


class FakeNadir:
    """An injected poster: records every call, answers from a script."""

    def __init__(self, status=200, reply: Any = None, error=None, delay_s=0.0):
        self.status = status
        self.reply = {"selected_model": "m2"} if reply is None else reply
        self.error = error
        self.delay_s = delay_s
        self.calls: list[tuple[str, dict, dict, float]] = []

    async def __call__(self, url, body, headers, timeout_s):
        self.calls.append((url, body, headers, timeout_s))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        raw = self.reply if isinstance(self.reply, bytes) else json.dumps(self.reply)
        return self.status, raw if isinstance(raw, bytes) else raw.encode()


NADIR_POOL = [
    make_scored("openai/m1@team-secret-conn", order=0),
    make_scored("anthropic/m2@billing-conn", order=1),
    make_scored("other/m2@spare-conn", order=2),
    make_scored("openai/m3@team-secret-conn", order=3),
]


def nadir_ctx(**overrides: Any) -> RouterContext:
    values: dict[str, Any] = {
        "route_id": "combo:private-route",
        "task_type": "coding",
        "has_tools": True,
        "has_images": True,
        "last_user_text": "Which model should answer this?",
        "session_key": "sess-0123456789abcdef",
        "lkgp_key": "lkgp:combo:private-route:sess",
        "lkgp_record": "openai/m1@team-secret-conn",
        "nadir": {},
        "now": 1000.0,
    }
    values.update(overrides)
    return RouterContext(**values)


async def test_nadir_success_sends_only_prompt_menu_and_source(monkeypatch):
    monkeypatch.setenv("MY_NADIR_KEY", "nk-secret")
    post = FakeNadir(reply={"selected_model": "m2", "confidence": 0.9})
    ctx = nadir_ctx(
        nadir={
            "apiKey": "env:MY_NADIR_KEY",
            "baseUrl": "https://nadir.example/v1/",
            "timeoutMs": 1500,
        }
    )

    choice = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)

    assert choice == Choice(primary=NADIR_POOL[1], strategy="nadir", explorable=False)
    (call,) = post.calls
    url, body, headers, timeout_s = call
    assert url == "https://nadir.example/v1/bucket"
    assert body == {
        "prompt": "Which model should answer this?",
        "menu": ["m1", "m2", "m3"],
        "source": "omniroute",
    }
    assert headers == {"Content-Type": "application/json", "X-API-Key": "nk-secret"}
    assert timeout_s == 1.5
    sent = json.dumps([url, body])
    for private in ("team-secret-conn", "billing-conn", "openai", "anthropic", "sess-"):
        assert private not in sent
    assert "private-route" not in json.dumps(call)


async def test_nadir_prompt_and_menu_are_capped():
    pool = [make_scored(f"p/m{i}@c", order=i) for i in range(120)]
    post = FakeNadir(reply={"selected_model": "m99"})

    choice = await choose(
        "nadir", pool, nadir_ctx(last_user_text="x" * 20_000), nadir_post=post
    )

    body = post.calls[0][1]
    assert body["prompt"] == "x" * 16_000
    assert body["menu"] == [f"m{i}" for i in range(100)]
    assert choice.primary is pool[99]


async def test_nadir_key_falls_back_to_the_env_var(monkeypatch):
    monkeypatch.setenv("OMNIROUTE_NADIR_API_KEY", "global-key")
    post = FakeNadir()

    await choose(
        "nadir", NADIR_POOL, nadir_ctx(nadir={"apiKey": "env:UNSET"}), nadir_post=post
    )

    assert post.calls[0][2]["X-API-Key"] == "global-key"


async def test_nadir_without_any_key_sends_no_key_header():
    post = FakeNadir()

    await choose("nadir", NADIR_POOL, nadir_ctx(nadir=None), nadir_post=post)

    url, _, headers, timeout_s = post.calls[0]
    assert url == "https://api.getnadir.com/v1/bucket"
    assert headers == {"Content-Type": "application/json"}
    assert timeout_s == 2.0


@pytest.mark.parametrize(
    ("base_url", "env", "expected"),
    [
        (None, None, "https://api.getnadir.com"),
        (None, "http://env.example/v1", "http://env.example"),
        ("https://n.example", "http://env.example", "https://n.example"),
        ("https://n.example/", None, "https://n.example"),
        ("https://n.example/v1", None, "https://n.example"),
        ("https://n.example/v1/", None, "https://n.example"),
        ("https://n.example/v1/v1", None, "https://n.example/v1"),
        ("https://n.example/proxy/v1", None, "https://n.example/proxy"),
        ("http://localhost:8080/v1", None, "http://localhost:8080"),
        ("", None, "https://api.getnadir.com"),
    ],
)
def test_nadir_base_url_normalisation(monkeypatch, base_url, env, expected):
    if env is not None:
        monkeypatch.setenv("OMNIROUTE_NADIR_BASE_URL", env)
    config = {} if base_url is None else {"baseUrl": base_url}

    assert nadir_base_url(config) == expected


@pytest.mark.parametrize(
    "base_url", ["ftp://n.example", "n.example/v1", "https://", "file:///etc/passwd"]
)
async def test_an_invalid_nadir_base_url_is_a_failure_without_a_call(base_url):
    post = FakeNadir()
    ctx = nadir_ctx(nadir={"baseUrl": base_url})

    choice = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)

    assert post.calls == []
    assert (choice.primary, choice.strategy, choice.explorable) == (
        NADIR_POOL[0],
        "rules",
        True,
    )
    assert choice.note is not None
    assert "invalid base URL" in choice.note


async def test_nadir_timing_out_skips_the_base_url_for_30_seconds(caplog):
    post = FakeNadir(delay_s=5.0)  # slower than its 100 ms deadline
    ctx = nadir_ctx(nadir={"timeoutMs": 100})

    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        first = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)
    ctx.now += 29.9
    second = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)
    ctx.now += 0.1
    post.delay_s = 0.0
    third = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)

    assert (first.strategy, first.primary, first.explorable) == (
        "rules",
        NADIR_POOL[0],
        True,
    )
    assert first.note == "nadir failed: timeout"
    assert "timeout" in caplog.text
    assert second.strategy == "rules"
    assert third.strategy == "nadir"
    assert len(post.calls) == 2


@pytest.mark.parametrize(
    "post",
    [
        FakeNadir(error=TimeoutError()),
        FakeNadir(error=OSError("connection refused")),
        FakeNadir(status=500),
        FakeNadir(status=302),
        FakeNadir(reply=b"not json"),
        FakeNadir(reply=b"\xff\xfe"),
        FakeNadir(reply=["m2"]),
    ],
    ids=["timeout", "network", "5xx", "3xx", "malformed", "undecodable", "not-object"],
)
async def test_nadir_failures_fall_back_to_rules_and_skip_the_base_url(post):
    ctx = nadir_ctx()

    first = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)
    second = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)

    assert (first.strategy, first.primary) == ("rules", NADIR_POOL[0])
    assert (second.strategy, second.primary) == ("rules", NADIR_POOL[0])
    assert len(post.calls) == 1


async def test_a_skip_is_per_base_url():
    failing = FakeNadir(status=503)
    working = FakeNadir()

    await choose("nadir", NADIR_POOL, nadir_ctx(), nadir_post=failing)
    ctx = nadir_ctx(nadir={"baseUrl": "https://other.example"})
    choice = await choose("nadir", NADIR_POOL, ctx, nadir_post=working)

    assert choice.strategy == "nadir"


@pytest.mark.parametrize(
    "reply",
    [{"selected_model": "gpt-unlisted"}, {}, {"selected_model": None}, {"model": "m2"}],
)
async def test_an_off_menu_or_missing_model_is_rules_without_a_skip(reply):
    post = FakeNadir(reply=reply)
    ctx = nadir_ctx()

    first = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)
    second = await choose("nadir", NADIR_POOL, ctx, nadir_post=post)

    assert (first.strategy, first.primary, first.explorable) == (
        "rules",
        NADIR_POOL[0],
        True,
    )
    assert second.strategy == "rules"
    assert len(post.calls) == 2


@pytest.mark.parametrize("text", [None, ""])
async def test_nadir_without_user_text_makes_no_call(text):
    post = FakeNadir()

    choice = await choose(
        "nadir", NADIR_POOL, nadir_ctx(last_user_text=text), nadir_post=post
    )

    assert post.calls == []
    assert (choice.strategy, choice.primary) == ("rules", NADIR_POOL[0])


async def test_nadir_without_a_poster_is_rules_and_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        first = await choose("nadir", NADIR_POOL, nadir_ctx())
        await choose("nadir", NADIR_POOL, nadir_ctx())

    assert first.strategy == "rules"
    assert caplog.text.count("no HTTP poster") == 1


# --- custom strategies --------------------------------------------------------------


class PreferProvider(RouterStrategy):
    def __init__(self, provider: str, name: str = "prefer-provider") -> None:
        self.name = name
        self.provider = provider
        self.seen: list[tuple[Any, RouterContext]] = []

    def select(self, pool, ctx):
        self.seen.append((pool, ctx))
        return next((c for c in pool if c.provider == self.provider), None)


class AsyncPrefer(PreferProvider):
    async def select(self, pool, ctx):
        await asyncio.sleep(0)
        return next((c for c in pool if c.provider == self.provider), None)


class Returns(RouterStrategy):
    name = "returns"

    def __init__(self, value: Any) -> None:
        self.value = value

    def select(self, pool, ctx):
        return self.value


@pytest.mark.parametrize(
    "name", ["", "Prefer", "1st", "-x", "under_score", "sp ace", "a" * 41, None, 7]
)
def test_a_malformed_custom_name_is_refused(name):
    strategy = PreferProvider("pb")
    strategy.name = name

    with pytest.raises(ValueError, match="Invalid router strategy name"):
        register_router_strategy(strategy)


@pytest.mark.parametrize(
    "name",
    [*strategies.BUILTIN_NAMES, "eco", "fast", "sla"],
)
def test_a_built_in_name_or_alias_cannot_be_registered(name):
    with pytest.raises(ValueError, match="built-in"):
        register_router_strategy(PreferProvider("pb", name=name), replace=True)


def test_re_registering_needs_replace():
    first, second = PreferProvider("pa"), PreferProvider("pb")
    register_router_strategy(first)

    with pytest.raises(ValueError, match="already registered"):
        register_router_strategy(second)
    register_router_strategy(second, replace=True)

    assert get_router_strategy("prefer-provider") is second


def test_a_strategy_without_select_is_refused():
    class NoSelect:
        name = "no-select"

    with pytest.raises(TypeError, match="select"):
        register_router_strategy(NoSelect())


def test_names_are_known_exactly_and_case_sensitively():
    register_router_strategy(PreferProvider("pb", name="a" * 40))
    register_router_strategy(PreferProvider("pb", name="x"))

    assert all(
        is_known_strategy(n)
        for n in ("rules", "eco", "sla", "sla-aware", "x", "a" * 40)
    )
    assert not is_known_strategy("Cost")
    assert not is_known_strategy("prefer-local")
    assert canonical_name("prefer-local") == "prefer-local"


def test_get_router_strategy_resolves_built_ins_aliases_and_customs():
    custom = PreferProvider("pb")
    register_router_strategy(custom)

    eco = get_router_strategy("eco")
    assert eco is not None
    assert eco.name == "cost"
    assert eco.select([A, make_scored("pz/z@c", cost=0.1)], make_ctx()).key == "pz/z@c"
    assert get_router_strategy("prefer-provider") is custom
    assert get_router_strategy("nope") is None


@pytest.mark.parametrize("cls", [PreferProvider, AsyncPrefer])
async def test_a_custom_choice_is_reported_under_its_name_without_exploration(cls):
    register_router_strategy(cls("pb"))

    choice = await choose("prefer-provider", [A, B, C], make_ctx())

    assert choice == Choice(primary=B, strategy="prefer-provider", explorable=False)


async def test_a_custom_strategy_sees_the_pool_in_rank_order_and_the_ctx():
    strategy = PreferProvider("pc")
    register_router_strategy(strategy)
    ctx = make_ctx(task_type="coding")

    await choose("prefer-provider", [C, A, B], ctx)

    (pool, seen_ctx) = strategy.seen[0]
    assert pool == (C, A, B)
    assert seen_ctx is ctx


async def test_a_custom_none_is_rules_without_a_warning(caplog):
    register_router_strategy(PreferProvider("nobody"))

    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        choice = await choose("prefer-provider", [A, B], make_ctx())

    assert choice == Choice(primary=A, strategy="rules", explorable=True)
    assert caplog.text == ""


async def test_an_equal_copy_counts_as_the_pool_member():
    register_router_strategy(Returns(dataclasses.replace(B)))

    choice = await choose("returns", [A, B], make_ctx())

    assert choice.primary is B
    assert choice.strategy == "returns"


@pytest.mark.parametrize(
    "foreign",
    [dataclasses.replace(B, score=0.99), make_scored("pz/z@c"), B.key, object()],
    ids=["altered-copy", "outsider", "key-string", "object"],
)
async def test_a_foreign_object_is_rules_with_a_warning(foreign, caplog):
    register_router_strategy(Returns(foreign))

    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        choice = await choose("returns", [A, B], make_ctx())

    assert choice.primary is A
    assert (choice.strategy, choice.explorable) == ("rules", True)
    assert "not a pool member" in caplog.text


async def test_a_raising_custom_strategy_is_rules_with_a_warning(caplog):
    class Broken(RouterStrategy):
        name = "broken"

        def select(self, pool, ctx):
            raise KeyError("boom")

    register_router_strategy(Broken())

    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        choice = await choose("broken", [A, B], make_ctx())

    assert (choice.primary, choice.strategy, choice.explorable) == (A, "rules", True)
    assert "'broken' failed" in caplog.text


async def test_a_slow_async_custom_strategy_is_rules_with_a_warning(caplog):
    class Slow(RouterStrategy):
        name = "slow"
        cancelled = False

        async def select(self, pool, ctx):
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                Slow.cancelled = True
                raise
            return pool[1]

    register_router_strategy(Slow())

    with caplog.at_level(logging.WARNING, logger="omniroute.routing"):
        choice = await choose("slow", [A, B], make_ctx(), custom_timeout_s=0.01)

    assert (choice.primary, choice.strategy, choice.explorable) == (A, "rules", True)
    assert Slow.cancelled
    assert "took over" in caplog.text


def test_the_default_custom_timeout_is_two_and_a_half_seconds():
    assert strategies.CUSTOM_TIMEOUT_SECONDS == 2.5


# --- load_strategy_modules ------------------------------------------------------------

PLUGIN = "omniroute_test_router_plugin"


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """A module on sys.path that registers ``from-plugin`` when imported."""
    (tmp_path / f"{PLUGIN}.py").write_text(
        textwrap.dedent(
            """
            from gateway.auto.engine import routers as strategies

            class Last(strategies.RouterStrategy):
                name = "from-plugin"

                def select(self, pool, ctx):
                    return pool[-1]

            strategies.register_router_strategy(Last())
            """
        )
    )
    (tmp_path / "omniroute_test_broken_plugin.py").write_text(
        "raise RuntimeError('x')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in (PLUGIN, "omniroute_test_broken_plugin"):
        sys.modules.pop(name, None)


async def test_loading_a_module_registers_its_strategy(plugin_path):
    modules = load_strategy_modules([PLUGIN])

    choice = await choose("from-plugin", [A, B, C], make_ctx())

    assert [m.__name__ for m in modules] == [PLUGIN]
    assert is_known_strategy("from-plugin")
    assert choice == Choice(primary=C, strategy="from-plugin", explorable=False)


def test_a_comma_separated_string_is_split_and_blanks_skipped(plugin_path):
    modules = load_strategy_modules(f" {PLUGIN} , ,")

    assert [m.__name__ for m in modules] == [PLUGIN]


def test_a_missing_module_is_an_import_error_naming_it():
    with pytest.raises(ImportError, match="omniroute_no_such_plugin"):
        load_strategy_modules(["omniroute_no_such_plugin"])


def test_a_module_failing_at_import_propagates_with_a_note(plugin_path):
    with pytest.raises(RuntimeError) as info:
        load_strategy_modules(["omniroute_test_broken_plugin"])

    assert "omniroute_test_broken_plugin" in " ".join(info.value.__notes__)
