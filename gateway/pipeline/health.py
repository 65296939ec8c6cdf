"""Feeding attempt outcomes to the connection health board (spec 03 §8)."""

from __future__ import annotations

import time
from typing import Any

from gateway.kernel import ratelimits
from gateway.kernel.breaker import (
    AuthDisableConfig,
    BreakerConfig,
    BreakerOutcome,
    Circuit,
    CooldownConfig,
    HealthConfig,
    breaker_outcome,
    config_from_settings,
)
from gateway.kernel.failover import Item
from gateway.kernel.types import RoutingTable, Target
from providers.health import board
from providers.latency import latency
from providers.live_window import window
from providers.target_stats import stats
from telemetry import metrics
from telemetry.sanitize import sanitize

_CIRCUIT_VALUE = {Circuit.CLOSED: 0, Circuit.HALF_OPEN: 1, Circuit.OPEN: 2}
_configs: dict[int, HealthConfig] = {}


_CLIENT_FAULT_DETAILS = frozenset(
    {"auth_failed", "payment_required", "model_not_found"}
)


def window_result(reason: str | None, detail: str | None) -> str | None:
    """An attempt as a live-window sample (spec 04 §3.1, 06 counting); None = none."""
    if reason is None:
        return "success"
    if reason == "client_cancelled":
        return None
    if reason in ("invalid_request", "context_length") and (
        detail not in _CLIENT_FAULT_DETAILS
    ):
        return None  # the client's fault says nothing about the model
    if detail in ("empty_output", "empty_stream"):
        return "empty_response"
    if detail == "stream_interrupted":
        return "stream_interrupted"
    return "failure"


def conn_key(target: Target) -> str:
    """The breaker key of spec 03 §8.1: ``<provider slug>@<connection name>``."""
    return f"{target.provider.slug}@{target.connection.name}"


def health_config(table: RoutingTable) -> HealthConfig:
    config = _configs.get(table.version)
    if config is None:
        settings = table.settings
        config = _configs[table.version] = HealthConfig(
            breaker=config_from_settings(BreakerConfig, settings.breaker),
            cooldown=config_from_settings(CooldownConfig, settings.cooldown),
            auth=config_from_settings(AuthDisableConfig, settings.auth_disable),
            model_lock_minutes=settings.model_lock_minutes,
        )
    return config


def record_health(
    table: RoutingTable, target: Target, item: Item, outcome: Any
) -> str | None:
    """Apply one attempt to its connection; returns the penalty it started."""
    now = time.time()
    error = getattr(outcome, "error", None)
    connection = conn_key(target)
    trigger = board.record(
        connection,
        target.model.model_id,
        item.reason,
        item.detail if item.detail != "stream_interrupted" else None,
        now=now,
        config=health_config(table),
        retry_after=getattr(outcome, "retry_after", None),
        message=sanitize(error.message)
        if error is not None and error.message
        else None,
    )
    outcome_kind = breaker_outcome(item.reason, item.detail)
    success = (
        True
        if item.reason is None
        else (
            False
            if outcome_kind is BreakerOutcome.FAILURE or item.reason == "rate_limit"
            else None
        )
    )
    stats.finished(target.key, now, success=success, latency_ms=item.latency_ms)
    sample = window_result(item.reason, item.detail)
    if sample is not None:
        window.record(target.model_key, sample, item.latency_ms)
    feed_latency(target, item, outcome, now)
    headers = getattr(outcome, "ratelimit", None)
    if headers:
        reading = ratelimits.parse(headers, now)
        if reading is not None:
            board.store.set(
                ratelimits.quota_key(connection),
                {
                    "remaining": reading.remaining,
                    "resets_at": reading.resets_at,
                    "at": now,
                },
                ratelimits.MAX_AGE_SECONDS,
            )
    circuit = board.describe_circuit(connection, now)
    metrics.bounded(metrics.CIRCUIT_STATE, connection).set(_CIRCUIT_VALUE[circuit])
    if trigger is not None:  # spec 05 §3.8: a health penalty this attempt started
        metrics.bounded(metrics.ROUTING_COOLDOWNS, target.key, trigger).inc()
    cooling = board.skip_reason(connection, target.model.model_id, 0, now) is not None
    metrics.bounded(metrics.ROUTING_COOLDOWN_ACTIVE, target.key).set(
        1 if cooling else 0
    )
    return trigger


LKGP_TTL_SECONDS = 24 * 3600  # spec 03 §8.6
LKGP_SESSION_TTL_SECONDS = 30 * 60


def lkgp_key(table: RoutingTable, target: Target) -> str | None:
    """``lkgp:<combo primary key>`` or ``lkgp:<auto id>`` of the route that served."""
    via = target.via
    if via is None:
        return None
    if via == "auto" or via.startswith("auto/"):  # a built-in id, not a combo name
        return f"lkgp:{via}"
    combo = table.combos.get(via.lower())
    return f"lkgp:{combo.id}" if combo is not None else None


def remember_good(
    table: RoutingTable, target: Target, session_key: str | None = None
) -> None:
    """Every served call through a combo or auto route records its target (§8.6):
    ``lkgp:<combo>`` for 24 h and, with a session, ``lkgp:<combo>:<S>`` for 30 min."""
    key = lkgp_key(table, target)
    if key is not None:
        board.store.set(key, target.key, LKGP_TTL_SECONDS)
        if session_key is not None:
            board.store.set(
                f"{key}:{session_key}", target.key, LKGP_SESSION_TTL_SECONDS
            )


def attempt_started(target: Target) -> None:
    """Count the call in the target's stats (spec 03 §8.7) before it goes out."""
    now = time.time()
    stats.started(target.key, now)
    latency.started(target.key, now)
    metrics.bounded(metrics.ROUTING_IN_FLIGHT, target.key).inc()


def attempt_abandoned(target: Target) -> None:
    """A call cancelled without an outcome (a chaos member that lost the race)."""
    stats.finished(target.key, time.time(), success=None)
    latency.finished(target.key)
    metrics.bounded(metrics.ROUTING_IN_FLIGHT, target.key).dec()


_TRANSPORT = frozenset({"connection_error", "timeout"})


def feed_latency(target: Target, item: Item, outcome: Any, now: float) -> None:
    """Every attempt of every route feeds its target's estimate (05 §3.2)."""
    key = target.key
    duration_ms = float(item.latency_ms or 0)
    # the start nearest to now − duration leaves the in-flight record (05 §3.5 step 3)
    latency.finished(key, now - duration_ms / 1000 if duration_ms > 0 else None)
    metrics.bounded(metrics.ROUTING_IN_FLIGHT, key).dec()
    if item.reason == "client_cancelled":
        return
    if item.reason is None:
        ttfb = getattr(outcome, "ttfb_s", None)
        if ttfb is not None and getattr(outcome, "completion", None) is None:
            sample = float(ttfb) * 1000  # a stream: time to first byte
        else:
            sample = float(getattr(outcome, "latency_s", 0.0) or 0.0) * 1000
        latency.sample(key, sample or duration_ms, now)
    elif item.reason in _TRANSPORT:
        latency.sample(key, duration_ms, now)
    else:
        latency.error_sample(key, duration_ms, now)
    estimate = latency.estimate(key, now)
    if estimate is not None:
        metrics.bounded(metrics.ROUTING_LATENCY_ESTIMATE, key).set(estimate)
