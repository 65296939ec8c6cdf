"""What ``fusion`` and ``pipeline`` share (spec 03 §6-7, 02 §5): a composite unit.

A composite slot runs as ONE unit and adds ONE report item: ``model`` = the model
whose answer was returned (or whose failure ended the slot), ``via`` = the combo name,
``calls`` = the upstream calls made inside, ``latency_ms`` = the whole slot.
``X-OmniRoute-Attempts`` counts the inner calls (``run.calls``).

* A **unit** is one declared target of the combo: a model target (its connections in
  order, under 02 rules) or a combo-ref (its own plan, tried in place).  A ref to
  another fusion or pipeline combo is a ``CompositeUnit``: it runs as a nested
  composite in *answer-only* mode (no streaming, no report item of its own) and hands
  back one ``Answer`` carrying the calls that contributed to it (§4.4).
* Every inner call is one ``gateway.pipeline.attempt`` call: failed ones are logged at
  once, not billable; the answering ones when the slot settles, billable when they
  contributed.  Inner skips are reported only when the slot made no call at all (02
  §10 then decides); panel members still running when collection ends are cancelled
  and logged ``timeout`` with detail ``panel_timeout`` (health counts) or
  ``straggler_dropped`` (it does not).
* The slot's result: a JSON answer with the usage summed over every contributing
  call, a non-streamed answer given to a streaming client as a short stream, or the
  relayed stream of the final call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gateway.kernel import composite as pure
from gateway.kernel.chain import Slot
from gateway.kernel.failover import Item, should_continue
from gateway.kernel.types import (
    ComboInfo,
    ComboTargetInfo,
    CompositeUnit,
    PlannedUnit,
    Target,
)
from gateway.pipeline import attempt, report
from gateway.pipeline.accounting import result_of
from gateway.pipeline.attempt import Cancel, Opened, Settled, Skipped
from gateway.pipeline.filters import skip_item
from gateway.pipeline.health import record_health
from gateway.pipeline.result import (
    Result,
    Streamed,
    StreamEncoder,
    StreamEnd,
    upstream_id,
)
from gateway.pipeline.run import Run
from gateway.pipeline.stream import StreamRelay
from gateway.planning.combo import plan_combo
from gateway.planning.plan import RequestFacts, request_facts
from gateway.planning.strategies import COMPOSITE
from providers.health import Skip
from telemetry import metrics


def is_composite(combo: ComboInfo | None) -> bool:
    return combo is not None and combo.strategy in COMPOSITE


@dataclass(slots=True, kw_only=True)
class Answer:
    """A successful inner call whose billing is decided when the slot settles."""

    call: Settled | Opened
    #: calls of a nested composite that contributed to this answer (billed with it)
    carried: tuple[Answer, ...] = ()

    @property
    def target(self) -> Target:
        return self.call.target

    @property
    def item(self) -> Item:
        return self.call.item

    @property
    def result(self) -> Any:
        return self.call.result if isinstance(self.call, Settled) else None

    @property
    def text(self) -> str | None:
        result = self.result
        return pure.answer_text(result.completion if result else None)


@dataclass(slots=True)
class Done:
    """What a composite hands back: a result, or (nested) its answer or failure."""

    result: Result | None = None
    #: the target whose failure ended the slot (None: no call was made)
    target: Target | None = None
    answer: Answer | None = None
    item: Item | None = None


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


def has_text(completion: dict[str, Any] | None) -> bool:
    return bool(pure.answer_text(completion))


#: how a composite strategy runs its combo: its module's ``run`` (``gateway.slots``)
Body = Callable[["Composite"], Awaitable[Done]]


@dataclass(slots=True, kw_only=True)
class Composite:
    run: Run
    slot: Slot
    index: int
    combo: ComboInfo
    #: composite strategy -> how it runs (nested composites run by the same table)
    bodies: Mapping[str, Body]
    started: float = field(default_factory=time.perf_counter)
    calls: int = 0
    skips: list[Item] = field(default_factory=list)
    #: ``AttemptLog`` rows logged as billable by this slot
    billed_rows: list[dict[str, Any]] = field(default_factory=list)
    #: why members were cancelled by the panel collector; None = the client left
    cancel_cause: Cancel | None = None
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
        return self.run.request.body

    @property
    def stream(self) -> bool:
        return False if self.answer_only else self.run.request.stream

    def cause(self) -> Cancel:
        """Why a cancelled inner call was cancelled (inherited from the parents)."""
        c: Composite | None = self
        while c is not None:
            if c.cancel_cause is not None:
                return c.cancel_cause
            c = c.parent
        return Cancel.CLIENT

    def _counted(self) -> None:
        c: Composite | None = self
        while c is not None:
            c.calls += 1
            c = c.parent

    # --- planning -----------------------------------------------------------------

    def _facts(self) -> RequestFacts:
        # members get other bodies (no tools on the panel, stage k's messages):
        # the request-shaped checks run at dispatch, on the body actually sent
        return request_facts(self.body, self.run.session_key, shaped=False)

    def _plan(self, declared: ComboTargetInfo) -> list[PlannedUnit]:
        table = self.run.ctx.table
        if declared.ref is not None:
            inner = table.combos.get(declared.ref.lower())
            if inner is None or not inner.active:
                return []
            if inner.strategy in COMPOSITE:
                return [CompositeUnit(combo=inner, via=self.combo.name)]
            combo = inner
        else:
            combo = ComboInfo(
                id=self.combo.id,
                name=self.combo.name,
                strategy="priority",
                targets=(declared,),
                config={},
            )
        plan = plan_combo(table, combo, self._facts())
        for target, skip in plan.skips:
            self._skip(target, skip)
        self.run.plans.append(plan)
        return plan.targets

    def units(self) -> list[tuple[str, list[PlannedUnit]]]:
        return [
            (_unit_model(targets, declared), targets)
            for declared in self.combo.targets
            for targets in [self._plan(declared)]
        ]

    def judge_unit(self) -> list[PlannedUnit]:
        name = self.combo.config.get("judgeModel")
        if not isinstance(name, str) or not name:
            return []
        if "/" in name and not name.lower().startswith("combo/"):
            return self._plan(ComboTargetInfo(model=name))
        return self._plan(ComboTargetInfo(ref=name.split("/", 1)[-1]))

    # --- items --------------------------------------------------------------------

    def _skip(self, target: Target, skip: Skip) -> None:
        self.skips.append(skip_item(target, self.index, skip))

    def slot_item(self, target: Target, **fields: Any) -> Item:
        fields.setdefault("latency_ms", self.elapsed_ms())
        return Item(
            model=target.model_key,
            slot=self.index,
            via=self.combo.name,
            connection=target.connection.name,
            calls=self.calls,
            **fields,
        )

    def elapsed_ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)

    def should_continue(self, failure: Item, target: Target) -> bool:
        return should_continue(
            failure.reason or "", self.run.options(self.slot, target).on
        )

    # --- one unit -----------------------------------------------------------------

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
        run = self.run
        for target in unit:
            if not run.calls_left():
                break
            if isinstance(target, CompositeUnit):
                done = await self._nested(target, body)
                if done.answer is not None:
                    out.answer = done.answer
                    return out
                if done.target is None:
                    continue
                out.failure, out.target = done.item, done.target
                if done.item is not None and not self.should_continue(
                    done.item, done.target
                ):
                    break
                continue
            skip = run.skip_check(target, self.index, body, repeat_ok=repeat_ok)
            if skip is not None:
                self._skip(target, skip)
                continue
            out.target = target
            called = await attempt.attempt(
                run,
                self.slot,
                self.index,
                target,
                body=body,
                stream=stream,
                via=self.combo.name,
                report=None,
                wants=has_text if need_text else None,
                cancel=self.cause,
                counted=self._counted,
            )
            if isinstance(called, Skipped):
                self._skip(target, called.skip)
                continue
            if isinstance(called, Opened) or called.served:
                out.answer = Answer(call=called)
                return out
            metrics.bounded(
                metrics.FAILOVERS, result_of(called.item.reason, called.item.detail)
            ).inc()
            out.failure = called.item
            if not self.should_continue(called.item, target):
                break
        return out

    async def _nested(self, unit: CompositeUnit, body: dict[str, Any]) -> Done:
        """Run a referenced fusion or pipeline combo as one black-box unit."""
        inner = Composite(
            run=self.run,
            slot=self.slot,
            index=self.index,
            combo=unit.combo,
            bodies=self.bodies,
            parent=self,
            answer_only=True,
            given_body=body,
            billed_rows=self.billed_rows,
        )
        done = await self.bodies[unit.combo.strategy](inner)
        if done.answer is not None:
            self.run.unit_served(unit)
        return done

    # --- settling the slot ----------------------------------------------------------

    def _bill(self, answer: Answer) -> None:
        """Log a contributing answer as billable (streams are logged at their end)."""
        assert isinstance(answer.call, Settled)
        self.billed_rows.append(attempt.bill(self.run, answer.call))

    def unbilled(self, answer: Answer) -> None:
        """Log an answer that reached no client (a pipeline that failed later)."""
        for carried in answer.carried:
            self.unbilled(carried)
        if isinstance(answer.call, Settled):
            attempt.unbilled(self.run, answer.call)

    def sum_totals(self) -> None:
        """The request row's cost is the sum of every billable call of the slot (its
        tokens are already summed over every attempt that reported usage by
        ``RunRecord.add_attempt``, spec 06 §1.1)."""
        rows = self.billed_rows
        if not rows:
            return
        costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
        self.run.rec.cost = sum(costs, Decimal(0)) if costs else None

    def fail(self, model: str, target: Target | None, item: Item | None) -> Done:
        """The slot failed as a unit; a slot that made no call reports its skips."""
        if self.calls == 0 or target is None:
            if self.parent is not None and self.answer_only:
                self.parent.skips.extend(self.skips)
            else:
                self.run.items.extend(self.skips)
            return Done()
        slot_item = self.slot_item(
            target,
            status="failed",
            reason=item.reason if item is not None else "server_error",
            detail=item.detail if item is not None else None,
            http_status=item.http_status if item is not None else None,
            upstream_message=item.upstream_message if item is not None else None,
            upstream_param=item.upstream_param if item is not None else None,
        )
        slot_item.model = model if item is None else item.model
        if not self.answer_only:
            self.run.items.append(slot_item)
        return Done(target=target, item=slot_item)

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
        if isinstance(flat_final.call, Opened):
            return Done(result=self._relayed(flat_final.call, flat))
        if self.run.request.stream:
            return Done(result=self._single_stream(flat_final, flat, detail))
        return Done(result=self._answer(flat_final, flat, detail))

    # --- the slot's result ----------------------------------------------------------

    def _settle_served(self, final: Answer, detail: str | None) -> Target:
        """Bill the answer, total the usage and add the slot's served report item."""
        self._bill(final)
        if detail is not None:  # spec 06 §1.2: the served attempt's row says it too
            self.billed_rows[-1]["detail"] = detail
        self.sum_totals()
        target = dataclasses.replace(final.target, via=self.combo.name)
        self.run.items.append(
            self.slot_item(
                target,
                status="served",
                detail=detail,
                http_status=final.item.http_status,
            )
        )
        return target

    def _answer(
        self, final: Answer, contributors: list[Answer], detail: str | None
    ) -> Result:
        target = self._settle_served(final, detail)
        completion = dict(final.result.completion or {})
        return report.answer(self.run, target, completion, usage_of(contributors))

    def _single_stream(
        self, final: Answer, contributors: list[Answer], detail: str | None
    ) -> Result:
        """A non-streamed answer delivered to a streaming client (spec 03 §6 step 7)."""
        run = self.run
        target = self._settle_served(final, detail)
        completion = final.result.completion or {}
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        content = message.get("content")
        if not isinstance(content, str):
            content = final.text or ""
        chunk_id = (
            upstream_id(completion.get("id")) or f"chatcmpl-{run.rec.request_id.hex}"
        )
        created = completion.get("created") or int(final.call.started_wall)
        base: dict[str, Any] = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": target.model_key,
        }
        delta = {"role": "assistant", "content": content}
        chunks: list[dict[str, Any]] = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": choice.get("finish_reason") or "stop",
                    }
                ],
            },
        ]
        omni = report.omniroute(run, target)
        relay = _Delivered(
            run=run,
            target=target,
            chunks=chunks,
            end=StreamEnd(
                chunk_id=chunk_id,
                created=int(created),
                model=target.model_key,
                report=omni,
                usage=usage_of(contributors),
            ),
        )
        return Streamed(
            relay=relay, request=run.request, headers=report.stream_headers(run, omni)
        )

    def _relayed(self, final: Opened, contributors: list[Answer]) -> Result:
        run = self.run
        target = dataclasses.replace(final.target, via=self.combo.name)
        slot_item = self.slot_item(
            target, status="served", http_status=final.item.http_status
        )
        run.items.append(slot_item)
        omni = report.omniroute(run, target)
        relay = CompositeRelay(
            run=run,
            target=target,
            item=slot_item,
            stream=final.stream,
            started_wall=final.started_wall,
            report=lambda t: report.omniroute(run, t),
            composite=self,
            call_item=final.item,
            call_body=final.body,
            prior=[a for a in contributors if a.call is not final],
        )
        return Streamed(
            relay=relay, request=run.request, headers=report.stream_headers(run, omni)
        )


