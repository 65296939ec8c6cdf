"""What the auto engine would do, as JSON (spec 04 §10, 01-api):

* ``GET /v1/auto-combo/{channel}/candidates`` (API key): the live pool of a channel
  as this key sees it, scored, with health and self-healing flags;
* ``GET /api/combos/auto`` (management auth): each listed built-in id with its pool
  and limits;
* the auto entries of ``GET /v1/models`` (same ids, same limits).
"""

from __future__ import annotations

import dataclasses
import re
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from combos.models import Combo
from gateway.auto import live as auto_glue
from gateway.auto.engine.classify import channel_prior
from gateway.auto.engine.decide import (
    AutoRequest,
    Decision,
    Environment,
    candidate_inputs,
    decide,
    resolve_exploration,
    resolve_weights,
    router_name,
)
from gateway.auto.engine.pool import (
    AutoRoute,
    Filtered,
    Needs,
    Refusal,
    apply_filters,
    for_combo,
    servable,
)
from gateway.auto.engine.scoring import score_pool
from gateway.auto.engine.types import TASK_TYPES, RequestFeatures, Scored
from gateway.config.state import tables
from gateway.edge.auth import authenticate
from gateway.inbound.base import error_body
from gateway.kernel.autoids import UnknownAutoVariant, parse_auto_id
from gateway.kernel.chain import is_allowed
from gateway.kernel.exchange import RequestError
from gateway.kernel.globs import matches
from gateway.kernel.resolve import Resolved, RouteKind
from gateway.kernel.types import ComboInfo, KeyPolicy, RoutingTable, Target
from gateway.planning.strategies import Family, traits
from providers.health import board, connection_key

CHANNEL_RE = re.compile(r"^[A-Za-z0-9:_-]{1,64}$")
#: spec 04 §1.2, in the table's order (§10 lists them first, in this order)
VARIANT_IDS = (
    "auto",
    "auto/lkgp",
    "auto/coding",
    "auto/fast",
    "auto/cheap",
    "auto/offline",
    "auto/smart",
    "auto/chaos",
)
LISTED_IDS = (
    *VARIANT_IDS,
    "auto/reasoning",
    "auto/vision",
    "auto/chat",
    "auto/multimodal",
    "auto/coding:fast",
    "auto/coding:cheap",
    "auto/coding:reliable",
    "auto/coding:free",
    "auto/coding:pro",
    "auto/reasoning:pro",
)
DEFAULT_CONTEXT = 128_000
DEFAULT_MAX_OUTPUT = 8_192


def listed_ids(table: RoutingTable) -> list[str]:
    """§10 order; ``:pro`` ids are left out while ``hide_paid_models`` is on."""
    hide = table.settings.hide_paid_models
    return [i for i in LISTED_IDS if not (hide and i.endswith(":pro"))]


def shadowing_combo(table: RoutingTable, route_id: str) -> ComboInfo | None:
    """The active combo a model->combo mapping sends this id to (§1.1)."""
    for mapping in table.mappings:
        if matches(mapping.regex, route_id):
            combo = table.combos.get(mapping.combo.lower())
            if combo is not None and combo.active:
                return combo
    return None


def _everyone() -> KeyPolicy:
    return KeyPolicy(id=0, name="", prefix="")


def _health_filter(now: float) -> Any:
    def reachable(target: Target) -> tuple[str, float | None] | None:
        found = board.skip_reason(
            connection_key(target.provider.slug, target.connection.name),
            target.model.model_id,
            target.connection.max_concurrency,
            now,
        )
        return None if found is None else (found.reason, found.retry_after_s)

    return reachable


def _listing_pool(
    table: RoutingTable, route: AutoRoute, now: float
) -> tuple[list[Target], Filtered]:
    """F2 and F5 only (the listing of §10)."""
    filtered = apply_filters(
        servable(table, route),
        route=route,
        key=_everyone(),
        hide_paid=table.settings.hide_paid_models,
        needs=Needs(),
        excluded=None,
        reachable=_health_filter(now),
        health_only=True,
    )
    return filtered.fitting, filtered


