"""``count_tokens`` upstream (spec 09 §4.5): the chain's candidates in declared order
(combos and ``auto`` ids as ``plan_targets`` lists them, without planning, so no
strategy state moves), the first whose dialect counts tokens itself asked (by
passthrough when it speaks Messages, else with the canonical body it translates,
as Gemini's ``:countTokens``), the next such one on a failover trigger.  Each call
is an attempt row of the request's log record; not billed, no limits, no health
fed: a count is not an answer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.dialects import dialect_of
from gateway.kernel.chain import Slot, plan_targets
from gateway.kernel.errors import RETRYABLE_REASONS
from gateway.kernel.exchange import ChatRequest
from gateway.kernel.failover import Item
from gateway.kernel.types import RoutingTable, Target
from gateway.pipeline import upstream
from gateway.pipeline.health import conn_key
from gateway.pipeline.record import RunRecord
from providers.credential_sources import CredentialUnavailable
from providers.health import board
from providers.http import client_for

#: upstream counts tried before the gateway counts itself
MAX_COUNT_CALLS = 3


@dataclass(frozen=True, slots=True)
class Counted:
    input_tokens: int
    target: Target


def counters(table: RoutingTable, chain: Sequence[Slot]) -> list[tuple[int, Target]]:
    """``(slot, target)`` of the chain's candidates whose dialect counts tokens, in
    order, each once."""
    found: list[tuple[int, Target]] = []
    seen: set[str] = set()
    warnings: list[str] = []
    for index, slot in enumerate(chain):
        for target in plan_targets(table, slot, warnings):
            if target.key in seen or not dialect_of(target).counts_tokens:
                continue
            seen.add(target.key)
            found.append((index, target))
    return found


def _usable(target: Target, now: float) -> bool:
    """Not cooling, open, disabled or busy right now (a count never probes)."""
    skip = board.skip_reason(
        conn_key(target), target.model.model_id, target.connection.max_concurrency, now
    )
    return skip is None


async def count_upstream(
    table: RoutingTable,
    chain: Sequence[Slot],
    request: ChatRequest,
    rec: RunRecord,
) -> Counted | None:
    """The first upstream count of the chain's counting candidates, or None; every
    call is an attempt row of ``rec`` (never billable)."""
    original = request.passthrough()
    if original is None:
        return None
    timeout_s = table.settings.attempt_timeout_ms / 1000
    for slot_index, target in counters(table, chain):
        if len(rec.attempts) >= MAX_COUNT_CALLS:
            break
        if not _usable(target, time.time()):
            continue
        dialect = dialect_of(target)
        started_wall = time.time()
        try:
            auth = await upstream.ready_auth(target)
        except CredentialUnavailable as exc:
            result = upstream.credential_failure(
                upstream.AttemptResult(started=time.perf_counter()), exc
            )
        else:
            passthrough = "messages" in dialect.surfaces
            call = dialect.count_tokens_request(
                base_url=target.connection.base_url or target.provider.base_url,
                api_key=target.connection.api_key,
                model=target.model.model_id,
                body=_without_output_fields(
                    original.body if passthrough else request.body
                ),
                forward=original.forward,
                auth=auth,
            )
            result = await upstream.call_json(
                client_for(target.provider.kind, target.provider.outbound),
                dialect,
                call,
                timeout_s=timeout_s,
                created=int(started_wall),
            )
            upstream.drop_refused(target, auth, result)
        result.passthrough = "messages" in dialect.surfaces
        rec.upstream_wait_s += result.latency_s
        failure = result.failure
        item = Item(
            model=target.model_key,
            slot=slot_index,
            via=None,
            status="served" if failure is None else "failed",
            reason=failure.reason.value if failure is not None else None,
            detail=failure.detail.value
            if failure is not None and failure.detail is not None
            else None,
            latency_ms=round(result.latency_s * 1000),
            http_status=result.http_status,
            connection=target.connection.name,
        )
        rec.add_attempt(target, item, started_wall, result)
        if failure is None and result.completion is not None:
            return Counted(int(result.completion["input_tokens"]), target)
        if failure is None or failure.reason not in RETRYABLE_REASONS:
            break
    return None


def _without_output_fields(body: dict[str, Any]) -> dict[str, Any]:
    """A count_tokens body has no output settings (the endpoint refuses them)."""
    drop = (
        *("max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences"),
        *("stream_options", "stop", "max_completion_tokens"),
    )
    return {k: v for k, v in body.items() if k not in drop}
