"""Classify one upstream outcome into the failover vocabulary (spec 02 §6.1).

``classify()`` is the only place that maps an HTTP status, a transport failure or a
malformed reply to a ``(reason, detail)`` pair.  The attempt loop, the breakers and the
request log read nothing else.  Invariants:

* every failure maps to exactly one ``FailureReason``;
* 401/402/403/404 are ``server_error`` (the gateway's provider setup is at fault, not
  the client's request) with a ``detail`` that keeps the precise cause;
* message matching is case-insensitive and only looks at the upstream's error message
  (or the body text when the body is not JSON).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class FailureReason(StrEnum):
    """Why an attempt failed (spec 02 §6.1)."""

    CONNECTION_ERROR = "connection_error"
    SERVER_ERROR = "server_error"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    CONTEXT_LENGTH = "context_length"
    INVALID_REQUEST = "invalid_request"
    CLIENT_CANCELLED = "client_cancelled"


class FailureDetail(StrEnum):
    """The precise cause kept beside a reason (spec 02 §6.1, §9)."""

    BAD_RESPONSE = "bad_response"
    EMPTY_STREAM = "empty_stream"
    EMPTY_OUTPUT = "empty_output"
    AUTH_FAILED = "auth_failed"
    PAYMENT_REQUIRED = "payment_required"
    MODEL_NOT_FOUND = "model_not_found"
    UNEXPECTED_STATUS = "unexpected_status"
    FIRST_TOKEN = "first_token"
    IDLE = "idle"
    STREAM_INTERRUPTED = "stream_interrupted"


#: The reasons a client may list in ``redundancy.on`` (spec 02 §6.1).
RETRYABLE_REASONS: tuple[FailureReason, ...] = (
    FailureReason.CONNECTION_ERROR,
    FailureReason.SERVER_ERROR,
    FailureReason.RATE_LIMIT,
    FailureReason.TIMEOUT,
)


class TransportFailure(StrEnum):
    """What went wrong below HTTP, as reported by the edge module (``proxy.py``)."""

    CONNECT = "connect"  # DNS, refused, connect timeout, TLS
    RESET = "reset"  # closed or reset before a complete response
    TIMEOUT = "timeout"  # the attempt's own deadline
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"
    IDLE_TIMEOUT = "idle_timeout"


@dataclass(frozen=True, slots=True)
class Classification:
    reason: FailureReason
    detail: FailureDetail | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamError:
    """The upstream's own description of an error reply, dialect-neutral."""

    message: str = ""
    code: str | None = None
    type: str | None = None
    param: str | None = None
    #: the delay the error's body asks for (Google's ``RetryInfo.retryDelay``),
    #: used like ``Retry-After`` when no such header came
    retry_after_s: float | None = None


_MODEL_MISSING = re.compile(
    r"model.{0,80}(does not exist|not exist|not found|not supported|unsupported|"
    r"unavailable|not available|deprecated|decommissioned)|"
    r"(unknown|invalid|unsupported) model|no such model",
    re.IGNORECASE | re.DOTALL,
)
_CONTEXT = re.compile(
    r"context.{0,20}(length|window|limit)|maximum context|too many tokens|"
    r"prompt is too long|too long prompt|prompt too long|input is too long|"
    r"reduce the length|exceeds the context|maximum number of tokens|"
    r"(input|prompt).{0,20}token count.{0,40}exceeds",
    re.IGNORECASE | re.DOTALL,
)

_FIRST_SERVER_ERROR = 500
_TOO_MANY = 429
#: 400/422 are read further: a missing model, a too-long context, or the request itself
_REJECTIONS = frozenset({400, 422})
_AUTH_FAILED = Classification(FailureReason.SERVER_ERROR, FailureDetail.AUTH_FAILED)
_MODEL_GONE = Classification(FailureReason.SERVER_ERROR, FailureDetail.MODEL_NOT_FOUND)
#: error codes that decide a 400/422 whatever its message says
_BY_CODE: Mapping[str, Classification] = MappingProxyType(
    {
        "model_not_found": _MODEL_GONE,
        "context_length_exceeded": Classification(FailureReason.CONTEXT_LENGTH),
        # a 400 that says the key is wrong (Gemini's ``API_KEY_INVALID``)
        "api_key_invalid": _AUTH_FAILED,
        "invalid_api_key": _AUTH_FAILED,
        # a 400 that says a quota is spent (Bedrock's, spec 10 §1)
        "throttlingexception": Classification(FailureReason.RATE_LIMIT),
        "servicequotaexceededexception": Classification(FailureReason.RATE_LIMIT),
    }
)
#: error codes that name a model not ready on a 429: a server error, not the
#: connection's rate (Bedrock's ``ModelNotReadyException``, spec 10 §1)
_NOT_READY_CODES = frozenset({"modelnotreadyexception"})

