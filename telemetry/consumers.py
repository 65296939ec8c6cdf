"""The live routing feed socket, ``/ws/routing/`` (spec 06 §4.2, 01 websocket row).

``RoutingFeedConsumer`` serves one admin page.  Steps and invariants:

1. A refused handshake is accepted, then closed, so that the client reads the code:
   a user who is not an active staff member (anonymous included), or staff without
   the Live routing page's permissions (the request and attempt logs' view rights,
   ``providers.console_access``), is closed with ``4403`` at once and never joins
   the group.
2. Staff join the channel-layer group ``FEED_GROUP``, then the handshake is
   accepted (a client that is connected is on the feed); the gateway sends one
   ``routing_decision`` event there per finished request (``gateway.edge.feed``), and
   Channels dispatches it to ``routing_decision()`` by its ``type``.
3. Each socket gets at most ``MAX_MESSAGES_PER_SECOND`` decisions per one-second
   window (``RateWindow``).  Decisions past the limit are not queued: they are
   counted, and when the window ends the count goes out as one
   ``{"type": "dropped", "count": N}`` message, so a socket sees at most one such
   message per second.  The layer's own per-channel capacity bounds what waits.
4. Group membership is renewed every ``GROUP_REFRESH_SECONDS``: channel layers
   forget members after ``group_expiry`` (one day by default), and an admin page
   may stay open longer than that.

The feed is one-way: what the client sends is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from providers.console_access import may_open

logger = logging.getLogger(__name__)

FEED_GROUP = "routing_feed"  # spec 06 §4.2
MAX_MESSAGES_PER_SECOND = 50  # spec 06 §4.2, per socket
WINDOW_SECONDS = 1.0
FORBIDDEN_CLOSE_CODE = 4403  # spec 01: non-staff sockets
#: the close frame's reason: what the socket needs, as the page's 403 says
FORBIDDEN_REASON = (
    "Live routing needs a staff user with the permissions: "
    "telemetry.view_requestlog, telemetry.view_attemptlog."
)
# Below the layers' default group_expiry (86 400 s), so membership never lapses.
GROUP_REFRESH_SECONDS = 3600.0


class RateWindow:
    """At most ``limit`` admissions per window of ``window_seconds``; the rest are
    counted until ``take_dropped()``.  A window opens at the first admission after
    the previous one ended.  Time comes in as ``now`` (seconds, monotonic)."""

    __slots__ = ("dropped", "limit", "sent", "window_seconds", "window_start")

    def __init__(self, limit: int, window_seconds: float = WINDOW_SECONDS) -> None:
        self.limit = limit
        self.window_seconds = window_seconds
        self.window_start: float | None = None
        self.sent = 0
        self.dropped = 0

    @property
    def window_end(self) -> float:
        start = self.window_start if self.window_start is not None else 0.0
        return start + self.window_seconds

    def admit(self, now: float) -> bool:
        if self.window_start is None or now >= self.window_end:
            self.window_start, self.sent = now, 0
        if self.sent < self.limit:
            self.sent += 1
            return True
        self.dropped += 1
        return False

    def take_dropped(self) -> int:
        count, self.dropped = self.dropped, 0
        return count


def is_feed_viewer(user: Any) -> bool:
    """Active staff (spec 06 §4.2) who may open the Live routing page; the anonymous
    user has neither flag.  Reads the user's permissions: call it off the loop."""
    return user is not None and may_open(user, "live_routing")


class RoutingFeedConsumer(AsyncJsonWebsocketConsumer):
    """One socket of the live routing feed (see the module docstring)."""

    groups: list[str] = []  # noqa: RUF012 - joined by hand, after the staff check

    async def connect(self) -> None:
        self.window = RateWindow(MAX_MESSAGES_PER_SECOND)
        self.reporter: asyncio.Task[None] | None = None
        self.refresher: asyncio.Task[None] | None = None
        self.joined = False
        allowed = await database_sync_to_async(is_feed_viewer)(self.scope.get("user"))
        if not allowed:
            await self.accept()
            await self.close(code=FORBIDDEN_CLOSE_CODE, reason=FORBIDDEN_REASON)
            return
        # joined before the accept: a client that reads "accepted" is on the feed
        await self.channel_layer.group_add(FEED_GROUP, self.channel_name)
        self.joined = True
        await self.accept()
        self.refresher = asyncio.create_task(self._keep_membership())

    async def disconnect(self, code: int) -> None:
        for task in (getattr(self, "reporter", None), getattr(self, "refresher", None)):
            if task is not None:
                task.cancel()
        if getattr(self, "joined", False):
            self.joined = False
            await self.channel_layer.group_discard(FEED_GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The feed is one-way; client messages are ignored."""

    async def routing_decision(self, event: dict[str, Any]) -> None:
        now = asyncio.get_running_loop().time()
        if self.window.admit(now):
            await self.send_json(event)
        elif self.reporter is None:
            delay = max(0.0, self.window.window_end - now)
            self.reporter = asyncio.create_task(self._report_dropped(delay))

    async def _report_dropped(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self.reporter = None
        count = self.window.take_dropped()
        if count:
            with contextlib.suppress(RuntimeError, OSError):  # closed meanwhile
                await self.send_json({"type": "dropped", "count": count})

    async def _keep_membership(self) -> None:
        while True:
            await asyncio.sleep(GROUP_REFRESH_SECONDS)
            try:
                await self.channel_layer.group_add(FEED_GROUP, self.channel_name)
            except Exception:  # noqa: BLE001 - a layer outage; retried next period
                logger.warning("live feed: could not renew the group membership")
