"""``Persist``: where a finished run goes (spec 06 §1): its metrics at once, its rows
to the recorder's queue (or written inline with ``OMNIROUTE_LOG_SYNC``), its events to
the webhooks and its rows to the live routing feed, once the answer is sent."""

from __future__ import annotations

import asyncio

from django.conf import settings

from gateway.edge import feed
from gateway.kernel.types import RoutingTable
from gateway.pipeline.record import RunRecord
from telemetry import recorder, webhooks


class Persist:
    """Receives the finished run, writes it (queued, or inline in sync mode) and
    publishes it to the live routing feed."""

    __slots__ = ("run", "table")

    def __init__(self, table: RoutingTable | None = None) -> None:
        self.run: RunRecord | None = None
        self.table = table

    def __call__(self, run: RunRecord) -> None:
        self.run = run
        run.emit_metrics()

    async def flush(self) -> None:
        """Queue the rows; with ``OMNIROUTE_LOG_SYNC`` write them before returning."""
        run, self.run = self.run, None
        if run is None:
            return
        if run.limits is not None:  # spec 08 §6: reconcile the key's reservation
            run.limits(run)
        if run.events and self.table is not None:
            webhooks.publish_events(run.events, self.table)
        request, attempts = run.rows()
        # a background task, never awaited here; the feed shows the key's name
        feed.publish({**request, "api_key_name": run.key.name}, attempts)
        if settings.OMNIROUTE_LOG_SYNC:
            try:
                await asyncio.to_thread(recorder.record_now, request, attempts)
            except asyncio.CancelledError:
                recorder.record(request, attempts)
                raise
            return
        recorder.record(request, attempts)
