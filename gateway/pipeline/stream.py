"""The committed part of a stream (spec 02 §8): relay, rewrite, end, record.

``StreamBody.frames()`` yields the buffered chunks and then the live remainder of the
upstream stream, each with ``model`` rewritten to the served ``provider/model``, hides
the usage-only chunk from clients that did not ask for usage, and ends with the chunk
carrying the ``omniroute`` object (or the ``stream_interrupted`` error chunk) and
``data: [DONE]``.  Its ``finally`` closes the upstream and records the attempt and the
request, also when the client went away.

Shutdown (spec 08 §4): only the wait for the next upstream chunk is interruptible by
the drain's cut (``gateway.drain``).  A cut there, or a cut flagged while a frame was
being sent, ends the relay: the upstream is closed and the final chunk carries the
``shutting_down`` error next to the ``omniroute`` object.  The request is logged as
``interrupted`` with reason ``shutting_down``; the attempt as ``cancelled``, with no
health effect (the gateway, not the target, ended it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway import drain
from gateway.inbound.render import DONE_FRAME, sse_frame
from gateway.kernel.failover import Item
from gateway.kernel.types import Target
from gateway.pipeline import upstream as proxy
from gateway.pipeline.health import record_health

if TYPE_CHECKING:
    from gateway.pipeline.handle import AttemptLoop


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
class StreamBody:
    """A committed stream: relay, rewrite ``model``, end with ``omniroute``."""

    loop: AttemptLoop
    target: Target
    item: Item
    stream: proxy.OpenStream
    started_wall: float
    chars: int = 0
    usage: dict[str, Any] | None = None
    completed: bool = False
    #: the drain's cut ended the relay (spec 08 §4)
    cut: bool = False

    def _prepare(self, chunk: dict[str, Any]) -> bytes | None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not self.loop.request.include_usage and "usage" in chunk:
            if not choices and usage is not None:
                return None  # the usage-only chunk the client did not ask for
            del chunk["usage"]  # also when an upstream puts it on a content chunk
        if choices:
            for choice in choices:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict):
                    self.chars += delivered_chars(delta)
        chunk["model"] = self.target.model_key
        return sse_frame(chunk)

    def _tail(self, created: int, chunk_id: str) -> bytes:
        tail: dict[str, Any] = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.target.model_key,
            "choices": [],
        }
        interrupted = self.stream.interrupted
        if self.cut:
            tail["error"] = drain.shutdown_error()
        elif interrupted is not None:
            self.item.detail = "stream_interrupted"
            tail["error"] = {
                "message": f"Upstream stream interrupted ({interrupted.reason.value})",
                "type": "upstream_error",
                "code": "stream_interrupted",
            }
        tail["omniroute"] = self.loop.omniroute(self.target)
        if self.loop.request.include_usage and self.usage is not None:
            # the usage again on the last chunk: clients that keep the last chunk's
            # usage (the openai SDK's stream helper) still see it
            tail["usage"] = self.usage
        return sse_frame(tail) + DONE_FRAME

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

    async def frames(self) -> AsyncIterator[bytes]:
        run = self.loop.rec
        created, chunk_id = int(self.started_wall), f"chatcmpl-{run.request_id.hex}"
        guard = drain.current() or drain.InFlight()  # untracked: never cut
        batches = self.stream.batches()
        try:
            first = True
            while (batch := await self._next(batches, guard)) is not None:
                frames = []
                for chunk in batch:
                    if isinstance(chunk.get("id"), str):
                        chunk_id = chunk["id"]
                    if isinstance(chunk.get("created"), int):
                        created = chunk["created"]
                    frame = self._prepare(chunk)
                    if frame is not None:
                        frames.append(frame)
                if not frames:
                    continue
                if first:
                    run.mark_ttft()
                    first = False
                # what one upstream read brought goes out in one write
                yield frames[0] if len(frames) == 1 else b"".join(frames)
            self.item.latency_ms = int((time.time() - self.started_wall) * 1000)
            yield self._tail(created, chunk_id)
            self.completed = True
        finally:
            # Cancelled while a frame was being sent (a client that stopped reading).
            self.cut = self.cut or (guard.stopping and not self.completed)
            await batches.aclose()
            await self.stream.aclose()
            self._finish()

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

    def _health_item(self) -> Item:
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

    def _finish(self) -> None:
        run = self.loop.rec
        self.item.latency_ms = int((time.time() - self.started_wall) * 1000)
        result = self.stream.result
        result.latency_s = self.item.latency_ms / 1000
        result.usage = self.usage
        if result.usage is None and result.partial_usage is not None:
            result.usage = self._with_delivered(result.partial_usage())
        health_item = self._health_item()
        trigger = record_health(self.loop.ctx.table, self.target, health_item, result)
        if health_item.reason is None:
            self.loop.served(self.target)
        logged = self.item
        if not self.cut and not self.completed:
            # spec 02 §8: a client that leaves mid-stream cancels the attempt, which is
            # logged as such; what was delivered is still billed
            logged = dataclasses.replace(self.item, reason="client_cancelled")
        run.add_attempt(
            self.target,
            logged,
            self.started_wall,
            result,
            billable=True,
            estimate_body=self.loop.request.body,
            delivered_chars=self.chars,
            trigger=trigger,
            result="cancelled" if self.cut else None,
        )
        if self.cut:
            run.interrupt(
                self.target,
                self.loop.calls,
                len(self.loop.chain) > 1,
                drain.SHUTDOWN_MESSAGE,
            )
            run.reason = drain.SHUTDOWN_CODE
        elif not self.completed:
            run.client_closed(200, len(self.loop.chain) > 1, self.target)
        elif self.stream.interrupted is not None:
            run.interrupt(
                self.target,
                self.loop.calls,
                len(self.loop.chain) > 1,
                self.stream.interrupted_error or "",
            )
        else:
            run.succeed(self.target, 200, self.loop.calls, len(self.loop.chain) > 1)
        self.loop.ctx.record(run)
