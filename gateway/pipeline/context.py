"""``ChatContext``: what the front door knows of a request before its body is read:
the endpoint, the headers, the routing table it is served with, when it arrived, its
id, the recorder its run goes to, and its place in the in-flight gauge."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.ids import new_id
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.pipeline.record import RunRecord
from telemetry import metrics


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
