"""The auto engine's glue inside the gateway (spec 04): what the pure pipeline
(``gateway.auto.engine.decide.decide``) needs from live state, the per-request headers,
and the self-healing bookkeeping.

- ``auto_route(slot)``: the ``AutoRoute`` of a slot, a built-in ``auto…`` id or a
  persisted ``strategy: auto`` combo (None for any other slot).
- ``read_controls(headers)``: the ``X-OmniRoute-Mode``, ``X-OmniRoute-Budget`` and
  ``X-OmniRoute-Budget-Fallback`` headers (§5), read once per request; a bad budget
  is a 400 ``invalid_budget``.
- ``environment(...)``: the live lookups of ``decide`` over the routing table
  snapshot: reachability and circuit state from the health board, quota readings,
  in-flight counts (``providers.target_stats``), the 24 h statistics
  (``gateway.auto.stats``, else the live window), the Arena fitness
  (``gateway.auto.arena``, only while ``OMNIROUTE_ARENA_ELO_SYNC_ENABLED``), the
  key's candidate overrides, the self-healing entries and the LKGP record; given the
  pool, the state-store records are read in one ``get_many``.  Used by
  ``plan_auto``, the candidates endpoint (``gateway.ops.auto_views``) and explain-route
  (``gateway.ops.explain``, a dry run without Nadir).
- ``plan_auto(...)``: one auto slot's ``Decision`` for the attempt loop
  (``gateway.pipeline.handle``): the servable pool, ``environment`` and ``decide``,
  then the decision's self-healing writes stored (§6).
- ``probe_started`` / ``probe_finished``: a self-healing probe's outcome applied to
  its entry (§6), called by the attempt loop and the ``auto/chaos`` fan-out
  (``gateway.slots.chaos``).

Nothing here queries the database: the statistics and the Arena fitness come from
in-memory caches, the rest from the health board and the state store.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from gateway.auto.arena import cache as arena_cache
from gateway.auto.arena import category_for
from gateway.auto.engine import healing
from gateway.auto.engine.budget import BudgetHeaderError, parse_budget, parse_fallback
from gateway.auto.engine.decide import AutoRequest, Decision, Environment, Stats, decide
from gateway.auto.engine.pool import AutoRoute, for_combo, servable
from gateway.auto.stats import cache as stats_cache
from gateway.kernel.chain import Slot
from gateway.kernel.exchange import RequestError
from gateway.kernel.ratelimits import quota_key
from gateway.kernel.resolve import RouteKind
from gateway.kernel.types import GatewaySettings, KeyPolicy, RoutingTable, Target
from gateway.planning.combo import connection_quota
from gateway.planning.strategies import Family, traits
from providers.health import board
from providers.http import post_json
from providers.live_window import window
from providers.target_stats import stats

logger = logging.getLogger("omniroute.gateway")
HEAL_PREFIX = "heal:"
HEAL_TTL_SECONDS = 24 * 3600
_rng = random.Random()
MIN_STD_MS = 10.0


def auto_route(slot: Slot) -> AutoRoute | None:
    """The auto route of a slot: a built-in id, or a persisted ``auto`` combo."""
    resolved = slot.resolved
    if resolved.kind is RouteKind.AUTO and resolved.auto_id is not None:
        return AutoRoute(route_id=resolved.auto_id)
    combo = resolved.combo
    if combo is not None and traits(combo.strategy).family is Family.AUTO:
        return for_combo(combo)
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Controls:
    """The per-request auto headers (§5), read once."""

    mode: str | None = None
    budget: float | None = None
    budget_fallback: str | None = None


def read_controls(headers: dict[str, str] | Any) -> Controls:
    """Raises ``RequestError`` 400 ``invalid_budget`` for a bad budget header."""
    raw_budget = headers.get("x-omniroute-budget")
    try:
        budget = parse_budget(raw_budget)
    except BudgetHeaderError as exc:
        raise RequestError(
            400,
            "invalid_budget",
            f"X-OmniRoute-Budget must be a positive number of USD, got {raw_budget!r}",
            param="X-OmniRoute-Budget",
        ) from exc
    return Controls(
        mode=headers.get("x-omniroute-mode"),
        budget=budget,
        budget_fallback=parse_fallback(headers.get("x-omniroute-budget-fallback")),
    )


def heal_key(candidate_key: str) -> str:
    return f"{HEAL_PREFIX}{candidate_key}"


def _conn(target: Target) -> str:
    return f"{target.provider.slug}@{target.connection.name}"


def live_stats(target: Target) -> Stats | None:
    """§3.1: the 24 h row of the (provider, model, connection), else of the
    (provider, model, *), else the live window; None when none has data.

    The rows come from the in-memory cache, never the database.  Servers without
    lifespan events start its refresher here, on the first auto request."""
    stats_cache.start()
    row = stats_cache.lookup(
        target.provider.slug, target.model.model_id, target.connection.name
    )
    if row is not None:
        return row
    found = window.stats(target.model_key)
    if found is None:
        return None
    std = found.std_ms
    return Stats(
        p95_ms=found.p95_ms,
        std_ms=max(MIN_STD_MS, std) if std is not None else None,
        failure_rate=found.failure_rate,
        good_rate=found.good_rate,
    )


def _no_elo(model_id: str, task: str) -> float | None:
    return None


def arena_elo(now: float) -> Callable[[str, str], float | None]:
    """Spec 04 §9.2 source 1: the stored Arena fitness of a model for a task (the
    coding board for coding and debugging, overall otherwise), from the in-memory
    cache; never an answer while the sync is switched off, whatever is stored.
    Servers without lifespan events start the cache's refresher here."""
    if not settings.OMNIROUTE_ARENA_ELO_SYNC_ENABLED:
        return _no_elo
    arena_cache.start()
    return lambda model, task: arena_cache.fitness(model, category_for(task), now)


