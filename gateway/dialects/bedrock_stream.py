"""Amazon Bedrock's ConverseStream (spec 10 §1): AWS event-stream frames decoded into
events, and the events translated into OpenAI chunks, for the ``bedrock`` dialect
(``gateway.dialects.bedrock``, which re-exports what it used to define here).

The body is AWS event-stream frames (``EventStreamDecoder``: botocore's parser,
imported on first use, checks each frame's CRCs); a frame's ``:event-type`` names
the event and its payload is the event's JSON.  ``messageStart`` gives the role
chunk; ``contentBlockStart`` with a ``toolUse`` a call's start; ``contentBlockDelta``
text, reasoning or a piece of a call's ``input`` JSON; ``messageStop`` the finish
chunk; ``metadata`` (after it) the usage-only chunk, and the stream is then
``finished``.  An exception frame (``:message-type: exception``,
``:exception-type: throttlingException``, …) raises ``StreamErrorEvent``,
classified as the same error would be as a reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gateway.dialects.base import JSON, RAW, BadUpstreamResponse, StreamErrorEvent
from gateway.dialects.bedrock_reply import (
    as_dict,
    as_int,
    error_of,
    exception_name,
    map_stop_reason,
    map_usage,
)
from gateway.kernel.sse import SSEEvent

EVENT_STREAM_TYPE = "application/vnd.amazon.eventstream"
#: the event name a decoded exception frame carries
EXCEPTION_EVENT = "exception"


class EventStreamDecoder:
    """AWS event-stream frames -> ``SSEEvent`` values (the frame's ``:event-type``
    and its JSON payload; an exception frame as ``exception`` with
    ``{"__type", "message"}``), checked by botocore's parser (prelude and message
    CRCs); a malformed frame raises ``BadUpstreamResponse``."""

    __slots__ = ("_buffer", "_errors")

    def __init__(self) -> None:
        from botocore.eventstream import (  # first use: off the import path
            EventStreamBuffer,
            ParserError,
        )

        self._buffer = EventStreamBuffer()
        self._errors = ParserError

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer.add_data(chunk)
        events: list[SSEEvent] = []
        try:
            for message in self._buffer:
                events.append(_event(message.headers, message.payload))
        except self._errors as exc:
            raise BadUpstreamResponse(f"malformed event-stream frame: {exc}") from None
        return events

    def flush(self) -> list[SSEEvent]:
        return []


def _event(headers: Mapping[str, Any], payload: bytes) -> SSEEvent:
    kind = headers.get(":message-type", "event")
    if kind == "event":
        return SSEEvent(
            data=payload.decode("utf-8", "replace") or "{}",
            event=str(headers.get(":event-type") or ""),
        )
    try:
        body = json.loads(payload) if payload else {}
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    if kind == "exception":
        name = headers.get(":exception-type")
    else:  # an "error" frame names its code and message in headers
        name = headers.get(":error-code")
        body.setdefault("message", headers.get(":error-message"))
    message = body.get("message", body.get("Message"))
    return SSEEvent(
        data=json.dumps({"__type": name, "message": message or ""}),
        event=EXCEPTION_EVENT,
    )


class BedrockStreamTranslator:
    """ConverseStream events -> OpenAI chunks for one attempt."""

    __slots__ = (
        "_blocks",
        "_calls",
        "_created",
        "_finished",
        "_raw",
        "_started",
        "_usage",
    )

    def __init__(self, *, created: int, raw: bool = False) -> None:
        self._created = created
        self._raw = raw
        self._started = False
        self._finished = False
        self._usage: JSON | None = None
        self._blocks: dict[int, int] = {}  # contentBlockIndex -> tool call position
        self._calls = 0

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        return map_usage(self._usage) if self._usage is not None else None

    def _chunk(self, delta: JSON, finish: str | None = None) -> JSON:
        # no "id": ConverseStream has none, and the gateway's own applies
        return {
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": "",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def _start(self) -> list[JSON]:
        if self._started:
            return []
        self._started = True
        return [self._chunk({"role": "assistant", "content": ""})]

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        chunks = self._translate(event, as_dict(data))
        if self._raw and isinstance(data, dict):
            chunks.insert(0, {RAW: (event, data)})
        return chunks

    def _translate(self, event: str | None, data: JSON) -> list[JSON]:
        if event == EXCEPTION_EVENT:
            raise StreamErrorEvent(
                error_of(exception_name(data.get("__type")), str(data.get("message")))
            )
        if event == "messageStart":
            return self._start()
        if event == "contentBlockStart":
            return self._block_start(data)
        if event == "contentBlockDelta":
            return self._delta(data)
        if event == "messageStop":
            self._finished = True
            reason = map_stop_reason(data.get("stopReason"), self._calls > 0)
            return [*self._start(), self._chunk({}, reason)]
        if event == "metadata" and isinstance(data.get("usage"), dict):
            self._usage = data["usage"]
            chunk = self._chunk({})
            chunk["choices"] = []
            chunk["usage"] = map_usage(self._usage)
            return [chunk]
        return []

    def _block_start(self, data: JSON) -> list[JSON]:
        use = as_dict(as_dict(data.get("start")).get("toolUse"))
        if not use:
            return []
        position = self._calls
        self._calls += 1
        self._blocks[as_int(data.get("contentBlockIndex"))] = position
        start = {
            "index": position,
            "id": str(use.get("toolUseId") or ""),
            "type": "function",
            "function": {"name": str(use.get("name") or ""), "arguments": ""},
        }
        return [*self._start(), self._chunk({"tool_calls": [start]})]

    def _delta(self, data: JSON) -> list[JSON]:
        delta = as_dict(data.get("delta"))
        if isinstance(delta.get("text"), str):
            if not delta["text"]:
                return []
            return [*self._start(), self._chunk({"content": delta["text"]})]
        if "toolUse" in delta:
            piece = as_dict(delta["toolUse"]).get("input")
            position = self._blocks.get(as_int(data.get("contentBlockIndex")))
            if position is None or not isinstance(piece, str) or not piece:
                return []
            call = {"index": position, "function": {"arguments": piece}}
            return [self._chunk({"tool_calls": [call]})]
        reasoning = as_dict(delta.get("reasoningContent"))
        if isinstance(reasoning.get("text"), str) and reasoning["text"]:
            return [
                *self._start(),
                self._chunk({"reasoning_content": reasoning["text"]}),
            ]
        return []
