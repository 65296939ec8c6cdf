"""Shared state as operations see it (spec 08 §1, §3.3, §3.4): the store chosen at
start-up, config changes announced over Redis, /readyz, the metrics and W002.

Redis is the real one on 127.0.0.1:6379; every link here gets its own key prefix
(channels included), deleted afterwards.  With CI=true a missing Redis fails.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.db import transaction
from django.test import Client
from prometheus_client import REGISTRY

from gateway.checks import check_shared_state
from gateway.config.state import TableHolder
from gateway.kernel.types import RoutingTable
from providers import services
from providers.health import shared_store
from providers.pins import PinStore, RedisPinStore, _configured
from providers.redis_store import RedisLink, _Links, shared_link, shared_state_mode
from providers.state_mirror import MirroredStore
from providers.state_store import LocalStore
from tests.services import unavailable

REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@pytest.fixture
def links(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, RedisLink]]:
    """A fresh per-process link registry whose links use a test key prefix."""
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping()
    except redis.RedisError:
        unavailable(f"Redis at {REDIS_URL} is not running")
    namespace = f"omniroute-test-{uuid.uuid4().hex[:12]}:"
    registry = {REDIS_URL: RedisLink(REDIS_URL, timeout_s=0.5, namespace=namespace)}
    monkeypatch.setattr(_Links, "by_url", registry)
    yield registry
    for link in list(registry.values()):
        link.close()
    raw = redis.Redis.from_url(REDIS_URL)
    for key in raw.scan_iter(match=f"{namespace}*"):
        raw.delete(key)
    raw.close()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- the store chosen at start-up -----------------------------------------------------


def test_without_redis_url_state_and_pins_stay_in_the_process(settings, links):
    settings.REDIS_URL = None
    assert type(shared_store()) is LocalStore
    assert type(_configured()) is PinStore
    assert shared_state_mode() == "local"


def test_with_redis_url_state_and_pins_are_shared(settings, links):
    settings.REDIS_URL = REDIS_URL
    store, pins = shared_store(), _configured()
    assert isinstance(store, MirroredStore)
    assert isinstance(pins, RedisPinStore)
    assert store.link is pins.link is shared_link()
    assert shared_state_mode() == "redis"


# --- metrics (spec 08 §3.3) -----------------------------------------------------------


def test_fallbacks_are_counted_per_operation_and_redis_up_follows(settings, links):
    settings.REDIS_URL = url = dead_url()
    before = sample("omniroute_shared_state_fallbacks_total", op="get")
    store = shared_store()

    assert store.get("state:a") is None
    store.set("state:a", 1, None)

    assert sample("omniroute_shared_state_fallbacks_total", op="get") == before + 1
    assert sample("omniroute_redis_up") == 0
    assert shared_state_mode() == "local"

    settings.REDIS_URL = REDIS_URL
    shared_store().get("state:a")
    assert sample("omniroute_redis_up") == 1
    assert url in links


# --- config propagation (spec 08 §3.4) ------------------------------------------------


def wait_for_subscriber(channel: str) -> None:
    raw = redis.Redis.from_url(REDIS_URL)
    deadline = time.monotonic() + 3
    while dict(raw.pubsub_numsub(channel)).get(channel.encode(), 0) < 1:
        assert time.monotonic() < deadline, "the watcher never subscribed"
        time.sleep(0.01)
    raw.close()


@pytest.mark.django_db(transaction=True)
def test_a_committed_config_change_wakes_the_watcher_before_its_poll(
    settings, links, monkeypatch
):
    settings.REDIS_URL = REDIS_URL
    settings.OMNIROUTE_CONFIG_POLL_MS = 60_000  # only the announcement can be quick
    holder = TableHolder()
    holder.table = RoutingTable(version=services.config_version())
    refreshed = threading.Event()
    monkeypatch.setattr(holder, "refresh", refreshed.set)
    holder.start()
    try:
        wait_for_subscriber(links[REDIS_URL].channel("config"))
        assert not refreshed.is_set()  # connected, version unchanged: nothing to do

        with transaction.atomic():
            services.bump_config_revision()
            time.sleep(0.2)
            assert not refreshed.is_set()  # announced after the commit only

        assert refreshed.wait(2.0)
    finally:
        holder.stop()


@pytest.mark.django_db(transaction=True)
def test_the_version_is_stored_then_published(settings, links):
    settings.REDIS_URL = REDIS_URL
    link = links[REDIS_URL]
    raw = redis.Redis.from_url(REDIS_URL)
    listener = raw.pubsub(ignore_subscribe_messages=True)
    listener.subscribe(link.channel("config"))

    services.bump_config_revision()  # autocommit: announced at once
    services.bump_config_revision()

    messages = []
    deadline = time.monotonic() + 2
    while len(messages) < 2 and time.monotonic() < deadline:
        message = listener.get_message(timeout=0.1)
        if message is not None:
            messages.append(message["data"])
    assert messages == [b"1", b"2"]
    assert raw.get(link.key("config:version")) == b"2"
    listener.close()
    raw.close()


@pytest.mark.django_db(transaction=True)
def test_without_redis_a_config_change_announces_nothing(
    settings, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = None
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        services.bump_config_revision()
    assert callbacks == []


# --- /readyz (spec 08 §3.3, 01-api) ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_readyz_reports_redis_down_and_backs_the_shared_state_off(settings, links):
    settings.REDIS_URL = dead_url()
    link = shared_link()
    assert link is not None

    response = Client().get("/readyz")

    assert (response.status_code, response.json()) == (
        503,
        {
            "status": "degraded",
            "db": "ok",
            "redis": "unreachable",
            "shared_state": "local",
        },
    )
    assert not link.is_up()


@pytest.mark.django_db(transaction=True)
def test_readyz_keeps_the_node_when_redis_is_not_required(settings, links):
    settings.REDIS_URL = dead_url()
    settings.OMNIROUTE_READYZ_REQUIRE_REDIS = False
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (
        200,
        {
            "status": "degraded",
            "db": "ok",
            "redis": "unreachable",
            "shared_state": "local",
        },
    )


@pytest.mark.django_db(transaction=True)
def test_a_successful_readyz_ends_the_backoff_at_once(settings, links):
    settings.REDIS_URL = REDIS_URL
    link = links[REDIS_URL]
    link.failed("get", redis.ConnectionError("blip"))
    assert shared_state_mode() == "local"

    response = Client().get("/readyz")

    assert response.json() == {"status": "ok", "db": "ok", "redis": "ok"}
    assert shared_state_mode() == "redis"


# --- omniroute.W002 -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("redis_url", "workers", "ids"),
    [
        (None, "4", ["omniroute.W002"]),
        (None, "1", []),
        (None, None, []),
        (REDIS_URL, "4", []),
    ],
)
def test_w002_warns_when_several_workers_run_without_redis(
    settings, monkeypatch, redis_url, workers, ids
):
    settings.REDIS_URL = redis_url
    if workers is None:
        monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    else:
        monkeypatch.setenv("WEB_CONCURRENCY", workers)
    assert [w.id for w in check_shared_state()] == ids
