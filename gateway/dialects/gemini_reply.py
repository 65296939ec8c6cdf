"""Gemini replies, streams and errors (spec 10 §1): a ``GenerateContentResponse``
-> an OpenAI ``chat.completion`` or its chunks, Gemini's error envelope ->
``UpstreamError``, the embeddings reply and the model list.

Reply: text parts joined into ``content`` (``None`` when there are only calls),
``thought: true`` parts into ``reasoning_content``, ``functionCall`` parts into
``tool_calls`` (ids ``call_<tag>_<n>``, the tag the letters and digits of the
``responseId``, else ``created`` in hex, so ids differ from one turn to the next and a
conversation can fail over to Anthropic, which refuses repeated ids; a part's
``thoughtSignature`` travels inside the id, ``call_<tag>_<n>_ts_<base64url>`` (``_tu_``
for a signature in the URL-safe alphabet), and goes back on that ``functionCall``
part, in the alphabet it came in and padded, when the client sends the call again,
as Gemini needs for its reasoning across tool turns).
``finishReason``: ``STOP`` -> ``stop`` (``tool_calls`` when the candidate calls a
function), ``MAX_TOKENS`` -> ``length``, the safety family -> ``content_filter``,
anything else -> ``stop``.  A prompt blocked before any candidate
(``promptFeedback.blockReason``) is an empty ``content_filter`` answer.
``usageMetadata`` -> ``prompt_tokens`` (``promptTokenCount`` +
``toolUsePromptTokenCount``), ``completion_tokens`` (``candidatesTokenCount`` +
``thoughtsTokenCount``), ``prompt_tokens_details.cached_tokens``
(``cachedContentTokenCount``, part of the prompt count) and
``completion_tokens_details.reasoning_tokens`` (``thoughtsTokenCount``).

Stream (``alt=sse``): each ``data:`` event is a whole ``GenerateContentResponse``.
Text and thoughts become deltas; each ``functionCall`` part arrives whole and becomes
a tool call's start chunk and one chunk with its full arguments.  There is no
``[DONE]``: the stream is ``finished`` once a candidate carries a ``finishReason``,
which gives the finish chunk and a usage-only chunk (when any ``usageMetadata``
came); ``partial_usage`` is the latest ``usageMetadata``.  An ``{"error": ...}``
event raises ``StreamErrorEvent``.

Errors: ``{"error": {"code", "message", "status"}}`` -> ``UpstreamError`` with the
``status`` as ``code`` and an OpenAI-style ``type`` (``RESOURCE_EXHAUSTED`` ->
``rate_limit_error``, ...), so ``kernel.errors`` classifies it as spec 10 §1 says;
Gemini sends the matching HTTP status (429, 503, 500, 400, 401, 403, 404) as well.
A ``google.rpc.RetryInfo`` detail's ``retryDelay`` (``"120s"``) is the error's
``retry_after_s``: Gemini and Vertex send it on a 429 without a ``Retry-After``
header, and the cooldown reads it as one (spec 03 §8.2, amended).
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.dialects.base import JSON, RAW, BadUpstreamResponse, StreamErrorEvent
from gateway.dialects.gemini_ids import call_id, reply_tag
from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import DONE

ERROR_TEXT_MAX_CHARS = 2000
_FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}
#: Gemini ``error.status`` -> an OpenAI-style error ``type`` (what
#: ``classify_stream_error`` and the logs read)
_ERROR_TYPES = {
    "RESOURCE_EXHAUSTED": "rate_limit_error",
    "UNAVAILABLE": "overloaded_error",
    "INTERNAL": "api_error",
    "DEADLINE_EXCEEDED": "timeout_error",
    "INVALID_ARGUMENT": "invalid_request_error",
    "FAILED_PRECONDITION": "invalid_request_error",
    "OUT_OF_RANGE": "invalid_request_error",
    "PERMISSION_DENIED": "permission_error",
    "UNAUTHENTICATED": "authentication_error",
    "NOT_FOUND": "not_found_error",
}


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- reply ---------------------------------------------------------------------------


def map_usage(usage: Any) -> JSON:
    """``usageMetadata`` -> OpenAI usage (thoughts are output; cache reads are part
    of the prompt, as OpenAI's ``cached_tokens``)."""
    usage = _dict(usage)
    prompt = _int(usage.get("promptTokenCount")) + _int(
        usage.get("toolUsePromptTokenCount")
    )
    thoughts = _int(usage.get("thoughtsTokenCount"))
    completion = _int(usage.get("candidatesTokenCount")) + thoughts
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": _int(usage.get("cachedContentTokenCount"))
        },
        "completion_tokens_details": {"reasoning_tokens": thoughts},
    }


def map_finish_reason(reason: Any, calls: bool) -> str:
    """Gemini ``finishReason`` -> OpenAI ``finish_reason`` (unknown -> ``stop``)."""
    mapped = _FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "tool_calls" if calls and mapped == "stop" else mapped


