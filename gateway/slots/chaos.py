"""``auto/chaos``: parallel fan-out, first good answer wins (spec 04 §1.4).

The panel is the best-ranked eligible candidate of each provider, in rank order, up
to ``OMNIROUTE_CHAOS_MAX_PANEL`` members (2..10, default 5); under a budget cap
members are added only while their summed estimated cost stays within it.  All
members are sent at once; the first 2xx with content or tool calls (for streams: the
first content delta, which is where ``dispatch`` hands a stream back) wins and is
relayed, the others are cancelled at once and logged ``cancelled`` (neither success
nor failure for health).  Every member counts in ``X-OmniRoute-Attempts``.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING

from gateway.auto import live as auto_glue
from gateway.auto.engine.decide import Decision
from gateway.auto.engine.types import Scored
from gateway.inbound.render import JSONReply
from gateway.kernel.composite import answer_text
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline import upstream as proxy
from gateway.pipeline.context import StreamReply
from gateway.pipeline.dispatch import dispatch
from gateway.pipeline.health import attempt_abandoned, conn_key
from providers.health import board

if TYPE_CHECKING:
    from gateway.kernel.chain import Slot
    from gateway.pipeline.handle import AttemptLoop

DEFAULT_PANEL = 5
PANEL_RANGE = (2, 10)

Finished = tuple[Target, proxy.AttemptResult | proxy.OpenStream | None, float]


def max_panel() -> int:
    try:
        size = int(os.environ.get("OMNIROUTE_CHAOS_MAX_PANEL", DEFAULT_PANEL))
    except ValueError:
        size = DEFAULT_PANEL
    return min(PANEL_RANGE[1], max(PANEL_RANGE[0], size))


def panel(decision: Decision, size: int) -> list[Scored]:
    """One member per provider in rank order, within the budget cap (§1.4)."""
    eligible = decision.eligible
    if decision.budget.get("outcome") == "cheapest" and eligible:
        return [eligible[0]]  # nothing fits: one attempt on the cheapest
    cap = decision.budget.get("cap")
    members: list[Scored] = []
    seen: set[str] = set()
    spent = 0.0
    for item in eligible:
        if item.provider in seen:
            continue
        if cap is not None and spent + item.est_cost_usd > cap:
            continue
        seen.add(item.provider)
        members.append(item)
        spent += item.est_cost_usd
        if len(members) >= size:
            break
    return members


def _good(outcome: proxy.AttemptResult | proxy.OpenStream | None) -> bool:
    if isinstance(outcome, proxy.OpenStream):
        return True
    if outcome is None or outcome.failure is not None or outcome.completion is None:
        return False
    if answer_text(outcome.completion):
        return True
    choices = outcome.completion.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    return isinstance(message, dict) and bool(message.get("tool_calls"))


async def run_chaos(
    loop: AttemptLoop, slot: Slot, index: int, decision: Decision
) -> JSONReply | StreamReply | None:
    by_key = {t.key: t for t in decision.order}
    members = [by_key[s.key] for s in panel(decision, max_panel()) if s.key in by_key]

    tasks: dict[asyncio.Task[Finished], tuple[Target, float]] = {}
    for target in members:
        if loop._skipped(target, index):
            continue
        loop.calls += 1
        loop.attempted.add(target.key)
        tasks[asyncio.create_task(_member(loop, slot, target))] = (target, time.time())
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(
                pending, return_when=asyncio.FIRST_COMPLETED
            )
            winner = await _first_good(loop, done, index)
            if winner is not None:
                await _cancel(loop, pending, tasks, index)
                target, outcome, started = winner
                if isinstance(outcome, proxy.OpenStream):
                    return loop._stream_reply(target, index, outcome, started)
                assert isinstance(outcome, proxy.AttemptResult)
                return loop._settle(target, index, outcome, started)
    except asyncio.CancelledError:
        await _cancel(loop, pending, tasks, index)
        loop.rec.client_closed(499, len(loop.chain) > 1)
        loop.ctx.record(loop.rec)
        raise
    return None


async def _first_good(
    loop: AttemptLoop, done: set[asyncio.Task[Finished]], index: int
) -> Finished | None:
    """Settle the finished members; the first good answer among them wins."""
    winner: Finished | None = None
    for task in done:
        target, outcome, started = task.result()
        if winner is None and _good(outcome):
            winner = (target, outcome, started)
        elif isinstance(outcome, proxy.OpenStream):
            await outcome.generator.aclose()  # a tie: only one stream wins
            _cancelled(loop, target, index, started)
        elif isinstance(outcome, proxy.AttemptResult):
            loop._settle(target, index, outcome, started)
    return winner


async def _member(loop: AttemptLoop, slot: Slot, target: Target) -> Finished:
    """One panel member's call; a self-healing probe is settled here."""
    options = loop._options(slot, target)
    started = time.time()
    connection = conn_key(target)
    if not board.begin(connection, started, options.timeout_ms / 1000):
        return target, None, started
    probe = target.key in loop.probes
    if probe:
        auto_glue.probe_started(target)
    try:
        outcome = await dispatch(
            target,
            loop.attempt_body(target),
            stream=loop.request.stream,
            options=options,
            idle_timeout_ms=loop.ctx.table.settings.stream_idle_timeout_ms,
            created=int(started),
        )
    except asyncio.CancelledError:
        if probe:
            auto_glue.probe_finished(target, "client_cancelled", False)
        raise
    finally:
        board.end(connection)
    if probe:
        failure = getattr(outcome, "failure", None)
        auto_glue.probe_finished(
            target, failure.reason.value if failure else None, _good(outcome)
        )
    return target, outcome, started


async def _cancel(
    loop: AttemptLoop,
    pending: set[asyncio.Task[Finished]],
    tasks: dict[asyncio.Task[Finished], tuple[Target, float]],
    index: int,
) -> None:
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    for task in pending:
        target, started = tasks[task]
        _cancelled(loop, target, index, started)


def _cancelled(loop: AttemptLoop, target: Target, index: int, started: float) -> None:
    """A member that lost the race: logged ``cancelled``, no health effect, and an
    item of the report, so its ``calls`` add up to ``X-OmniRoute-Attempts``."""
    item = Item(
        model=target.model_key,
        slot=index,
        via=target.via,
        status="failed",
        reason="client_cancelled",
        latency_ms=int((time.time() - started) * 1000),
        connection=target.connection.name,
    )
    loop.items.append(item)
    loop.rec.add_attempt(target, item, started, None, result="cancelled")
    attempt_abandoned(target)
