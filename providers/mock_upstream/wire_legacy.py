"""The mock's smaller wires: OpenAI legacy Completions (``/completions``:
``text_completion`` objects and chunks, one choice per prompt) and Anthropic's
``/messages/count_tokens`` (``{"input_tokens": n}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from providers.mock_upstream.core import MockBehaviour
from providers.mock_upstream.reply import _Call, _error_kind, _Frames


def _prompts(request: Mapping[str, Any]) -> int:
    prompt = request.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return len(prompt)
    return 1


class _CompletionsWire:
    """Legacy Completions: ``choices[].text``; streams end with ``[DONE]``."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _error_kind(status)
        return {
            "error": {"message": message, "type": kind, "param": None, "code": code}
        }

    def _head(self, call: _Call) -> dict[str, Any]:
        return {
            "id": f"cmpl-mock-{call.reply_id}",
            "object": "text_completion",
            "created": call.created,
            "model": call.model,
        }

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        text = "".join(tokens)
        reply = self._head(call)
        reply["choices"] = [
            {"text": text, "index": index, "logprobs": None, "finish_reason": "stop"}
            for index in range(_prompts(call.request))
        ]
        if behaviour.usage:
            completion = len(tokens) * len(reply["choices"])
            reply["usage"] = {
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": call.prompt_tokens + completion,
            }
        return reply

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        head = self._head(call)

        def chunk(text: str, finish: str | None = None) -> bytes:
            choice = {
                "text": text,
                "index": 0,
                "logprobs": None,
                "finish_reason": finish,
            }
            return b"data: " + orjson.dumps({**head, "choices": [choice]}) + b"\n\n"

        pieces = [chunk(token) for token in tokens]
        tail = chunk("", "stop")
        if call.wants_usage and behaviour.usage:
            usage = {
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": len(tokens),
                "total_tokens": call.prompt_tokens + len(tokens),
            }
            tail += b"data: " + orjson.dumps({**head, "choices": [], "usage": usage})
            tail += b"\n\n"
        return _Frames(b"", pieces, tail + b"data: [DONE]\n\n")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b"data: " + orjson.dumps({"error": dict(error)}) + b"\n\n"


class _CountTokensWire:
    """Anthropic ``count_tokens``: the prompt's size, never streamed."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, _ = _error_kind(status)
        return {"type": "error", "error": {"type": kind, "message": message}}

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        return {"input_tokens": max(1, call.prompt_tokens)}

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return _Frames(orjson.dumps(self.message(call, behaviour, tokens)), [], b"")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b""


COMPLETIONS = _CompletionsWire()
COUNT_TOKENS = _CountTokensWire()
