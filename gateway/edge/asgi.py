"""The lean front door for ``/v1/chat/completions`` and ``/chat/completions``.

No Django middleware runs here (spec style §1.3): this module reads the body with its
size limit, runs the request as a task beside a watcher of ``receive()``, and cancels
the request, and with it the upstream call, the moment the client disconnects.
Everything it sends comes from ``gateway.pipeline.handle``; it only adapts replies to
ASGI.

Shutdown (spec 08 §4, ``gateway.drain``): while the process drains, a new request gets
503 ``shutting_down`` with ``Retry-After: 1`` (logged as refused once its key is
known); a request being served is tracked, and the drain's cut, if it comes before
the reply is decided, turns it into the same 503.  A committed stream is ended by
``StreamRelay`` with its final ``shutting_down`` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from gateway import drain
from gateway.config.state import tables
from gateway.edge.auth import authenticate_key
from gateway.edge.persist import Persist
from gateway.inbound import REGISTRY
from gateway.inbound.base import (
    JSON_CONTENT_TYPE,
    JSONReply,
    StreamReply,
    Wire,
    serve,
)
from gateway.inbound.chat import WIRE as CHAT_WIRE
from gateway.kernel.exchange import RequestError
from gateway.kernel.types import KeyPolicy
from gateway.pipeline.context import ChatContext
from gateway.pipeline.record import RunRecord
from gateway.pipeline.report import refusal
from gateway.pipeline.result import Failure
from telemetry import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

logger = logging.getLogger(__name__)
#: every path a client wire serves (the rest is Django's)
PATHS = frozenset(REGISTRY)


class ClientGone(Exception):
    """The client disconnected before its body arrived."""


class BodyTooLarge(Exception):
    pass


class BodyTimeout(Exception):
    """The body stopped arriving for longer than the body timeout (408)."""


async def read_body(
    receive: Receive,
    limit: int,
    declared: int | None = None,
    idle_s: float | None = None,
) -> bytes:
    """The whole body, at most ``limit`` bytes (``BodyTooLarge``), each part within
    ``idle_s`` of the one before (``BodyTimeout``; None: no bound)."""
    if declared is not None and declared > limit:
        raise BodyTooLarge
    parts: list[bytes] = []
    size = 0
    while True:
        try:
            async with asyncio.timeout(idle_s):
                message = await receive()
        except TimeoutError:
            raise BodyTimeout from None
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


async def wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def send_json(send: Send, reply: JSONReply) -> None:
    headers = [JSON_CONTENT_TYPE, *reply.headers]
    if reply.headers and reply.headers[0] == JSON_CONTENT_TYPE:
        headers = list(reply.headers)
    headers.append((b"content-length", str(len(reply.body)).encode()))
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": headers}
    )
    await send({"type": "http.response.body", "body": reply.body})


def _headers(scope: Scope) -> dict[str, str]:
    return {
        k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
    }


def _declared_length(headers: Mapping[str, str]) -> int | None:
    value = headers.get("content-length")
    return int(value) if value and value.isascii() and value.isdigit() else None


def authenticate_request(wire: Wire, ctx: ChatContext) -> KeyPolicy | Failure:
    """The key, or the 401 (counted, never logged: spec 06 §1.1)."""
    try:
        return authenticate_key(
            wire.credential(ctx.headers), ctx.table, ctx.received_at
        )
    except RequestError as exc:
        # no log row, but a client request all the same (06 §2: by status sent)
        metrics.bounded(
            metrics.REQUESTS, wire.surface, "unresolved", "none", str(exc.status)
        ).inc()
        return refusal(ctx, exc, None)


def body_timeout() -> RequestError:
    """408 ``request_timeout``: the body stopped arriving (a slow-body attack)."""
    seconds = settings.OMNIROUTE_BODY_TIMEOUT_S
    return RequestError(
        408, "request_timeout", f"The request body stalled for more than {seconds} s"
    )


def refuse_oversize(ctx: ChatContext, key: KeyPolicy, limit: int) -> Failure:
    """413 ``body_too_large`` for an authenticated request, logged as refused."""
    exc = RequestError(413, "body_too_large", f"Request body exceeds {limit} bytes")
    return refusal(ctx, exc, ctx.start_run(key))


def client_left_early(ctx: ChatContext, key: KeyPolicy) -> RunRecord:
    """The record of a client that went away before its body had arrived."""
    run = ctx.start_run(key)
    run.client_closed(499, False)
    return run


async def _serve(
    wire: Wire,
    ctx: ChatContext,
    key: KeyPolicy,
    body: bytes,
    send: Send,
    persist: Persist,
) -> None:
    # spec 06 §2: in progress until the answer is sent, labelled by the request's
    # ``stream`` flag from the moment the pipeline has parsed the body
    ctx.enter()
    try:
        reply = await serve(wire, body, ctx, key)
        drain.committed()
        if isinstance(reply, JSONReply):
            await persist.flush()
            await send_json(send, reply)
            return
        await _send_stream(reply, send, persist)
    finally:
        ctx.leave()


async def _send_stream(reply: StreamReply, send: Send, persist: Persist) -> None:
    try:
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": reply.headers,
            }
        )
        async for frame in reply.body:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
    finally:
        await reply.body.aclose()  # type: ignore[attr-defined]
    await persist.flush()
    await send({"type": "http.response.body", "body": b""})


async def chat_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one request on a client wire's path."""
    wire = REGISTRY.get(scope["path"], CHAT_WIRE)
    headers = _headers(scope)
    if scope["method"] != "POST":
        failure = Failure(
            status=405,
            code="method_not_allowed",
            message="Use POST",
            error_type="invalid_request_error",
            headers=[(b"allow", b"POST")],  # spec 09 §1
        )
        await send_json(send, wire.error(failure))
        return
    table = await tables.ensure()
    persist = Persist(table)
    ctx = ChatContext(
        endpoint=wire.surface, headers=headers, table=table, record=persist
    )
    if drain.is_draining():  # spec 08 §4 step 2: any new request, keyed or not
        try:
            found = authenticate_key(
                wire.credential(ctx.headers), ctx.table, ctx.received_at
            )
        except RequestError:
            await send_json(send, wire.error(shutting_down()))
            return
        failure = _refuse_shutting_down(ctx, found)  # logged under its key
        await persist.flush()
        await send_json(send, wire.error(failure))
        return
    key = authenticate_request(wire, ctx)
    if isinstance(key, Failure):  # 401 before the body is even read
        await send_json(send, wire.error(key))
        return
    body = await _body_or_refusal(wire, ctx, key, receive, send, persist)
    if body is None:
        return
    with drain.registry.track(asyncio.current_task()) as guard:
        ctx.record = _cut_aware(persist, guard)
        await _serve_watched(wire, ctx, key, body, receive, send, persist)