def environment(
    table: RoutingTable,
    key: KeyPolicy,
    route: AutoRoute,
    now: float,
    session: str | None,
    pool: list[Target] | None = None,
) -> Environment:
    """Live lookups for ``decide``.  With ``pool`` the state-store records the
    pipeline reads per candidate (self-healing entries, quota readings, the LKGP
    record) are fetched in ONE ``get_many`` (one Redis round trip, spec 08 §3.2)."""
    lkgp_key = f"lkgp:{route.state_id}:{session}" if session is not None else None
    read: dict[str, Any] = {}
    if pool:
        wanted = {heal_key(t.key) for t in pool}
        wanted |= {quota_key(_conn(t)) for t in pool}
        if lkgp_key is not None:
            wanted.add(lkgp_key)
        names = sorted(wanted)
        read = dict(zip(names, board.store.get_many(names), strict=True))

    def fetched(name: str) -> Any:
        return read[name] if name in read else board.store.get(name)

    def reachable(target: Target) -> tuple[str, float | None] | None:
        found = board.skip_reason(
            _conn(target),
            target.model.model_id,
            target.connection.max_concurrency,
            now,
        )
        return None if found is None else (found.reason, found.retry_after_s)

    def circuit(target: Target) -> str:
        return board.describe_circuit(_conn(target), now).value

    def quota(target: Target) -> tuple[float | None, float | None, float | None]:
        conn = _conn(target)
        snap = connection_quota(target.connection, conn, now, fetched(quota_key(conn)))
        pct = None if snap.remaining is None else snap.remaining * 100
        return pct, snap.resets_at, snap.window_s

    def in_flight(target: Target) -> int:
        return stats.snapshot(target.key, now).in_flight

    def healing_entry(candidate: str) -> dict[str, Any] | None:
        entry = fetched(heal_key(candidate))
        return entry if isinstance(entry, dict) else None

    channel = route.channel
    excluded = table.overrides.get((key.id, channel)) if channel is not None else None
    lkgp = None
    if lkgp_key is not None:
        record = fetched(lkgp_key)
        lkgp = record if isinstance(record, str) else None
    return Environment(
        table_settings=table.settings,
        reachable=reachable,
        circuit=circuit,
        quota=quota,
        in_flight=in_flight,
        stats=live_stats,
        healing_entry=healing_entry,
        excluded=excluded,
        lkgp_record=lkgp,
        nadir_post=post_json,
        elo=arena_elo(now),
    )


async def plan_auto(  # noqa: PLR0913
    table: RoutingTable,
    key: KeyPolicy,
    route: AutoRoute,
    body: dict[str, Any],
    controls: Controls,
    session_key: str | None,
    *,
    now: float | None = None,
    rng: random.Random | None = None,
    dry_run: bool = False,
) -> Decision:
    """One auto slot's decision; ``dry_run`` (explain_route): no Nadir call, and the
    self-healing writes are not stored."""
    now = time.time() if now is None else now
    request = AutoRequest(
        route=route,
        key=key,
        body=body,
        session_key=session_key,
        mode=controls.mode,
        budget=controls.budget,
        budget_fallback=controls.budget_fallback,
        now=now,
        rng=rng or _rng,
    )
    pool = servable(table, route)
    env = environment(table, key, route, now, session_key, pool)
    if dry_run:
        env.nadir_post = None
    decision = await decide(request, env, pool)
    if dry_run:
        return decision
    for candidate, entry in decision.healing_writes.items():
        if entry is None:
            board.store.delete(heal_key(candidate))
        else:
            board.store.set(heal_key(candidate), entry, HEAL_TTL_SECONDS)
    return decision


def probe_started(target: Target) -> None:
    board.store.update(
        heal_key(target.key),
        lambda entry: (
            healing.probe_started(entry) if isinstance(entry, dict) else entry
        ),
        HEAL_TTL_SECONDS,
    )


TRIGGER_REASONS = frozenset(
    {"connection_error", "server_error", "rate_limit", "timeout"}
)


def probe_finished(
    target: Target,
    reason: str | None,
    served: bool,
    table_settings: GatewaySettings | None = None,
) -> None:
    """§6 probe outcome: success deletes, a trigger failure escalates (with the
    exclusion durations of ``settings.self_healing``), else pending."""
    now = time.time()
    if served:
        outcome = "success"
    elif reason in TRIGGER_REASONS:
        outcome = "failure"
    else:
        outcome = "other"
    key = heal_key(target.key)
    entry = board.store.get(key)
    if not isinstance(entry, dict):
        return
    first_s, cap_s = healing.durations(
        table_settings.self_healing if table_settings is not None else {}
    )
    updated = healing.probe_finished(entry, outcome, now, first_s, cap_s)
    if updated is None:
        board.store.delete(key)
    else:
        board.store.set(key, updated, HEAL_TTL_SECONDS)
