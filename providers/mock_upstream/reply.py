"""What to send (``Reply``) and the pieces replies are built from.

Status texts, dialect-neutral error kinds, and the token splitting that decides what
each streamed chunk carries.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from http import HTTPStatus
from typing import Any, NamedTuple

import orjson

from providers.mock_upstream.core import (
    _SUCCESS,
    JSON_TYPE,
    TOKEN_CACHE_SIZE,
    Ending,
    MockBehaviour,
    Outcome,
    Part,
    Record,
)

_ANTHROPIC_OVERLOADED = 529  # not in http.HTTPStatus
_WORD = re.compile(r"\s*\S+(?:\s+$)?|\s+$")  # a word with its leading whitespace


@dataclass(slots=True, kw_only=True)
class Reply:
    """What to send: the head, timed parts, and how the exchange ends."""

    status: int
    headers: list[tuple[str, str]]
    parts: list[Part]
    content_length: int | None = None  # None: a stream, sent chunked
    latency_seconds: float = 0.0  # before the status line
    before: Ending | None = None  # RESET or HANG instead of a status line
    ending: Ending = Ending.DONE  # after the parts
    outcome: Outcome = Outcome.COMPLETED  # recorded when the reply ends DONE
    record: Record | None = None

    @property
    def is_immediate(self) -> bool:
        return (
            self.latency_seconds <= 0
            and self.before is None
            and self.ending is Ending.DONE
            and all(delay <= 0 for delay, _ in self.parts)
        )


@dataclass(frozen=True, slots=True)
class _Call:
    model: str
    reply_id: int
    created: int
    is_stream: bool
    wants_usage: bool  # OpenAI stream_options.include_usage
    prompt_tokens: int
    record: Record
    #: the request body (a wire that answers from it: embeddings, Responses)
    request: Mapping[str, Any] = field(default_factory=dict)


class _Frames(NamedTuple):
    head: bytes  # the role chunk (Anthropic: message_start [+ content_block_start])
    pieces: list[bytes]  # one per content token or tool call
    tail: bytes  # finish, usage, end of stream


def _headers(content_type: str, extra: Mapping[str, str]) -> list[tuple[str, str]]:
    if not extra:
        return [("content-type", content_type)]
    merged = {"content-type": content_type}
    merged.update((str(name).lower(), str(value)) for name, value in extra.items())
    return list(merged.items())


def _whole(
    status: int,
    payload: bytes,
    *,
    extra: Mapping[str, str] | None = None,
    record: Record | None = None,
) -> Reply:
    return Reply(
        status=status,
        headers=_headers(JSON_TYPE, extra or {}),
        parts=[(0.0, payload)],
        content_length=len(payload),
        outcome=Outcome.COMPLETED if status in _SUCCESS else Outcome.ERROR,
        record=record,
    )


def _error_kind(status: int) -> tuple[str, str]:
    known = _ERROR_KINDS.get(status)
    if known is not None:
        return known
    if status < HTTPStatus.INTERNAL_SERVER_ERROR:
        return ("invalid_request_error", "invalid_request")
    return ("api_error", "server_error")


_ERROR_KINDS: dict[int, tuple[str, str]] = {  # status -> (error type, code)
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    402: ("billing_error", "insufficient_quota"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    408: ("timeout_error", "request_timeout"),
    413: ("request_too_large", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("api_error", "internal_error"),
    502: ("api_error", "bad_gateway"),
    503: ("overloaded_error", "service_unavailable"),
    504: ("timeout_error", "gateway_timeout"),
    529: ("overloaded_error", "overloaded"),
}


@lru_cache(maxsize=64)
def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == _ANTHROPIC_OVERLOADED else "Unknown"


def _status_message(status: int) -> str:
    return f"Mock upstream error: {status} {_phrase(status)}."


# --- tokens ---------------------------------------------------------------------------


@lru_cache(maxsize=TOKEN_CACHE_SIZE)
def split_tokens(text: str, count: int | None = None) -> tuple[str, ...]:
    """Words with their leading space, or ``count`` near-equal slices of ``text``."""
    if count is None:
        return tuple(_WORD.findall(text))
    count = min(count, len(text))
    if count <= 0:
        return ()
    bounds = [len(text) * index // count for index in range(count + 1)]
    return tuple(text[start:end] for start, end in itertools.pairwise(bounds))


@lru_cache(maxsize=TOKEN_CACHE_SIZE)
def _filler_tokens(model: str, count: int) -> tuple[str, ...]:
    words = itertools.islice(itertools.cycle(_default_content(model).split()), count)
    return tuple(word if index == 0 else " " + word for index, word in enumerate(words))


def _default_content(model: str) -> str:
    return f"Hello from mock {model}."


def _tokens_for(behaviour: MockBehaviour, model: str) -> tuple[str, ...]:
    if behaviour.content is not None:
        return split_tokens(behaviour.content, behaviour.tokens)
    if behaviour.tokens is None:
        return split_tokens(_default_content(model))
    return _filler_tokens(model, behaviour.tokens)


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def _arguments_object(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {}
