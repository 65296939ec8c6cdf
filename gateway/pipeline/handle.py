"""One chat request end to end: auth, validation, the attempt loop, the reply.

``handle_chat(raw, ctx, key)`` returns a ``JSONReply`` or a ``StreamReply``; the front
doors only adapt those to their server.  The attempt loop follows spec 02 §7: slot by
slot, target by target; it moves on after a failure only as ``should_continue``
allows, and a stream is committed (and failover ends) at its first content token.
Every attempt and the request itself are handed to the recorder when the request ends,
also when the client went away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.auto import live as auto_glue
from gateway.auto.engine import healing
from gateway.auto.engine.decide import Decision
from gateway.auto.engine.effort import apply_effort
from gateway.auto.engine.pool import Refusal
from gateway.auto.live import Controls, auto_route, plan_auto, read_controls
from gateway.inbound.chat import (
    ChatRequest,
    RequestError,
    model_sent,
    parse_chat_request,
)
from gateway.inbound.render import JSONReply, stream_headers
from gateway.kernel.chain import (
    ChainError,
    EntrySpec,
    Options,
    Slot,
    build_chain,
    effective_options,
    plan_targets,
    with_defaults,
)
from gateway.kernel.facts import Need, cache_key, needed_tokens, needs
from gateway.kernel.failover import Item, should_continue
from gateway.kernel.relay import with_handoff
from gateway.kernel.resolve import ModelNotFound, UnknownAutoVariant, resolve
from gateway.kernel.types import CompositeUnit, KeyPolicy, PlannedUnit, Target
from gateway.limits import admission as limits
from gateway.pipeline import handoff as relay
from gateway.pipeline import tiers as smart_routes
from gateway.pipeline import upstream as proxy
from gateway.pipeline.accounting import result_of
from gateway.pipeline.context import ChatContext, StreamReply, refusal
from gateway.pipeline.context import refusal as refusal_reply
from gateway.pipeline.dispatch import dispatch
from gateway.pipeline.filters import pre_call_skip, skip_item
from gateway.pipeline.health import conn_key, record_health, remember_good
from gateway.pipeline.record import RunRecord
from gateway.pipeline.report import Reporting
from gateway.pipeline.sessions import request_session, session_key
from gateway.pipeline.stream import StreamBody
from gateway.planning.combo import ComboPlan, plan_combo, request_facts
from gateway.slots.chaos import run_chaos
from gateway.slots.composite import is_composite
from gateway.slots.composite_run import run_composite
from providers.health import Skip, board
from telemetry import metrics
from telemetry.sanitize import sanitize

logger = logging.getLogger("omniroute.gateway")

#: auto refusals that mean "no call could be made", not a gateway refusal (spec 01
#: "When nothing was served"): every candidate filtered out, or all too small
NOTHING_TO_CALL = frozenset({"no_healthy_candidate", "context_length_exceeded"})


async def handle_chat(
    raw: bytes, ctx: ChatContext, key: KeyPolicy
) -> JSONReply | StreamReply:
    run = ctx.start_run(key)
    try:
        request = parse_chat_request(raw)
        run.stream = request.stream
        ctx.streaming(request.stream)
        run.requested_model = request.entries[0].model
        session = request_session(ctx.headers, request, key)
        if session is not None:
            run.session_id, run.session_source = session.id, session.source
        scoped = session_key(key, session)
        warnings: list[str] = []
        # spec 05 §2.1: the chain is built first (a smart alias as sent), then
        # every alias entry is replaced by its tier target, then resolved
        sent = request.entry_specs()
        if not request.explicit_chain:
            sent = with_defaults(ctx.table, key, sent, warnings)
        entries, tier = smart_routes.apply(
            ctx.table, sent, request.body, ctx.headers, scoped, key=key
        )
        if tier is not None:
            run.smart(tier)
        chain = build_chain(ctx.table, key, entries, explicit=True, warnings=warnings)
    except (RequestError, ChainError) as exc:
        if not run.requested_model:
            run.requested_model = model_sent(raw)
        if exc.code == "model_not_allowed":  # resolved, then refused: not unresolved
            run.route = "chain" if len(entries) > 1 else _route_of(ctx, entries[0])
        return _with_tier(refusal(ctx, exc, run), run)
    # spec 06 §1.1: a request refused after resolution (limits) logs its route
    run.route = "chain" if len(chain) > 1 else chain[0].resolved.route
    for warning in warnings:
        logger.warning("failover defaults: %s", warning)
    if limits.applies(key):  # spec 08 §6: before any upstream call
        refused = await limits.admit_request(ctx, key, request.body, chain, run)
        if refused is not None:
            return _with_tier(refused, run)
    loop = AttemptLoop(
        ctx=ctx,
        key=key,
        request=request,
        chain=chain,
        rec=run,
        session_key=scoped,
    )
    try:
        return _with_tier(await loop.run(), run)
    except BaseException:
        if run.limits is not None:  # ended before a record reached the front door
            run.limits(run)
        raise


def _route_of(ctx: ChatContext, entry: EntrySpec) -> str:
    try:
        return resolve(ctx.table, entry.model).route
    except (UnknownAutoVariant, ModelNotFound):
        return "unresolved"


def _with_tier(
    reply: JSONReply | StreamReply, run: RunRecord
) -> JSONReply | StreamReply:
    """Spec 05 §2.4: the tier headers on every answer of a smart alias."""
    if run.tier_outcome is not None:
        reply.headers.extend(run.tier_outcome.headers())
    return reply


@dataclass(slots=True, kw_only=True)
class AttemptLoop(Reporting):
    ctx: ChatContext
    key: KeyPolicy
    request: ChatRequest
    chain: list[Slot]
    rec: RunRecord
    items: list[Item] = field(default_factory=list)
    calls: int = 0
    attempted: set[str] = field(default_factory=set)
    failed_connections: set[str] = field(default_factory=set)
    too_large: set[str] = field(default_factory=set)
    needed: int | None = None
    plans: list[ComboPlan] = field(default_factory=list)
    needs: tuple[Need, ...] | None = None
    #: ``S`` of spec 03 §3 (None: no session)
    session_key: str | None = None
    #: target key -> context-relay handoff summary to hand to it (03 §5.17)
    injected: dict[str, str] = field(default_factory=dict)
    #: auto slots: slot index -> the engine's decision (spec 04)
    auto: dict[int, Decision] = field(default_factory=dict)
    #: candidate keys whose next attempt is a self-healing probe
    probes: set[str] = field(default_factory=set)
    #: targets called although cooling (adaptive's all-cooling choice)
    forced: set[str] = field(default_factory=set)
    controls: Controls | None = None

    async def run(self) -> JSONReply | StreamReply:
        table = self.ctx.table
        self.rec.route = self.route
        self.rec.items = self.items
        max_calls = table.settings.max_attempts_per_request
        warnings: list[str] = []
        if any(auto_route(slot) is not None for slot in self.chain):
            try:  # spec 02 §6.4: header validation ends a request before any call
                self.controls = read_controls(self.ctx.headers)
            except RequestError as exc:
                return refusal_reply(self.ctx, exc, self.rec)
        for index, slot in enumerate(self.chain):
            if is_composite(slot):
                reply = await self._composite(slot, index)
            else:
                reply = await self._slot(slot, index, warnings, max_calls)
            if reply is not None:
                return reply
            if index + 1 < len(self.chain):
                self._model_failover(index)
        for warning in warnings:
            logger.warning("%s", warning)
        return self._all_failed()

    async def _slot(
        self, slot: Slot, index: int, warnings: list[str], max_calls: int
    ) -> JSONReply | StreamReply | None:
        """Try the slot's targets in order; a reply ends the request."""
        planned = await self._plan_slot(slot, index, warnings)
        if isinstance(planned, JSONReply):
            return planned
        decision = self.auto.get(index)
        if decision is not None and decision.chaos and planned:
            return await run_chaos(self, slot, index, decision)
        return await self._walk(slot, index, planned, max_calls)

    async def _walk(
        self, slot: Slot, index: int, planned: list[PlannedUnit], max_calls: int
    ) -> JSONReply | StreamReply | None:
        for position, target in enumerate(planned, 1):
            if self.calls >= max_calls:
                return self._all_failed()
            if isinstance(target, CompositeUnit):
                done = await self._composite_unit(slot, index, target)
                if done is not None:
                    return done
                continue
            if self._skipped(target, index):
                continue
            reply = await self._attempt(slot, index, target)
            if reply is not None:
                return reply
            last = self.items[-1]
            if last.status != "failed":
                continue  # a skip found at the call itself: skips never consult `on`
            if not should_continue(last.reason or "", self._options(slot, target).on):
                return self._all_failed()
            if self.calls < max_calls and (
                position < len(planned) or index + 1 < len(self.chain)
            ):
                # spec 06 §2: a move from a failed attempt to the next target (none
                # once the request's call budget is spent)
                result = result_of(last.reason, last.detail)
                metrics.bounded(metrics.FAILOVERS, result).inc()
        return None

    async def _composite(
        self, slot: Slot, index: int
    ) -> JSONReply | StreamReply | None:
        """A fusion or pipeline slot: one unit, one report item (spec 02 §5)."""
        done = await run_composite(self, slot, index)
        if done.reply is not None:
            return done.reply
        if done.target is not None and not should_continue(
            self.items[-1].reason or "", self._options(slot, done.target).on
        ):
            return self._all_failed()
        return None

    async def _composite_unit(
        self, slot: Slot, index: int, unit: CompositeUnit
    ) -> JSONReply | StreamReply | None:
        """A fusion or pipeline combo referenced by this slot's combo (03 §4.4)."""
        done = await run_composite(self, slot, index, unit.combo, in_plan=True)
        if done.reply is not None:
            for plan in self.plans:
                plan.succeeded(unit)
            return done.reply
        if done.target is not None and not should_continue(
            self.items[-1].reason or "", self._options(slot, done.target).on
        ):
            return self._all_failed()
        return None

    async def _plan_slot(
        self, slot: Slot, index: int, warnings: list[str]
    ) -> list[PlannedUnit] | JSONReply:
        route = auto_route(slot)
        if route is None:
            return self._slot_targets(slot, index, warnings)
        if self.controls is None:
            try:
                self.controls = read_controls(self.ctx.headers)
            except RequestError as exc:
                return self.refused(exc)
        decision = await plan_auto(
            self.ctx.table,
            self.key,
            route,
            self.request.body,
            self.controls,
            self.session_key,
        )
        self.auto[index] = decision
        self.rec.auto_decision = decision.record()
        self.probes |= decision.probes
        refusal = decision.refusal
        if refusal is None:
            return [*decision.order]
        filtered = decision.filtered
        if refusal.code == "no_healthy_candidate" and filtered and filtered.unreachable:
            for target, reason, wait in filtered.unreachable:
                self._skip(target, index, reason, wait)
            return []
        if refusal.code in NOTHING_TO_CALL and index + 1 < len(self.chain):
            return []  # the next chain slot is tried (spec 02 §5)
        return self._refuse(refusal)

    def _refuse(self, refusal: Refusal) -> JSONReply:
        """An auto filter failed closed: the request ends with its error; an empty
        pool (nothing to call) answers with the attempts so far (spec 01)."""
        exc = RequestError(
            refusal.status,
            refusal.code,
            refusal.message,
            param=refusal.param,
            error_type=refusal.error_type,
        )
        if refusal.code in NOTHING_TO_CALL:
            return self.nothing_to_call(exc, refusal.retry_after_s)
        reply = self.refused(exc)
        if refusal.retry_after_s is not None:
            reply.headers.append(
                (b"retry-after", str(max(1, round(refusal.retry_after_s))).encode())
            )
        return reply

    def _slot_targets(
        self, slot: Slot, index: int, warnings: list[str]
    ) -> list[PlannedUnit]:
        """The slot's targets in order; a combo also lists its pre-filtered skips."""
        combo = slot.resolved.combo
        if combo is None:
            affinity = self.ctx.table.settings.promptcache_affinity
            key = cache_key(self.request.body) if affinity else None
            return [*plan_targets(self.ctx.table, slot, warnings, key)]
        plan = plan_combo(
            self.ctx.table, combo, request_facts(self.request.body, self.session_key)
        )
        for target, skip in plan.skips:
            self._skip(target, index, skip.reason, skip.retry_after_s, skip.unmet_param)
        self.plans.append(plan)
        self.injected.update(plan.inject)
        self.forced |= plan.forced
        return plan.targets

    def served(self, target: Target) -> None:
        """State updates of a success: last-known-good, sticky strategy records."""
        remember_good(self.ctx.table, target, self.session_key)
        for plan in self.plans:
            plan.succeeded(target)
            if plan.relays:
                relay.after_success(
                    self.ctx.table, plan.relays, target, self.request.body
                )

    def _options(self, slot: Slot, target: Target) -> Any:
        r = self.request.redundancy
        options = effective_options(
            self.ctx.table,
            self.key,
            slot,
            target,
            (r.timeout_ms, r.first_token_timeout_ms, r.on),
        )
        if target.key in self.probes:  # spec 04 §6: a probe gets a shortened timeout
            cap = healing.PROBE_TIMEOUT_MS
            first = options.first_token_timeout_ms
            options = dataclasses.replace(
                options,
                timeout_ms=min(options.timeout_ms, cap),
                first_token_timeout_ms=min(first, cap) if first is not None else None,
            )
        return options

    def _needed(self) -> int:
        """``R`` of spec 03 §4.2, computed once per request when first asked."""
        if self.needed is None:
            self.needed = needed_tokens(self.request.body)
        return self.needed

    def _needs(self) -> tuple[Need, ...]:
        if self.needs is None:
            self.needs = needs(self.request.body)
        return self.needs

    def _skip(
        self,
        target: Target,
        slot: int,
        reason: str,
        retry_after_s: float | None = None,
        unmet_param: str | None = None,
    ) -> None:
        self.items.append(
            skip_item(target, slot, Skip(reason, retry_after_s, unmet_param))
        )

    def _skipped(self, target: Target, slot: int) -> bool:
        found = pre_call_skip(
            target,
            repeat=target.key in self.attempted,
            failed_connections=self.failed_connections,
            too_large=self.too_large,
            needed=self._needed,
            # an auto slot's pool passed the engine's capability filter, which
            # fails open (spec 04 §2.3 F6): the upstream decides, not a skip here
            wanted=self._needs if slot not in self.auto else lambda: (),
            now=time.time(),
            forced=target.key in self.forced,
        )
        if found is None:
            return False
        self.items.append(skip_item(target, slot, found))
        return True

    async def _attempt(
        self, slot: Slot, index: int, target: Target
    ) -> JSONReply | StreamReply | None:
        options = self._options(slot, target)
        connection = conn_key(target)
        claimed = board.begin(connection, time.time(), options.timeout_ms / 1000)
        if not claimed and target.key not in self.forced:
            # another request took the half-open probe since the check above
            self._skip(target, index, "circuit_open", 1.0)
            return None
        probe = target.key in self.probes
        if probe:
            auto_glue.probe_started(target)
        try:
            reply = await self._call(slot, index, target, options)
        except asyncio.CancelledError:
            if probe:  # the probe stays pending; nothing is in flight any more
                self.probes.discard(target.key)
                auto_glue.probe_finished(target, "client_cancelled", False)
            raise
        finally:
            if claimed:
                board.end(connection)
        if probe:
            self.probes.discard(target.key)
            last = self.items[-1] if self.items else None
            served = last is not None and last.status == "served"
            auto_glue.probe_finished(
                target, last.reason if last is not None else None, served
            )
        return reply

    async def _call(
        self, slot: Slot, index: int, target: Target, options: Options
    ) -> JSONReply | StreamReply | None:
        self.calls += 1
        self.attempted.add(target.key)
        started_wall = time.time()
        progress = proxy.AttemptResult(started=time.perf_counter())
        try:
            outcome = await dispatch(
                target,
                self.attempt_body(target),
                stream=self.request.stream,
                options=options,
                idle_timeout_ms=self.ctx.table.settings.stream_idle_timeout_ms,
                created=int(started_wall),
                result=progress,
            )
        except asyncio.CancelledError:
            self._cancelled(target, index, started_wall, progress)
            raise
        if isinstance(outcome, proxy.OpenStream):
            return self._stream_reply(target, index, outcome, started_wall)
        return self._settle(target, index, outcome, started_wall)

    def attempt_body(self, target: Target) -> dict[str, Any]:
        """The body for one attempt: a relay handoff note, ``X-OmniRoute-Effort``."""
        body = self.request.body
        summary = self.injected.get(target.key)
        if summary is not None:
            body = with_handoff(body, summary)
        effort = self.ctx.headers.get("x-omniroute-effort")
        if effort is not None:
            body = apply_effort(
                body,
                header=effort,
                provider_kind=target.provider.kind.value,
                capabilities=target.model.capabilities,
            )
        return body

    def _cancelled(
        self,
        target: Target,
        index: int,
        started_wall: float,
        progress: proxy.AttemptResult,
    ) -> None:
        waited = max(0.0, time.time() - started_wall)
        self.rec.upstream_wait_s += waited  # overhead excludes the upstream wait
        latency = int(waited * 1000)
        item = Item(
            model=target.model_key,
            slot=index,
            via=target.via,
            status="failed",
            reason="client_cancelled",
            latency_ms=latency,
            http_status=progress.http_status,  # null when no response had come
            connection=target.connection.name,
        )
        self.items.append(item)
        record_health(self.ctx.table, target, item, None)
        self.rec.add_attempt(target, item, started_wall, progress, result="cancelled")
        self.rec.client_closed(499, len(self.chain) > 1)
        self.ctx.record(self.rec)

    def _settle(
        self,
        target: Target,
        index: int,
        outcome: proxy.AttemptResult,
        started_wall: float,
    ) -> JSONReply | None:
        latency = int(outcome.latency_s * 1000)
        self.rec.upstream_wait_s += outcome.upstream_wait_s
        if outcome.failure is None and outcome.completion is not None:
            item = Item(
                model=target.model_key,
                slot=index,
                via=target.via,
                status="served",
                latency_ms=latency,
                http_status=outcome.http_status,
                connection=target.connection.name,
            )
            self.items.append(item)
            record_health(self.ctx.table, target, item, outcome)
            self.served(target)
            return self._success(target, item, outcome, started_wall)
        failure = outcome.failure
        assert failure is not None
        error = outcome.error
        item = Item(
            model=target.model_key,
            slot=index,
            via=target.via,
            status="failed",
            reason=failure.reason.value,
            detail=failure.detail.value if failure.detail else None,
            latency_ms=latency,
            http_status=outcome.http_status,
            connection=target.connection.name,
            upstream_message=sanitize(error.message) if error else None,
            upstream_param=error.param if error else None,
        )
        self.items.append(item)
        trigger = record_health(self.ctx.table, target, item, outcome)
        self.rec.add_attempt(target, item, started_wall, outcome, trigger=trigger)
        for plan in self.plans:
            plan.failed(target)  # e.g. a weighted sticky pin that failed is cleared
        if item.reason == "connection_error":
            self.failed_connections.add(conn_key(target))
        if item.reason == "context_length":
            self.too_large.add(target.model_key)
        return None

    def _stream_reply(
        self, target: Target, index: int, stream: proxy.OpenStream, started_wall: float
    ) -> StreamReply:
        item = Item(
            model=target.model_key,
            slot=index,
            via=target.via,
            status="served",
            http_status=stream.result.http_status,
            connection=target.connection.name,
        )
        self.items.append(item)
        self.rec.upstream_wait_s += stream.result.upstream_wait_s
        omni = self.omniroute(target)
        headers = stream_headers(omni, self.calls)
        body = StreamBody(
            loop=self,
            target=target,
            item=item,
            stream=stream,
            started_wall=started_wall,
        )
        return StreamReply(headers=headers, body=body.frames())


__all__ = ["AttemptLoop", "handle_chat"]
