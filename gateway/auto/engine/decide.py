"""The auto pipeline of spec 04 §4, over plain data and injected lookups.

``decide(request, env)`` resolves the controls (weights, exploration, budget, router
strategy), builds and filters the pool (F1-F8), scores it together with the DEFAULT
scores, applies self-healing (F9) and the budget cap (F10), lets the router strategy
pick the primary, explores, and returns the attempt order with the record the request
log keeps.  Nothing here touches a database, a socket or the wall clock: the caller
passes ``now``, the RNG and every lookup (health, quota, statistics, healing state,
overrides, LKGP record, the Nadir poster).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gateway.auto.engine import budget as budgets
from gateway.auto.engine import healing
from gateway.auto.engine.classify import apply_prior, classify_task, last_user_text
from gateway.auto.engine.effort import complexity_level
from gateway.auto.engine.exploration import attempt_order, explore, is_cost_first
from gateway.auto.engine.fitness import fitness
from gateway.auto.engine.pool import (
    AutoRoute,
    Filtered,
    Needs,
    Refusal,
    apply_filters,
    servable,
    usable,
)
from gateway.auto.engine.routers import canonical_name, choose
from gateway.auto.engine.scoring import rank, score_pool
from gateway.auto.engine.types import (
    CandidateInput,
    RequestFeatures,
    RouterContext,
    Scored,
)
from gateway.auto.engine.weights import (
    DEFAULT_WEIGHTS,
    MODE_PACKS,
    normalize_scoring_weights,
    route_exploration,
    route_tier_hint,
    route_weights,
    weights_for_mode,
)
from gateway.kernel.facts import cache_key, input_tokens, needs
from gateway.kernel.types import GatewaySettings, KeyPolicy, Target

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_EST_OUT = 1000
INCIDENT_WEIGHTS = "reliability-first"
#: the router strategy of each built-in variant (§1.2); everything else: rules
BUILTIN_ROUTER = {"auto": "lkgp", "auto/lkgp": "lkgp", "auto/chaos": "chaos"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """A candidate's statistics from the first source with data (§3.1)."""

    p95_ms: float | None = None
    std_ms: float | None = None
    failure_rate: float | None = None
    good_rate: float | None = None


