"""The committed part of a stream (spec 02 §8): relay, account, end, record.

``StreamRelay.frames(encoder)`` relays the buffered chunks and then the live remainder
of the upstream stream, each with ``model`` rewritten to the served ``provider/model``;
the client wire's encoder (``gateway.inbound``) turns each upstream read's chunks into
one write, and ends the stream with the ``omniroute`` report (and the
``stream_interrupted`` or ``shutting_down`` error when it did not end normally).  Its
``finally`` closes the upstream and records the attempt and the request, also when
the client went away.

Shutdown (spec 08 §4): only the wait for the next upstream chunk is interruptible by
the drain's cut (``gateway.drain``).  A cut there, or a cut flagged while a frame was
being sent, ends the relay: the upstream is closed and the end carries the
``shutting_down`` error next to the report.  The request is logged as ``interrupted``
with reason ``shutting_down``; the attempt as ``cancelled``, with no health effect (the
gateway, not the target, ended it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway import drain
from gateway.dialects import RAW
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline import report, upstream
from gateway.pipeline.health import record_health
from gateway.pipeline.result import Streamed, StreamEncoder, StreamEnd, upstream_id

if TYPE_CHECKING:
    from gateway.pipeline.attempt import Opened
    from gateway.pipeline.run import Run


_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")


def delivered_chars(delta: dict[str, Any]) -> int:
    """Characters of one delta for the usage estimate (spec 02 §11): its text fields
    and the tool-call names and arguments, everything that counts as a token."""
    chars = sum(
        len(value) for name in _TEXT_FIELDS if isinstance(value := delta.get(name), str)
    )
    calls = delta.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            for name in ("name", "arguments"):
                value = function.get(name)
                if isinstance(value, str):
                    chars += len(value)
    return chars


@dataclass(slots=True, kw_only=True)
class StreamRelay:
    """A committed stream: relay, rewrite ``model``, end with the report.

    ``report`` builds the ``omniroute`` object when the stream ends; ``on_end`` (a
    composite's) replaces the request-level record with its own.
    """

    run: Run
    target: Target
    item: Item
    stream: upstream.OpenStream
    started_wall: float
    report: Callable[[Target], dict[str, Any]]
    chars: int = 0
    usage: dict[str, Any] | None = None
    completed: bool = False
    #: the drain's cut ended the relay (spec 08 §4)
    cut: bool = False

    def observe(self, chunk: dict[str, Any]) -> None:
        """Account one canonical chunk: its usage, its delivered characters, and the
        served model."""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if choices:
            for choice in choices:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict):
                    self.chars += delivered_chars(delta)
        chunk["model"] = self.target.model_key

    def _end(self, created: int, chunk_id: str) -> StreamEnd:
        error: dict[str, Any] | None = None
        interrupted = self.stream.interrupted
        if self.cut:
            error = drain.shutdown_error()
        elif interrupted is not None:
            self.item.detail = "stream_interrupted"
            error = {
                "message": f"Upstream stream interrupted ({interrupted.reason.value})",
                "type": "upstream_error",
                "code": "stream_interrupted",
            }
        return StreamEnd(
            chunk_id=chunk_id,
            created=created,
            model=self.target.model_key,
            report=self.report(self.target),
            error=error,
            usage=self.usage,
        )

    async def _next(
        self,
        batches: AsyncGenerator[list[dict[str, Any]], None],
        guard: drain.InFlight,
    ) -> list[dict[str, Any]] | None:
        """The next upstream chunks (one read's); None at the end or at the cut."""
        if guard.stopping:
            self.cut = True
            return None
        guard.interruptible = True
        try:
            return await anext(batches)
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            if not guard.absorb():
                raise
            self.cut = True
            return None
        finally:
            guard.interruptible = False

    async def frames(self, encoder: StreamEncoder) -> AsyncIterator[bytes]:
        run = self.run.rec
        created, chunk_id = int(self.started_wall), f"chatcmpl-{run.request_id.hex}"
        guard = drain.current() or drain.InFlight()  # untracked: never cut
        batches = self.stream.batches()
        try:
            first = True
            while (batch := await self._next(batches, guard)) is not None:
                for chunk in batch:
                    # every chunk carries an id (spec 01): the upstream's, else the
                    # stream's so far (Converse gives none, Gemini none without a
                    # responseId), which the end chunk carries too
                    given = upstream_id(chunk.get("id"))
                    if given is not None:
                        chunk_id = given
                    elif RAW not in chunk:
                        chunk["id"] = chunk_id
                    if isinstance(chunk.get("created"), int):
                        created = chunk["created"]
                    self.observe(chunk)
                # what one upstream read brought goes out in one write
                data = encoder.chunks(batch)
                if not data:
                    continue
                if first:
                    run.mark_ttft()
                    first = False
                yield data
            self.item.latency_ms = int((time.time() - self.started_wall) * 1000)
            yield encoder.end(self._end(created, chunk_id))
            self.completed = True
        finally:
            # Cancelled while a frame was being sent (a client that stopped reading).
            self.cut = self.cut or (guard.stopping and not self.completed)
            await batches.aclose()
            await self.stream.aclose()
            self.finish()

    def _with_delivered(self, usage: dict[str, Any] | None) -> dict[str, Any] | None:
        """A stream broken before its usage chunk: the prompt counts the upstream
        reported, and output at least what was delivered (characters / 4), since
        ``message_start``'s output count is a placeholder (spec 02 §11)."""
        if usage is None:
            return None
        delivered = -(-self.chars // 4)
        reported = usage.get("completion_tokens")
        completion = max(reported if isinstance(reported, int) else 0, delivered)
        prompt = usage.get("prompt_tokens")
        total = (prompt if isinstance(prompt, int) else 0) + completion
        return {**usage, "completion_tokens": completion, "total_tokens": total}

    def health_item(self) -> Item:
        """What the stream did to its connection (a disconnect counts for nothing)."""
        interrupted = self.stream.interrupted
        if self.cut or not self.completed:
            reason, detail = "client_cancelled", None
        elif interrupted is not None:
            reason = interrupted.reason.value
            detail = interrupted.detail.value if interrupted.detail else None
        else:
            reason, detail = None, None
        return Item(
            model=self.item.model,
            slot=self.item.slot,
            via=self.item.via,
            status="failed" if reason else "served",
            reason=reason,
            detail=detail,
            connection=self.item.connection,
        )

    def finish(self) -> None:
        run = self.run
        rec = run.rec
        self.item.latency_ms = int((time.time() - self.started_wall) * 1000)
        result = self.stream.result
        result.latency_s = self.item.latency_ms / 1000
        result.usage = self.usage
        if result.usage is None and result.partial_usage is not None:
            result.usage = self._with_delivered(result.partial_usage())
        health_item = self.health_item()
        trigger = record_health(run.ctx.table, self.target, health_item, result)
        if health_item.reason is None:
            run.served(self.target)
        logged = self.item
        if not self.cut and not self.completed:
            # spec 02 §8: a client that leaves mid-stream cancels the attempt, which is
            # logged as such; what was delivered is still billed
            logged = dataclasses.replace(self.item, reason="client_cancelled")
        rec.add_attempt(
            self.target,
            logged,
            self.started_wall,
            result,
            billable=True,
            estimate_body=run.request.body,
            delivered_chars=self.chars,
            trigger=trigger,
            result="cancelled" if self.cut else None,
        )
        if self.cut:
            rec.interrupt(self.target, run.calls, run.failover, drain.SHUTDOWN_MESSAGE)
            rec.reason = drain.SHUTDOWN_CODE
        elif not self.completed:
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


def relayed(run: Run, opened: Opened) -> Streamed:
    """The result of a stream that committed: its report item joins the run, and
    the relay ends with the report as it stands then."""
    run.items.append(opened.item)
    omni = report.omniroute(run, opened.target)
    relay = StreamRelay(
        run=run,
        target=opened.target,
        item=opened.item,
        stream=opened.stream,
        started_wall=opened.started_wall,
        report=lambda target: report.omniroute(run, target),
    )
    return Streamed(
        relay=relay,
        request=run.request,
        headers=report.stream_headers(run, omni),
        passthrough=opened.stream.result.passthrough,
        served=opened.target,
    )
