"""The wire formats the mock answers: OpenAI Chat Completions, Anthropic Messages,
OpenAI embeddings; OpenAI Responses (``wire_responses``), legacy Completions and
Anthropic count_tokens (``wire_legacy``).

A Chat Completions request with a tool-call id over 40 characters is refused (400) as
OpenAI refuses it."""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from providers.mock_upstream.core import MockBehaviour
from providers.mock_upstream.reply import (
    _arguments_object,
    _arguments_text,
    _Call,
    _error_kind,
    _Frames,
)
from providers.mock_upstream.wire_legacy import COMPLETIONS, COUNT_TOKENS
from providers.mock_upstream.wire_responses import RESPONSES


class _Wire(Protocol):
    def error_body(self, status: int, message: str) -> dict[str, Any]: ...

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]: ...

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames: ...

    def stream_error(self, error: Mapping[str, Any]) -> bytes: ...


def _openai_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _openai_tool_call(index: int, call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_mock_{index}",
        "type": "function",
        "function": {
            "name": str(call.get("name", "")),
            "arguments": _arguments_text(call.get("arguments", {})),
        },
    }


class _OpenAIWire:
    """Chat Completions: ``chat.completion`` objects and ``data:`` chunks."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _error_kind(status)
        return {
            "error": {"message": message, "type": kind, "param": None, "code": code}
        }

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(tokens)}
        finish, count = "stop", len(tokens)
        if behaviour.tool_calls:
            message["content"] = None
            message["tool_calls"] = [
                _openai_tool_call(index, tool)
                for index, tool in enumerate(behaviour.tool_calls)
            ]
            finish, count = "tool_calls", len(behaviour.tool_calls)
        reply: dict[str, Any] = {
            "id": f"chatcmpl-mock-{call.reply_id}",
            "object": "chat.completion",
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
        }
        if behaviour.usage:
            reply["usage"] = _openai_usage(call.prompt_tokens, count)
        return reply

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        prefix = b'data: {"id":"chatcmpl-mock-%d","object":"chat.completion.chunk",' % (
            call.reply_id
        ) + b'"created":%d,"model":%s,"choices":' % (
            call.created,
            orjson.dumps(call.model),
        )

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return prefix + orjson.dumps([choice]) + b"}\n\n"

        if behaviour.tool_calls:
            head = chunk({"role": "assistant", "content": None})
            pieces = [
                chunk(
                    {"tool_calls": [{"index": index, **_openai_tool_call(index, tool)}]}
                )
                for index, tool in enumerate(behaviour.tool_calls)
            ]
            finish = "tool_calls"
        else:
            head = chunk({"role": "assistant", "content": ""})
            pieces = [chunk({"content": token}) for token in tokens]
            finish = "stop"
        tail = chunk({}, finish)
        if call.wants_usage and behaviour.usage:
            usage = orjson.dumps(_openai_usage(call.prompt_tokens, len(pieces)))
            tail += prefix + b'[],"usage":' + usage + b"}\n\n"
        return _Frames(head, pieces, tail + b"data: [DONE]\n\n")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b"data: " + orjson.dumps({"error": dict(error)}) + b"\n\n"


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _anthropic_tool_use(index: int, tool: Mapping[str, Any], arguments: Any) -> bytes:
    block = {"type": "tool_use", "id": f"toolu_mock_{index}", "name": tool.get("name")}
    text = _arguments_text(arguments)
    # as Anthropic streams a tool call without input: one empty partial_json
    partial = "" if text == "{}" else text
    delta = {"type": "input_json_delta", "partial_json": partial}
    return (
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {**block, "input": {}},
            },
        )
        + _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
        + _event("content_block_stop", {"type": "content_block_stop", "index": index})
    )


class _AnthropicWire:
    """Anthropic Messages: ``message`` objects and named SSE events."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, _ = _error_kind(status)
        return {"type": "error", "error": {"type": kind, "message": message}}

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": "".join(tokens)}]
        stop, count = "end_turn", len(tokens)
        if behaviour.tool_calls:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_mock_{index}",
                    "name": tool.get("name"),
                    "input": _arguments_object(tool.get("arguments", {})),
                }
                for index, tool in enumerate(behaviour.tool_calls)
            ]
            stop, count = "tool_use", len(behaviour.tool_calls)
        reply = self._message_head(call, behaviour, content, stop)
        if behaviour.usage:
            reply["usage"] = {
                "input_tokens": call.prompt_tokens,
                "output_tokens": count,
            }
        return reply

    @staticmethod
    def _message_head(
        call: _Call, behaviour: MockBehaviour, content: list[Any], stop: str | None
    ) -> dict[str, Any]:
        return {
            "id": f"msg_mock_{call.reply_id}",
            "type": "message",
            "role": "assistant",
            "model": call.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
        }

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        start = self._message_head(call, behaviour, [], None)
        if behaviour.usage:
            start["usage"] = {"input_tokens": call.prompt_tokens, "output_tokens": 0}
        head = _event("message_start", {"type": "message_start", "message": start})
        if behaviour.tool_calls:
            pieces = [
                _anthropic_tool_use(index, tool, tool.get("arguments", {}))
                for index, tool in enumerate(behaviour.tool_calls)
            ]
            blocks_end, stop = b"", "tool_use"
        else:
            head += _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            pieces = [
                _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": token},
                    },
                )
                for token in tokens
            ]
            blocks_end = _event(
                "content_block_stop", {"type": "content_block_stop", "index": 0}
            )
            stop = "end_turn"
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
        }
        if behaviour.usage:
            delta["usage"] = {"output_tokens": len(pieces)}
        tail = blocks_end + _event("message_delta", delta)
        return _Frames(
            head, pieces, tail + _event("message_stop", {"type": "message_stop"})
        )

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return _event("error", {"type": "error", "error": dict(error)})


