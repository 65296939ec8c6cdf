"""Publishing gateway events to webhook endpoints (spec 02 §12.3, §12.4).

``publish_events(events, table)`` runs after the response is finished and never blocks
or fails the request: the subscribers come from the in-memory routing table, and with
none it returns at once; otherwise it only does ``put_nowait`` of (event, endpoint ids)
into a bounded queue.  One daemon thread drains the queue, inserts the delivery rows
(idempotent per endpoint and event id) in one transaction per batch and, after the
commit, hands them to Celery or to the embedded worker (``telemetry.webhook_delivery``).
A full queue or a failed insert drops the events, logged at ERROR and counted in
``omniroute_webhook_enqueue_failures_total``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import close_old_connections, connections, transaction

from gateway.kernel.types import RoutingTable
from telemetry import metrics, webhook_delivery
from telemetry.services import create_deliveries

logger = logging.getLogger(__name__)

QUEUE_EVENTS = 1000  # events waiting for their rows; more are dropped (counted)
BATCH_EVENTS = 100
SHUTDOWN_DEADLINE_SECONDS = 5.0

_Job = tuple[Mapping[str, Any], tuple[int, ...]]


def subscribers(table: RoutingTable, event: object) -> tuple[int, ...]:
    """Ids of the table's active endpoints subscribed to ``event``."""
    return tuple(
        hook.endpoint_id
        for hook in table.webhooks
        if hook.active and event in hook.events
    )


class Publisher:
    """The bounded queue of events and the thread that turns them into rows."""

    def __init__(self, maxsize: int = QUEUE_EVENTS) -> None:
        self._queue: queue.Queue[_Job] = queue.Queue(maxsize=maxsize)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, jobs: Sequence[_Job]) -> None:
        self._start()
        for job in jobs:
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                metrics.WEBHOOK_ENQUEUE_FAILURES.inc(len(job[1]))
                logger.error(  # noqa: TRY400 - one line; there is no traceback to show
                    "webhook event %s dropped: the publish queue is full",
                    job[0].get("id"),
                )

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(
                target=self._run, name="omniroute-webhook-publisher", daemon=True
            )
            self._thread.start()

    def _next_batch(self, timeout_s: float | None) -> list[_Job]:
        try:
            batch = [self._queue.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while len(batch) < BATCH_EVENTS:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def write(self, batch: Sequence[_Job]) -> None:
        """Insert the rows of ``batch`` in one transaction (delivery after commit)."""
        try:
            with transaction.atomic():
                for event, endpoint_ids in batch:
                    create_deliveries(event, endpoint_ids)
        except Exception:
            lost = sum(len(ids) for _, ids in batch)
            metrics.WEBHOOK_ENQUEUE_FAILURES.inc(lost)
            logger.exception("webhook deliveries not stored (%d dropped)", lost)
        finally:
            close_old_connections()

    def _run(self) -> None:
        try:
            while True:
                batch = self._next_batch(timeout_s=None)
                stop = any(job is _STOP for job in batch)
                self.write([job for job in batch if job is not _STOP])
                if stop:
                    return
        finally:
            connections.close_all()

    def stop(self, timeout_s: float = SHUTDOWN_DEADLINE_SECONDS) -> None:
        """Write what is queued (best effort within ``timeout_s``), end the thread."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            return
        thread.join(timeout_s)


_STOP: _Job = ({}, ())
publisher = Publisher()


def publish_events(events: list[dict[str, Any]], table: RoutingTable) -> None:
    """Hand finished-request events to the delivery machinery (never blocks)."""
    jobs = [
        (event, ids)
        for event in events
        if (ids := subscribers(table, event.get("event")))
    ]
    if not jobs:
        return
    try:
        publisher.put(jobs)
    except RuntimeError:
        # ``can't start new thread``: the request is finished and must stay so.
        metrics.WEBHOOK_ENQUEUE_FAILURES.inc(sum(len(ids) for _, ids in jobs))
        logger.exception("webhook publisher unavailable; events dropped")


def start() -> None:
    """At gateway start-up: resume pending deliveries (embedded worker, no broker)."""
    webhook_delivery.worker.start()


def shutdown() -> None:
    publisher.stop()
    webhook_delivery.worker.stop(timeout_s=webhook_delivery.TIMEOUT_SECONDS + 1)
