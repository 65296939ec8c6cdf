"""Replies of a composite slot (spec 03 §6-7): JSON, a single answer as a stream, and
the relayed stream of the final call, with usage summed over every contributing call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.inbound.render import (
    DONE_FRAME,
    JSONReply,
    completion_reply,
    sse_frame,
    stream_headers,
)
from gateway.kernel import composite as pure
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline.context import StreamReply
from gateway.pipeline.health import record_health
from gateway.pipeline.stream import StreamBody

if TYPE_CHECKING:
    from gateway.slots.composite import Answer, Composite


def usage_of(c: Composite, contributors: list[Answer]) -> dict[str, int] | None:
    return pure.sum_usage(
        a.result.usage if a.result is not None else None for a in contributors
    )


def _settle_served(c: Composite, final: Answer, detail: str | None) -> Target:
    """Bill the answer, total the usage and add the slot's served report item."""
    c._bill(final)
    if detail is not None:  # spec 06 §1.2: the served attempt's row says it too
        c.billed_rows[-1]["detail"] = detail
    c._sum_totals()
    target = c._served_target(final.target)
    slot_item = c._slot_item(
        target, status="served", detail=detail, http_status=final.item.http_status
    )
    c.loop.items.append(slot_item)
    return target


def json_reply(
    c: Composite, final: Answer, contributors: list[Answer], detail: str | None
) -> JSONReply:
    loop = c.loop
    target = _settle_served(c, final, detail)
    assert final.result is not None
    completion = dict(final.result.completion or {})
    completion["model"] = target.model_key
    usage = usage_of(c, contributors)
    if usage is not None:
        completion["usage"] = usage
    reply = completion_reply(
        completion,
        loop.omniroute(target),
        classic=loop.ctx.classic,
        attempts=loop.calls,
        overhead_ms=loop.rec.overhead_ms(),
    )
    loop.rec.succeed(target, 200, loop.calls, len(loop.chain) > 1)
    loop.ctx.record(loop.rec)
    return reply


def single_stream_reply(
    c: Composite, final: Answer, contributors: list[Answer], detail: str | None
) -> StreamReply:
    """A non-streamed answer delivered to a streaming client (spec 03 §6 step 7)."""
    loop = c.loop
    target = _settle_served(c, final, detail)
    assert final.result is not None
    completion = final.result.completion or {}
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content = message.get("content")
    if not isinstance(content, str):
        content = final.text or ""
    base = {
        "id": completion.get("id") or f"chatcmpl-{loop.rec.request_id.hex}",
        "object": "chat.completion.chunk",
        "created": completion.get("created") or int(final.started_wall),
        "model": target.model_key,
    }
    usage = usage_of(c, contributors)
    omni = loop.omniroute(target)
    headers = stream_headers(omni, loop.calls)
    first = {
        **base,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": content},
                "finish_reason": None,
            }
        ],
    }
    finish: dict[str, Any] = {
        **base,
        "choices": [
            {
                "index": 0,
                "delta": {},
                "finish_reason": choice.get("finish_reason") or "stop",
            }
        ],
    }
    tail: dict[str, Any] = {**base, "choices": [], "omniroute": omni}
    if usage is not None and loop.request.include_usage:
        tail["usage"] = usage

    async def frames() -> AsyncIterator[bytes]:
        completed = False
        try:
            loop.rec.mark_ttft()
            yield sse_frame(first)
            yield sse_frame(finish)
            yield sse_frame(tail) + DONE_FRAME
            completed = True
        finally:
            if completed:
                loop.rec.succeed(target, 200, loop.calls, len(loop.chain) > 1)
            else:
                loop.rec.client_closed(200, len(loop.chain) > 1, target)
            loop.ctx.record(loop.rec)

    return StreamReply(headers=headers, body=frames())


def stream_reply(
    c: Composite, final: Answer, contributors: list[Answer]
) -> StreamReply:
    loop = c.loop
    assert final.stream is not None
    target = c._served_target(final.target)
    slot_item = c._slot_item(
        target, status="served", http_status=final.item.http_status
    )
    loop.items.append(slot_item)
    omni = loop.omniroute(target)
    headers = stream_headers(omni, loop.calls)
    body = CompositeStreamBody(
        loop=loop,
        target=target,
        item=slot_item,
        stream=final.stream,
        started_wall=final.started_wall,
        composite=c,
        call_item=final.item,
        call_body=final.body,
        prior=[a for a in contributors if a is not final],
    )
    return StreamReply(headers=headers, body=body.frames())


@dataclass(slots=True, kw_only=True)
class CompositeStreamBody(StreamBody):
    """A committed stream of a composite slot: usage summed, one row per call."""

    composite: Composite
    call_item: Item
    call_body: dict[str, Any]
    prior: list[Answer]
    raw_usage: dict[str, Any] | None = None

    def _prepare(self, chunk: dict[str, Any]) -> bytes | None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.raw_usage = usage
            summed = pure.sum_usage(
                [usage, *(a.result.usage for a in self.prior if a.result is not None)]
            )
            if summed is not None:
                chunk["usage"] = {**usage, **summed}
        return StreamBody._prepare(self, chunk)

    def _finish(self) -> None:
        loop, run = self.loop, self.loop.rec
        self.item.latency_ms = self.composite._elapsed_ms()
        self.call_item.latency_ms = int((time.time() - self.started_wall) * 1000)
        self.call_item.detail = self.item.detail
        result = self.stream.result
        result.latency_s = self.call_item.latency_ms / 1000
        result.usage = self.raw_usage
        health_item = self._health_item()
        trigger = record_health(loop.ctx.table, self.target, health_item, result)
        if health_item.reason is None:
            loop.served(self.target)
        run.add_attempt(
            self.target,
            self.call_item,
            self.started_wall,
            result,
            billable=True,
            estimate_body=self.call_body,
            delivered_chars=self.chars,
            trigger=trigger,
        )
        self.composite.billed_rows.append(run.attempts[-1])
        self.composite._sum_totals()
        failover = len(loop.chain) > 1
        if not self.completed:
            run.client_closed(200, failover, self.target)
        elif self.stream.interrupted is not None:
            run.interrupt(
                self.target, loop.calls, failover, self.stream.interrupted_error or ""
            )
        else:
            run.succeed(self.target, 200, loop.calls, failover)
        loop.ctx.record(run)


# --- pipeline -------------------------------------------------------------------------