async def _body_or_refusal(
    wire: Wire,
    ctx: ChatContext,
    key: KeyPolicy,
    receive: Receive,
    send: Send,
    persist: Persist,
) -> bytes | None:
    """The body of an authenticated request, or None once its refusal is sent (413,
    408) or its client has gone; every case is logged under the key."""
    limit = settings.OMNIROUTE_MAX_BODY_BYTES
    try:
        return await read_body(
            receive,
            limit,
            _declared_length(ctx.headers),
            settings.OMNIROUTE_BODY_TIMEOUT_S,
        )
    except BodyTooLarge:
        failure = refuse_oversize(ctx, key, limit)
    except BodyTimeout:
        failure = refusal(ctx, body_timeout(), ctx.start_run(key))
        failure.headers.append((b"connection", b"close"))
    except ClientGone:  # spec 06 §1.1: an authenticated request is logged
        ctx.record(client_left_early(ctx, key))
        await persist.flush()
        return None
    await persist.flush()
    await send_json(send, wire.error(failure))
    return None


def _refused(status: int, code: str, message: str) -> Failure:
    return Failure(
        status=status,
        code=code,
        message=message,
        error_type="invalid_request_error",
        headers=[(b"connection", b"close")],
    )


def header_refusal(scope: Scope) -> Failure | None:
    """Before anything else (issue #16): all headers together over
    ``OMNIROUTE_MAX_HEADER_BYTES`` (431), or a ``Host`` outside ``ALLOWED_HOSTS`` on
    a client wire's path (400, as Django answers its own paths)."""
    size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
    limit = settings.OMNIROUTE_MAX_HEADER_BYTES
    if size > limit:
        return _refused(
            431,
            "request_header_fields_too_large",
            f"Request headers exceed {limit} bytes",
        )
    if scope["path"] in REGISTRY and not _host_allowed(scope):
        return _refused(400, "invalid_host", "The Host header is not allowed")
    return None


def _host_allowed(scope: Scope) -> bool:
    host = next((v for k, v in scope["headers"] if k == b"host"), None)
    if host is None:  # HTTP/1.0 without Host: nothing to check
        return True
    name, _ = split_domain_port(host.decode("latin-1"))
    return bool(name) and validate_host(name, settings.ALLOWED_HOSTS)


