"""What every client wire shares: the reply types the front door sends, the wire
contract, and the OpenAI shapes more than one wire (and the ops endpoints) speak.

A wire (one module of ``gateway.inbound``) owns its paths, how a credential arrives,
how its body becomes the canonical ``ChatRequest`` and how a ``Result`` becomes bytes;
everything between is wire-neutral (``gateway.pipeline``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gateway.kernel.exchange import ChatRequest
from gateway.kernel.sse import DONE_FRAME, encode_data
from gateway.kernel.types import KeyPolicy
from gateway.pipeline.context import ChatContext
from gateway.pipeline.handle import handle
from gateway.pipeline.result import Failure, Result
from telemetry.sanitize import sanitize

Headers = list[tuple[bytes, bytes]]
JSON_CONTENT_TYPE = (b"content-type", b"application/json")
SSE_HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


@dataclass(slots=True, kw_only=True)
class JSONReply:
    status: int
    body: bytes
    headers: Headers = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class StreamReply:
    headers: Headers
    body: AsyncIterator[bytes]
    status: int = 200


Reply = JSONReply | StreamReply


class Wire(Protocol):
    """One client wire: its paths, its body, its bytes."""

    #: the request paths it serves (with and without a trailing slash)
    paths: frozenset[str]
    #: the surface name the request log and the metrics record (spec 09 §2.11)
    surface: str

    def credential(self, headers: Mapping[str, str]) -> str | None:
        """The API key the request presents, where this wire's clients put it."""
        ...

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
        """The canonical request; raises ``RequestError`` naming the field."""
        ...

    def model_sent(self, raw: bytes) -> str:
        """The model a body that failed validation names (spec 06 §1.1)."""
        ...

    def render(self, result: Result) -> Reply:
        """The bytes of a pipeline result."""
        ...

    def error(self, failure: Failure) -> JSONReply:
        """The bytes of a refusal made before the pipeline (401, 413, 503...)."""
        ...

    async def serve(self, raw: bytes, ctx: ChatContext, key: KeyPolicy) -> Reply:
        """One authenticated request: its answer, as bytes."""
        ...


class Pipelined:
    """A wire whose requests run the pipeline (``gateway.pipeline.handle``): every
    wire but one that answers locally (``messages/count_tokens``)."""

    async def serve(self, raw: bytes, ctx: ChatContext, key: KeyPolicy) -> Reply:
        wire: Wire = self  # type: ignore[assignment]
        return wire.render(await handle(raw, wire, ctx, key))


def bearer_or_api_key(headers: Mapping[str, str]) -> str | None:
    """``Authorization: Bearer <key>`` (OpenAI's SDKs), else ``x-api-key``
    (Anthropic's): the OpenAI-shaped wires accept both, so one key works from
    either SDK."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    header = headers.get("x-api-key")
    return header.strip() if header and header.strip() else None


async def serve(wire: Wire, raw: bytes, ctx: ChatContext, key: KeyPolicy) -> Reply:
    """One authenticated request on ``wire``, as its bytes."""
    return await wire.serve(raw, ctx, key)


def error_body(
    *,
    message: str,
    error_type: str,
    code: str,
    param: str | None = None,
    attempts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The OpenAI error envelope ``{"error": {message, type, param, code}}``."""
    error: dict[str, Any] = {
        # spec 08 §5.4: an error never echoes a credential (a key sent as a model)
        "message": sanitize(message, limit=10_000),
        "type": error_type,
        "param": param,
        "code": code,
    }
    if attempts is not None:
        error["attempts"] = attempts
    return {"error": error}


def openai_error(failure: Failure) -> JSONReply:
    """A failure in the OpenAI error envelope, with its headers and ``Retry-After``."""
    body = error_body(
        message=failure.message,
        error_type=failure.error_type,
        code=failure.code,
        param=failure.param,
        attempts=failure.attempts,
    )
    return JSONReply(
        status=failure.status,
        body=orjson.dumps(body),
        headers=with_retry_after(failure),
    )


def with_retry_after(failure: Failure) -> Headers:
    headers = list(failure.headers)
    if failure.retry_after_s is not None:
        headers.append((b"retry-after", str(failure.retry_after_s).encode()))
    return headers


def sse_frame(chunk: dict[str, Any]) -> bytes:
    return encode_data(orjson.dumps(chunk))


def client_paths(
    names: Mapping[str, str],
    messages: list[dict[str, Any]],
    sources: list[tuple[dict[str, Any], str]],
) -> Mapping[str, str]:
    """A wire's ``ChatRequest.renamed``: its top-level ``names``, plus the client's
    path of every canonical content part in ``sources`` (the part as put in the
    canonical ``messages``, and where the client sent it), so a part a dialect
    leaves out is named where the client can find it (09 §2.6); a tool call in
    ``sources`` gives its ``function.arguments`` the client's ``<path>.arguments``.
    ``names`` itself when there are no sources (a text-only request)."""
    if not sources:
        return names
    where = {id(part): path for part, path in sources}
    found = dict(names)
    for i, message in enumerate(messages):
        calls = message.get("tool_calls")
        for j, call in enumerate(calls if isinstance(calls, list) else ()):
            path = where.get(id(call))
            if path is not None:
                found[f"messages[{i}].tool_calls[{j}].function.arguments"] = (
                    f"{path}.arguments"
                )
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            path = where.get(id(part))
            if path is not None:
                found[f"messages[{i}].content[{j}]"] = path
    return found


__all__ = [
    "DONE_FRAME",
    "JSON_CONTENT_TYPE",
    "SSE_HEADERS",
    "JSONReply",
    "Reply",
    "StreamReply",
    "Wire",
    "bearer_or_api_key",
    "client_paths",
    "error_body",
    "openai_error",
    "serve",
    "sse_frame",
]
