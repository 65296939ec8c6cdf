"""context-relay handoffs in the background (spec 03 §5.17).

After a success in a context-relay combo with a session, if the served connection's
remaining quota (§8.5) is at or below ``1 - handoffThreshold``, a background task
asks the same target (non-streaming, ≤ 1 024 output tokens) for a summary of the
last ``maxMessagesForSummary`` messages, stores it with its writer's model for 5 h
(or until that quota resets, if sooner) and moves the holder to the next surviving
target in declared order.  One handoff per session at a time (a lock in the state
store); a failed summary call is logged and dropped.  The client's response never
waits for any of this.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gateway.kernel import relay as pure
from gateway.kernel.chain import Options
from gateway.kernel.composite import answer_text
from gateway.kernel.types import RoutingTable, Target
from gateway.pipeline import upstream as proxy
from gateway.pipeline.health import attempt_abandoned, conn_key
from gateway.pipeline.upstream import build_call, dispatch, ready_auth
from gateway.planning.combo import SESSION_STATE_TTL_SECONDS, connection_quota
from gateway.planning.plan import RelayPlan
from providers.health import board

logger = logging.getLogger("omniroute.gateway")
LOCK_SECONDS = 300
_tasks: set[asyncio.Task[None]] = set()


def after_success(
    table: RoutingTable,
    relays: list[RelayPlan],
    target: Target,
    body: dict[str, Any],
) -> None:
    """Start a handoff for every relay combo ``target`` served in, when one is due."""
    for plan in relays:
        if target.key in plan.candidate_of:
            _maybe_start(table, plan, target, body)


def _maybe_start(
    table: RoutingTable, plan: RelayPlan, target: Target, body: dict[str, Any]
) -> None:
    threshold, max_messages = pure.relay_settings(plan.combo.config)
    now = time.time()
    quota = connection_quota(target.connection, conn_key(target), now)
    if not pure.handoff_due(quota.remaining, threshold):
        return
    if board.store.get(plan.lock_key) is not None:
        return  # one handoff per session at a time
    board.store.set(plan.lock_key, now, LOCK_SECONDS)
    summary_body = pure.summary_body(body.get("messages"), max_messages)
    task = asyncio.get_running_loop().create_task(
        _handoff(table, plan, target, summary_body, quota.resets_at)
    )
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _handoff(
    table: RoutingTable,
    plan: RelayPlan,
    target: Target,
    body: dict[str, Any],
    resets_at: float | None,
) -> None:
    try:
        try:
            outcome = await dispatch(
                target,
                build_call(target, body, stream=False, auth=await ready_auth(target)),
                stream=False,
                options=Options(
                    timeout_ms=table.settings.attempt_timeout_ms,
                    first_token_timeout_ms=None,
                    on=(),
                ),
                idle_timeout_ms=table.settings.stream_idle_timeout_ms,
                created=int(time.time()),
            )
        finally:
            attempt_abandoned(target)  # a side call: no stats, no health
        text = None
        failure = None
        if isinstance(outcome, proxy.AttemptResult):
            text = answer_text(outcome.completion)
            failure = outcome.failure
        if failure is not None or not text:
            reason = failure.reason.value if failure is not None else "empty_output"
            logger.warning(
                "context-relay handoff dropped: combo=%s target=%s reason=%s",
                plan.combo.name,
                target.key,
                reason,
            )
            return
        now = time.time()
        board.store.set(
            plan.summary_key,
            {"text": text, "model": target.model_key, "at": now},
            pure.summary_ttl(now, resets_at),
        )
        served = plan.candidate_of.get(target.key, target.key)
        holder = pure.next_holder(plan.declared, served)
        if holder is not None:
            board.store.set(plan.state_key, holder, SESSION_STATE_TTL_SECONDS)
        logger.info(
            "context-relay handoff: combo=%s from=%s to=%s",
            plan.combo.name,
            served,
            holder,
        )
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("context-relay handoff failed: combo=%s", plan.combo.name)
    finally:
        board.store.delete(plan.lock_key)


async def drain(timeout_s: float = 5.0) -> None:
    """Wait for running handoffs (shutdown, tests)."""
    if _tasks:
        await asyncio.wait(set(_tasks), timeout=timeout_s)
