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


def _act(client: Client, action: str, pk: int, **confirm: str) -> str:
    response = client.post(
        "/admin/providers/connection/",
        {"action": action, "_selected_action": [pk], **confirm},
        follow=True,
    )
    assert response.status_code == 200
    return response.content.decode()


def test_reset_action_asks_first_then_clears_the_health_state(admin_client, connection):
    conn = connection_key("hp", "main")
    for _ in range(5):
        _fail(conn, "server_error")

    asked = _act(admin_client, "reset_health", connection.pk)

    # the first POST is the question: the connection, its state now, a Yes that
    # re-posts the action with post=yes; nothing is reset yet
    assert 'id="omr-bulk-confirm" data-action="reset_health"' in asked
    assert "Reset 1 connection?" in asked
    assert '<tr data-connection="hp@main">' in asked
    assert 'data-health="open">open</span>' in asked
    assert f'name="_selected_action" value="{connection.pk}"' in asked
    assert '<input type="hidden" name="post" value="yes">' in asked
    assert "Yes, reset 1 connection</button>" in asked
    assert board.skip_reason(conn, "m1", 0, time.time()) is not None

    done = _act(admin_client, "reset_health", connection.pk, post="yes")

    assert "Health state reset for 1 connection(s)." in done
    assert board.skip_reason(conn, "m1", 0, time.time()) is None


def test_reenable_action_asks_first_then_clears_an_auth_disable(
    admin_client, connection
):
    conn = connection_key("hp", "main")
    _fail(conn, "server_error", "auth_failed")
    assert board.skip_reason(conn, "m1", 0, time.time()).reason == "auth_disabled"

    asked = _act(admin_client, "reenable_now", connection.pk)

    assert 'id="omr-bulk-confirm" data-action="reenable_now"' in asked
    assert "Re-enable 1 connection?" in asked
    assert 'data-health="auth_disabled">auth disabled</span>' in asked
    assert "Incorrect API key provided" in asked
    assert board.skip_reason(conn, "m1", 0, time.time()).reason == "auth_disabled"

    done = _act(admin_client, "reenable_now", connection.pk, post="yes")

    assert board.skip_reason(conn, "m1", 0, time.time()) is None
    assert "Re-enabled 1: hp@main." in done
    # nothing was disabled: the message says so instead of counting the selection
    again = _act(admin_client, "reenable_now", connection.pk, post="yes")
    assert "None of the selected connections was auth-disabled." in again
    board.reset(conn)


def test_the_question_lists_every_selected_connection(admin_client, connection):
    other = Connection.objects.create(provider=connection.provider, name="spare")

    asked = admin_client.post(
        "/admin/providers/connection/",
        {"action": "reset_health", "_selected_action": [connection.pk, other.pk]},
    ).content.decode()

    assert "Reset 2 connections?" in asked
    assert '<tr data-connection="hp@main">' in asked
    assert '<tr data-connection="hp@spare">' in asked
    assert "Yes, reset 2 connections</button>" in asked


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