@dataclass(slots=True, kw_only=True)
class Environment:
    """Everything ``decide`` looks up, injected."""

    table_settings: GatewaySettings
    #: F8: (reason, retry after) when the target is unreachable
    reachable: Callable[[Target], tuple[str, float | None] | None]
    circuit: Callable[[Target], str]
    #: (quota_pct 0..100 | None, resets_at | None, window seconds | None)
    quota: Callable[[Target], tuple[float | None, float | None, float | None]]
    in_flight: Callable[[Target], int]
    stats: Callable[[Target], Stats | None]
    healing_entry: Callable[[str], dict[str, Any] | None]
    #: this key's override exclusions for the channel; None = no row
    excluded: frozenset[str] | None = None
    overrides_failed: bool = False
    lkgp_record: str | None = None
    elo: Callable[[str, str], float | None] = lambda _model, _task: None
    nadir_post: Callable[..., Awaitable[tuple[int, bytes]]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoRequest:
    route: AutoRoute
    key: KeyPolicy
    body: Mapping[str, Any]
    session_key: str | None = None
    mode: str | None = None  # X-OmniRoute-Mode, raw
    budget: float | None = None  # parsed X-OmniRoute-Budget
    budget_fallback: str | None = None  # parsed X-OmniRoute-Budget-Fallback
    now: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    #: the candidates endpoint: describe, do not refuse or exclude
    describe: bool = False
    #: the candidates endpoint's ``task`` query
    task_override: str | None = None


@dataclass(slots=True, kw_only=True)
class Decision:
    route: AutoRoute
    order: list[Target] = field(default_factory=list)
    #: target keys whose attempt is a self-healing probe (§6)
    probes: set[str] = field(default_factory=set)
    strategy: str = "rules"
    router_strategy: str = "rules"
    chaos: bool = False
    refusal: Refusal | None = None
    filtered: Filtered | None = None
    #: every scored candidate (F8 output) in rank order
    ranked: list[Scored] = field(default_factory=list)
    eligible: list[Scored] = field(default_factory=list)
    task_type: str = "default"
    weights: Mapping[str, float] = field(default_factory=dict)
    weights_source: str = "default"
    exploration_rate: float = 0.0
    explored: bool = False
    incident_mode: bool = False
    budget: dict[str, Any] = field(default_factory=dict)
    #: candidate key -> new or changed healing entry to store (None = delete)
    healing_writes: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: candidate key -> healing entry (as read, or as written by this decision)
    healing: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    note: str | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def record(self) -> dict[str, Any]:
        """``auto_decision`` of the request log (§4 step 8)."""
        filtered = self.filtered
        return {
            "route": self.route.route_id,
            "strategy": self.strategy,
            "task_type": self.task_type,
            "weights_source": self.weights_source,
            "explored": self.explored,
            "incident_mode": self.incident_mode,
            "filter_fell_open": list(filtered.filter_fell_open) if filtered else [],
            "overrides_ignored": bool(filtered and filtered.overrides_ignored),
            "budget": self.budget,
            "probe": sorted(self.probes)[0] if self.probes else None,
            "candidates_considered": len(self.ranked),
            "top": [
                {"key": s.key, "score": round(s.score, 4)} for s in self.ranked[:5]
            ],
            **({"note": self.note} if self.note else {}),
        }


def _config_weights(
    config: Mapping[str, Any],
) -> tuple[Mapping[str, float], str] | None:
    pack = config.get("modePack")
    if isinstance(pack, str) and pack in MODE_PACKS:
        return MODE_PACKS[pack], f"combo:{pack}"
    custom = config.get("weights")
    if isinstance(custom, Mapping) and custom:
        return normalize_scoring_weights(dict(custom)), "combo:weights"
    return None


def resolve_weights(
    route: AutoRoute, mode: str | None, incident: bool
) -> tuple[Mapping[str, float], str]:
    """§4 step 3: incident, header, combo config, route, defaults."""
    if incident:
        return MODE_PACKS[INCIDENT_WEIGHTS], "incident"
    header = weights_for_mode(mode)
    if header is not None:
        return header
    if route.combo is not None:
        configured = _config_weights(route.config)
        if configured is not None:
            return configured
        return DEFAULT_WEIGHTS, "default"
    return route_weights(route.route_id)


def resolve_exploration(route: AutoRoute, setting: float, incident: bool) -> float:
    if incident:
        return 0.0
    if route.combo is not None:
        rate = route.config.get("explorationRate")
        return float(rate) if isinstance(rate, int | float) else setting
    return route_exploration(route.route_id, setting)


def router_name(route: AutoRoute) -> str:
    if route.combo is None:
        return BUILTIN_ROUTER.get(route.route_id, "rules")
    name = route.config.get("routerStrategy")
    if not isinstance(name, str):
        name = route.combo.config.get("routerStrategy")
    return canonical_name(name) if isinstance(name, str) else "rules"


def _needs(body: Mapping[str, Any]) -> Needs:
    found = {need.capability for need in needs(dict(body))}
    max_out = body.get("max_completion_tokens") or body.get("max_tokens")
    r_in = input_tokens(body.get("messages"))
    extra = max_out if isinstance(max_out, int) and not isinstance(max_out, bool) else 0
    return Needs(
        tools="tools" in found,
        vision="vision" in found,
        json="json" in found,
        need_tokens=r_in + extra,
    )


def _features(
    request: AutoRequest, task: str, settings: GatewaySettings, need_tokens: int
) -> RequestFeatures:
    body = request.body
    route = request.route
    max_out = body.get("max_completion_tokens") or body.get("max_tokens")
    est_out = (
        max_out
        if isinstance(max_out, int) and not isinstance(max_out, bool)
        else DEFAULT_EST_OUT
    )
    hint = route.config.get("preferTier") if route.combo is not None else None
    if not isinstance(hint, str):
        hint = route_tier_hint(route.route_id) if route.combo is None else None
    return RequestFeatures(
        task_type=task,
        need_tokens=need_tokens,
        est_in=input_tokens(body.get("messages")),
        est_out=est_out,
        cache_key=cache_key(dict(body)) if not request.describe else None,
        promptcache_affinity=settings.promptcache_affinity,
        tier_hint=hint,
        complexity_aware=bool(route.config.get("complexityAware", False)),
        complexity=complexity_level(body.get("messages") or []),
        now=request.now,
    )


def candidate_inputs(
    targets: list[Target], env: Environment, task: str
) -> list[CandidateInput]:
    found = []
    for order, target in enumerate(targets):
        model = target.model
        stats = env.stats(target)
        pct, resets_at, window = env.quota(target)
        found.append(
            CandidateInput(
                key=target.key,
                provider=target.provider.slug,
                model=model.model_id,
                connection=target.connection.name,
                order=order,
                input_cost=model.input_cost,
                output_cost=model.output_cost,
                p95_ms=stats.p95_ms if stats else None,
                std_ms=stats.std_ms if stats else None,
                failure_rate=stats.failure_rate if stats else None,
                good_rate=stats.good_rate if stats else None,
                circuit=env.circuit(target),
                quota_pct=pct,
                resets_at=resets_at,
                window_s=window,
                account_tier=target.connection.tier,
                context_window=model.context_window,
                max_output_tokens=model.max_output_tokens,
                capabilities=model.capabilities,
                model_tier=model.tier,
                n_conn=max(1, _usable_connections(target)),
                in_flight=env.in_flight(target),
                max_concurrency=target.connection.max_concurrency,
                fitness=fitness(
                    model.model_id,
                    task,
                    elo_fitness=env.elo(model.model_id, task),
                    tier=model.tier,
                    capabilities=model.capabilities,
                    context_window=model.context_window,
                ),
            )
        )
    return found


def _usable_connections(target: Target) -> int:
    """``n_conn`` of §3.1: the active connections of the provider with usable
    credentials (the table holds active connections only)."""
    provider = target.provider
    return sum(1 for c in provider.connections if usable(provider, c))


def _max_attempts(route: AutoRoute) -> int:
    value = route.config.get("maxAttempts") if route.combo is not None else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a row stored before validation normalised 2.0 to 2
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return DEFAULT_MAX_ATTEMPTS
    return value


def _task(request: AutoRequest) -> str:
    if request.task_override is not None:
        return request.task_override
    return apply_prior(classify_task(request.body), request.route.route_id)


def _healing(
    ranked: list[Scored], env: Environment, now: float, decision: Decision
) -> list[Scored]:
    """F9: exclusions by DEFAULT score, probes; fails open to the F8 output."""
    kept: list[Scored] = []
    first_s, _ = healing.durations(env.table_settings.self_healing)
    for item in ranked:
        entry = env.healing_entry(item.key)
        if entry is None:
            created = healing.maybe_exclude(None, item.default_score, now, first_s)
            if created is not None:
                entry = created
                decision.healing_writes[item.key] = created
        decision.healing[item.key] = entry
        if entry is not None and healing.is_excluded(entry, now):
            continue
        kept.append(item)
    return kept or list(ranked)


def _describe_pool(filtered: Filtered, routed: Filtered | None) -> list[Target]:
    """§10: the pool routing would score: reachable, not excluded (F4 fails open).

    ``routed`` is the chain as routing runs it (F4 applied); its reachable
    candidates that the listing also shows are scored."""
    if routed is None:
        kept = list(filtered.reachable)
    else:
        listed = {t.key for t in filtered.fitting}
        kept = [t for t in routed.reachable if t.key in listed]
    return kept or filtered.reachable or filtered.fitting


def _apply_budget(
    request: AutoRequest, eligible: list[Scored], decision: Decision
) -> list[Scored] | None:
    """F10, before selection; None when a strict budget refuses the request."""
    route = request.route
    cap = request.budget
    if cap is None and route.combo is not None:
        configured = route.config.get("budgetCap")
        cap = float(configured) if isinstance(configured, int | float) else None
    fallback = request.budget_fallback
    if fallback is None and route.combo is not None:
        configured_fb = route.config.get("budgetFallback")
        # the aliases of §5.2 (soft, hard, ...) are valid in the config too
        fallback = (
            budgets.parse_fallback(configured_fb)
            if isinstance(configured_fb, str)
            else None
        )
    result = budgets.apply_budget(eligible, cap, fallback or "cheapest")
    decision.budget = {
        "cap": cap,
        "fallback": fallback or "cheapest",
        "outcome": result.outcome,
    }
    if result.message is not None:
        decision.refusal = Refusal(
            status=402,
            code="budget_exceeded",
            message=result.message,
            error_type="budget_error",
            # the header's cap, else the combo's own config.auto.budgetCap
            param="X-OmniRoute-Budget" if request.budget is not None else None,
        )
        return None
    return list(result.eligible)


async def _select(
    request: AutoRequest,
    env: Environment,
    decision: Decision,
    eligible: list[Scored],
    needs_: Needs,
    features: RequestFeatures,
) -> list[Scored]:
    """§4 step 6: the router strategy's primary, then exploration (§7)."""
    route = request.route
    nadir = route.config.get("nadir")
    ctx = RouterContext(
        route_id=route.route_id,
        task_type=decision.task_type,
        has_tools=needs_.tools,
        has_images=needs_.vision,
        est_in=features.est_in,
        est_out=features.est_out,
        last_user_text=last_user_text(request.body.get("messages")),
        session_key=request.session_key,
        lkgp_key=f"lkgp:{route.state_id}:{request.session_key}"
        if request.session_key
        else None,
        lkgp_record=env.lkgp_record if request.session_key else None,
        sla={k: v for k, v in route.config.items() if str(k).startswith("sla")},
        weights=decision.weights,
        rng=request.rng,
        now=request.now,
        nadir=nadir if isinstance(nadir, Mapping) else None,
    )
    choice = await choose(
        decision.router_strategy, eligible, ctx, nadir_post=env.nadir_post
    )
    decision.strategy = choice.strategy
    decision.note = choice.note
    first = choice.primary
    if (
        choice.explorable
        and not decision.incident_mode
        and decision.exploration_rate > 0
    ):
        first, decision.explored = explore(
            eligible,
            first,
            decision.exploration_rate,
            request.rng,
            whole_list=choice.whole_list,
            cost_first=is_cost_first(decision.weights),
        )
    return attempt_order(eligible, first, len(eligible))


async def decide(
    request: AutoRequest, env: Environment, table_pool: list[Target]
) -> Decision:
    """§4 steps 2-7 for one request; ``table_pool`` = ``servable(table, route)``."""
    route = request.route
    settings = env.table_settings
    decision = Decision(route=route, max_attempts=_max_attempts(route))
    needs_ = _needs(request.body)
    chain = partial(
        apply_filters,
        table_pool,
        route=route,
        key=request.key,
        hide_paid=settings.hide_paid_models,
        needs=needs_,
        reachable=env.reachable,
        overrides_failed=env.overrides_failed,
    )
    filtered = chain(
        excluded=None if request.describe else env.excluded,
        health_only=request.describe,
    )
    routed: Filtered | None = None
    if request.describe and (env.excluded or env.overrides_failed):
        # §10: F4 only flags, but whether routing would ignore the overrides (and
        # which candidates it would score) comes from the chain as routing runs it.
        routed = chain(excluded=env.excluded, health_only=True)
        filtered.overrides_ignored = routed.overrides_ignored
    decision.filtered = filtered
    decision.task_type = task = _task(request)
    if filtered.refusal is not None and not request.describe:
        decision.refusal = filtered.refusal
        return decision
    circuits = [env.circuit(t) for t in filtered.fitting]
    decision.incident_mode = incident = healing.incident_mode(circuits)
    weights, source = resolve_weights(route, request.mode, incident)
    decision.weights, decision.weights_source = weights, source
    decision.exploration_rate = resolve_exploration(
        route, settings.exploration_rate, incident
    )
    scored_pool = (
        _describe_pool(filtered, routed) if request.describe else filtered.reachable
    )
    features = _features(
        request, task, settings, 0 if request.describe else needs_.need_tokens
    )
    ranked = rank(
        score_pool(candidate_inputs(scored_pool, env, task), weights, features)
    )
    decision.ranked = ranked
    by_key = {t.key: t for t in scored_pool}
    eligible = _healing(ranked, env, request.now, decision)
    if request.describe:
        reachable_keys = {t.key for t in filtered.reachable}
        excluded = (
            frozenset() if filtered.overrides_ignored else env.excluded or frozenset()
        )
        decision.eligible = [
            s for s in eligible if s.key in reachable_keys and s.key not in excluded
        ]
        decision.router_strategy = router_name(route)
        return decision
    budgeted = _apply_budget(request, eligible, decision)
    if budgeted is None:
        return decision
    decision.eligible = eligible = budgeted
    name = router_name(route)
    decision.router_strategy = name
    decision.chaos = name == "chaos"
    if decision.budget["outcome"] == "cheapest":
        # the cheapest fallback: no strategy, no exploring (chaos stays chaos, §1.4)
        decision.strategy = "chaos" if decision.chaos else "rules"
        order = eligible
    else:
        order = await _select(request, env, decision, eligible, needs_, features)
    if not decision.chaos:
        order = order[: decision.max_attempts]
    decision.order = [by_key[s.key] for s in order]
    for target in decision.order:
        entry = decision.healing.get(target.key)
        if entry is not None and healing.is_probe(entry, request.now):
            decision.probes.add(target.key)
    return decision


__all__ = [
    "AutoRequest",
    "Decision",
    "Environment",
    "Stats",
    "decide",
    "servable",
]
