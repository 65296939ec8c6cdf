"""What the pipeline answers: wire-neutral results that only ``gateway.inbound`` turns
into bytes.

* ``Answer``: a served, whole completion (the OpenAI ``chat.completion`` object, the
  canonical reply shape, with ``model`` set to the served ``provider/model``) and the
  ``omniroute`` report beside it.
* ``Failure``: the request ends without an answer (a refusal, or every attempt failed):
  status, code, message, the field it names and the report items tried so far.
* ``Streamed``: a committed stream; ``relay.frames(encoder)`` yields the bytes the
  client wire's encoder makes of the canonical chunks, ending with its report.

``headers`` are the transport headers every wire sends alike (``X-OmniRoute-*``,
``Retry-After``, the smart tier headers), as ASGI byte pairs; the content type and the
body belong to the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.kernel.exchange import ChatRequest
from gateway.kernel.types import Target

Headers = list[tuple[bytes, bytes]]


@dataclass(slots=True, kw_only=True)
class Answer:
    completion: dict[str, Any]
    report: dict[str, Any]
    headers: Headers = field(default_factory=list)
    status: int = 200
    #: the upstream's own answer, when the call was a passthrough (spec 09 §2.5)
    raw: dict[str, Any] | None = None
    #: the request it answers (a wire's rendering may depend on what it asked for)
    request: ChatRequest | None = None


@dataclass(slots=True, kw_only=True)
class Failure:
    status: int
    code: str
    message: str
    error_type: str
    param: str | None = None
    #: the report items of the attempts and skips so far (spec 02 §10); None: none
    attempts: list[dict[str, Any]] | None = None
    retry_after_s: int | None = None
    headers: Headers = field(default_factory=list)
    #: every attempt failed (``all_models_failed``); a wire may answer it in a shape
    #: of its own (the classic endpoint's envelope, spec 01)
    all_failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnd:
    """The end of a committed stream, for the wire's last event."""

    chunk_id: str
    created: int
    model: str
    report: dict[str, Any]
    #: ``{"message", "type", "code"}`` when the stream did not end normally
    error: dict[str, Any] | None = None
    #: the usage of the whole answer, when known
    usage: dict[str, Any] | None = None


class StreamEncoder(Protocol):
    """A client wire's encoding of a committed stream (``gateway.inbound``)."""

    def chunks(self, chunks: list[dict[str, Any]]) -> bytes:
        """The bytes for the canonical chunks of one upstream read (b"": nothing)."""
        ...

    def end(self, end: StreamEnd) -> bytes:
        """The bytes that close the stream: its report and the end marker."""
        ...


class Relay(Protocol):
    def frames(self, encoder: StreamEncoder) -> AsyncIterator[bytes]: ...


@dataclass(slots=True, kw_only=True)
class Streamed:
    relay: Relay
    #: the request it answers (a wire's encoding may depend on what it asked for)
    request: ChatRequest
    headers: Headers = field(default_factory=list)
    status: int = 200
    #: the upstream's own events ride along (``dialects.RAW`` chunks, 09 §2.5)
    passthrough: bool = False
    #: the target whose stream it is, when one target serves it
    served: Target | None = None


Result = Answer | Failure | Streamed


def upstream_id(value: Any) -> str | None:
    """A completion's or chunk's own id when the upstream gave one (a bare
    ``chatcmpl-``, as a Gemini reply without a ``responseId`` makes, is none)."""
    if isinstance(value, str) and value.removeprefix("chatcmpl-"):
        return value
    return None


def omniroute_headers(
    *,
    served_model: str | None,
    attempts: int,
    route: str | None,
    overhead_ms: int | None = None,
) -> Headers:
    """``X-OmniRoute-Attempts``, ``-Served-Model``, ``-Route``, ``-Overhead-Ms``."""
    headers = [(b"x-omniroute-attempts", str(attempts).encode())]
    if served_model:
        headers.append((b"x-omniroute-served-model", served_model.encode()))
    if route:
        headers.append((b"x-omniroute-route", route.encode()))
    if overhead_ms is not None:
        headers.append((b"x-omniroute-overhead-ms", str(overhead_ms).encode()))
    return headers