def usage_of(contributors: list[Answer]) -> dict[str, int] | None:
    return pure.sum_usage(
        a.result.usage if a.result is not None else None for a in contributors
    )


@dataclass(slots=True, kw_only=True)
class _Delivered:
    """A whole answer sent as a stream: its chunks, then its end."""

    run: Run
    target: Target
    chunks: list[dict[str, Any]]
    end: StreamEnd

    async def frames(self, encoder: StreamEncoder) -> AsyncIterator[bytes]:
        rec, completed = self.run.rec, False
        try:
            rec.mark_ttft()
            yield encoder.chunks(self.chunks)
            yield encoder.end(self.end)
            completed = True
        finally:
            if completed:
                rec.succeed(self.target, 200, self.run.calls, self.run.failover)
            else:
                rec.client_closed(200, self.run.failover, self.target)
            self.run.ctx.record(rec)


@dataclass(slots=True, kw_only=True)
class CompositeRelay(StreamRelay):
    """A committed stream of a composite slot: usage summed, one row per call."""

    composite: Composite
    call_item: Item
    call_body: dict[str, Any]
    prior: list[Answer]
    raw_usage: dict[str, Any] | None = None

    def observe(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.raw_usage = usage
            summed = pure.sum_usage(
                [usage, *(a.result.usage for a in self.prior if a.result is not None)]
            )
            if summed is not None:
                chunk["usage"] = {**usage, **summed}
        StreamRelay.observe(self, chunk)

    def finish(self) -> None:
        run, rec = self.run, self.run.rec
        self.item.latency_ms = self.composite.elapsed_ms()
        self.call_item.latency_ms = int((time.time() - self.started_wall) * 1000)
        self.call_item.detail = self.item.detail
        result = self.stream.result
        result.latency_s = self.call_item.latency_ms / 1000
        result.usage = self.raw_usage
        health_item = self.health_item()
        trigger = record_health(run.ctx.table, self.target, health_item, result)
        if health_item.reason is None:
            run.served(self.target)
        rec.add_attempt(
            self.target,
            self.call_item,
            self.started_wall,
            result,
            billable=True,
            estimate_body=self.call_body,
            delivered_chars=self.chars,
            trigger=trigger,
        )
        self.composite.billed_rows.append(rec.attempts[-1])
        self.composite.sum_totals()
        if not self.completed:
            rec.client_closed(200, run.failover, self.target)
        elif self.stream.interrupted is not None:
            rec.interrupt(
                self.target,
                run.calls,
                run.failover,
                self.stream.interrupted_error or "",
            )
        else:
            rec.succeed(self.target, 200, run.calls, run.failover)
        run.ctx.record(rec)
