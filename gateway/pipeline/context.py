"""Request context, reply types and the refusals decided before the attempt loop."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.edge.auth import authenticate
from gateway.ids import new_id
from gateway.inbound.chat import RequestError
from gateway.inbound.render import JSONReply, error_reply
from gateway.kernel.chain import ChainError
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.pipeline.record import RunRecord
from telemetry import metrics

V1_ENDPOINT = "/v1/chat/completions"
CLASSIC_ENDPOINT = "/chat/completions"


@dataclass(slots=True, kw_only=True)
class ChatContext:
    endpoint: str
    headers: Mapping[str, str]
    table: RoutingTable
    record: Callable[[RunRecord], None]
    started: float = field(default_factory=time.perf_counter)
    received_at: float = field(default_factory=time.time)
    request_id: uuid.UUID = field(default_factory=new_id)
    #: the request's ``stream`` flag once its body is parsed (the in-flight label)
    stream: bool = False
    in_flight: bool = False

    @property
    def classic(self) -> bool:
        return self.endpoint == CLASSIC_ENDPOINT

    def start_run(self, key: KeyPolicy) -> RunRecord:
        """The log record of this request, for ``key``."""
        return RunRecord.start(
            self.request_id,
            self.endpoint,
            key,
            self.table.version,
            self.received_at,
            self.started,
        )

    def _gauge(self) -> Any:
        return metrics.bounded(
            metrics.REQUESTS_IN_FLIGHT, "true" if self.stream else "false"
        )

    def enter(self) -> None:
        """The request is in progress (spec 06 §2 ``omniroute_requests_in_flight``)."""
        if not self.in_flight:
            self.in_flight = True
            self._gauge().inc()

    def leave(self) -> None:
        if self.in_flight:
            self.in_flight = False
            self._gauge().dec()

    def streaming(self, stream: bool) -> None:
        """The parsed body's ``stream`` flag: the in-flight count moves label."""
        if stream == self.stream:
            return
        counted = self.in_flight
        self.leave()
        self.stream = stream
        if counted:
            self.enter()


@dataclass(slots=True, kw_only=True)
class StreamReply:
    headers: list[tuple[bytes, bytes]]
    body: AsyncIterator[bytes]
    status: int = 200


def refusal(
    ctx: ChatContext, exc: RequestError | ChainError, run: RunRecord | None
) -> JSONReply:
    metrics.bounded(metrics.REFUSALS, exc.code).inc()
    reply = error_reply(
        exc.status,
        message=exc.message,
        error_type=exc.error_type,
        code=exc.code,
        param=exc.param,
    )
    if run is not None:
        run.refuse(exc.status, exc.code, exc.message)
        ctx.record(run)
    return reply


def authenticate_request(ctx: ChatContext) -> KeyPolicy | JSONReply:
    """The key, or the 401 reply (counted, never logged: spec 06 §1.1)."""
    try:
        return authenticate(ctx.headers, ctx.table, ctx.received_at)
    except RequestError as exc:
        # no log row, but a client request all the same (06 §2: by status sent)
        metrics.bounded(metrics.REQUESTS, "unresolved", "none", str(exc.status)).inc()
        return refusal(ctx, exc, None)


def refuse_oversize(ctx: ChatContext, key: KeyPolicy, limit: int) -> JSONReply:
    """413 ``body_too_large`` for an authenticated request, logged as refused."""
    run = ctx.start_run(key)
    exc = RequestError(413, "body_too_large", f"Request body exceeds {limit} bytes")
    return refusal(ctx, exc, run)


def client_left_early(ctx: ChatContext, key: KeyPolicy) -> RunRecord:
    """The record of a client that went away before its body had arrived."""
    run = ctx.start_run(key)
    run.client_closed(499, False)
    return run
