"""The sequential walk (spec 02 §7): a slot's units tried one after another.

Every ordering strategy, ``adaptive`` and ``auto`` end here: the slot is planned
(``Run.plan_slot``: a direct model's connections, a combo's plan, an auto decision),
then its units are called in order until one answers.  After a failure the walk moves
on only as ``should_continue`` allows, and within the request's call budget; a stream
is committed (and the walk ends) at its first content token.  A fusion or pipeline
combo referenced inside the plan runs as one unit (``Run.composite``); an auto
decision for ``chaos`` hands the slot to the fan-out (``gateway.slots.chaos``).
"""

from __future__ import annotations

from gateway.kernel.chain import Slot
from gateway.kernel.failover import should_continue
from gateway.kernel.types import CompositeUnit, PlannedUnit, Target
from gateway.pipeline import attempt, report
from gateway.pipeline.accounting import result_of
from gateway.pipeline.attempt import Opened, Skipped
from gateway.pipeline.result import Result
from gateway.pipeline.run import Run
from gateway.pipeline.stream import relayed
from gateway.slots.chaos import fan_out
from telemetry import metrics


async def run(run: Run, slot: Slot, index: int, warnings: list[str]) -> Result | None:
    """The slot's answer, the request's end (a refusal, the call budget spent, a
    failure that stops failover), or None: the next slot is tried."""
    plan = await run.plan_slot(slot, index, warnings)
    if plan.error is not None:
        return report.refused(run, plan.error)
    if plan.refusal is not None:
        return report.auto_refusal(run, plan.refusal)
    if plan.decision is not None and plan.decision.chaos and plan.units:
        return await fan_out(run, slot, index, plan.decision)
    return await walk(run, slot, index, plan.units)


async def walk(
    run: Run, slot: Slot, index: int, planned: list[PlannedUnit]
) -> Result | None:
    for position, target in enumerate(planned, 1):
        if not run.calls_left():
            return report.all_failed(run)
        if isinstance(target, CompositeUnit):
            result = await _unit(run, slot, index, target)
        else:
            more = position < len(planned) or index + 1 < len(run.chain)
            result = await _call(run, slot, index, target, more)
        if result is not None:
            return result
    return None


async def _unit(run: Run, slot: Slot, index: int, unit: CompositeUnit) -> Result | None:
    """A fusion or pipeline combo of the plan, run as one unit (spec 03 §4.4)."""
    assert run.composite is not None
    done = await run.composite(run, slot, index, unit.combo, True)
    if done.result is not None:
        run.unit_served(unit)
        return done.result
    if done.target is not None and run.stops(slot, done.target):
        return report.all_failed(run)
    return None


async def _call(
    run: Run, slot: Slot, index: int, target: Target, more: bool
) -> Result | None:
    """One target: its answer, the request's end, or None to go on (``more``: a
    target or slot is left to move to)."""
    skip = run.skip_check(target, index)
    if skip is not None:
        run.skip(target, index, skip)
        return None
    called = await attempt.attempt(
        run,
        slot,
        index,
        target,
        body=run.attempt_body(target),
        stream=run.request.stream,
        via=target.via,
        report=run.items,
    )
    if isinstance(called, Skipped):
        run.skip(target, index, called.skip)
        return None  # a skip found at the call itself: skips never consult `on`
    if isinstance(called, Opened):
        return relayed(run, called)
    run.items.append(called.item)
    if called.served:
        attempt.bill(run, called)
        reply = called.result
        return report.answer(run, target, reply.completion or {}, raw=reply.raw)
    if not should_continue(called.item.reason or "", run.options(slot, target).on):
        return report.all_failed(run)
    if more and run.calls_left():
        # spec 06 §2: a move from a failed attempt to the next target (none once
        # the request's call budget is spent)
        result = result_of(called.item.reason, called.item.detail)
        metrics.bounded(metrics.FAILOVERS, result).inc()
    return None
