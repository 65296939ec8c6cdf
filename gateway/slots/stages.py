"""``pipeline`` combos (spec 03 §7): the targets are stages run in order, each stage's
answer feeding the next; with ``agenticOrchestration`` a planner decides, then an
executor (and its backups) answers.  Stage bodies come from ``gateway.kernel.composite``
and ``gateway.kernel.agentic``; a stage without an answer ends the slot.
"""

from __future__ import annotations

from typing import Any

from gateway.kernel import agentic
from gateway.kernel import composite as pure
from gateway.kernel.failover import Item
from gateway.kernel.types import PlannedUnit, Target
from gateway.slots.composite import Answer, Composite, Done


def first_target(unit: list[PlannedUnit]) -> Target | None:
    return next((t for t in unit if isinstance(t, Target)), None)


async def run(c: Composite) -> Done:
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
            return c.fail(model, out.target or first_target(unit), out.failure)
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
            planner_model, decision.target or first_target(planner), decision.failure
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
        return c.fail(model, out.target or first_target(unit), out.failure)
    return c.serve(out.answer, [*before, out.answer])
