"""Upstream I/O for one attempt: the only gateway module that touches httpx.

* ``dispatch()``: one call for a target: the request in its dialect, the client of its
  provider kind, target stats and the in-flight gauge, then one of:
* ``call_json()``: a non-streaming attempt, bounded by its ``timeout_ms``; a call of
  several ``parts`` (Bedrock's Titan embeds one input per call) sends them, at most
  ``PARTS_AT_ONCE`` at a time, and answers with their joined replies or the first
  part's failure (spec 09 §5.2, amended).
* ``open_stream()``: a streaming attempt read up to its *commit point*, the first
  content token (spec 02 §8).  Nothing reaches the client before it, so any failure
  until then is an ordinary failed attempt.  At the commit point the caller gets an
  ``OpenStream`` whose ``chunks()`` continues the very same upstream response.

Invariants: the upstream response is opened inside an ``async with`` in the generator
that yields its chunks, so a cancel (client disconnect) unwinds it and drops the
connection at once; ``CancelledError`` is never swallowed; httpx exceptions are
translated into ``TransportFailure`` here and nowhere else.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from gateway import jsonload
from gateway.dialects import (
    BadUpstreamResponse,
    Dialect,
    StreamErrorEvent,
    UpstreamCall,
    dialect_of,
    join_embeddings,
)
from gateway.kernel.chain import Options
from gateway.kernel.errors import (
    Classification,
    TransportFailure,
    UpstreamError,
    bad_response,
    classify_status,
    classify_stream_error,
    classify_transport,
    credential_refused,
    empty_stream,
)
from gateway.kernel.exchange import Original
from gateway.kernel.sse import DONE
from gateway.kernel.types import Auth, Target
from gateway.pipeline.health import attempt_started
from providers import credential_sources
from providers.http import client_for
from providers.outbound import HTTPClient
from providers.upstream_client import (
    UpstreamConnectError,
    UpstreamPoolTimeout,
    UpstreamReadError,
    UpstreamReadTimeout,
)
from providers.upstream_client import UpstreamError as UpstreamTransportError
from telemetry import metrics

_CONNECT_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.UnsupportedProtocol,
    UpstreamConnectError,
)
_TIMEOUT_ERRORS = (
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.PoolTimeout,
    UpstreamReadTimeout,
    UpstreamPoolTimeout,
)
#: every transport failure of either client; anything not connect/timeout is a reset
TRANSPORT_ERRORS = (httpx.HTTPError, UpstreamTransportError, ConnectionError)
_MAX_ERROR_BODY = 64 * 1024
_HTTP_OK, _HTTP_REDIRECT = 200, 300


def _is_success(status: int) -> bool:
    return _HTTP_OK <= status < _HTTP_REDIRECT


class UpstreamStatusError(Exception):
    """A non-2xx status line, raised inside the stream generator."""

    def __init__(self, status: int, body: bytes, headers: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers


@dataclass(slots=True, kw_only=True)
class AttemptResult:
    started: float  # perf_counter at the start of the attempt
    latency_s: float = 0.0
    ttfb_s: float | None = None
    ttft_s: float | None = None
    http_status: int | None = None
    failure: Classification | None = None
    error: UpstreamError | None = None
    retry_after: str | None = None
    completion: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    #: time spent waiting for the upstream (full body, or first byte for streams)
    upstream_wait_s: float = 0.0
    cancelled: bool = False
    #: the response's rate-limit headers (spec 03 §8.5), lower-case names
    ratelimit: list[tuple[str, str]] | None = None
    #: called on every read of stream bytes (the idle timer restarts, spec 02 §4)
    on_bytes: Callable[[], None] | None = None
    #: a stream's usage as reported so far (spec 02 §11: an interrupted stream
    #: bills the usage the upstream reported before it broke)
    partial_usage: Callable[[], dict[str, Any] | None] | None = None
    #: the call sent the client's own body (spec 09 §2.5); ``raw``: the upstream's
    #: own answer (non-streaming), for the client
    passthrough: bool = False
    raw: dict[str, Any] | None = None


@functools.cache
def _starts(prefixes: tuple[str, ...]) -> frozenset[bytes]:
    return frozenset(p[:2].encode() for p in prefixes)


def _ratelimit(dialect: Dialect, headers: Any) -> list[tuple[str, str]] | None:
    """The rate-limit header pairs the dialect declares (``x-ratelimit-*``,
    ``anthropic-ratelimit-*``), lower-case, if any."""
    found = None
    prefixes = dialect.ratelimit_prefixes
    starts = _starts(prefixes)
    for name, value in getattr(headers, "raw", ()):
        if name[:2].lower() not in starts:
            continue
        text = name.decode("latin-1").lower()
        if text.startswith(prefixes):
            if found is None:
                found = []
            found.append((text, value.decode("latin-1")))
    return found


def _transport_failure(exc: BaseException) -> TransportFailure:
    if isinstance(exc, _CONNECT_ERRORS):
        return TransportFailure.CONNECT
    if isinstance(exc, _TIMEOUT_ERRORS):
        return TransportFailure.TIMEOUT
    return TransportFailure.RESET


def signed_headers(call: UpstreamCall, content: bytes) -> dict[str, str]:
    """The call's headers, plus its signature over ``content`` (the exact bytes
    sent) where the dialect signs (SigV4, spec 10 §1)."""
    sign = call.sign
    if sign is None:
        return call.headers
    added = sign(
        method=call.method,
        url=call.url,
        headers=call.headers,
        body=content,
        now=time.time(),
    )
    return {**call.headers, **added}


def _error_of(dialect: Dialect, body: bytes, headers: Any = None) -> UpstreamError:
    text = body[:_MAX_ERROR_BODY].decode("utf-8", errors="replace")
    try:
        payload = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        payload = None
    return dialect.parse_error(payload, text, headers)


def _fail_status(
    result: AttemptResult,
    dialect: Dialect,
    status: int,
    body: bytes,
    headers: Any,
) -> AttemptResult:
    result.http_status = status
    result.ratelimit = _ratelimit(dialect, headers)
    result.error = _error_of(dialect, body, headers)
    result.failure = classify_status(status, result.error)
    retry_ms = headers.get("retry-after-ms")
    try:
        valid_ms = retry_ms is not None and float(retry_ms) >= 0
    except ValueError:
        valid_ms = False
    result.retry_after = f"ms:{retry_ms}" if valid_ms else headers.get("retry-after")
    if result.retry_after is None:
        result.retry_after = _body_retry_after(result.error)
    return result


def _body_retry_after(error: UpstreamError | None) -> str | None:
    """The delay an error's body asks for (Google's ``RetryInfo``), in the
    ``ms:`` form ``Retry-After-Ms`` takes (spec 03 §8.2, amended)."""
    delay = error.retry_after_s if error is not None else None
    return f"ms:{round(delay * 1000)}" if delay is not None else None


async def call_json(
    client: HTTPClient,
    dialect: Dialect,
    call: UpstreamCall,
    *,
    timeout_s: float,
    created: int,
    result: AttemptResult | None = None,
) -> AttemptResult:
    """One non-streaming attempt; the whole reply must arrive within ``timeout_s``.
    ``result``: the caller's record, filled as the exchange goes (what a cancelled
    attempt still knows)."""
    if result is None:
        result = AttemptResult(started=time.perf_counter())
    if call.parts:  # one call per input (Bedrock's Titan, spec 09 §5.2)
        return await _call_parts(
            client, dialect, call, timeout_s=timeout_s, created=created, result=result
        )
    content = orjson.dumps(call.body) if call.method == "POST" else b""
    headers = signed_headers(call, content)
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(
                call.method, call.url, content=content, headers=headers
            ) as response:
                result.ttfb_s = time.perf_counter() - result.started
                result.http_status = response.status_code  # also if the body stalls
                body = await response.aread()
    except TimeoutError:
        result.failure = classify_transport(TransportFailure.TIMEOUT)
    except TRANSPORT_ERRORS as exc:
        result.failure = classify_transport(_transport_failure(exc))
        result.error = UpstreamError(message=str(exc) or type(exc).__name__)
    else:
        _finish_json(
            result, dialect, response, body, created, call.operation, call.count_field
        )
    result.latency_s = time.perf_counter() - result.started
    result.upstream_wait_s = result.latency_s
    return result


#: the most parts of one call in flight at once
PARTS_AT_ONCE = 8


class _PartFailed(Exception):
    """A part of a call failed: its siblings are cancelled."""


async def _call_parts(
    client: HTTPClient,
    dialect: Dialect,
    call: UpstreamCall,
    *,
    timeout_s: float,
    created: int,
    result: AttemptResult,
) -> AttemptResult:
    """A call's ``parts``, at most ``PARTS_AT_ONCE`` at once, all within
    ``timeout_s``: the joined answer when every part answered, else the first
    failure (the others are cancelled), never part of a list."""
    parts = call.parts
    done: list[AttemptResult | None] = [None] * len(parts)
    failed: list[AttemptResult] = []
    gate = asyncio.Semaphore(PARTS_AT_ONCE)

    async def send(index: int) -> None:
        async with gate:
            part = await call_json(
                client,
                dialect,
                parts[index],
                timeout_s=timeout_s,
                created=created,
                result=AttemptResult(started=time.perf_counter()),
            )
        done[index] = part
        if part.ttfb_s is not None and result.ttfb_s is None:
            result.ttfb_s = part.started + part.ttfb_s - result.started
        if part.failure is not None or part.completion is None:
            failed.append(part)
            raise _PartFailed

    try:
        async with asyncio.timeout(timeout_s):
            try:
                async with asyncio.TaskGroup() as group:
                    for index in range(len(parts)):
                        group.create_task(send(index))
            except* _PartFailed:
                pass
    except TimeoutError:
        result.failure = classify_transport(TransportFailure.TIMEOUT)
    if failed:
        first = failed[0]
        result.http_status = first.http_status
        result.failure = first.failure
        result.error = first.error
        result.retry_after = first.retry_after
        result.ratelimit = first.ratelimit
    elif result.failure is None:
        answered = [part for part in done if part is not None]
        result.http_status = answered[-1].http_status
        result.ratelimit = answered[-1].ratelimit
        result.completion = join_embeddings(
            [part.completion for part in answered if part.completion is not None]
        )
        usage = result.completion.get("usage")
        result.usage = usage if isinstance(usage, dict) else None
    result.latency_s = time.perf_counter() - result.started
    result.upstream_wait_s = result.latency_s
    return result


def _finish_json(
    result: AttemptResult,
    dialect: Dialect,
    response: Any,
    body: bytes,
    created: int,
    operation: str = "chat",
    count_field: str = "input_tokens",
) -> None:
    passthrough = result.passthrough
    status = response.status_code
    if not _is_success(status):
        _fail_status(result, dialect, status, body, response.headers)
        return
    result.http_status = status
    result.ratelimit = _ratelimit(dialect, response.headers)
    try:
        payload = jsonload.loads(body)
        if operation == "embeddings":  # the vectors are the answer (09 §5)
            completion = dialect.parse_embeddings(payload, response.headers)
        elif operation == "count_tokens":  # the count is the answer (09 §4.5)
            completion = _token_count(payload, count_field)
        elif operation == "models":  # a model list (spec 10 §2)
            completion = {"models": dialect.parse_model_list(payload)}
        else:
            completion = dialect.parse_completion(payload, created=created)
        if passthrough:  # the upstream's own answer, for the client (09 §2.5)
            result.raw = payload
    except (orjson.JSONDecodeError, BadUpstreamResponse) as exc:
        result.failure = bad_response()
        result.error = UpstreamError(message=f"unusable upstream reply: {exc}")
        return
    result.completion = completion
    usage = completion.get("usage")
    result.usage = usage if isinstance(usage, dict) else None


def _token_count(payload: Any, field: str = "input_tokens") -> dict[str, Any]:
    count = payload.get(field) if isinstance(payload, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise BadUpstreamResponse(f"count_tokens reply has no {field}")
    return {"input_tokens": count}


def is_content_chunk(chunk: dict[str, Any]) -> bool:
    """The first content token (spec 02 §8): a non-empty content-like delta."""
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        for name in ("content", "reasoning_content", "reasoning", "refusal"):
            if delta.get(name):
                return True
        if delta.get("tool_calls"):
            return True
    return False


def has_finish(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, dict) and c.get("finish_reason") for c in choices
    )


async def _batches(
    client: HTTPClient,
    dialect: Dialect,
    call: UpstreamCall,
    created: int,
    result: AttemptResult,
) -> AsyncGenerator[list[dict[str, Any]], None]:
    """Translated chunks of one upstream stream, as they arrive: one list per read
    that completed any event, so what arrived together is relayed in one write."""
    content = orjson.dumps(call.body)
    async with client.stream(
        "POST", call.url, content=content, headers=signed_headers(call, content)
    ) as response:
        result.ttfb_s = time.perf_counter() - result.started
        result.http_status = response.status_code
        result.ratelimit = _ratelimit(dialect, response.headers)
        if not _is_success(response.status_code):
            body = await response.aread()
            raise UpstreamStatusError(response.status_code, body, response.headers)
        decoder = dialect.stream_decoder()
        translator = dialect.stream_translator(created=created, raw=call.passthrough)
        result.partial_usage = translator.partial_usage
        ending = _Ending()
        async for raw in response.aiter_raw():
            if result.on_bytes is not None:
                result.on_bytes()  # keep-alive comments and pings count as bytes
            batch: list[dict[str, Any]] = []
            try:
                for event in decoder.feed(raw):
                    batch += translator.translate(event.event, _load(event.data))
            except (StreamErrorEvent, BadUpstreamResponse):
                if batch:
                    yield batch  # what came before the error is still relayed
                raise
            if batch:
                ending.saw(batch)
                yield batch
        batch = []
        for event in decoder.flush():
            batch += translator.translate(event.event, _load(event.data))
        if batch:
            ending.saw(batch)
            yield batch
        if ending.content and not (ending.finish or translator.finished):
            # closed cleanly but short: no finish_reason, no [DONE]/message_stop
            raise UpstreamReadError("the upstream closed the stream before its end")


class _Ending:
    """Whether a stream brought content, and a sign that it ended on purpose."""

    __slots__ = ("content", "finish")

    def __init__(self) -> None:
        self.content = False
        self.finish = False

    def saw(self, batch: list[dict[str, Any]]) -> None:
        self.content = self.content or any(is_content_chunk(c) for c in batch)
        self.finish = self.finish or any(has_finish(c) for c in batch)


def _load(data: str) -> Any:
    if data == DONE:
        return DONE
    try:
        return jsonload.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadUpstreamResponse(f"stream event is not JSON: {data[:200]}") from exc


@dataclass(slots=True, kw_only=True)
class OpenStream:
    """A stream past its commit point: buffered chunks plus the live remainder."""

    result: AttemptResult
    buffered: list[dict[str, Any]]
    generator: AsyncGenerator[list[dict[str, Any]], None]
    idle_timeout_s: float
    usage: dict[str, Any] | None = None
    delivered_chars: int = 0
    interrupted: Classification | None = None
    interrupted_error: str | None = None
    ended: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    async def batches(self) -> AsyncGenerator[list[dict[str, Any]], None]:
        """The buffered chunks, then the rest as they arrive, a list per upstream
        read; an interruption is recorded, not raised."""
        if self.buffered:
            yield self.buffered
        self.buffered = []
        loop = asyncio.get_running_loop()
        idle_s = self.idle_timeout_s
        while True:
            try:
                # the idle bound runs between upstream bytes, not translated chunks
                async with asyncio.timeout(idle_s) as idle:
                    self.result.on_bytes = lambda: idle.reschedule(loop.time() + idle_s)
                    try:
                        batch = await anext(self.generator)
                    finally:
                        self.result.on_bytes = None
            except StopAsyncIteration:
                self.ended = True
                return
            except TimeoutError:
                self._interrupt(
                    classify_transport(TransportFailure.IDLE_TIMEOUT), "idle"
                )
                return
            except TRANSPORT_ERRORS as exc:
                self._interrupt(classify_transport(_transport_failure(exc)), str(exc))
                return
            except StreamErrorEvent as exc:
                self._interrupt(classify_stream_error(exc.error), exc.error.message)
                return
            except BadUpstreamResponse as exc:
                self._interrupt(bad_response(), str(exc))
                return
            yield batch

    def _interrupt(self, why: Classification, message: str) -> None:
        self.interrupted = why
        self.interrupted_error = message

    async def aclose(self) -> None:
        await self.generator.aclose()


async def open_stream(
    client: HTTPClient,
    dialect: Dialect,
    call: UpstreamCall,
    *,
    timeout_s: float,
    first_token_s: float | None,
    idle_timeout_s: float,
    created: int,
    result: AttemptResult | None = None,
) -> OpenStream | AttemptResult:
    """Read until the first content token; a failure before it is a failed attempt.
    ``result``: as for ``call_json``."""
    result = result or AttemptResult(started=time.perf_counter())
    generator = _batches(client, dialect, call, created, result)
    buffered: list[dict[str, Any]] = []
    deadline = timeout_s if first_token_s is None else min(timeout_s, first_token_s)
    first_token_bound = first_token_s is not None and first_token_s < timeout_s
    committed = False
    try:
        async with asyncio.timeout(deadline):
            while True:
                try:
                    batch = await anext(generator)
                except StopAsyncIteration:
                    break
                buffered += batch
                if any(is_content_chunk(c) or has_finish(c) for c in batch):
                    committed = True
                    break
    except TimeoutError:
        kind = (
            TransportFailure.FIRST_TOKEN_TIMEOUT
            if first_token_bound
            else TransportFailure.TIMEOUT
        )
        result.failure = classify_transport(kind)
    except UpstreamStatusError as exc:
        _fail_status(result, dialect, exc.status, exc.body, exc.headers)
    except StreamErrorEvent as exc:
        result.error = exc.error
        result.failure = classify_stream_error(exc.error)
        result.retry_after = _body_retry_after(exc.error)
    except BadUpstreamResponse as exc:
        result.failure = bad_response()
        result.error = UpstreamError(message=str(exc))
    except TRANSPORT_ERRORS as exc:
        result.failure = classify_transport(_transport_failure(exc))
        result.error = UpstreamError(message=str(exc) or type(exc).__name__)
    except BaseException:
        await generator.aclose()
        raise
    now = time.perf_counter()
    result.upstream_wait_s = (
        result.ttfb_s if result.ttfb_s is not None else now - result.started
    )
    if committed:
        result.ttft_s = now - result.started
        return OpenStream(
            result=result,
            buffered=buffered,
            generator=generator,
            idle_timeout_s=idle_timeout_s,
        )
    await generator.aclose()
    if result.failure is None:
        # Ended before any content: an empty answer with a finish_reason would have
        # committed above, so this is an empty stream (spec 02 §6.1).
        result.failure = empty_stream()
    result.latency_s = now - result.started
    return result


def build_call(
    target: Target,
    body: dict[str, Any],
    *,
    stream: bool,
    original: Original | None = None,
    operation: str = "chat",
    auth: Auth | None = None,
) -> UpstreamCall:
    """The request for ``target`` in its dialect.  ``original``: the client's own
    body and wire; a target whose dialect speaks that wire gets it by passthrough
    (spec 09 §2.5), any other the canonical ``body``.  ``operation``: ``chat`` or
    ``embeddings`` (09 §5).  ``auth``: the connection's credential as ``ready_auth``
    returned it (None: the connection's as stored)."""
    dialect = dialect_of(target)
    connection = target.connection
    if auth is None:
        auth = connection.auth
    base_url = connection.base_url or target.provider.base_url
    if operation == "embeddings":
        return dialect.embeddings_request(
            base_url=base_url,
            api_key=connection.api_key,
            model=target.model.upstream_id,
            body=body,
            auth=auth,
        )
    if original is not None and original.surface in dialect.surfaces:
        return dialect.passthrough_request(
            base_url=base_url,
            api_key=connection.api_key,
            model=target.model.upstream_id,
            body=original.body,
            stream=stream,
            forward=original.forward,
            surface=original.surface,
            auth=auth,
        )
    return dialect.build_request(
        base_url=base_url,
        api_key=connection.api_key,
        model=target.model.upstream_id,
        body=body,
        stream=stream,
        auth=auth,
    )


async def ready_auth(target: Target) -> Auth | None:
    """The connection's credential ready for a request: a token minted (or taken
    from the cache) where its kind needs one (spec 10 §1).  Raises
    ``CredentialUnavailable``; ``credential_failure`` turns that into the attempt's
    result."""
    auth = target.connection.auth
    if not credential_sources.needs_minting(auth):
        return auth
    return await credential_sources.ready(auth, target.provider.outbound)


#: the statuses that say a minted credential is no longer taken (spec 03 §8.3)
_REFUSED = frozenset({401, 403})


def drop_refused(target: Target, auth: Auth | None, outcome: object) -> None:
    """A minted credential the upstream refused leaves the cache (the attempt still
    counts as an auth failure; docs/decisions.md)."""
    if (
        isinstance(outcome, AttemptResult)
        and outcome.http_status in _REFUSED
        and auth is not None
        and target.connection.auth is not None
        and auth is not target.connection.auth
    ):
        credential_sources.refused(target.connection.auth, auth)


def credential_failure(
    result: AttemptResult, exc: credential_sources.CredentialUnavailable
) -> AttemptResult:
    """An attempt that never reached the upstream: no credential could be had."""
    if exc.reason == "auth":
        result.failure = credential_refused()
    else:
        result.failure = classify_transport(TransportFailure.CONNECT)
    result.error = UpstreamError(message=str(exc))
    result.latency_s = time.perf_counter() - result.started
    return result


async def dispatch(
    target: Target,
    call: UpstreamCall,
    *,
    stream: bool,
    options: Options,
    idle_timeout_ms: int,
    created: int,
    result: AttemptResult | None = None,
) -> AttemptResult | OpenStream:
    """Send ``call`` (``build_call``) to ``target``; a stream comes back at its first
    content token.  ``result``: a record the proxy fills as the exchange goes, so a
    caller whose call is cancelled still knows the status and first-byte time it
    got."""
    dialect = dialect_of(target)
    if result is not None:
        result.passthrough = call.passthrough
    client = client_for(target.provider.kind, target.provider.outbound)
    attempt_started(target)
    gauge = metrics.bounded(metrics.UPSTREAM_IN_FLIGHT, target.provider.slug)
    gauge.inc()
    try:
        if stream:
            first = options.first_token_timeout_ms
            return await open_stream(
                client,
                dialect,
                call,
                timeout_s=options.timeout_ms / 1000,
                first_token_s=first / 1000 if first else None,
                idle_timeout_s=idle_timeout_ms / 1000,
                created=created,
                result=result,
            )
        return await call_json(
            client,
            dialect,
            call,
            timeout_s=options.timeout_ms / 1000,
            created=created,
            result=result,
        )
    finally:
        gauge.dec()
