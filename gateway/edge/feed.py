"""Publishing each finished request to the live routing feed (spec 06 §4.2).

``publish(request_row, attempt_rows)`` is called once per request, at its end, with
the rows ``RunRecord.rows()`` made for the log.  It never blocks or fails the
request:

1. When nobody is in the group (no admin page open) it returns at once: there is
   no one to tell.  The in-memory layer knows that for free.  On Redis a
   ``group_send`` costs ~150 µs of event-loop CPU even to an empty group, so the
   member count is read instead, in the background, at most once per
   ``LISTENER_CHECK_SECONDS``; a page opened meanwhile sees its first decisions
   up to that long later.  A failed count is taken as "someone may listen", so
   a broken layer still shows up as counted drops.
2. Otherwise it starts a background task and returns; nothing awaits that task.
   The task builds the message (``feed_message``) and hands it to the layer's
   ``group_send`` under a ``PUBLISH_TIMEOUT_SECONDS`` deadline.
3. A layer error, a missed deadline, or more than ``MAX_PENDING`` publishes
   already in flight drops the message and counts it in
   ``omniroute_feed_messages_dropped_total``.

The rows are only read, never changed, so the recorder may write them meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from telemetry import metrics
from telemetry.consumers import FEED_GROUP

logger = logging.getLogger(__name__)

PUBLISH_TIMEOUT_SECONDS = 0.05  # spec 06 §4.2: slower than this is a drop
# Publishes in flight per process; a stalled layer costs at most this many tasks.
MAX_PENDING = 256
LISTENER_CHECK_SECONDS = 1.0
ATTEMPT_FIELDS = ("target", "result", "http_status", "latency_ms")
TIER_FIELDS = (
    "smart_alias",
    "smart_mode",
    "tier",
    "tier_score",
    "tier_source",
    "tier_signals",
    "tier_target",
)


def _timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _cost(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def feed_message(
    request: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The ``routing_decision`` message for one request's log rows: JSON and
    msgpack types only (the Redis layer serialises with msgpack)."""
    message: dict[str, Any] = {
        "type": "routing_decision",
        "ts": _timestamp(request.get("finished_at")),
        "request_id": str(request["id"]),
        "api_key_prefix": request.get("api_key_prefix"),
        "api_key": request.get("api_key_name"),
        "requested_model": request.get("requested_model"),
        "route": request.get("route"),
        "strategy": request.get("strategy"),
    }
    for name in TIER_FIELDS:  # absent from the row when no smart alias ran
        message[name] = request.get(name)
    signals = message["tier_signals"]
    message["tier_signals"] = list(signals) if signals is not None else None
    message.update(
        {
            "session_id": request.get("session_id"),
            "served_model": request.get("served_model"),
            "http_status": request.get("http_status"),
            "status": request.get("status"),
            "latency_ms": request.get("latency_ms"),
            "ttft_ms": request.get("ttft_ms"),
            "cost_usd": _cost(request.get("cost_usd")),
            "auto_decision": request.get("auto_decision"),
            "attempts": [
                {name: attempt.get(name) for name in ATTEMPT_FIELDS}
                for attempt in attempts
            ],
        }
    )
    return message


def member_counter(layer: Any) -> Callable[[], Awaitable[int]] | None:
    """A coroutine function counting the group's live members on ``layer``, or
    None when the layer offers no way to (then every message is published).

    For ``channels_redis`` it reads the group's sorted set the way its own
    ``group_send`` does (members scored by join time, expired after
    ``group_expiry``), with one ``ZCOUNT``.
    """
    group_key = getattr(layer, "_group_key", None)
    connection = getattr(layer, "connection", None)
    consistent_hash = getattr(layer, "consistent_hash", None)
    expiry = getattr(layer, "group_expiry", None)
    if group_key is None or connection is None or consistent_hash is None:
        return None

    async def count() -> int:
        redis = connection(consistent_hash(FEED_GROUP))
        since = int(time.time()) - int(expiry or 0)
        return int(await redis.zcount(group_key(FEED_GROUP), since, "+inf"))

    return count


class FeedPublisher:
    """Starts the background publishes and keeps them referenced until done;
    remembers whether anyone listens on a layer that can only tell by a query."""

    __slots__ = ("checked_at", "checking", "listening", "pending")

    def __init__(self) -> None:
        self.pending: set[asyncio.Task[Any]] = set()
        self.listening = False
        self.checked_at = float("-inf")
        self.checking = False

    def publish(
        self, request: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]
    ) -> None:
        try:
            layer = get_channel_layer()
            if layer is None or not self.may_listen(layer):
                return
            if len(self.pending) >= MAX_PENDING:
                metrics.FEED_MESSAGES_DROPPED.inc()
                return
            self._spawn(_deliver(layer, request, attempts))
        except Exception:  # a misconfigured layer must not fail the request
            metrics.FEED_MESSAGES_DROPPED.inc()
            logger.warning("live feed: message dropped", exc_info=True)

    def may_listen(self, layer: Any) -> bool:
        if isinstance(layer, InMemoryChannelLayer):
            return bool(layer.groups.get(FEED_GROUP))
        count = member_counter(layer)
        if count is None:
            return True
        now = time.monotonic()
        if not self.checking and now - self.checked_at >= LISTENER_CHECK_SECONDS:
            self.checking, self.checked_at = True, now
            self._spawn(self._check(count))
        return self.listening

    async def _check(self, count: Callable[[], Awaitable[int]]) -> None:
        try:
            async with asyncio.timeout(PUBLISH_TIMEOUT_SECONDS):
                self.listening = await count() > 0
        except Exception:  # noqa: BLE001 - unknown: publish, and count the failures
            self.listening = True
        finally:
            self.checking = False

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)


async def _deliver(
    layer: Any, request: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]
) -> None:
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_SECONDS):
            await layer.group_send(FEED_GROUP, feed_message(request, attempts))
    except TimeoutError:
        metrics.FEED_MESSAGES_DROPPED.inc()
    except Exception:
        metrics.FEED_MESSAGES_DROPPED.inc()
        logger.debug("live feed: message dropped", exc_info=True)


publisher = FeedPublisher()
publish = publisher.publish
