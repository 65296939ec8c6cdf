"""Running composite slots: the pipeline's stages in order, fusion's panel and judge."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from gateway.inbound.render import error_reply, omniroute_headers
from gateway.kernel import agentic
from gateway.kernel import composite as pure
from gateway.kernel.failover import Item, should_continue
from gateway.kernel.types import ComboInfo, PlannedUnit, Strategy, Target
from gateway.slots.composite import Answer, Composite, Done, UnitOutcome

if TYPE_CHECKING:
    from gateway.kernel.chain import Slot
    from gateway.pipeline.handle import AttemptLoop

COMPOSITE_STRATEGIES = frozenset({Strategy.FUSION, Strategy.PIPELINE})


def _first_target(unit: list[PlannedUnit]) -> Target | None:
    return next((t for t in unit if isinstance(t, Target)), None)


async def run_pipeline(c: Composite) -> Done:
    units = c.units()
    enabled, max_rounds = agentic.settings_of(c.combo.config)
    if enabled and len(units) >= 2:  # noqa: PLR2004 - a planner and an executor
        return await run_agentic(c, units, max_rounds)
    count = len(units)
    previous: str | None = None
    contributors: list[Answer] = []
    for index, (model, unit) in enumerate(units):
        final = index == count - 1
        body = pure.stage_body(
            c.body,
            index=index,
            count=count,
            prompt=pure.stage_prompt(c.combo.config, index),
            previous=previous,
        )
        out = await c.call_unit(
            unit, body, stream=final and c.stream, need_text=not final
        )
        if out.answer is None:
            for answer in contributors:
                c.unbilled(answer)
            return c.fail(model, out.target or _first_target(unit), out.failure)
        contributors.append(out.answer)
        previous = out.answer.text
    if not contributors:
        return c.fail("", None, None)
    return c.serve(contributors[-1], contributors)


async def run_agentic(
    c: Composite, units: list[tuple[str, list[PlannedUnit]]], max_rounds: int
) -> Done:
    """Planner, then executor (and backups) as spec 03 §7 "Agentic orchestration"."""
    body = c.body
    planner_model, planner = units[0]
    if not body.get("tools"):
        return await _client_facing(c, planner_model, planner, body, [])
    if agentic.tool_rounds(body.get("messages")) >= max_rounds:
        return await _client_facing(
            c, planner_model, planner, agentic.budget_body(body), []
        )
    decision = await c.call_unit(
        planner, agentic.decision_body(body), stream=False, need_text=True
    )
    if decision.answer is None:
        return c.fail(
            planner_model, decision.target or _first_target(planner), decision.failure
        )
    action, instructions = agentic.parse_decision(decision.answer.text)
    if action == "final" or instructions is None:
        return await _client_facing(
            c,
            planner_model,
            planner,
            agentic.final_body(body),
            [decision.answer],
            repeat_ok=True,
        )
    executor_body = agentic.executor_body(body, instructions)
    failure: Item | None = None
    last: Target | None = None
    last_model = units[1][0]
    for model, unit in units[1:]:
        out = await c.call_unit(unit, executor_body, stream=c.stream, need_text=False)
        if out.answer is not None:
            return c.serve(out.answer, [decision.answer, out.answer])
        failure, last, last_model = out.failure, out.target, model
    c.unbilled(decision.answer)
    return c.fail(last_model, last, failure)


async def _client_facing(
    c: Composite,
    model: str,
    unit: list[PlannedUnit],
    body: dict[str, Any],
    before: list[Answer],
    *,
    repeat_ok: bool = False,
) -> Done:
    out = await c.call_unit(
        unit, body, stream=c.stream, need_text=False, repeat_ok=repeat_ok
    )
    if out.answer is None:
        for answer in before:
            c.unbilled(answer)
        return c.fail(model, out.target or _first_target(unit), out.failure)
    return c.serve(out.answer, [*before, out.answer])


# --- fusion ---------------------------------------------------------------------------


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
            options = c.loop._options(c.slot, last)
            if not should_continue(failure.reason or "", options.on):
                break
    return None, failure, last


async def run_fusion(c: Composite) -> Done:  # noqa: PLR0911
    units = [(model, unit) for model, unit in c.units() if unit]
    if not units:
        return c.fail("", None, None)
    if len(units) == 1 or pure.tools_bypass(c.body):
        ordered = [unit for _, unit in units]
        if len(units) > 1:
            judge = c._judge_unit()
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
    judge_unit = c._judge_unit()
    if judge_unit:
        candidates.append(judge_unit)
    candidates.extend(units[i][1] for i in sorted(answers))
    for unit in candidates:
        out = await c.call_unit(
            unit, judge_body, stream=c.stream, need_text=False, repeat_ok=True
        )
        if out.answer is not None:
            return c.serve(out.answer, [*ordered_answers, out.answer])
        if out.failure is not None and out.target is not None:
            options = c.loop._options(c.slot, out.target)
            if not should_continue(out.failure.reason or "", options.on):
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
            c.cancel_detail = "panel_timeout" if hard else "straggler_dropped"
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
                        detail=c.cancel_detail,
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
    loop = c.loop
    ordered = [failures.get(i, (None, None)) for i in range(len(units))]
    last_target = next(
        (t for _, t in reversed(ordered) if t is not None),
        None,
    )
    if c.calls == 0 or last_target is None:
        return c.fail("", None, None)
    reasons = [item.reason if item is not None else "skipped" for item, _ in ordered]
    all_rate = all(r == "rate_limit" for r in reasons)
    last_item = next((i for i, _ in reversed(ordered) if i is not None), None)
    slot_item = c._slot_item(
        last_target,
        status="failed",
        reason="rate_limit" if all_rate else "server_error",
        http_status=last_item.http_status if last_item else None,
    )
    if last_item is not None:
        slot_item.model = last_item.model
    if c.answer_only:
        return Done(target=last_target, item=slot_item)
    loop.items.append(slot_item)
    if len(loop.chain) > 1 or c.in_plan:
        return Done(target=last_target, item=slot_item)
    message = "All fusion panel models failed: " + ", ".join(
        f"{(item.model if item is not None else model)}={reason}"
        for (model, _), (item, _), reason in zip(units, ordered, reasons, strict=True)
    )
    attempts = [i.report() for i in loop.items]
    loop.rec.fail(503, "fusion_panel_failed", message, loop.calls, False, loop.items)
    loop.ctx.record(loop.rec)
    reply = error_reply(
        503,
        message=message,
        error_type="upstream_error",
        code="fusion_panel_failed",
        attempts=attempts,
        headers=omniroute_headers(
            served_model=None, attempts=loop.calls, route=loop.route
        ),
    )
    return Done(reply=reply)


async def run_body(c: Composite) -> Done:
    if c.combo.strategy is Strategy.FUSION:
        return await run_fusion(c)
    return await run_pipeline(c)


async def run_composite(
    loop: AttemptLoop,
    slot: Slot,
    index: int,
    combo: ComboInfo | None = None,
    *,
    in_plan: bool = False,
) -> Done:
    """A composite slot, or (``combo`` given) a composite ref inside a combo's plan."""
    combo = combo or slot.resolved.combo
    assert combo is not None
    c = Composite(loop=loop, slot=slot, index=index, combo=combo, in_plan=in_plan)
    try:
        return await run_body(c)
    except asyncio.CancelledError:
        c.abandon()
        raise
