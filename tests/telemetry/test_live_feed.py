"""The live routing feed (spec 06 §4.2): the message built from a finished request,
fire-and-forget publishing, and the ``/ws/routing/`` socket (staff only, 4403 for
everyone else, 50 messages per second per socket).

Sockets are driven with ``WebsocketCommunicator`` against the real ASGI application
and an in-memory channel layer.  The session middleware reads the database from a
worker thread, so those tests need ``transaction=True``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.test import Client
from prometheus_client import REGISTRY

from gateway.edge import feed
from gateway.kernel.failover import Item
from gateway.kernel.types import (
    ConnectionInfo,
    KeyPolicy,
    ModelInfo,
    ProviderInfo,
    Target,
)
from gateway.pipeline.record import RunRecord
from gateway.pipeline.tiers import TierOutcome
from omniroute_site.asgi import application
from providers.console_access import TRAFFIC_PERMISSIONS
from telemetry.consumers import (
    FEED_GROUP,
    FORBIDDEN_REASON,
    MAX_MESSAGES_PER_SECOND,
    RateWindow,
)

ORIGIN = (b"origin", b"http://localhost")
FEED_FIELDS = {
    "type",
    "ts",
    "request_id",
    "api_key_prefix",
    "api_key",  # issue #15: the key's name for the live page
    "requested_model",
    "route",
    "strategy",
    "smart_alias",
    "smart_mode",
    "tier",
    "tier_score",
    "tier_source",
    "tier_signals",
    "tier_target",
    "session_id",
    "served_model",
    "http_status",
    "status",
    "latency_ms",
    "ttft_ms",
    "cost_usd",
    "auto_decision",
    "attempts",
}


@pytest.fixture(autouse=True)
def in_memory_layer(settings: Any) -> Iterator[None]:
    """A fresh in-memory layer per test, whatever ``REDIS_URL`` says."""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    yield
    feed.publisher.pending.clear()
    feed.publisher.listening = False
    feed.publisher.checked_at = float("-inf")


def dropped_total() -> float:
    value = REGISTRY.get_sample_value("omniroute_feed_messages_dropped_total")
    return value or 0.0


def _target(slug: str, model: str, connection: str = "main") -> Target:
    return Target(
        provider=ProviderInfo(
            slug=slug, kind="openai", base_url="https://x.example/v1"
        ),
        model=ModelInfo(provider=slug, model_id=model),
        connection=ConnectionInfo(provider=slug, name=connection),
    )


@pytest.fixture
def finished_run() -> RunRecord:
    """A streamed request through the smart alias ``coder`` that failed over from
    ``pa/m1`` (HTTP 503) to ``pb/m2``."""
    run = RunRecord.start(
        uuid.UUID("00000000-0000-4000-8000-000000000042"),
        "/v1/chat/completions",
        KeyPolicy(id=7, name="ops", prefix="sk-or-ops"),
        12,
        received_at=1_750_000_000.0,
        started=time.perf_counter(),
    )
    run.stream = True
    run.requested_model = "coder"
    run.route, run.strategy = "combo:team", "priority"
    run.session_id = "sess-1"
    run.auto_decision = {"router": "rules", "chosen": "pb/m2"}
    run.smart(
        TierOutcome(
            alias="coder",
            tier="hard",
            source="classifier",
            score=7,
            signals=("tools:+3", "code:+4"),
            target="team",
            mode="enforce",
        )
    )
    first, second = _target("pa", "m1"), _target("pb", "m2")
    run.add_attempt(
        first,
        Item(
            model="pa/m1",
            slot=0,
            via="team",
            status="failed",
            reason="server_error",
            latency_ms=80,
            http_status=503,
        ),
        1_750_000_000.01,
        None,
    )
    run.add_attempt(
        second,
        Item(model="pb/m2", slot=1, via="team", status="served", latency_ms=420),
        1_750_000_000.1,
        None,
        billable=True,
    )
    run.succeed(second, 200, 2, True)
    run.cost = Decimal("0.0012345")
    run.ttft_s = 0.25
    run.finished_at = 1_750_000_000.5
    return run


def test_feed_message_from_a_run_record_has_every_field(finished_run: RunRecord):
    request, attempts = finished_run.rows()

    message = feed.feed_message(request, attempts)

    assert set(message) == FEED_FIELDS
    assert message == {
        "type": "routing_decision",
        "ts": "2025-06-15T15:06:40.500Z",
        "request_id": "00000000-0000-4000-8000-000000000042",
        "api_key_prefix": "sk-or-ops",
        "api_key": None,  # the rows carry no name; the front door adds it
        "requested_model": "coder",
        "route": "combo:team",
        "strategy": "priority",
        "smart_alias": "coder",
        "smart_mode": "enforce",
        "tier": "hard",
        "tier_score": 7,
        "tier_source": "classifier",
        "tier_signals": ["tools:+3", "code:+4"],
        "tier_target": "team",
        "session_id": "sess-1",
        "served_model": "pb/m2",
        "http_status": 200,
        "status": "success",
        "latency_ms": 500,
        "ttft_ms": 250,
        "cost_usd": 0.0012345,
        "auto_decision": {"router": "rules", "chosen": "pb/m2"},
        "attempts": [
            {
                "target": "pa/m1@main",
                "result": "server_error",
                "http_status": 503,
                "latency_ms": 80,
            },
            {
                "target": "pb/m2@main",
                "result": "success",
                "http_status": None,
                "latency_ms": 420,
            },
        ],
    }


def test_feed_message_without_smart_routing_has_null_tier_fields(
    finished_run: RunRecord,
):
    finished_run.tier_outcome = None
    finished_run.cost = None
    request, attempts = finished_run.rows()

    message = feed.feed_message(request, attempts)

    assert set(message) == FEED_FIELDS
    assert {name: message[name] for name in feed.TIER_FIELDS} == dict.fromkeys(
        feed.TIER_FIELDS
    )
    assert message["cost_usd"] is None


class _Layer:
    """A channel layer whose ``group_send`` fails or stalls; an admin is watching."""

    def __init__(self, *, delay: float = 0.0, error: Exception | None = None):
        self.delay, self.error = delay, error
        self.sent: list[dict[str, Any]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        self.sent.append(message)


async def _publish_with(
    monkeypatch: pytest.MonkeyPatch, layer: Any, run: RunRecord
) -> None:
    monkeypatch.setattr(feed, "get_channel_layer", lambda: layer)
    request, attempts = run.rows()
    feed.publish(request, attempts)
    await asyncio.gather(*feed.publisher.pending)


@pytest.mark.parametrize(
    "layer",
    [
        pytest.param(_Layer(error=ConnectionError("redis down")), id="layer-error"),
        pytest.param(_Layer(delay=0.2), id="over-50-ms"),
    ],
)
async def test_publishing_to_a_failing_or_slow_layer_drops_and_counts(
    monkeypatch: pytest.MonkeyPatch, finished_run: RunRecord, layer: _Layer
):
    before = dropped_total()

    started = time.perf_counter()
    await _publish_with(monkeypatch, layer, finished_run)

    assert layer.sent == []
    assert dropped_total() == before + 1
    assert time.perf_counter() - started < 0.15  # gave up at the 50 ms deadline


async def test_a_layer_that_cannot_be_built_drops_without_failing_the_request(
    monkeypatch: pytest.MonkeyPatch, finished_run: RunRecord
):
    def broken() -> None:
        raise ValueError("bad CHANNEL_LAYERS")

    monkeypatch.setattr(feed, "get_channel_layer", broken)
    request, attempts = finished_run.rows()
    before = dropped_total()

    feed.publish(request, attempts)

    assert dropped_total() == before + 1


async def test_publish_returns_before_the_layer_answers(
    monkeypatch: pytest.MonkeyPatch, finished_run: RunRecord
):
    layer = _Layer(delay=0.01)
    monkeypatch.setattr(feed, "get_channel_layer", lambda: layer)
    request, attempts = finished_run.rows()

    feed.publish(request, attempts)

    assert layer.sent == []  # nothing was awaited by the caller
    await asyncio.gather(*feed.publisher.pending)
    assert [m["request_id"] for m in layer.sent] == [str(finished_run.request_id)]


async def test_publishes_past_the_in_flight_cap_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch, finished_run: RunRecord
):
    monkeypatch.setattr(feed, "MAX_PENDING", 2)
    layer = _Layer(delay=0.01)
    monkeypatch.setattr(feed, "get_channel_layer", lambda: layer)
    request, attempts = finished_run.rows()
    before = dropped_total()

    for _ in range(3):
        feed.publish(request, attempts)
    await asyncio.gather(*feed.publisher.pending)

    assert len(layer.sent) == 2
    assert dropped_total() == before + 1


async def test_nothing_is_published_when_no_socket_listens_in_memory(
    finished_run: RunRecord,
):
    request, attempts = finished_run.rows()

    feed.publish(request, attempts)

    assert feed.publisher.pending == set()


class _CountingLayer(_Layer):
    """A layer shaped like ``channels_redis``'s: it can count a group's members."""

    group_expiry = 86400

    def __init__(self, members: int | Exception) -> None:
        super().__init__()
        self.members = members
        self.counts: list[tuple[str, int, str]] = []

    def _group_key(self, group: str) -> str:
        return f"asgi:group:{group}"

    def consistent_hash(self, value: str) -> int:
        return 0

    def connection(self, index: int) -> Any:
        return self

    async def zcount(self, key: str, low: int, high: str) -> int:
        self.counts.append((key, low, high))
        if isinstance(self.members, Exception):
            raise self.members
        return self.members


@pytest.mark.parametrize(
    ("members", "delivered"),
    [
        pytest.param(0, 0, id="empty-group"),
        pytest.param(2, 1, id="someone-listens"),
        pytest.param(ConnectionError("redis down"), 1, id="count-failed"),
    ],
)
async def test_a_queried_layer_is_asked_for_listeners_once_then_trusted(
    monkeypatch: pytest.MonkeyPatch,
    finished_run: RunRecord,
    members: int | Exception,
    delivered: int,
):
    layer = _CountingLayer(members)
    monkeypatch.setattr(feed, "get_channel_layer", lambda: layer)
    request, attempts = finished_run.rows()

    feed.publish(request, attempts)  # unknown yet: skipped, the count starts
    await asyncio.gather(*feed.publisher.pending)
    feed.publish(request, attempts)  # within the second: the count is trusted
    await asyncio.gather(*feed.publisher.pending)

    assert len(layer.counts) == 1
    key, since, high = layer.counts[0]
    assert (key, high) == ("asgi:group:routing_feed", "+inf")
    assert abs(since - (time.time() - 86400)) < 5
    assert len(layer.sent) == delivered


def test_rate_window_admits_the_limit_then_counts_the_rest_until_taken():
    window = RateWindow(3, window_seconds=1.0)

    admitted = [window.admit(10.0 + i * 0.1) for i in range(5)]

    assert admitted == [True, True, True, False, False]
    assert window.window_end == 11.0
    assert window.take_dropped() == 2
    assert window.take_dropped() == 0
    assert window.admit(11.0) is True  # a new window opens at its end
    assert window.sent == 1


# --- the socket ----------------------------------------------------------------------


@pytest.fixture
def session_cookie() -> Callable[..., bytes]:
    """``session_cookie(is_staff=..., may_view=True)``: a ``Cookie`` header of a
    logged-in user; ``may_view``: with the Live routing page's permissions."""
    made = iter(range(1000))

    def make(*, is_staff: bool, may_view: bool = True) -> bytes:
        user = User.objects.create_user(
            f"user{next(made)}", password="pw", is_staff=is_staff
        )
        if may_view:
            codenames = [name.split(".")[1] for name in TRAFFIC_PERMISSIONS]
            user.user_permissions.add(
                *Permission.objects.filter(codename__in=codenames)
            )
        client = Client()
        client.force_login(user)
        return f"sessionid={client.cookies['sessionid'].value}".encode()

    return make


