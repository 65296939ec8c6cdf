"""The failover report and the all-failed decision (spec 02 §7, §9, §10).

The attempt loop in ``gateway.pipeline.upstream`` appends one ``Item`` per attempt or
skip, in the
order things happened, and asks this module two questions:

* ``should_continue(reason, on)``: does the loop move on after this failure?  The four
  retryable reasons move on iff listed in ``on``; ``context_length`` always moves on;
  ``invalid_request`` and ``client_cancelled`` always stop.
* ``terminal(items)``: nothing was served; which status/code does the client get?
  The first rule of §10 that applies decides.

Invariants: failover happens only before the first byte reached the client (the proxy
commits a stream at the first content token and never calls back here afterwards);
every item carries every key of the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gateway.kernel.errors import FailureReason

HEALTH_SKIPS = frozenset(
    {
        "circuit_open",
        "cooldown",
        "auth_disabled",
        "model_locked",
        "busy",
        "connection_failed",
    }
)
REQUEST_SKIPS = frozenset({"context_too_large", "capability_mismatch"})


@dataclass(slots=True, kw_only=True)
class Item:
    """One line of the failover report (spec 02 §9)."""

    model: str
    slot: int
    via: str | None
    status: str  # served | failed | skipped
    reason: str | None = None
    detail: str | None = None
    latency_ms: int = 0
    http_status: int | None = None
    connection: str | None = None
    calls: int = 1
    #: seconds until the target is usable again: a health skip's remaining block, or
    #: a rate-limited attempt's cooldown (for Retry-After); not reported
    retry_after_s: float | None = None
    #: a ``capability_mismatch`` skip's first unmet need as a request field (``tools``,
    #: ``messages`` or ``response_format``, spec 02 §10 rule 4); not reported
    unmet_param: str | None = None
    #: the upstream's error message and param, kept for rule 2; not reported
    upstream_message: str | None = None
    upstream_param: str | None = None

    def report(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "slot": self.slot,
            "via": self.via,
            "status": self.status,
            "reason": self.reason,
            "detail": self.detail,
            "latency_ms": self.latency_ms,
            "http_status": self.http_status,
            "connection": self.connection,
            "calls": self.calls,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Terminal:
    """What the client gets when nothing was served."""

    status: int
    error_type: str
    code: str
    message: str
    param: str | None = None
    retry_after_s: int | None = None


def should_continue(reason: str, on: tuple[str, ...]) -> bool:
    if reason == FailureReason.CONTEXT_LENGTH:
        return True
    if reason in (FailureReason.INVALID_REQUEST, FailureReason.CLIENT_CANCELLED):
        return False
    return reason in on


BUSY_RETRY_AFTER_SECONDS = 1  # spec 02 §10 rule 3: a busy connection counts as 1 s


def _ceil_seconds(value: float | None) -> int:
    return max(1, math.ceil(value or 1))


def _wait(item: Item) -> float | None:
    if item.retry_after_s is None and item.reason == "busy":
        return BUSY_RETRY_AFTER_SECONDS
    return item.retry_after_s


def terminal(
    items: list[Item], *, cooldown_retry_after_s: float | None = None
) -> Terminal:
    """Decide the all-failed answer (spec 02 §10 rules 2-7).

    ``cooldown_retry_after_s`` is the time until the earliest cooldown of the tried
    connections ends (rule 6); when it is not given, the rate-limited items'
    ``retry_after_s`` are used.
    """
    failed = [item for item in items if item.status == "failed"]
    last = failed[-1] if failed else None
    if last is not None and last.reason == FailureReason.INVALID_REQUEST:
        message = (last.upstream_message or "")[:500]
        return Terminal(
            status=last.http_status or 400,
            error_type="invalid_request_error",
            code="upstream_invalid_request",
            message=f"Upstream rejected the request: {message}",
            param=last.upstream_param,
        )
    if not any(item.calls for item in items):
        return _no_call(items)
    if last is not None and last.reason == FailureReason.CONTEXT_LENGTH:
        return Terminal(
            status=400,
            error_type="invalid_request_error",
            code="context_length_exceeded",
            message="The request exceeds the context window of every model tried",
            param="messages",
        )
    count = len(failed)
    what = f"{last.model} \u2014 {last.reason}" if last is not None else "none"
    message = f"All {count} model attempt(s) failed (last: {what})"
    if failed and all(item.reason == FailureReason.RATE_LIMIT for item in failed):
        waits = [cooldown_retry_after_s] if cooldown_retry_after_s is not None else []
        waits = waits or [w for w in map(_wait, failed) if w is not None]
        return Terminal(
            status=429,
            error_type="rate_limit_error",
            code="all_models_failed",
            message=message,
            retry_after_s=_ceil_seconds(min(waits) if waits else None),
        )
    return Terminal(
        status=502,
        error_type="upstream_error",
        code="all_models_failed",
        message=message,
    )


def _no_call(items: list[Item]) -> Terminal:
    health = [item for item in items if item.reason in HEALTH_SKIPS]
    if health or not items:
        waits = [wait for wait in map(_wait, health) if wait is not None]
        return Terminal(
            status=503,
            error_type="upstream_error",
            code="no_healthy_candidate",
            message="No healthy candidate is available for this request",
            retry_after_s=_ceil_seconds(min(waits) if waits else None),
        )
    if any(item.reason == "context_too_large" for item in items):
        return Terminal(
            status=400,
            error_type="invalid_request_error",
            code="context_length_exceeded",
            message="The request exceeds the context window of every candidate",
            param="messages",
        )
    need = next(
        (item.unmet_param for item in items if item.reason == "capability_mismatch"),
        None,
    )
    return Terminal(
        status=400,
        error_type="invalid_request_error",
        code="capability_mismatch",
        message="No candidate has a capability this request needs",
        param=need or "messages",
    )
