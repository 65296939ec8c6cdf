"""The admin shows each connection's live health state and can reset it."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from gateway.kernel.breaker import HealthConfig
from providers.health import board, connection_key
from providers.models import Connection, Provider

pytestmark = pytest.mark.django_db


@pytest.fixture
def connection() -> Connection:
    provider = Provider.objects.create(
        slug="hp", kind="openai", base_url="http://127.0.0.1:9/v1"
    )
    return Connection.objects.create(provider=provider, name="main")


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _fail(conn: str, reason: str, detail: str | None = None) -> None:
    board.record(
        conn,
        "m1",
        reason,
        detail,
        now=time.time(),
        config=HealthConfig(),
        message="Incorrect API key provided",
    )


def test_changelist_shows_breaker_auth_and_locks(admin_client, connection):
    conn = connection_key("hp", "main")
    board.reset(conn)
    for _ in range(5):
        _fail(conn, "server_error")
    _fail(conn, "server_error", "auth_failed")
    _fail(conn, "server_error", "model_not_found")
    listing = admin_client.get("/admin/providers/connection/").content.decode()
    # the list: one badge, the worst state first, with the time left counting
    assert 'data-health="auth_disabled">auth disabled</span>' in listing
    assert "Incorrect API key provided" in listing
    assert 'data-mode="left"' in listing
    unhealthy = admin_client.get(
        "/admin/providers/connection/?health=unhealthy"
    ).content.decode()
    assert 'data-health="auth_disabled"' in unhealthy
    healthy = admin_client.get(
        "/admin/providers/connection/?health=healthy"
    ).content.decode()
    assert "data-health=" not in healthy  # the only connection is not healthy
    # the connection's page: breaker, auth and locks in detail, times as <time>
    page = admin_client.get(
        f"/admin/providers/connection/{connection.pk}/change/"
    ).content.decode()
    assert "open, <time" in page
    assert "auth_failed disabled: " in page
    assert "m1 (<time" in page
    board.reset(conn)


def test_reset_action_clears_the_health_state(admin_client, connection):
    conn = connection_key("hp", "main")
    for _ in range(5):
        _fail(conn, "server_error")
    response = admin_client.post(
        "/admin/providers/connection/",
        {"action": "reset_health", "_selected_action": [connection.pk]},
        follow=True,
    )
    assert "Health state reset for 1 connection(s)." in response.content.decode()
    assert board.skip_reason(conn, "m1", 0, time.time()) is None


def test_reenable_action_clears_an_auth_disable(admin_client, connection):
    conn = connection_key("hp", "main")
    _fail(conn, "server_error", "auth_failed")
    assert board.skip_reason(conn, "m1", 0, time.time()).reason == "auth_disabled"
    done = admin_client.post(
        "/admin/providers/connection/",
        {"action": "reenable_now", "_selected_action": [connection.pk]},
        follow=True,
    )
    assert board.skip_reason(conn, "m1", 0, time.time()) is None
    assert "Re-enabled 1: hp@main." in done.content.decode()
    # nothing was disabled: the message says so instead of counting the selection
    again = admin_client.post(
        "/admin/providers/connection/",
        {"action": "reenable_now", "_selected_action": [connection.pk]},
        follow=True,
    )
    assert "None of the selected connections was auth-disabled." in (
        again.content.decode()
    )
    board.reset(conn)


def test_provider_page_shows_each_connection_health(admin_client, connection):
    conn = connection_key("hp", "main")
    board.reset(conn)
    _fail(conn, "rate_limit")
    html = admin_client.get(
        f"/admin/providers/provider/{connection.provider.pk}/change/"
    ).content.decode()
    assert 'data-health="cooling">cooling</span> rate-limit cooldown' in html
    assert 'data-mode="left"' in html
    board.reset(conn)