def describe_id(table: RoutingTable, route_id: str, now: float) -> dict[str, Any]:
    route = AutoRoute(route_id=route_id)
    pool, filtered = _listing_pool(table, route, now)
    _, weights_source = resolve_weights(route, None, incident=False)
    windows = [t.model.context_window for t in pool if t.model.context_window]
    outputs = [t.model.max_output_tokens for t in pool if t.model.max_output_tokens]
    shadow = shadowing_combo(table, route_id)
    return {
        "id": route_id,
        "kind": "variant" if route_id in VARIANT_IDS else "category",
        "weights_source": weights_source,
        "exploration_rate": resolve_exploration(
            route, table.settings.exploration_rate, incident=False
        ),
        "router_strategy": router_name(route),
        "shadowed_by_combo": shadow.name if shadow is not None else None,
        "filter_fell_open": filtered.filter_fell_open,
        "candidate_count": len(pool),
        "reachable_count": len(filtered.reachable),
        "candidate_pool": [t.key for t in pool],
        "context_length": max(windows) if windows else DEFAULT_CONTEXT,
        "max_output_tokens": max(outputs) if outputs else DEFAULT_MAX_OUTPUT,
        "limits_known": bool(windows or outputs),
    }


def model_entries(table: RoutingTable) -> list[dict[str, object]]:
    """The auto ids of ``/v1/models`` with their pool limits."""
    now = time.time()
    entries: list[dict[str, object]] = []
    for route_id in listed_ids(table):
        item = describe_id(table, route_id, now)
        entries.append(
            {
                "id": route_id,
                "object": "model",
                "created": 0,
                "owned_by": "omniroute",
                "context_length": item["context_length"],
                "max_output_tokens": item["max_output_tokens"],
            }
        )
    return entries


class AutoCombosView(APIView):
    """``GET /api/combos/auto`` (staff session or admin token, ``view_combo``)."""

    model = Combo

    def get(self, request: Request) -> Response:
        table = tables.table or tables.refresh()
        now = time.time()
        return Response(
            {"combos": [describe_id(table, i, now) for i in listed_ids(table)]}
        )


# --- GET /v1/auto-combo/{channel}/candidates ------------------------------------------


def _json(status: int, data: Any) -> HttpResponse:
    return HttpResponse(
        orjson.dumps(data), status=status, content_type="application/json"
    )