def _socket(*headers: tuple[bytes, bytes], path: str = "/ws/routing/") -> Any:
    return WebsocketCommunicator(application, path, headers=list(headers))


async def _staff_socket(session_cookie: Callable[..., bytes]) -> Any:
    cookie = await sync_to_async(session_cookie)(is_staff=True)
    socket = _socket(ORIGIN, (b"cookie", cookie))
    connected, _ = await socket.connect()
    assert connected
    return socket


@pytest.mark.django_db(transaction=True)
async def test_staff_socket_receives_a_published_decision(
    session_cookie: Callable[..., bytes], finished_run: RunRecord
):
    socket = await _staff_socket(session_cookie)
    request, attempts = finished_run.rows()

    feed.publish(request, attempts)
    message = await socket.receive_json_from(timeout=2)

    assert message == feed.feed_message(request, attempts)
    await socket.disconnect()
    assert not get_channel_layer().groups.get(FEED_GROUP)


@pytest.mark.django_db(transaction=True)
async def test_anonymous_socket_is_closed_with_4403():
    socket = _socket(ORIGIN)

    connected, _ = await socket.connect()

    assert connected  # accepted first, so that the client reads the code
    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
        "reason": FORBIDDEN_REASON,
    }
    assert not get_channel_layer().groups.get(FEED_GROUP)