def _tool_call(position: int, part: JSON, tag: str) -> JSON:
    call = _dict(part.get("functionCall"))
    return {
        "id": call_id(position, part.get("thoughtSignature"), tag),
        "type": "function",
        "function": {
            "name": str(call.get("name") or ""),
            "arguments": json.dumps(call.get("args") or {}),
        },
    }


def _choice(candidate: JSON, position: int, tag: str) -> JSON:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[JSON] = []
    for part in _dict(candidate.get("content")).get("parts") or ():
        part = _dict(part)
        if "functionCall" in part:
            calls.append(_tool_call(len(calls), part, tag))
        elif isinstance(part.get("text"), str):
            (thoughts if part.get("thought") is True else texts).append(part["text"])
    message: JSON = {
        "role": "assistant",
        "content": None if calls and not texts else "".join(texts),
    }
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    index = candidate.get("index")
    return {
        "index": index if isinstance(index, int) else position,
        "message": message,
        "finish_reason": map_finish_reason(candidate.get("finishReason"), bool(calls)),
    }


def _completion_id(payload: JSON) -> str:
    return f"chatcmpl-{payload.get('responseId') or ''}"


def parse_generate_reply(payload: Any, *, created: int) -> JSON:
    """A ``GenerateContentResponse`` -> an OpenAI ``chat.completion``."""
    if not isinstance(payload, dict):
        raise BadUpstreamResponse("completion is not a JSON object")
    if payload.get("error") is not None:
        raise BadUpstreamResponse("completion carries an error object")
    candidates = payload.get("candidates")
    if isinstance(candidates, list) and candidates:
        tag = reply_tag(payload.get("responseId"), created)
        choices = [_choice(_dict(c), i, tag) for i, c in enumerate(candidates)]
    elif _dict(payload.get("promptFeedback")).get("blockReason"):
        choices = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "content_filter",
            }
        ]
    else:
        raise BadUpstreamResponse("completion has no candidates")
    completion: JSON = {
        "id": _completion_id(payload),
        "object": "chat.completion",
        "created": created,
        "model": payload.get("modelVersion"),
        "choices": choices,
    }
    if isinstance(payload.get("usageMetadata"), dict):
        completion["usage"] = map_usage(payload["usageMetadata"])
    return completion


def parse_embed_reply(payload: Any) -> JSON:
    """A ``BatchEmbedContentsResponse`` -> the OpenAI embeddings list."""
    embeddings = _dict(payload).get("embeddings")
    if not isinstance(embeddings, list) or not embeddings:
        raise BadUpstreamResponse("embeddings reply has no embeddings")
    data = []
    for index, item in enumerate(embeddings):
        values = _dict(item).get("values")
        if not isinstance(values, list):
            raise BadUpstreamResponse(f"embeddings reply item {index} has no values")
        data.append({"object": "embedding", "index": index, "embedding": values})
    out: JSON = {"object": "list", "data": data}
    usage = _dict(_dict(payload).get("usageMetadata"))
    prompt = _int(usage.get("promptTokenCount")) or _int(usage.get("totalTokenCount"))
    if prompt:
        out["usage"] = {"prompt_tokens": prompt, "total_tokens": prompt}
    return out


def model_ids(payload: Any) -> list[str]:
    """The ids of a ``{"models": [{"name": "models/<id>"}, ...]}`` list."""
    models = _dict(payload).get("models")
    if not isinstance(models, list):
        raise BadUpstreamResponse("model list has no models")
    return [
        name.removeprefix("models/")
        for item in models
        if isinstance(name := _dict(item).get("name"), str) and name
    ]


def _reason(error: JSON) -> str | None:
    """The ``ErrorInfo`` reason among the error's ``details``, if any."""
    for detail in error.get("details") or ():
        reason = _dict(detail).get("reason")
        if isinstance(reason, str):
            return reason
    return None


_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")


def retry_delay(error: JSON) -> float | None:
    """Seconds of the ``google.rpc.RetryInfo`` among the error's ``details``
    (``retryDelay``, a protobuf Duration such as ``"120s"`` or ``"1.5s"``)."""
    for detail in error.get("details") or ():
        detail = _dict(detail)
        if detail.get("@type") != _RETRY_INFO:
            continue
        found = _DURATION.fullmatch(str(detail.get("retryDelay") or "").strip())
        if found is not None:
            return float(found.group(1))
    return None


def error_from_payload(payload: Any, text: str) -> UpstreamError:
    """``{"error": {"code", "message", "status"}}`` (or a list of one) ->
    ``UpstreamError`` with the ``status`` as ``code``."""
    if isinstance(payload, list) and payload:
        payload = payload[0]
    error = _dict(payload).get("error")
    if isinstance(error, str):
        return UpstreamError(message=error)
    if isinstance(error, dict):
        status = error.get("status")
        status = status if isinstance(status, str) and status else None
        if _reason(error) == "API_KEY_INVALID":  # a 400 that means a wrong key
            status = "API_KEY_INVALID"
        return UpstreamError(
            message=str(error.get("message") or "") or text[:ERROR_TEXT_MAX_CHARS],
            code=status,
            type=_ERROR_TYPES.get(status or ""),
            retry_after_s=retry_delay(error),
        )
    return UpstreamError(message=text[:ERROR_TEXT_MAX_CHARS])


