"""``RunRecord``: what one request did, turned into log rows and metrics at its end.

Built up by the attempt loop (cheap attribute writes on the hot path); ``rows()``
produces the ``RequestLog``/``AttemptLog`` field dicts for the recorder and
``emit_metrics()`` updates the Prometheus series once, when the request ends.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from gateway.ids import new_id
from gateway.kernel.failover import Item
from gateway.kernel.types import KeyPolicy, Target
from gateway.pipeline.accounting import (
    cost_usd,
    estimate_prompt_tokens,
    result_of,
    usage_numbers,
)
from telemetry import metrics
from telemetry.sanitize import sanitize

#: the request log's session_id column
SESSION_ID_CHARS = 200


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@dataclass(slots=True, kw_only=True)
class RunRecord:
    request_id: uuid.UUID
    endpoint: str
    key: KeyPolicy
    config_version: int
    received_at: float
    started: float  # perf_counter
    stream: bool = False
    requested_model: str = ""
    session_id: str | None = None
    session_source: str | None = None
    #: the auto engine's decision record (spec 04 §4 step 8)
    auto_decision: dict[str, Any] | None = None
    #: smart tier routing of the first alias entry (spec 05 §2.4)
    tier_outcome: Any = None
    route: str = "unresolved"
    strategy: str | None = None
    served: Target | None = None
    status: str = "success"
    http_status: int = 200
    reason: str | None = None
    error_message: str | None = None
    attempt_count: int = 0
    failover: bool = False
    skips: list[dict[str, Any]] | None = None
    #: the attempt loop's report items; their skips are stored with the request
    #: whatever its outcome (spec 06 §1.1 ``skips``)
    items: list[Item] | None = None
    ttft_s: float | None = None
    upstream_wait_s: float = 0.0
    client_disconnected: bool = False
    attempts: list[dict[str, Any]] = field(default_factory=list)
    cost: Decimal | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    usage_source: str = "none"
    finished_at: float | None = None
    overhead_final: int | None = None
    #: what the wire's translation could not carry (spec 09 §2.6): a translated
    #: attempt's ``dropped``
    dropped: tuple[str, ...] = ()
    #: target key -> what that target's attempts also left out (a ``Carried`` field
    #: its model cannot take)
    attempt_dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: events to publish once the response is finished (``model_failover``)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: spec 08 §6: reconciles the key's rate-limit and budget reservation; the front
    #: door calls it once the request has ended (``gateway.limits.admission.Ticket``)
    limits: Callable[[RunRecord], None] | None = None

    @classmethod
    def start(
        cls,
        request_id: uuid.UUID,
        endpoint: str,
        key: KeyPolicy,
        version: int,
        received_at: float,
        started: float,
    ) -> RunRecord:
        return cls(
            request_id=request_id,
            endpoint=endpoint,
            key=key,
            config_version=version,
            received_at=received_at,
            started=started,
        )

    def overhead_ms(self) -> int:
        """Gateway time so far minus upstream waits; fixed once a reply header has it.

        The first call made for the ``X-OmniRoute-Overhead-Ms`` header freezes the
        value, so the log row records exactly what the client saw (spec 06 §1.1).
        """
        if self.overhead_final is None:
            total = time.perf_counter() - self.started
            self.overhead_final = max(0, round((total - self.upstream_wait_s) * 1000))
        return self.overhead_final

    def mark_ttft(self) -> None:
        self.ttft_s = time.perf_counter() - self.started

    def refuse(self, status: int, code: str, message: str) -> None:
        self.status, self.http_status, self.reason = "refused", status, code
        self.error_message = sanitize(message)

    def add_attempt(  # noqa: PLR0913
        self,
        target: Target,
        item: Item,
        started_wall: float,
        outcome: Any,
        *,
        result: str | None = None,
        billable: bool = False,
        estimate_body: dict[str, Any] | None = None,
        delivered_chars: int | None = None,
        trigger: str | None = None,
    ) -> None:
        numbers = usage_numbers(getattr(outcome, "usage", None))
        source = "upstream" if numbers is not None else "none"
        if numbers is None and billable and estimate_body is not None:
            completion = math.ceil((delivered_chars or 0) / 4)
            if outcome is not None and outcome.completion is not None:
                completion = _completion_chars(outcome.completion)
            numbers = (estimate_prompt_tokens(estimate_body), completion, 0, 0)
            source = "estimated"
        cost = cost_usd(target.model, numbers) if numbers is not None else None
        if billable:
            self.usage_source = source
            if cost is not None:  # spec 06 §1.1: the sum of the billable costs
                self.cost = cost if self.cost is None else self.cost + cost
        if numbers is not None:  # token totals: every attempt that reported usage
            self.prompt_tokens = (self.prompt_tokens or 0) + numbers[0]
            self.completion_tokens = (self.completion_tokens or 0) + numbers[1]
            self.cached_tokens = (self.cached_tokens or 0) + numbers[2]
        error = getattr(outcome, "error", None)
        passthrough = bool(getattr(outcome, "passthrough", False))
        self.attempts.append(
            {
                "id": new_id(),
                "request_id": self.request_id,
                "attempt_no": len(self.attempts) + 1,
                "started_at": _dt(started_wall),
                "provider": target.provider.slug,
                "model": target.model.model_id,
                "connection": target.connection.name,
                "target": target.key,
                "slot": item.slot,
                "via": item.via,
                "reason": item.reason,
                "detail": item.detail,
                "result": result or result_of(item.reason, item.detail),
                "http_status": item.http_status,
                "latency_ms": item.latency_ms,
                # rounded from another clock reading: never above the duration
                "ttfb_ms": _at_most(_ms(getattr(outcome, "ttfb_s", None)), item),
                "ttft_ms": _ms(getattr(outcome, "ttft_s", None)),
                "prompt_tokens": numbers[0] if numbers else None,
                "completion_tokens": numbers[1] if numbers else None,
                "cached_tokens": numbers[2] if numbers else None,
                "cost_usd": cost,
                "billable": billable,
                "cooldown_trigger": trigger,
                "passthrough": passthrough,
                "dropped": [] if passthrough else self.dropped_for(target),
                "error_message": sanitize(error.message)
                if error and error.message
                else None,
            }
        )

    def succeed(self, target: Target, status: int, calls: int, failover: bool) -> None:
        self.served, self.http_status, self.status = target, status, "success"
        self.attempt_count, self.failover = calls, failover

    def interrupt(
        self, target: Target, calls: int, failover: bool, message: str
    ) -> None:
        self.succeed(target, 200, calls, failover)
        self.status, self.reason = "interrupted", "stream_interrupted"
        self.error_message = sanitize(message)

    def fail(
        self,
        status: int,
        code: str,
        message: str,
        calls: int,
        failover: bool,
        items: list[Item],
    ) -> None:
        self.status = "refused" if calls == 0 else "upstream_failed"
        self.http_status, self.reason = status, code
        self.error_message = sanitize(message)
        self.attempt_count, self.failover = calls, failover
        self.skips = _skip_rows(items)

    def client_closed(
        self, status: int, failover: bool, served: Target | None = None
    ) -> None:
        """The client left; ``served``: the target whose stream it was reading (the
        served model is fixed at the first token, spec 02 §8)."""
        self.status, self.http_status = "client_closed", status
        self.failover = failover
        if served is not None:
            self.served = served
        self.client_disconnected = True
        self.attempt_count = max(self.attempt_count, len(self.attempts))

    def dropped_for(self, target: Target) -> list[str]:
        """What a translated attempt on ``target`` left out (spec 09 §2.6)."""
        return [*self.dropped, *self.attempt_dropped.get(target.key, ())]

    def smart(self, outcome: Any) -> None:
        """Remember the smart-routing outcome (headers, log fields)."""
        self.tier_outcome = outcome

    def _tier_fields(self) -> dict[str, Any]:
        tier = self.tier_outcome
        if tier is None:
            return {}
        return {
            "smart_alias": tier.alias,
            "smart_mode": tier.mode,
            "tier": tier.tier,
            "tier_source": tier.source,
            "tier_score": tier.score,
            "tier_signals": list(tier.signals),
            "tier_target": tier.target,
        }

    def rows(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        finished = self.finished_at or time.time()
        served = self.served
        request = {
            "id": self.request_id,
            "created_at": _dt(self.received_at),
            "finished_at": _dt(finished),
            "api_key_id": self.key.id,
            "api_key_prefix": self.key.prefix,
            "endpoint": self.endpoint,
            "stream": self.stream,
            # client strings that may carry a secret (a key sent as the model)
            "requested_model": sanitize(self.requested_model, limit=256),
            "route": self.route[:200],
            "session_id": sanitize(self.session_id, limit=SESSION_ID_CHARS)
            if self.session_id is not None
            else None,
            "session_source": self.session_source,
            "auto_decision": self.auto_decision,
            **self._tier_fields(),
            "strategy": self.strategy,
            "served_model": served.model_key if served else None,
            "provider": served.provider.slug if served else None,
            "connection": served.connection.name if served else None,
            "status": self.status,
            "http_status": self.http_status,
            "reason": self.reason,
            "error_message": self.error_message,
            "attempt_count": self.attempt_count or len(self.attempts),
            "failover": self.failover,
            "skips": self.skips if self.skips is not None else _skip_rows(self.items),
            "latency_ms": max(0, round((finished - self.received_at) * 1000)),
            "ttft_ms": _ms(self.ttft_s),
            "overhead_ms": self.overhead_ms() if not self.stream else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "usage_source": self.usage_source,
            "cost_usd": self.cost,
            "client_disconnected": self.client_disconnected,
            "node": _node(),
            "config_version": self.config_version,
        }
        return request, self.attempts

    def emit_metrics(self) -> None:
        duration = time.perf_counter() - self.started
        stream = "true" if self.stream else "false"
        served = self.served.model_key if self.served else "none"
        metrics.bounded(
            metrics.REQUESTS, self.endpoint, self.route, served, str(self.http_status)
        ).inc()
        metrics.bounded(
            metrics.REQUEST_DURATION, self.endpoint, self.route, stream
        ).observe(duration)
        if self.ttft_s is not None:
            metrics.bounded(metrics.REQUEST_TTFT, self.route).observe(self.ttft_s)
            metrics.bounded(metrics.OVERHEAD, stream).observe(
                max(0.0, self.ttft_s - self.upstream_wait_s)
            )
        elif not self.stream:
            metrics.bounded(metrics.OVERHEAD, stream).observe(
                max(0.0, duration - self.upstream_wait_s)
            )
        if self.client_disconnected:
            metrics.bounded(metrics.CLIENT_DISCONNECTS, self.route).inc()
        for row in self.attempts:
            metrics.bounded(
                metrics.UPSTREAM_ATTEMPTS,
                row["provider"],
                row["model"],
                row["connection"],
                row["result"],
            ).inc()
            # spec 06 §2: full body for JSON, first byte for streams
            waited = row.get("ttfb_ms") if self.stream else row["latency_ms"]
            if waited is None:
                waited = row["latency_ms"]
            if waited is not None:
                metrics.bounded(
                    metrics.UPSTREAM_LATENCY, row["provider"], row["model"], stream
                ).observe(waited / 1000)
            if row["ttft_ms"] is not None:
                metrics.bounded(
                    metrics.UPSTREAM_TTFT, row["provider"], row["model"]
                ).observe(row["ttft_ms"] / 1000)
        if self.served is not None:
            self._emit_usage(self.served)

    def _emit_usage(self, target: Target) -> None:
        labels = (target.provider.slug, target.model.model_id)
        for kind, value in (
            ("prompt", self.prompt_tokens),
            ("completion", self.completion_tokens),
            ("cached", self.cached_tokens),
        ):
            if value:
                metrics.bounded(metrics.TOKENS, *labels, kind).inc(value)
        if self.cost:
            metrics.bounded(metrics.COST, *labels).inc(float(self.cost))


def _at_most(ms: int | None, item: Item) -> int | None:
    if ms is None or item.latency_ms is None:
        return ms
    return min(ms, item.latency_ms)


def _skip_rows(items: list[Item] | None) -> list[dict[str, Any]] | None:
    """``RequestLog.skips``: the skip items in order, or None when there are none."""
    return [
        {
            "model": i.model,
            "connection": i.connection,
            "slot": i.slot,
            "via": i.via,
            "reason": i.reason,
        }
        for i in items or ()
        if i.status == "skipped"
    ] or None


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(0, round(seconds * 1000))


def _completion_chars(completion: dict[str, Any]) -> int:
    chars = 0
    for choice in completion.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
    return math.ceil(chars / 4)


_NODE: list[str] = []


def _node() -> str:
    if not _NODE:
        from django.conf import settings

        _NODE.append(settings.OMNIROUTE_NODE)
    return _NODE[0]
