"""The report side of a run (spec 02 §10-12): the ``omniroute`` object, the results of
a served answer, of a refusal and of a request where every attempt failed, and the
``model_failover`` event between chain slots.  Every function reads and writes a
``Run``; none produces bytes (``gateway.inbound`` renders the results).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from gateway.ids import new_id
from gateway.kernel.chain import ChainError, Slot
from gateway.kernel.exchange import RequestError
from gateway.kernel.failover import terminal
from gateway.kernel.types import Target
from gateway.pipeline.result import Answer, Failure, omniroute_headers, upstream_id
from gateway.pipeline.run import NOTHING_TO_CALL
from providers.health import board
from telemetry import metrics
from telemetry.sanitize import VETTED

if TYPE_CHECKING:
    from gateway.auto.engine.pool import Refusal
    from gateway.pipeline.context import ChatContext
    from gateway.pipeline.record import RunRecord
    from gateway.pipeline.run import Run

logger = logging.getLogger("omniroute.gateway")


def as_sent(slot: Slot) -> str:
    """A chain entry as the client sent it: a smart alias, not its target."""
    return slot.entry.alias or slot.entry.model


def refusal(
    ctx: ChatContext, exc: RequestError | ChainError, rec: RunRecord | None
) -> Failure:
    """A request refused before any call (counted; logged when ``rec`` is given)."""
    metrics.bounded(metrics.REFUSALS, exc.code).inc()
    if rec is not None:
        rec.refuse(exc.status, exc.code, exc.message)
        ctx.record(rec)
    return Failure(
        status=exc.status,
        code=exc.code,
        message=exc.message,
        error_type=exc.error_type,
        param=exc.param,
    )


def model_failover(run: Run, index: int) -> None:
    """Slot ``index`` failed and the next one is tried (spec 02 §12)."""
    last = next((i for i in reversed(run.items) if i.slot == index), None)
    reason = last.reason if last is not None else "none"
    source = run.chain[index].resolved.identity
    target = run.chain[index + 1].resolved.identity
    metrics.bounded(metrics.MODEL_FAILOVERS, source, target, reason or "none").inc()
    event = {
        "event": "model_failover",
        "id": str(new_id()),
        "occurred_at": datetime.now(UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "request_id": str(run.ctx.request_id),
        "api_key": run.key.name,
        "endpoint": run.ctx.endpoint,
        "stream": run.request.stream,
        "to_slot": index + 1,
        "from_model": as_sent(run.chain[index]),
        "to_model": as_sent(run.chain[index + 1]),
        "reason": reason,
        "http_status": last.http_status if last is not None else None,
    }
    # the payload's ``api_key`` is the key's name (spec 02 §12), not a secret
    logger.info("model_failover %s", orjson.dumps(event).decode(), extra={VETTED: True})
    run.rec.events.append(event)


def refused(run: Run, exc: RequestError) -> Failure:
    """A gateway refusal met while planning a slot (spec 02 §5): the request ends
    with it, and the items of the earlier slots are listed in ``error.attempts``."""
    run.rec.failover = run.failover  # spec 06 §1.1: a chain ran
    failure = refusal(run.ctx, exc, run.rec)
    failure.headers.extend(
        omniroute_headers(served_model=None, attempts=run.calls, route=run.route)
    )
    if run.items:
        failure.attempts = [i.report() for i in run.items]
    return failure


def omniroute(run: Run, target: Target) -> dict[str, Any]:
    """The ``omniroute`` object of an answer served by ``target`` (spec 02 §10)."""
    chain = run.chain
    first = chain[0]
    resolved = first.resolved if len(chain) == 1 else None
    strategy = None
    served_slot = next(
        (
            s
            for s in chain
            if s.resolved.combo is not None and target.via == s.resolved.combo.name
        ),
        None,
    )
    decision = next((d for d in run.auto.values() if d.route.via == target.via), None)
    # the serving combo: the one whose plan the target came from, also when that is
    # a combo-ref's (``via`` names it)
    serving = run.ctx.table.combos.get(target.via.lower()) if target.via else None
    if decision is not None:
        strategy = decision.strategy
    elif serving is not None:
        strategy = serving.strategy
    elif served_slot is not None and served_slot.resolved.combo is not None:
        strategy = served_slot.resolved.combo.strategy
    run.rec.strategy = strategy  # the log row's (spec 06 §1.1)
    data: dict[str, Any] = {
        "requested_model": as_sent(first),
        "served_model": target.model_key,
        "provider": target.provider.slug,
        "connection": target.connection.name,
        "route": resolved.route if resolved is not None else "chain",
        "strategy": strategy,
    }
    if len(chain) > 1:
        served = next((i for i in run.items if i.status == "served"), None)
        data["failover"] = {
            "occurred": bool(served and served.slot > 0),
            "attempts": [i.report() for i in run.items],
        }
    return data


def answer(
    run: Run,
    target: Target,
    completion: dict[str, Any],
    usage: dict[str, Any] | None = None,
    raw: dict[str, Any] | None = None,
) -> Answer:
    """A served completion: ``model`` is the served target, ``usage`` (a composite's
    sum) replaces the call's own, ``raw`` the upstream's own answer of a passthrough;
    the request is recorded as a success.  A completion the upstream gave no id
    (Bedrock's Converse) gets the request's, as a stream's chunks do."""
    if upstream_id(completion.get("id")) is None:
        completion["id"] = f"chatcmpl-{run.rec.request_id.hex}"
    completion["model"] = target.model_key
    if usage is not None:
        completion["usage"] = usage
    report = omniroute(run, target)
    headers = omniroute_headers(
        served_model=report["served_model"],
        attempts=run.calls,
        route=report["route"],
        overhead_ms=run.rec.overhead_ms(),
    )
    run.rec.succeed(target, 200, run.calls, run.failover)
    run.ctx.record(run.rec)
    return Answer(
        completion=completion,
        report=report,
        headers=headers,
        raw=raw,
        request=run.request,
    )


def auto_refusal(run: Run, refusal: Refusal) -> Failure:
    """An auto filter failed closed: the request ends with its error; an empty pool
    (nothing to call) answers with the attempts so far (spec 01)."""
    exc = RequestError(
        refusal.status,
        refusal.code,
        refusal.message,
        param=refusal.param,
        error_type=refusal.error_type,
    )
    if refusal.code in NOTHING_TO_CALL:
        return nothing_to_call(run, exc, refusal.retry_after_s)
    failure = refused(run, exc)
    if refusal.retry_after_s is not None:
        failure.headers.append(
            (b"retry-after", str(max(1, round(refusal.retry_after_s))).encode())
        )
    return failure


def stream_headers(run: Run, report: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """The headers of a committed stream (attempts = calls made up to the commit)."""
    return omniroute_headers(
        served_model=report["served_model"], attempts=run.calls, route=report["route"]
    )


def nothing_to_call(
    run: Run, exc: RequestError, retry_after_s: float | None
) -> Failure:
    """No call could be made in the last slot (an ``auto`` pool emptied by its
    filters, every candidate too small): the error with ``error.attempts`` and the
    ``X-OmniRoute-*`` headers, like any answer where nothing was served."""
    record_failure(run, exc.status, exc.code, exc.message)
    return Failure(
        status=exc.status,
        code=exc.code,
        message=exc.message,
        error_type=exc.error_type,
        param=exc.param,
        attempts=[i.report() for i in run.items],
        retry_after_s=None if retry_after_s is None else max(1, round(retry_after_s)),
        headers=omniroute_headers(
            served_model=None, attempts=run.calls, route=run.route
        ),
    )


def record_failure(run: Run, status: int, code: str, message: str) -> None:
    """Log a request nothing served; decided without any call, it is also a
    gateway-side refusal (``omniroute_refusals_total``)."""
    run.rec.fail(status, code, message, run.calls, run.failover, run.items)
    run.rec.strategy = _route_strategy(run)
    if run.calls == 0:
        metrics.bounded(metrics.REFUSALS, code).inc()
    run.ctx.record(run.rec)


def _route_strategy(run: Run) -> str | None:
    """A request nothing served: its combo's or auto route's strategy, if one."""
    if len(run.chain) != 1:
        return None
    decision = run.auto.get(0)
    if decision is not None:
        return decision.strategy
    combo = run.chain[0].resolved.combo
    return combo.strategy if combo is not None else None


def all_failed(run: Run) -> Failure:
    """Every attempt failed or was skipped (spec 02 §9): the terminal error."""
    now = time.time()
    waits = [
        board.cooldown_remaining(f"{item.model.split('/')[0]}@{item.connection}", now)
        for item in run.items
        if item.reason == "rate_limit" and item.status == "failed"
    ]
    known = [w for w in waits if w is not None]
    result = terminal(run.items, cooldown_retry_after_s=min(known) if known else None)
    record_failure(run, result.status, result.code, result.message)
    return Failure(
        status=result.status,
        code=result.code,
        message=result.message,
        error_type=result.error_type,
        param=result.param,
        attempts=[i.report() for i in run.items],
        retry_after_s=result.retry_after_s,
        headers=omniroute_headers(
            served_model=None, attempts=run.calls, route=run.route
        ),
        all_failed=result.code == "all_models_failed",
    )