# --- stream ---------------------------------------------------------------------


class GeminiStreamTranslator:
    """``GenerateContentResponse`` events -> OpenAI chunks for one attempt.

    Tool calls are numbered from 0 per candidate in the order they arrive; every
    ``functionCall`` part is whole, so it gives its start and its full arguments.
    """

    __slots__ = (
        "_calls",
        "_created",
        "_finished",
        "_id",
        "_model",
        "_raw",
        "_response_id",
        "_started",
        "_usage",
    )

    def __init__(self, *, created: int, raw: bool = False) -> None:
        self._raw = raw
        self._created = created
        self._finished = False
        self._started = False
        self._id = "chatcmpl-"
        self._response_id: Any = None
        self._model = ""
        self._calls: dict[int, int] = {}  # candidate index -> calls so far
        self._usage: JSON | None = None

    @property
    def finished(self) -> bool:
        return self._finished

    def partial_usage(self) -> JSON | None:
        return map_usage(self._usage) if self._usage is not None else None

    def translate(self, event: str | None, data: Any) -> list[JSON]:
        chunks = self._translate(data)
        if self._raw and isinstance(data, dict):
            chunks.insert(0, {RAW: (event, data)})
        return chunks

    def _chunk(self, index: int, delta: JSON, finish: str | None = None) -> JSON:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
        }

    def _translate(self, data: Any) -> list[JSON]:
        if isinstance(data, list):  # a JSON-array stream: one response per item
            return [c for item in data for c in self._translate(item)]
        if data == DONE or not isinstance(data, dict):
            return []
        if data.get("error") is not None:
            raise StreamErrorEvent(error_from_payload(data, json.dumps(data)))
        self._note(data)
        chunks: list[JSON] = []
        if not self._started:
            self._started = True
            chunks.append(self._chunk(0, {"role": "assistant", "content": ""}))
        finished = False
        candidates = data.get("candidates")
        for position, candidate in enumerate(
            candidates if isinstance(candidates, list) else ()
        ):
            found, ended = self._candidate(_dict(candidate), position)
            chunks += found
            finished = finished or ended
        if not candidates and _dict(data.get("promptFeedback")).get("blockReason"):
            chunks.append(self._chunk(0, {}, "content_filter"))
            finished = True
        if finished:
            self._finished = True
            if self._usage is not None:  # none reported: the gateway estimates
                chunks.append(self._usage_chunk())
        return chunks

    def _note(self, data: JSON) -> None:
        """The id, model and usage a response carries (every event may)."""
        if data.get("responseId"):
            self._id = _completion_id(data)
            self._response_id = data["responseId"]
        if data.get("modelVersion"):
            self._model = str(data["modelVersion"])
        if isinstance(data.get("usageMetadata"), dict):
            self._usage = data["usageMetadata"]

    def _candidate(self, candidate: JSON, position: int) -> tuple[list[JSON], bool]:
        """One candidate's chunks, and whether it finished."""
        index = candidate.get("index")
        index = index if isinstance(index, int) else position
        chunks = self._parts(index, _dict(candidate.get("content")).get("parts"))
        reason = candidate.get("finishReason")
        if not reason:
            return chunks, False
        calls = self._calls.get(index, 0) > 0
        chunks.append(self._chunk(index, {}, map_finish_reason(reason, calls)))
        return chunks, True

    def _parts(self, index: int, parts: Any) -> list[JSON]:
        chunks: list[JSON] = []
        for part in parts if isinstance(parts, list) else ():
            part = _dict(part)
            if "functionCall" in part:
                chunks += self._call(index, part)
                continue
            text = part.get("text")
            if isinstance(text, str) and text:
                field = (
                    "reasoning_content" if part.get("thought") is True else "content"
                )
                chunks.append(self._chunk(index, {field: text}))
        return chunks

    def _call(self, index: int, part: JSON) -> list[JSON]:
        position = self._calls.get(index, 0)
        self._calls[index] = position + 1
        call = _tool_call(position, part, reply_tag(self._response_id, self._created))
        start = {
            "index": position,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        arguments = {
            "index": position,
            "function": {"arguments": call["function"]["arguments"]},
        }
        return [
            self._chunk(index, {"tool_calls": [start]}),
            self._chunk(index, {"tool_calls": [arguments]}),
        ]

    def _usage_chunk(self) -> JSON:
        chunk = self._chunk(0, {})
        chunk["choices"] = []
        chunk["usage"] = map_usage(self._usage)
        return chunk