@pytest.mark.django_db(transaction=True)
async def test_non_staff_socket_is_closed_with_4403(
    session_cookie: Callable[..., bytes],
):
    cookie = await sync_to_async(session_cookie)(is_staff=False)
    socket = _socket(ORIGIN, (b"cookie", cookie))

    connected, _ = await socket.connect()

    assert connected
    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
        "reason": FORBIDDEN_REASON,
    }


@pytest.mark.django_db(transaction=True)
async def test_staff_without_the_logs_view_permissions_are_closed_with_4403(
    session_cookie: Callable[..., bytes],
):
    cookie = await sync_to_async(session_cookie)(is_staff=True, may_view=False)
    socket = _socket(ORIGIN, (b"cookie", cookie))

    connected, _ = await socket.connect()

    assert connected
    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
        "reason": FORBIDDEN_REASON,
    }
    assert not get_channel_layer().groups.get(FEED_GROUP)


@pytest.mark.django_db(transaction=True)
async def test_socket_from_a_foreign_origin_is_refused(
    session_cookie: Callable[..., bytes],
):
    cookie = await sync_to_async(session_cookie)(is_staff=True)
    socket = _socket((b"origin", b"https://evil.example"), (b"cookie", cookie))

    connected, _ = await socket.connect()

    assert connected  # accepted first, so that the client reads the code
    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
    }


