"""Wire shapes: the OpenAI error envelope, SSE frames and ``X-OmniRoute-*`` headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.kernel.sse import DONE_FRAME, encode_data
from telemetry.sanitize import sanitize

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
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def error_body(
    *,
    message: str,
    error_type: str,
    code: str,
    param: str | None = None,
    attempts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
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


def error_reply(
    status: int,
    *,
    message: str,
    error_type: str,
    code: str,
    param: str | None = None,
    attempts: list[dict[str, Any]] | None = None,
    retry_after_s: int | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> JSONReply:
    body = error_body(
        message=message,
        error_type=error_type,
        code=code,
        param=param,
        attempts=attempts,
    )
    extra = list(headers or [])
    if retry_after_s is not None:
        extra.append((b"retry-after", str(retry_after_s).encode()))
    return JSONReply(status=status, body=orjson.dumps(body), headers=extra)


def omniroute_headers(
    *,
    served_model: str | None,
    attempts: int,
    route: str | None,
    overhead_ms: int | None = None,
) -> list[tuple[bytes, bytes]]:
    headers = [(b"x-omniroute-attempts", str(attempts).encode())]
    if served_model:
        headers.append((b"x-omniroute-served-model", served_model.encode()))
    if route:
        headers.append((b"x-omniroute-route", route.encode()))
    if overhead_ms is not None:
        headers.append((b"x-omniroute-overhead-ms", str(overhead_ms).encode()))
    return headers


def completion_reply(
    completion: dict[str, Any],
    omni: dict[str, Any],
    *,
    classic: bool,
    attempts: int,
    overhead_ms: int,
) -> JSONReply:
    """A served completion: OpenAI shape with ``omniroute``, or the classic
    envelope with ``metadata`` (spec 01), and the ``X-OmniRoute-*`` headers."""
    if classic:
        payload: dict[str, Any] = {
            "success": True,
            "data": completion,
            "metadata": omni,
        }
    else:
        payload = {**completion, "omniroute": omni}
    headers = [
        JSON_CONTENT_TYPE,
        *omniroute_headers(
            served_model=omni["served_model"],
            attempts=attempts,
            route=omni["route"],
            overhead_ms=overhead_ms,
        ),
    ]
    return JSONReply(status=200, body=orjson.dumps(payload), headers=headers)


def stream_headers(omni: dict[str, Any], attempts: int) -> list[tuple[bytes, bytes]]:
    """Headers of a committed stream (attempts = calls made up to the commit)."""
    return [
        *SSE_HEADERS,
        *omniroute_headers(
            served_model=omni["served_model"], attempts=attempts, route=omni["route"]
        ),
    ]


def sse_frame(chunk: dict[str, Any]) -> bytes:
    return encode_data(orjson.dumps(chunk))


__all__ = [
    "DONE_FRAME",
    "JSON_CONTENT_TYPE",
    "SSE_HEADERS",
    "JSONReply",
    "completion_reply",
    "error_body",
    "error_reply",
    "omniroute_headers",
    "sse_frame",
    "stream_headers",
]