EMBEDDING_DIMENSIONS = 8


def _vector(text: str, dimensions: int) -> list[float]:
    """A deterministic unit-ish vector of ``text``: the same input, the same vector."""
    digest = b""
    counter = 0
    while len(digest) < dimensions:
        digest += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    return [round((byte - 127.5) / 127.5, 6) for byte in digest[:dimensions]]


class _EmbeddingsWire:
    """OpenAI embeddings: one deterministic vector per input item, in input order
    (``tool_calls``, ``content`` and stream knobs do not apply)."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return _OPENAI.error_body(status, message)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        request = call.request
        raw = request.get("input")
        items = [raw] if isinstance(raw, str) else list(raw or [])
        if items and all(isinstance(t, int) for t in items):
            items = [items]  # one list of token ids
        dimensions = request.get("dimensions")
        size = dimensions if isinstance(dimensions, int) else EMBEDDING_DIMENSIONS
        data = []
        for index, item in enumerate(items):
            vector = _vector(orjson.dumps(item).decode(), size)
            embedding: Any = vector
            if request.get("encoding_format") == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        reply: dict[str, Any] = {"object": "list", "data": data, "model": call.model}
        if behaviour.usage:
            reply["usage"] = {
                "prompt_tokens": call.prompt_tokens,
                "total_tokens": call.prompt_tokens,
            }
        return reply

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return _Frames(orjson.dumps(self.message(call, behaviour, tokens)), [], b"")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b""


#: OpenAI refuses a longer tool-call id ("string too long")
MAX_TOOL_CALL_ID_CHARS = 40


def _tool_ids(request: Mapping[str, Any]) -> list[tuple[str, Any]]:
    messages = request.get("messages")
    found: list[tuple[str, Any]] = []
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict):
            continue
        if "tool_call_id" in message:
            found.append((f"messages[{i}].tool_call_id", message["tool_call_id"]))
        calls = message.get("tool_calls")
        for j, call in enumerate(calls if isinstance(calls, list) else ()):
            if isinstance(call, dict):
                found.append((f"messages[{i}].tool_calls[{j}].id", call.get("id")))
    return found


def tool_id_problem(request: Mapping[str, Any]) -> str | None:
    """What OpenAI's Chat Completions refuses of a request's tool-call ids."""
    for path, value in _tool_ids(request):
        if isinstance(value, str) and len(value) > MAX_TOOL_CALL_ID_CHARS:
            return (
                f"Invalid '{path}': string too long. Expected a string with maximum "
                f"length {MAX_TOOL_CALL_ID_CHARS}, but got a string with length "
                f"{len(value)} instead."
            )
    return None


_OPENAI = _OpenAIWire()
_WIRES: dict[str, _Wire] = {
    "/chat/completions": _OPENAI,
    "/messages": _AnthropicWire(),
    "/embeddings": _EmbeddingsWire(),
    "/responses": RESPONSES,
    "/completions": COMPLETIONS,
    "/messages/count_tokens": COUNT_TOKENS,
}