@pytest.mark.django_db(transaction=True)
async def test_a_client_sending_no_origin_still_needs_a_staff_session(
    session_cookie: Callable[..., bytes],
):
    anonymous = _socket()
    connected, _ = await anonymous.connect()
    assert connected
    assert await anonymous.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4403,
        "reason": FORBIDDEN_REASON,
    }

    cookie = await sync_to_async(session_cookie)(is_staff=True)
    staff = _socket((b"cookie", cookie))
    connected, _ = await staff.connect()
    assert connected
    assert await staff.receive_nothing(timeout=0.2)
    await staff.disconnect()


async def test_other_websocket_paths_are_closed_with_4404():
    socket = _socket(ORIGIN, path="/ws/other/")

    connected, _ = await socket.connect()

    assert connected
    assert await socket.receive_output(timeout=2) == {
        "type": "websocket.close",
        "code": 4404,
    }


@pytest.mark.django_db(transaction=True)
async def test_socket_gets_50_decisions_a_second_and_one_dropped_count(
    session_cookie: Callable[..., bytes],
):
    socket = await _staff_socket(session_cookie)
    layer = get_channel_layer()

    for n in range(MAX_MESSAGES_PER_SECOND + 10):
        await layer.group_send(FEED_GROUP, {"type": "routing_decision", "n": n})
    received = [
        await socket.receive_json_from(timeout=2)
        for _ in range(MAX_MESSAGES_PER_SECOND + 1)
    ]

    assert [m["n"] for m in received[:-1]] == list(range(MAX_MESSAGES_PER_SECOND))
    assert received[-1] == {"type": "dropped", "count": 10}
    await layer.group_send(FEED_GROUP, {"type": "routing_decision", "n": 99})
    assert await socket.receive_json_from(timeout=2) == {
        "type": "routing_decision",
        "n": 99,
    }  # the next window admits again
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()
