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
from typing import Any

from gateway.auto.engine.decide import Decision
from gateway.auto.engine.types import Scored
from gateway.kernel.chain import Slot
from gateway.kernel.composite import answer_text
from gateway.pipeline import attempt, report
from gateway.pipeline.attempt import Cancel, Opened, Outcome, Settled, Skipped
from gateway.pipeline.result import Result
from gateway.pipeline.run import Run
from gateway.pipeline.stream import relayed

DEFAULT_PANEL = 5
PANEL_RANGE = (2, 10)


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


def answers(completion: dict[str, Any] | None) -> bool:
    """A member's 2xx wins only with content or tool calls (§1.4)."""
    if completion is None:
        return False
    if answer_text(completion):
        return True
    choices = completion.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    return isinstance(message, dict) and bool(message.get("tool_calls"))


async def fan_out(
    run: Run, slot: Slot, index: int, decision: Decision
) -> Result | None:
    """Every panel member at once; the first good answer is the request's."""
    by_key = {t.key: t for t in decision.order}
    members = [by_key[s.key] for s in panel(decision, max_panel()) if s.key in by_key]
    cause = [Cancel.CLIENT]  # losers are cancelled as a lost race
    pending: set[asyncio.Task[Outcome]] = set()
    for target in members:
        skip = run.skip_check(target, index)
        if skip is not None:
            run.skip(target, index, skip)
            continue
        call = attempt.attempt(
            run,
            slot,
            index,
            target,
            body=run.attempt_body(target),
            stream=run.request.stream,
            via=target.via,
            report=run.items,
            wants=answers,
            cancel=lambda: cause[0],
        )
        pending.add(asyncio.create_task(call))
    try:
        while pending:
            done, pending = await asyncio.wait(
                pending, return_when=asyncio.FIRST_COMPLETED
            )
            winner = await _first_good(run, index, done)
            if winner is not None:
                cause[0] = Cancel.RACE_LOST
                await _cancel(pending)
                return _result(run, winner)
    except asyncio.CancelledError:
        await _cancel(pending)
        raise
    return None


async def _first_good(
    run: Run, index: int, done: set[asyncio.Task[Outcome]]
) -> Settled | Opened | None:
    """Settle the finished members; the first good answer among them wins."""
    winner: Settled | Opened | None = None
    for task in done:
        outcome = task.result()
        if isinstance(outcome, Skipped):
            run.skip(outcome.target, index, outcome.skip)  # its claim was lost
            continue
        good = isinstance(outcome, Opened) or outcome.served
        if winner is None and good:
            winner = outcome
        elif isinstance(outcome, Opened):
            await attempt.discard(run, outcome, run.items)  # a tie: one stream wins
        elif outcome.served:
            attempt.lost(run, outcome, run.items)
        else:
            run.items.append(outcome.item)
    return winner


async def _cancel(pending: set[asyncio.Task[Outcome]]) -> None:
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def _result(run: Run, winner: Settled | Opened) -> Result:
    if isinstance(winner, Opened):
        return relayed(run, winner)
    run.items.append(winner.item)
    attempt.bill(run, winner)
    result = winner.result
    return report.answer(run, winner.target, result.completion or {}, raw=result.raw)