def too_large(message: str) -> Failure:
    return _refused(413, "body_too_large", message)


def timed_out() -> Failure:
    exc = body_timeout()
    return _refused(exc.status, exc.code, exc.message)


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length``, when it is a number."""
    return _declared_length(_headers(scope))


def refusal_reply(scope: Scope, failure: Failure) -> JSONReply:
    """``failure`` in the envelope of the path's wire (OpenAI's elsewhere)."""
    return REGISTRY.get(scope["path"], CHAT_WIRE).error(failure)


def shutting_down() -> Failure:
    """503 ``shutting_down`` with ``Retry-After: 1`` (spec 01, 08 §4)."""
    return Failure(
        status=503,
        code=drain.SHUTDOWN_CODE,
        message=drain.SHUTDOWN_MESSAGE,
        error_type=drain.SHUTDOWN_ERROR_TYPE,
        retry_after_s=drain.RETRY_AFTER_SECONDS,
    )


def shutting_down_reply() -> JSONReply:
    """The 503 ``shutting_down`` of a path no wire serves (Django's, while draining)."""
    return CHAT_WIRE.error(shutting_down())


def _refuse_shutting_down(ctx: ChatContext, key: KeyPolicy) -> Failure:
    """The 503 for a request that made no upstream call; logged as refused."""
    metrics.bounded(metrics.REFUSALS, drain.SHUTDOWN_CODE).inc()
    run = ctx.start_run(key)
    run.refuse(503, drain.SHUTDOWN_CODE, drain.SHUTDOWN_MESSAGE)
    ctx.record(run)
    return shutting_down()


def _cut_aware(persist: Persist, guard: drain.InFlight) -> Callable[[RunRecord], None]:
    """``ctx.record`` of a tracked request.  A cut before the reply is decided cancels
    the attempt loop, which logs a client disconnect (499); the client gets the 503
    instead, and so does the log."""

    def record(run: RunRecord) -> None:
        if guard.stopping and not guard.committed and run.status == "client_closed":
            run.refuse(503, drain.SHUTDOWN_CODE, drain.SHUTDOWN_MESSAGE)
            run.client_disconnected = False
        persist(run)

    return record


async def _serve_guarded(
    wire: Wire,
    ctx: ChatContext,
    key: KeyPolicy,
    body: bytes,
    send: _SendTracker,
    persist: Persist,
) -> None:
    """``_serve``, with the drain's cut before a decided reply turned into the 503."""
    guard = drain.current()
    try:
        if guard is None or not guard.stopping:  # else: it arrived after the cut
            await _serve(wire, ctx, key, body, send, persist)
            return
    except asyncio.CancelledError:
        if guard is None or not guard.absorb():
            raise  # a client disconnect or the server's own cancel
        if guard.committed or send.started:
            return  # a stream ended itself, or a client stopped reading its reply
    if persist.run is None:  # cut before the attempt loop logged anything
        await send_json(send, wire.error(_refuse_shutting_down(ctx, key)))
    else:
        await send_json(send, wire.error(shutting_down()))


class _Watch:
    """Cancels the serving task the moment the client disconnects."""

    __slots__ = ("gone", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.gone = False

    async def __call__(self, receive: Receive) -> None:
        await wait_for_disconnect(receive)
        self.gone = True
        self.task.cancel()


async def _serve_watched(
    wire: Wire,
    ctx: ChatContext,
    key: KeyPolicy,
    body: bytes,
    receive: Receive,
    send: Send,
    persist: Persist,
) -> None:
    """Serve in this task; one watcher task turns a disconnect into a cancel."""
    current = asyncio.current_task()
    assert current is not None
    watch = _Watch(current)
    watcher = asyncio.create_task(watch(receive))
    sent = _SendTracker(send)
    try:
        await _serve_guarded(wire, ctx, key, body, sent, persist)
    except asyncio.CancelledError:
        if not watch.gone:
            raise
        current.uncancel()  # the client left; nothing more to send
    except (ConnectionError, OSError):
        pass  # the socket broke while sending; the run is recorded below
    except Exception:
        logger.exception("unhandled error while serving %s", ctx.endpoint)
        if not sent.started:
            failure = Failure(
                status=500,
                code="internal_error",
                message="Internal gateway error",
                error_type="api_error",
            )
            await send_json(send, wire.error(failure))
    finally:
        watcher.cancel()
        await persist.flush()


class _SendTracker:
    __slots__ = ("send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = True
        await self.send(message)
