"""The report side of the attempt loop (spec 02 §10-12): the ``omniroute`` object of a
reply, a successful JSON reply, the terminal error when every attempt failed, and the
``model_failover`` event between chain slots.  A mixin of
``gateway.pipeline.handle.AttemptLoop``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from gateway.ids import new_id
from gateway.inbound.render import (
    JSONReply,
    completion_reply,
    error_body,
    error_reply,
    omniroute_headers,
)
from gateway.kernel.failover import Item, terminal
from gateway.kernel.types import Target
from gateway.pipeline import upstream as proxy
from gateway.pipeline.context import refusal
from providers.health import board
from telemetry import metrics
from telemetry.sanitize import VETTED

if TYPE_CHECKING:
    from gateway.auto.engine.decide import Decision
    from gateway.inbound.chat import ChatRequest, RequestError
    from gateway.kernel.chain import Slot
    from gateway.kernel.types import KeyPolicy
    from gateway.pipeline.context import ChatContext
    from gateway.pipeline.record import RunRecord

logger = logging.getLogger("omniroute.gateway")


def _as_sent(slot: Slot) -> str:
    """A chain entry as the client sent it: a smart alias, not its target."""
    return slot.entry.alias or slot.entry.model


class Reporting:
    """Report and reply building over the loop's items, chain and record."""

    ctx: ChatContext
    key: KeyPolicy
    request: ChatRequest
    chain: list[Slot]
    rec: RunRecord
    items: list[Item]
    calls: int
    auto: dict[int, Decision]

    @property
    def route(self) -> str:
        return "chain" if len(self.chain) > 1 else self.chain[0].resolved.route

    def _model_failover(self, index: int) -> None:
        last = next((i for i in reversed(self.items) if i.slot == index), None)
        reason = last.reason if last is not None else "none"
        source = self.chain[index].resolved.identity
        target = self.chain[index + 1].resolved.identity
        metrics.bounded(metrics.MODEL_FAILOVERS, source, target, reason or "none").inc()
        event = {
            "event": "model_failover",
            "id": str(new_id()),
            "occurred_at": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "request_id": str(self.ctx.request_id),
            "api_key": self.key.name,
            "endpoint": self.ctx.endpoint,
            "stream": self.request.stream,
            "to_slot": index + 1,
            "from_model": _as_sent(self.chain[index]),
            "to_model": _as_sent(self.chain[index + 1]),
            "reason": reason,
            "http_status": last.http_status if last is not None else None,
        }
        # the payload's ``api_key`` is the key's name (spec 02 §12), not a secret
        logger.info(
            "model_failover %s", orjson.dumps(event).decode(), extra={VETTED: True}
        )
        self.rec.events.append(event)

    def refused(self, exc: RequestError) -> JSONReply:
        """A gateway refusal met while planning a slot (spec 02 §5): the request ends
        with it, and the items of the earlier slots are listed in ``error.attempts``."""
        self.rec.failover = len(self.chain) > 1  # spec 06 §1.1: a chain ran
        reply = refusal(self.ctx, exc, self.rec)
        reply.headers.extend(
            omniroute_headers(served_model=None, attempts=self.calls, route=self.route)
        )
        if self.items:
            reply.body = orjson.dumps(
                error_body(
                    message=exc.message,
                    error_type=exc.error_type,
                    code=exc.code,
                    param=exc.param,
                    attempts=[i.report() for i in self.items],
                )
            )
        return reply

    def omniroute(self, target: Target) -> dict[str, Any]:
        first = self.chain[0]
        resolved = first.resolved if len(self.chain) == 1 else None
        strategy = None
        served_slot = next(
            (
                s
                for s in self.chain
                if s.resolved.combo is not None and target.via == s.resolved.combo.name
            ),
            None,
        )
        decision = next(
            (d for d in self.auto.values() if d.route.via == target.via), None
        )
        # the serving combo: the one whose plan the target came from, also when
        # that is a combo-ref's (``via`` names it)
        serving = self.ctx.table.combos.get(target.via.lower()) if target.via else None
        if decision is not None:
            strategy = decision.strategy
        elif serving is not None:
            strategy = serving.strategy.value
        elif served_slot is not None and served_slot.resolved.combo is not None:
            strategy = served_slot.resolved.combo.strategy.value
        self.rec.strategy = strategy  # the log row's (spec 06 §1.1)
        data: dict[str, Any] = {
            "requested_model": _as_sent(first),
            "served_model": target.model_key,
            "provider": target.provider.slug,
            "connection": target.connection.name,
            "route": resolved.route if resolved is not None else "chain",
            "strategy": strategy,
        }
        if len(self.chain) > 1:
            served = next((i for i in self.items if i.status == "served"), None)
            data["failover"] = {
                "occurred": bool(served and served.slot > 0),
                "attempts": [i.report() for i in self.items],
            }
        return data

    def _success(
        self,
        target: Target,
        item: Item,
        outcome: proxy.AttemptResult,
        started_wall: float,
    ) -> JSONReply:
        completion = outcome.completion or {}
        completion["model"] = target.model_key
        omni = self.omniroute(target)
        self.rec.add_attempt(
            target,
            item,
            started_wall,
            outcome,
            billable=True,
            estimate_body=self.request.body,
        )
        reply = completion_reply(
            completion,
            omni,
            classic=self.ctx.classic,
            attempts=self.calls,
            overhead_ms=self.rec.overhead_ms(),
        )
        self.rec.succeed(target, 200, self.calls, len(self.chain) > 1)
        self.ctx.record(self.rec)
        return reply

    def nothing_to_call(
        self, exc: RequestError, retry_after_s: float | None
    ) -> JSONReply:
        """No call could be made in the last slot (an ``auto`` pool emptied by its
        filters, every candidate too small): the error with ``error.attempts`` and
        the ``X-OmniRoute-*`` headers, like any answer where nothing was served."""
        self._record_failure(exc.status, exc.code, exc.message)
        return error_reply(
            exc.status,
            message=exc.message,
            error_type=exc.error_type,
            code=exc.code,
            param=exc.param,
            attempts=[i.report() for i in self.items],
            retry_after_s=None
            if retry_after_s is None
            else max(1, round(retry_after_s)),
            headers=omniroute_headers(
                served_model=None, attempts=self.calls, route=self.route
            ),
        )

    def _record_failure(self, status: int, code: str, message: str) -> None:
        """Log a request nothing served; decided without any call, it is also a
        gateway-side refusal (``omniroute_refusals_total``)."""
        self.rec.fail(
            status, code, message, self.calls, len(self.chain) > 1, self.items
        )
        self.rec.strategy = self._route_strategy()
        if self.calls == 0:
            metrics.bounded(metrics.REFUSALS, code).inc()
        self.ctx.record(self.rec)

    def _route_strategy(self) -> str | None:
        """A request nothing served: its combo's or auto route's strategy, if one."""
        if len(self.chain) != 1:
            return None
        decision = self.auto.get(0)
        if decision is not None:
            return decision.strategy
        combo = self.chain[0].resolved.combo
        return combo.strategy.value if combo is not None else None

    def _all_failed(self) -> JSONReply:
        now = time.time()
        waits = [
            board.cooldown_remaining(
                f"{item.model.split('/')[0]}@{item.connection}", now
            )
            for item in self.items
            if item.reason == "rate_limit" and item.status == "failed"
        ]
        known = [w for w in waits if w is not None]
        result = terminal(
            self.items, cooldown_retry_after_s=min(known) if known else None
        )
        attempts = [i.report() for i in self.items]
        self._record_failure(result.status, result.code, result.message)
        headers = omniroute_headers(
            served_model=None, attempts=self.calls, route=self.route
        )
        if self.ctx.classic and result.code == "all_models_failed":
            body = {
                "success": False,
                "error": "All model attempts failed",
                "message": result.message,
                "attempts": attempts,
            }
            if result.retry_after_s is not None:
                headers.append((b"retry-after", str(result.retry_after_s).encode()))
            return JSONReply(
                status=result.status, body=orjson.dumps(body), headers=headers
            )
        return error_reply(
            result.status,
            message=result.message,
            error_type=result.error_type,
            code=result.code,
            param=result.param,
            attempts=attempts,
            retry_after_s=result.retry_after_s,
            headers=headers,
        )
