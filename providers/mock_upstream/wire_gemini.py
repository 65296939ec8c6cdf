"""The mock's Google Gemini API wire: the model is in the path,
``/v1beta/models/{model}:{method}``.

* ``:generateContent`` / ``:streamGenerateContent?alt=sse``: a
  ``GenerateContentResponse`` (a stream: one per ``data:`` event, no ``[DONE]``, the
  last carrying ``finishReason``), with ``usageMetadata``; scripted ``tool_calls``
  come back as ``functionCall`` parts.  A request asking for thoughts
  (``generationConfig.thinkingConfig.includeThoughts``) gets a ``thought`` part
  first, counted in ``thoughtsTokenCount``, and its first ``functionCall`` carries a
  ``thoughtSignature``.
* ``:batchEmbedContents``: one deterministic vector per request (its
  ``outputDimensionality``), no usage (as Gemini reports none).
* ``:countTokens``: ``{"totalTokens": n}``, ``n`` from the size of the request's
  contents, system instruction and tools (``count_of``).
* ``GET /v1beta/models``: the model list (``models/<id>`` names).

Errors are Gemini's ``{"error": {"code", "message", "status"}}`` with the status
name of the HTTP code (429 ``RESOURCE_EXHAUSTED``, 503 ``UNAVAILABLE``, ...).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import orjson

from providers.mock_upstream.core import CHARS_PER_TOKEN, MockBehaviour
from providers.mock_upstream.reply import _arguments_object, _Call, _Frames
from providers.mock_upstream.wire import EMBEDDING_DIMENSIONS, _vector, _Wire

PREFIX = "/v1beta/models"
THOUGHT = "Thinking."

#: HTTP status -> Gemini's ``error.status``
STATUSES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    name = STATUSES.get(status)
    if name is None:
        name = "FAILED_PRECONDITION" if status < 500 else "UNKNOWN"  # noqa: PLR2004
    return {"error": {"code": status, "message": message, "status": name}}


def _sse(data: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\r\n\r\n"


def _thinks(request: Mapping[str, Any]) -> bool:
    config = request.get("generationConfig")
    thinking = config.get("thinkingConfig") if isinstance(config, dict) else None
    return isinstance(thinking, dict) and thinking.get("includeThoughts") is True


def _signature(call: _Call) -> str:
    return base64.b64encode(f"sig-mock-{call.reply_id}".encode()).decode()


def _call_parts(call: _Call, tools: Iterable[Mapping[str, Any]]) -> list[dict]:
    parts: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        part: dict[str, Any] = {
            "functionCall": {
                "name": str(tool.get("name", "")),
                "args": _arguments_object(tool.get("arguments", {})) or {},
            }
        }
        if index == 0 and _thinks(call.request):
            part["thoughtSignature"] = _signature(call)
        parts.append(part)
    return parts


def _usage(call: _Call, output: int, thoughts: int) -> dict[str, int]:
    usage = {
        "promptTokenCount": call.prompt_tokens,
        "candidatesTokenCount": output,
        "totalTokenCount": call.prompt_tokens + output + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


class _GenerateWire:
    """``generateContent`` and ``streamGenerateContent?alt=sse``."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def _response(
        self,
        call: _Call,
        parts: list[dict[str, Any]],
        finish: str | None,
        usage: dict[str, int] | None,
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": parts},
            "index": 0,
        }
        if finish is not None:
            candidate["finishReason"] = finish
        out: dict[str, Any] = {"candidates": [candidate]}
        if usage is not None:
            out["usageMetadata"] = usage
        out["modelVersion"] = call.model
        out["responseId"] = f"mock-{call.reply_id}"
        return out

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        thoughts = 1 if _thinks(call.request) else 0
        parts: list[dict[str, Any]] = []
        if thoughts:
            parts.append({"text": THOUGHT, "thought": True})
        if behaviour.tool_calls:
            parts += _call_parts(call, behaviour.tool_calls)
            count = len(behaviour.tool_calls)
        else:
            parts.append({"text": "".join(tokens)})
            count = len(tokens)
        usage = _usage(call, count, thoughts) if behaviour.usage else None
        return self._response(call, parts, "STOP", usage)

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        thoughts = 1 if _thinks(call.request) else 0
        pieces: list[bytes] = []
        if thoughts:
            usage = _usage(call, 0, thoughts) if behaviour.usage else None
            pieces.append(
                _sse(
                    self._response(
                        call, [{"text": THOUGHT, "thought": True}], None, usage
                    )
                )
            )
        if behaviour.tool_calls:
            units: list[dict[str, Any]] = _call_parts(call, behaviour.tool_calls)
        else:
            units = [{"text": token} for token in tokens]
        for index, unit in enumerate(units):
            usage = _usage(call, index + 1, thoughts) if behaviour.usage else None
            pieces.append(_sse(self._response(call, [unit], None, usage)))
        usage = _usage(call, len(units), thoughts) if behaviour.usage else None
        tail = _sse(self._response(call, [{"text": ""}], "STOP", usage))
        return _Frames(b"", pieces, tail)

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return _sse({"error": dict(error)})