#: statuses whose meaning needs no body (spec 02 §6.1)
_BY_STATUS: Mapping[int, Classification] = MappingProxyType(
    {
        401: _AUTH_FAILED,
        402: Classification(FailureReason.SERVER_ERROR, FailureDetail.PAYMENT_REQUIRED),
        403: _AUTH_FAILED,
        404: _MODEL_GONE,
        408: Classification(FailureReason.TIMEOUT),
        410: _MODEL_GONE,
        413: Classification(FailureReason.CONTEXT_LENGTH),
        429: Classification(FailureReason.RATE_LIMIT),
    }
)


def classify_transport(failure: TransportFailure) -> Classification:
    """A failure below HTTP: no status line (or no complete body) arrived."""
    if failure in (TransportFailure.CONNECT, TransportFailure.RESET):
        return Classification(FailureReason.CONNECTION_ERROR)
    if failure is TransportFailure.FIRST_TOKEN_TIMEOUT:
        return Classification(FailureReason.TIMEOUT, FailureDetail.FIRST_TOKEN)
    if failure is TransportFailure.IDLE_TIMEOUT:
        return Classification(FailureReason.TIMEOUT, FailureDetail.IDLE)
    return Classification(FailureReason.TIMEOUT)


def classify_status(status: int, error: UpstreamError) -> Classification:
    """A non-2xx HTTP reply, with the upstream's error message already extracted."""
    if status >= _FIRST_SERVER_ERROR:
        return Classification(FailureReason.SERVER_ERROR)
    if status == _TOO_MANY and (error.code or "").lower() in _NOT_READY_CODES:
        return Classification(FailureReason.SERVER_ERROR)
    known = _BY_STATUS.get(status)
    if known is not None:
        return known
    if status in _REJECTIONS:
        return _classify_rejection(error)
    # A redirect is never followed (spec 08 §5.3); like any other unlisted status it
    # is the upstream misbehaving, not the client.
    return Classification(FailureReason.SERVER_ERROR, FailureDetail.UNEXPECTED_STATUS)


def _classify_rejection(error: UpstreamError) -> Classification:
    """A 400/422: the model is missing, the context is too long, or the request."""
    # An explicit error code outranks the wording of the message.
    known = _BY_CODE.get((error.code or "").lower())
    if known is not None:
        return known
    if _MODEL_MISSING.search(error.message):
        return _MODEL_GONE
    if _CONTEXT.search(error.message):
        return Classification(FailureReason.CONTEXT_LENGTH)
    return Classification(FailureReason.INVALID_REQUEST)


def classify_stream_error(error: UpstreamError) -> Classification:
    """An error object that arrived as a stream event (spec 02 §6.1)."""
    kind = f"{error.type or ''} {error.code or ''}".lower()
    if "rate_limit" in kind:
        return Classification(FailureReason.RATE_LIMIT)
    return Classification(FailureReason.SERVER_ERROR, FailureDetail.BAD_RESPONSE)


def credential_refused() -> Classification:
    """No usable credential could be obtained: the token endpoint refused it (spec 10
    §3), a failure of the connection's credential like a 401."""
    return _AUTH_FAILED


def bad_response() -> Classification:
    """A 200 that is not a usable completion."""
    return Classification(FailureReason.SERVER_ERROR, FailureDetail.BAD_RESPONSE)


def empty_stream() -> Classification:
    """A stream that ended before a content token and without a finish_reason."""
    return Classification(FailureReason.SERVER_ERROR, FailureDetail.EMPTY_STREAM)
