"""Composite slots: ``fusion`` and ``pipeline`` combos (spec 03 §6-7, 02 §5).

A composite slot runs inside the attempt loop as ONE unit and adds ONE report item:
``model`` = the model whose answer was returned (or whose failure ended the slot),
``via`` = the combo name, ``calls`` = the upstream calls made inside, ``latency_ms`` =
the whole slot.  ``X-OmniRoute-Attempts`` counts the inner calls (``loop.calls``).

* A **unit** is one declared target of the combo: a model target (its connections in
  order, under 02 rules) or a combo-ref (its own plan, tried in place).  A ref to
  another fusion or pipeline combo is a ``CompositeUnit``: it runs as a nested
  composite in *answer-only* mode (no streaming, no report item of its own) and
  hands back one ``Answer`` carrying the calls that contributed to it (§4.4).
* **pipeline**: the units are the stages; stage bodies come from
  ``gateway.kernel.composite.stage_body``; a stage without an answer ends the slot.
* **fusion**: panel fan-out (no tools, ``stream: false``), quorum and straggler grace,
  then a judge call over the answers (or the single answer as is).

Invariants: every inner call is an ``AttemptLog`` row (failed ones at once, not
billable; the answering ones when the slot settles, billable when they contributed);
inner skips are reported only when the slot made no call at all (02 §10 then decides);
panel members still running when collection ends are cancelled and logged ``timeout``
with detail ``panel_timeout`` (health counts) or ``straggler_dropped`` (it does not).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gateway.inbound.render import JSONReply
from gateway.kernel import composite as pure
from gateway.kernel.facts import needed_tokens, needs
from gateway.kernel.failover import Item, should_continue
from gateway.kernel.types import (
    ComboInfo,
    ComboTargetInfo,
    CompositeUnit,
    PlannedUnit,
    Strategy,
    Target,
)
from gateway.pipeline import upstream as proxy
from gateway.pipeline.accounting import result_of
from gateway.pipeline.context import StreamReply
from gateway.pipeline.dispatch import dispatch
from gateway.pipeline.filters import pre_call_skip, skip_item
from gateway.pipeline.health import conn_key, record_health
from gateway.planning.combo import RequestFacts, plan_combo, request_facts
from gateway.slots.composite_reply import json_reply, single_stream_reply, stream_reply
from providers.health import Skip, board
from telemetry import metrics
from telemetry.sanitize import sanitize

if TYPE_CHECKING:
    from gateway.kernel.chain import Slot
    from gateway.pipeline.handle import AttemptLoop

COMPOSITE_STRATEGIES = frozenset({Strategy.FUSION, Strategy.PIPELINE})


def is_composite(slot: Slot) -> bool:
    combo = slot.resolved.combo
    return combo is not None and combo.strategy in COMPOSITE_STRATEGIES


@dataclass(slots=True)
class Done:
    """What a composite slot hands back to the attempt loop."""

    reply: JSONReply | StreamReply | None = None
    #: the target whose failure ended the slot (None: no call was made)
    target: Target | None = None
    #: answer-only (nested) composites: the answer, or the failed slot item
    answer: Answer | None = None
    item: Item | None = None


@dataclass(slots=True, kw_only=True)
class Answer:
    """A successful inner call whose billing is decided when the slot settles."""

    target: Target
    item: Item
    started_wall: float
    body: dict[str, Any]
    result: proxy.AttemptResult | None = None
    stream: proxy.OpenStream | None = None
    #: calls of a nested composite that contributed to this answer (billed with it)
    carried: tuple[Answer, ...] = ()

    @property
    def text(self) -> str | None:
        return pure.answer_text(self.result.completion if self.result else None)


@dataclass(slots=True, kw_only=True)
class UnitOutcome:
    answer: Answer | None = None
    #: the last failed item of the unit and its target (None: nothing was called)
    failure: Item | None = None
    target: Target | None = None


def _unit_model(unit: list[PlannedUnit], declared: ComboTargetInfo) -> str:
    if declared.model:
        return declared.model
    return unit[0].model_key if unit else f"combo:{declared.ref}"


@dataclass(slots=True, kw_only=True)
class Composite:
    loop: AttemptLoop
    slot: Slot
    index: int
    combo: ComboInfo
    started_wall: float = field(default_factory=time.time)
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    skips: list[Item] = field(default_factory=list)
    #: ``AttemptLog`` rows logged as billable by this slot
    billed_rows: list[dict[str, Any]] = field(default_factory=list)
    #: detail for members cancelled by the panel collector; None = the client left
    cancel_detail: str | None = None
    #: the composite this one runs inside (a ``CompositeUnit``), if any
    parent: Composite | None = None
    #: nested in another composite: no stream, no report item, hand back the answer
    answer_only: bool = False
    #: a unit of a plan with more targets after it: a failed panel does not end the
    #: request with ``fusion_panel_failed``, the plan goes on
    in_plan: bool = False
    #: the body this composite answers (a stage or panel body when nested)
    given_body: dict[str, Any] | None = None

    @property
    def body(self) -> dict[str, Any]:
        if self.given_body is not None:
            return self.given_body
        return self.loop.request.body

    @property
    def stream(self) -> bool:
        return False if self.answer_only else self.loop.request.stream

    @property
    def dropped_detail(self) -> str | None:
        """Why a cancelled inner call was cancelled (inherited from the parents)."""
        c: Composite | None = self
        while c is not None:
            if c.cancel_detail is not None:
                return c.cancel_detail
            c = c.parent
        return None

    # --- planning -----------------------------------------------------------------

    def _facts(self) -> RequestFacts:
        # members get other bodies (no tools on the panel, stage k's messages):
        # the request-shaped checks run at dispatch, on the body actually sent
        return request_facts(self.body, self.loop.session_key, shaped=False)

    def _plan(self, declared: ComboTargetInfo) -> list[PlannedUnit]:
        table = self.loop.ctx.table
        if declared.ref is not None:
            inner = table.combos.get(declared.ref.lower())
            if inner is None or not inner.active:
                return []
            if inner.strategy in (Strategy.FUSION, Strategy.PIPELINE):
                return [CompositeUnit(combo=inner, via=self.combo.name)]
            combo = inner
        else:
            combo = ComboInfo(
                id=self.combo.id,
                name=self.combo.name,
                strategy=Strategy.PRIORITY,
                targets=(declared,),
                config={},
            )
        plan = plan_combo(table, combo, self._facts())
        for target, skip in plan.skips:
            self._skip(target, skip.reason, skip.retry_after_s, skip.unmet_param)
        self.loop.plans.append(plan)
        return plan.targets

    def units(self) -> list[tuple[str, list[PlannedUnit]]]:
        return [
            (_unit_model(targets, declared), targets)
            for declared in self.combo.targets
            for targets in [self._plan(declared)]
        ]

    def _judge_unit(self) -> list[PlannedUnit]:
        name = self.combo.config.get("judgeModel")
        if not isinstance(name, str) or not name:
            return []
        if "/" in name and not name.lower().startswith("combo/"):
            return self._plan(ComboTargetInfo(model=name))
        return self._plan(ComboTargetInfo(ref=name.split("/", 1)[-1]))

    # --- items and skips ----------------------------------------------------------

    def _skip(
        self,
        target: Target,
        reason: str,
        retry_after_s: float | None = None,
        unmet_param: str | None = None,
    ) -> None:
        self.skips.append(
            skip_item(target, self.index, Skip(reason, retry_after_s, unmet_param))
        )

    def _skipped(
        self, target: Target, body: dict[str, Any], *, repeat_ok: bool = False
    ) -> bool:
        loop = self.loop
        found = pre_call_skip(
            target,
            repeat=target.key in loop.attempted and not repeat_ok,
            failed_connections=loop.failed_connections,
            too_large=loop.too_large,
            needed=lambda: needed_tokens(body),
            wanted=lambda: needs(body),
            now=time.time(),
        )
        if found is None:
            return False
        self.skips.append(skip_item(target, self.index, found))
        return True

    def _item(self, target: Target, **fields: Any) -> Item:
        return Item(
            model=target.model_key,
            slot=self.index,
            via=self.combo.name,
            connection=target.connection.name,
            **fields,
        )

    def _slot_item(self, target: Target, **fields: Any) -> Item:
        fields.setdefault("latency_ms", self._elapsed_ms())
        return self._item(target, calls=self.calls, **fields)

    def _elapsed_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    # --- one unit, one call -------------------------------------------------------

    async def call_unit(
        self,
        unit: list[PlannedUnit],
        body: dict[str, Any],
        *,
        stream: bool,
        need_text: bool,
        repeat_ok: bool = False,
        out: UnitOutcome | None = None,
    ) -> UnitOutcome:
        """Try the unit's targets in order under 02 rules; the first answer wins.

        ``out`` (given by a panel collector) names the target being called while the
        call runs, so a member cancelled mid-call still has one."""
        out = UnitOutcome() if out is None else out
        max_calls = self.loop.ctx.table.settings.max_attempts_per_request
        for target in unit:
            if self.loop.calls >= max_calls:
                break
            if isinstance(target, CompositeUnit):
                done = await self._nested(target, body)
                if done.answer is not None:
                    out.answer = done.answer
                    return out
                if done.target is None:
                    continue
                out.failure, out.target = done.item, done.target
                options = self.loop._options(self.slot, done.target)
                if done.item is not None and not should_continue(
                    done.item.reason or "", options.on
                ):
                    break
                continue
            if self._skipped(target, body, repeat_ok=repeat_ok):
                continue
            options = self.loop._options(self.slot, target)
            connection = conn_key(target)
            if not board.begin(connection, time.time(), options.timeout_ms / 1000):
                self._skip(target, "circuit_open", 1.0)
                continue
            out.target = target
            try:
                answer, failure = await self._call(
                    target, body, stream, options, need_text=need_text
                )
            finally:
                board.end(connection)
            if answer is not None:
                out.answer = answer
                return out
            out.failure, out.target = failure, target
            if failure is not None and not should_continue(
                failure.reason or "", options.on
            ):
                break
        return out

    async def _call(
        self,
        target: Target,
        body: dict[str, Any],
        stream: bool,
        options: Any,
        *,
        need_text: bool,
    ) -> tuple[Answer | None, Item | None]:
        loop = self.loop
        loop.calls += 1
        c: Composite | None = self
        while c is not None:
            c.calls += 1
            c = c.parent
        loop.attempted.add(target.key)
        started_wall = time.time()
        try:
            outcome = await dispatch(
                target,
                body,
                stream=stream,
                options=options,
                idle_timeout_ms=loop.ctx.table.settings.stream_idle_timeout_ms,
                created=int(started_wall),
            )
        except asyncio.CancelledError:
            self._cancelled(target, started_wall)
            raise
        if isinstance(outcome, proxy.OpenStream):
            item = self._item(
                target, status="served", http_status=outcome.result.http_status
            )
            loop.rec.upstream_wait_s += outcome.result.upstream_wait_s
            answer = Answer(
                target=target,
                item=item,
                started_wall=started_wall,
                body=body,
                stream=outcome,
            )
            return answer, None
        return self._settle(target, body, outcome, started_wall, need_text=need_text)

    async def _nested(self, unit: CompositeUnit, body: dict[str, Any]) -> Done:
        """Run a referenced fusion or pipeline combo as one black-box unit."""
        inner = Composite(
            loop=self.loop,
            slot=self.slot,
            index=self.index,
            combo=unit.combo,
            parent=self,
            answer_only=True,
            given_body=body,
            billed_rows=self.billed_rows,
        )
        done = await run_nested(inner)
        if done.answer is not None:
            for plan in self.loop.plans:
                plan.succeeded(unit)
        return done

    def _cancelled(self, target: Target, started_wall: float) -> None:
        detail = self.dropped_detail
        item = self._item(
            target,
            status="failed",
            reason="timeout" if detail else "client_cancelled",
            detail=detail,
            latency_ms=int((time.time() - started_wall) * 1000),
        )
        health = item
        if detail == "straggler_dropped":
            # a dropped straggler says nothing about its connection
            health = dataclasses.replace(item, reason="client_cancelled", detail=None)
        record_health(self.loop.ctx.table, target, health, None)
        self.loop.rec.add_attempt(
            target, item, started_wall, None, result=None if detail else "cancelled"
        )

    def _settle(
        self,
        target: Target,
        body: dict[str, Any],
        outcome: proxy.AttemptResult,
        started_wall: float,
        *,
        need_text: bool,
    ) -> tuple[Answer | None, Item | None]:
        loop = self.loop
        table = loop.ctx.table
        latency = int(outcome.latency_s * 1000)
        loop.rec.upstream_wait_s += outcome.upstream_wait_s
        failure = outcome.failure
        reason = failure.reason.value if failure else None
        detail = failure.detail.value if failure and failure.detail else None
        if failure is None and outcome.completion is None:
            reason, detail = "server_error", "bad_response"
        if reason is None and need_text and not pure.answer_text(outcome.completion):
            reason, detail = "server_error", "empty_output"
        if reason is None:
            item = self._item(
                target,
                status="served",
                latency_ms=latency,
                http_status=outcome.http_status,
            )
            record_health(table, target, item, outcome)
            loop.served(target)
            answer = Answer(
                target=target,
                item=item,
                started_wall=started_wall,
                body=body,
                result=outcome,
            )
            return answer, None
        error = outcome.error
        item = self._item(
            target,
            status="failed",
            reason=reason,
            detail=detail,
            latency_ms=latency,
            http_status=outcome.http_status,
            upstream_message=sanitize(error.message) if error else None,
            upstream_param=error.param if error else None,
        )
        trigger = record_health(table, target, item, outcome)
        loop.rec.add_attempt(target, item, started_wall, outcome, trigger=trigger)
        metrics.bounded(metrics.FAILOVERS, result_of(item.reason, item.detail)).inc()
        if item.reason == "connection_error":
            loop.failed_connections.add(conn_key(target))
        if item.reason == "context_length":
            loop.too_large.add(target.model_key)
        return None, item

    # --- settling the slot ----------------------------------------------------------

    def _bill(self, answer: Answer) -> None:
        """Log a contributing answer as billable (streams are logged at their end)."""
        self.loop.rec.add_attempt(
            answer.target,
            answer.item,
            answer.started_wall,
            answer.result,
            billable=True,
            estimate_body=answer.body,
        )
        self.billed_rows.append(self.loop.rec.attempts[-1])

    def unbilled(self, answer: Answer) -> None:
        """Log an answer that reached no client (a pipeline that failed later)."""
        for carried in answer.carried:
            self.unbilled(carried)
        self.loop.rec.add_attempt(
            answer.target, answer.item, answer.started_wall, answer.result
        )

    def _sum_totals(self) -> None:
        """The request row's cost is the sum of every billable call of the slot (its
        tokens are already summed over every attempt that reported usage by
        ``RunRecord.add_attempt``, spec 06 §1.1)."""
        rows = self.billed_rows
        if not rows:
            return
        rec = self.loop.rec
        costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
        rec.cost = sum(costs, Decimal(0)) if costs else None

    def fail(self, model: str, target: Target | None, item: Item | None) -> Done:
        """The slot failed as a unit; a slot that made no call reports its skips."""
        if self.calls == 0 or target is None:
            if self.parent is not None and self.answer_only:
                self.parent.skips.extend(self.skips)
            else:
                self.loop.items.extend(self.skips)
            return Done()
        reason = item.reason if item is not None else "server_error"
        slot_item = self._slot_item(
            target,
            status="failed",
            reason=reason,
            detail=item.detail if item is not None else None,
            http_status=item.http_status if item is not None else None,
            upstream_message=item.upstream_message if item is not None else None,
            upstream_param=item.upstream_param if item is not None else None,
        )
        slot_item.model = model if item is None else item.model
        if not self.answer_only:
            self.loop.items.append(slot_item)
        return Done(target=target, item=slot_item)

    def _served_target(self, target: Target) -> Target:
        return dataclasses.replace(target, via=self.combo.name)

    def serve(
        self,
        final: Answer,
        contributors: list[Answer],
        *,
        detail: str | None = None,
    ) -> Done:
        """Return ``final``'s response; ``contributors`` are billed with it.

        Answer-only composites hand ``final`` back instead, carrying the other
        contributors so that whoever answers the client bills them all.
        """
        flat = [c for answer in contributors for c in (*answer.carried, answer)]
        flat_final = dataclasses.replace(final, carried=())
        flat = [flat_final if a is final else a for a in flat]
        if self.answer_only:
            others = tuple(a for a in flat if a is not flat_final)
            return Done(answer=dataclasses.replace(final, carried=others))
        for answer in flat:
            if answer is not flat_final:
                self._bill(answer)
        if flat_final.stream is not None:
            reply: JSONReply | StreamReply = stream_reply(self, flat_final, flat)
        elif self.loop.request.stream:
            reply = single_stream_reply(self, flat_final, flat, detail)
        else:
            reply = json_reply(self, flat_final, flat, detail)
        return Done(reply=reply)

    def abandon(self) -> None:
        """The client left while the slot ran: the request ends as closed."""
        self.loop.rec.client_closed(499, len(self.loop.chain) > 1)
        self.loop.ctx.record(self.loop.rec)


async def run_nested(c: Composite) -> Done:
    # imported here: composite_run builds on this module
    from gateway.slots.composite_run import run_body

    return await run_body(c)