def _texts(request: Mapping[str, Any]) -> list[tuple[str, int | None]]:
    """(text, outputDimensionality) of each request of a batch."""
    found: list[tuple[str, int | None]] = []
    for item in request.get("requests") or ():
        item = item if isinstance(item, dict) else {}
        content = item.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        text = "".join(
            str(p.get("text") or "") for p in parts or () if isinstance(p, dict)
        )
        size = item.get("outputDimensionality")
        found.append((text, size if isinstance(size, int) else None))
    return found


class _EmbedWire:
    """``batchEmbedContents``: a vector per request, in order."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        return {
            "embeddings": [
                {"values": _vector(text, size or EMBEDDING_DIMENSIONS)}
                for text, size in _texts(call.request)
            ]
        }

    def stream(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> _Frames:
        return _Frames(orjson.dumps(self.message(call, behaviour, tokens)), [], b"")

    def stream_error(self, error: Mapping[str, Any]) -> bytes:
        return b""


def count_of(request: Mapping[str, Any]) -> int:
    """The mock's count of a ``CountTokensRequest``: the size of its contents,
    system instruction and tools (under ``generateContentRequest`` or, the short
    form, ``contents`` alone), a token per 4 bytes of JSON, at least 1."""
    inner = request.get("generateContentRequest")
    source = inner if isinstance(inner, dict) else request
    counted = {
        k: source[k] for k in ("contents", "systemInstruction", "tools") if k in source
    }
    return max(1, len(orjson.dumps(counted)) // CHARS_PER_TOKEN)


class _CountWire(_EmbedWire):
    """``countTokens``: the prompt's size (``count_of``)."""

    def message(
        self, call: _Call, behaviour: MockBehaviour, tokens: Sequence[str]
    ) -> dict[str, Any]:
        return {"totalTokens": count_of(call.request)}


GENERATE = _GenerateWire()
EMBED = _EmbedWire()
COUNT = _CountWire()

#: method -> (wire, streams)
_METHODS: dict[str, tuple[_Wire, bool]] = {
    "generateContent": (GENERATE, False),
    "streamGenerateContent": (GENERATE, True),
    "batchEmbedContents": (EMBED, False),
    "countTokens": (COUNT, False),
}


def route(path: str) -> tuple[_Wire, str, bool] | None:
    """``(wire, model, streams)`` of a ``/v1beta/models/{model}:{method}`` path (its
    query already cut off); None for any other path."""
    if not path.startswith(PREFIX + "/"):
        return None
    name, colon, method = path[len(PREFIX) + 1 :].rpartition(":")
    found = _METHODS.get(method) if colon else None
    if found is None or not name:
        return None
    return found[0], unquote(name), found[1]


def models(ids: Iterable[str]) -> dict[str, Any]:
    """``GET /v1beta/models``."""
    return {
        "models": [
            {
                "name": f"models/{model_id}",
                "displayName": model_id,
                "supportedGenerationMethods": [
                    "generateContent",
                    "countTokens",
                    "embedContent",
                ],
            }
            for model_id in ids
        ]
    }
