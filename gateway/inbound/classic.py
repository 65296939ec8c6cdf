"""The classic wire: ``POST /chat/completions`` (spec 01), the OmniRoute envelope.

The body is a Chat Completions body, parsed as on ``/v1/chat/completions``.  A served
answer is ``{"success": true, "data": <completion>, "metadata": <omniroute>}``; a
request where every attempt failed is ``{"success": false, "error": "All model
attempts failed", "message", "attempts"}``; every other error, and streams, are the
Chat Completions wire's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.inbound.base import (
    JSONReply,
    Pipelined,
    Reply,
    bearer_or_api_key,
    with_retry_after,
)
from gateway.inbound.chat import WIRE as CHAT
from gateway.inbound.chat import (
    json_reply,
    model_sent,
    no_empty_arguments,
    parse_chat_request,
    stream_reply,
)
from gateway.kernel.exchange import ChatRequest
from gateway.pipeline.result import Answer, Failure, Result


class ClassicWire(Pipelined):
    paths = frozenset({"/chat/completions", "/chat/completions/"})
    surface = "chat"

    def credential(self, headers: Mapping[str, str]) -> str | None:
        return bearer_or_api_key(headers)

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_chat_request(raw)

    def model_sent(self, raw: bytes) -> str:
        return model_sent(raw)

    def error(self, failure: Failure) -> JSONReply:
        if not failure.all_failed:
            return CHAT.error(failure)
        body: dict[str, Any] = {
            "success": False,
            "error": "All model attempts failed",
            "message": failure.message,
            "attempts": failure.attempts,
        }
        return json_reply(failure.status, body, with_retry_after(failure))

    def render(self, result: Result) -> Reply:
        if isinstance(result, Answer):
            payload = {
                "success": True,
                "data": no_empty_arguments(result.completion),
                "metadata": result.report,
            }
            return json_reply(result.status, payload, result.headers)
        if isinstance(result, Failure):
            return self.error(result)
        return stream_reply(result)


WIRE = ClassicWire()