def _error(
    status: int,
    code: str,
    message: str,
    param: str | None,
    error_type: str = "invalid_request_error",
) -> HttpResponse:
    return _json(
        status,
        error_body(message=message, error_type=error_type, code=code, param=param),
    )


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return (
        datetime.fromtimestamp(ts, UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def _r4(value: float) -> float:
    return round(value, 4)


def _candidate(
    target: Target,
    scored: Scored | None,
    *,
    excluded: bool,
    reachable: bool,
    rank: int | None,
    healing_entry: dict[str, Any] | None,
    now: float,
) -> dict[str, Any]:
    conn = connection_key(target.provider.slug, target.connection.name)
    health = board.describe(conn, now)
    auth = health.auth
    later = max(
        (
            t
            for t in (
                health.cooldown_until,
                auth.until if auth.active(now) else None,
            )
            if t is not None and t > now
        ),
        default=None,
    )
    locked = health.locked_models.get(target.model.model_id)
    entry = healing_entry or {}
    excluded_until = entry.get("excluded_until")
    return {
        "key": target.key,
        "provider": target.provider.slug,
        "model": target.model.model_id,
        "connection": target.connection.name,
        "excluded": excluded,
        "circuit": health.circuit.value,
        "cooldown_until": _iso(later),
        "model_locked": locked is not None and locked > now,
        "reachable": reachable,
        "healing_excluded_until": _iso(excluded_until)
        if isinstance(excluded_until, int | float) and excluded_until > now
        else None,
        "probe_pending": bool(entry.get("probe_pending")),
        "eligible": rank is not None,
        "rank": rank,
        "score": _r4(scored.score) if scored is not None else None,
        "factors": {k: _r4(v) for k, v in scored.factors.items()}
        if scored is not None
        else None,
    }


async def candidates_view(request: HttpRequest, channel: str) -> HttpResponse:  # noqa: PLR0911
    table = await tables.ensure()
    headers = {k.lower(): v for k, v in request.headers.items()}
    now = time.time()
    try:
        key = authenticate(headers, table, now)
    except RequestError as exc:
        return _error(exc.status, exc.code, exc.message, exc.param, exc.error_type)
    if not CHANNEL_RE.match(channel):
        return _error(
            400,
            "invalid_auto_channel",
            f"'{channel}' is not an auto channel (letters, digits, ':', '_', '-')",
            "channel",
        )
    requested = "auto" if channel.lower() == "auto" else f"auto/{channel}"
    try:
        route_id = parse_auto_id(requested)
    except UnknownAutoVariant:
        return _error(
            404,
            "model_not_found",
            f"'{requested}' is not an auto model",
            "channel",
            "not_found_error",
        )
    resolved = Resolved(
        kind=RouteKind.AUTO,
        identity=route_id,
        route=route_id,
        resolved_name=route_id,
        auto_id=route_id,
    )
    if not is_allowed(key, requested, resolved):
        return _error(
            403,
            "model_not_allowed",
            f"This API key may not use '{requested}'",
            "channel",
            "permission_error",
        )
    task = request.GET.get("task")
    if task is not None and task not in TASK_TYPES:
        return _error(
            400,
            "invalid_value",
            f"task must be one of {', '.join(TASK_TYPES)}",
            "task",
        )
    shadow = shadowing_combo(table, route_id)
    route = AutoRoute(route_id=route_id)
    if shadow is not None and traits(shadow.strategy).family is Family.AUTO:
        route = for_combo(shadow)
    env = auto_glue.environment(table, key, route, now, None)
    if route.combo is None:
        env.excluded = table.overrides.get((key.id, route.channel or "auto"))
    decision = await decide(
        AutoRequest(
            route=route,
            key=key,
            body={},
            now=now,
            describe=True,
            task_override=task or channel_prior(route_id),
        ),
        env,
        servable(table, route),
    )
    refusal = _refusal(decision)
    if refusal is not None:
        return _error(
            refusal.status,
            refusal.code,
            refusal.message,
            refusal.param,
            refusal.error_type,
        )
    return _json(200, _describe(table, route_id, shadow, decision, env, now))


def _refusal(decision: Decision) -> Refusal | None:
    """What ends the listing: a refusal of the engine, or F1 leaving nothing, which
    is this endpoint's "not allowed" 403 (spec 01, 04 §2.3); the other filters only
    empty the listing."""
    if decision.refusal is not None and decision.filtered is None:
        return decision.refusal
    closed = decision.filtered.refusal if decision.filtered is not None else None
    if closed is not None and closed.code == "model_not_allowed":
        return dataclasses.replace(closed, param="channel")
    return None


def _describe(
    table: RoutingTable,
    route_id: str,
    shadow: ComboInfo | None,
    decision: Decision,
    env: Environment,
    now: float,
) -> dict[str, Any]:
    filtered = decision.filtered
    pool: list[Target] = filtered.fitting if filtered is not None else []
    excluded = env.excluded or frozenset()
    reachable = {t.key for t in filtered.reachable} if filtered is not None else set()
    scored = {s.key: s for s in decision.ranked}
    missing = [t for t in pool if t.key not in scored]
    if missing:  # not in the scored pool: score them on their own for display
        extra = score_pool(
            candidate_inputs(missing, env, decision.task_type),
            decision.weights,
            RequestFeatures(now=now, promptcache_affinity=False),
        )
        scored.update({s.key: s for s in extra})
    ranks = {s.key: i + 1 for i, s in enumerate(decision.eligible)}
    items = [
        _candidate(
            t,
            scored.get(t.key),
            excluded=t.key in excluded,
            reachable=t.key in reachable,
            rank=ranks.get(t.key),
            healing_entry=decision.healing.get(t.key) or env.healing_entry(t.key),
            now=now,
        )
        for t in pool
    ]
    order = {t.key: i for i, t in enumerate(pool)}
    items.sort(
        key=lambda c: (
            c["rank"] is None,
            c["rank"] or 0,
            -(c["score"] or 0.0),
            order[c["key"]],
        )
    )
    return {
        "channel": route_id.partition("/")[2] or "auto",
        "route": decision.route.route_id,
        "shadowed_by_combo": shadow.name if shadow is not None else None,
        "task_type": decision.task_type,
        "weights_source": decision.weights_source,
        "weights": {k: _r4(v) for k, v in decision.weights.items()},
        "exploration_rate": decision.exploration_rate,
        "router_strategy": decision.router_strategy,
        "incident_mode": decision.incident_mode,
        "filter_fell_open": filtered.filter_fell_open if filtered else [],
        "overrides_ignored": bool(filtered and filtered.overrides_ignored),
        "candidates": items,
    }


__all__ = ["AutoCombosView", "candidates_view", "listed_ids", "model_entries"]
