"""``fusion`` combos (spec 03 §6): the panel answers in parallel, a judge fuses.

The panel (no tools, ``stream: false``) fans out at once; collection ends at quorum
plus the straggler grace, or at the hard timeout, and the members still running are
cancelled (``panel_timeout`` / ``straggler_dropped``).  Two answers or more go to the
judge (``judgeModel``, else the answering members in order); one answer is returned as
is (``fusion_single_answer``); a failed judge returns the first answer
(``judge_failed``).  With one unit, or tools in the request, the units are tried one
after another instead (the judge first).
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.kernel import composite as pure
from gateway.kernel.failover import Item
from gateway.kernel.types import PlannedUnit, Target
from gateway.pipeline import report
from gateway.pipeline.attempt import Cancel
from gateway.pipeline.result import Failure, omniroute_headers
from gateway.slots.composite import Answer, Composite, Done, UnitOutcome


async def _sequential(
    c: Composite, units: list[list[PlannedUnit]], body: dict[str, Any], *, stream: bool
) -> tuple[Answer | None, Item | None, Target | None]:
    """Try whole units one after another (02 rules between them)."""
    failure: Item | None = None
    last: Target | None = None
    for unit in units:
        out = await c.call_unit(unit, body, stream=stream, need_text=False)
        if out.answer is not None:
            return out.answer, None, None
        if out.failure is not None and out.target is not None:
            failure, last = out.failure, out.target
            if not c.should_continue(failure, last):
                break
    return None, failure, last


async def run(c: Composite) -> Done:  # noqa: PLR0911
    units = [(model, unit) for model, unit in c.units() if unit]
    if not units:
        return c.fail("", None, None)
    if len(units) == 1 or pure.tools_bypass(c.body):
        ordered = [unit for _, unit in units]
        if len(units) > 1:
            judge = c.judge_unit()
            ordered = [judge, *ordered] if judge else ordered
        answer, failure, last = await _sequential(c, ordered, c.body, stream=c.stream)
        if answer is not None:
            return c.serve(answer, [answer])
        return c.fail(units[0][0], last, failure)
    answers, failures = await _collect(c, units)
    if not answers:
        return _panel_failed(c, units, failures)
    ordered_answers = [answers[i] for i in sorted(answers)]
    if len(ordered_answers) == 1:
        only = ordered_answers[0]
        return c.serve(only, [only], detail="fusion_single_answer")
    texts = [a.text or "" for a in ordered_answers]
    judge_body = pure.judge_body(c.body, texts)
    candidates: list[list[PlannedUnit]] = []
    judge_unit = c.judge_unit()
    if judge_unit:
        candidates.append(judge_unit)
    candidates.extend(units[i][1] for i in sorted(answers))
    for unit in candidates:
        out = await c.call_unit(
            unit, judge_body, stream=c.stream, need_text=False, repeat_ok=True
        )
        if out.answer is not None:
            return c.serve(out.answer, [*ordered_answers, out.answer])
        if (
            out.failure is not None
            and out.target is not None
            and not c.should_continue(out.failure, out.target)
        ):
            break
    first = ordered_answers[0]
    return c.serve(first, ordered_answers, detail="judge_failed")


async def _collect(
    c: Composite, units: list[tuple[str, list[PlannedUnit]]]
) -> tuple[dict[int, Answer], dict[int, tuple[Item | None, Target | None]]]:
    """Fan out, wait for quorum + grace or the hard timeout, cancel the rest."""
    tuning = pure.fusion_tuning(c.combo.config)
    body = pure.panel_body(c.body)
    need = pure.quorum(tuning.min_panel, len(units))
    clock = asyncio.get_running_loop().time
    hard_at = clock() + tuning.panel_hard_timeout_ms / 1000
    grace_at: float | None = None
    outs = [UnitOutcome() for _ in units]
    tasks = {
        asyncio.create_task(
            c.call_unit(unit, body, stream=False, need_text=True, out=outs[index])
        ): index
        for index, (_, unit) in enumerate(units)
    }
    answers: dict[int, Answer] = {}
    failures: dict[int, tuple[Item | None, Target | None]] = {}
    pending = set(tasks)
    try:
        while pending:
            deadline = hard_at if grace_at is None else min(hard_at, grace_at)
            remaining = deadline - clock()
            if remaining <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                out = task.result()
                if out.answer is not None:
                    answers[tasks[task]] = out.answer
                else:
                    failures[tasks[task]] = (out.failure, out.target)
            if grace_at is None and len(answers) >= need:
                grace_at = clock() + tuning.straggler_grace_ms / 1000
        if pending:
            hard = grace_at is None or hard_at <= grace_at
            c.cancel_cause = Cancel.PANEL_TIMEOUT if hard else Cancel.STRAGGLER_DROPPED
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in pending:
                failures[tasks[task]] = (
                    Item(
                        model=units[tasks[task]][0],
                        slot=c.index,
                        via=c.combo.name,
                        status="failed",
                        reason="timeout",
                        detail=c.cancel_cause.value,
                    ),
                    outs[tasks[task]].target,  # the call the collector cut
                )
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    return answers, failures


def _panel_failed(
    c: Composite,
    units: list[tuple[str, list[PlannedUnit]]],
    failures: dict[int, tuple[Item | None, Target | None]],
) -> Done:
    run = c.run
    ordered = [failures.get(i, (None, None)) for i in range(len(units))]
    last_target = next((t for _, t in reversed(ordered) if t is not None), None)
    if c.calls == 0 or last_target is None:
        return c.fail("", None, None)
    reasons = [item.reason if item is not None else "skipped" for item, _ in ordered]
    all_rate = all(r == "rate_limit" for r in reasons)
    last_item = next((i for i, _ in reversed(ordered) if i is not None), None)
    slot_item = c.slot_item(
        last_target,
        status="failed",
        reason="rate_limit" if all_rate else "server_error",
        http_status=last_item.http_status if last_item else None,
    )
    if last_item is not None:
        slot_item.model = last_item.model
    if c.answer_only:
        return Done(target=last_target, item=slot_item)
    run.items.append(slot_item)
    if run.failover or c.in_plan:
        return Done(target=last_target, item=slot_item)
    message = "All fusion panel models failed: " + ", ".join(
        f"{(item.model if item is not None else model)}={reason}"
        for (model, _), (item, _), reason in zip(units, ordered, reasons, strict=True)
    )
    report.record_failure(run, 503, "fusion_panel_failed", message)
    failure = Failure(
        status=503,
        code="fusion_panel_failed",
        message=message,
        error_type="upstream_error",
        attempts=[i.report() for i in run.items],
        headers=omniroute_headers(
            served_model=None, attempts=run.calls, route=run.route
        ),
    )
    return Done(result=failure)
