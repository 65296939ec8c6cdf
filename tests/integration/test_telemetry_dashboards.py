"""The live routing feed and the telemetry dashboards against the real gateway
process (spec 06 §4): a websocket client reads the close codes and a decision, and
headless Chromium (Debian's, driven by Playwright) logs in, reads the Overview
chart and numbers, and watches a new request arrive on the Live routing page.

Chromium comes from ``make test`` (apt-get) where it is missing; without it the
browser tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from providers.console_access import TRAFFIC_PERMISSIONS
from tests.integration.conftest import admin_user, logged_in

pytestmark = pytest.mark.integration
Gateway = Any  # tests/integration/conftest.py
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def viewer(gateway: Gateway) -> tuple[str, str]:
    """A staff user with a password (the admin login form needs one) and the
    dashboards' permissions (the request and attempt logs' view rights)."""
    return admin_user(
        gateway, "dash-viewer", superuser=False, perms=TRAFFIC_PERMISSIONS
    )


def _session_cookie(gateway: Gateway, username: str, password: str) -> str:
    """Log in through the admin form; the ``sessionid`` cookie's value."""
    with httpx.Client(base_url=gateway.url, timeout=10) as http:
        form = http.get("/admin/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.content)
        assert token is not None
        done = http.post(
            "/admin/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": token.group(1).decode(),
                "next": "/admin/",
            },
        )
        assert done.status_code == 302, done.text
        return str(http.cookies["sessionid"])


def _socket_url(gateway: Gateway, path: str = "/ws/routing/") -> str:
    return gateway.url.replace("http://", "ws://") + path


def _newest_request_id(gateway: Gateway) -> str:
    with gateway.db() as conn:
        row = conn.execute(
            "select id from telemetry_requestlog order by created_at desc limit 1"
        ).fetchone()
    return str(uuid.UUID(row[0]))


def test_staff_socket_receives_each_finished_request(
    gateway: Gateway, client: httpx.Client, upstream: Any, viewer: tuple[str, str]
):
    cookie = _session_cookie(gateway, *viewer)
    headers = {"Cookie": f"sessionid={cookie}", "Origin": gateway.url}

    with connect(_socket_url(gateway), additional_headers=headers) as socket:
        reply = client.post(
            "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
        )
        message = json.loads(socket.recv(timeout=5))

    assert reply.status_code == 200
    assert message["type"] == "routing_decision"
    assert message["request_id"] == _newest_request_id(gateway)
    assert (message["requested_model"], message["served_model"]) == ("pa/m1", "pa/m1")
    assert (message["route"], message["status"], message["http_status"]) == (
        "direct",
        "success",
        200,
    )
    assert [a["target"] for a in message["attempts"]] == ["pa/m1@main"]
    assert message["attempts"][0]["result"] == "success"


@pytest.mark.parametrize(
    ("path", "code"),
    [("/ws/routing/", 4403), ("/ws/elsewhere/", 4404)],
    ids=["anonymous-feed", "unknown-path"],
)
def test_socket_close_codes_reach_a_real_client(gateway: Gateway, path: str, code: int):
    with (
        connect(
            _socket_url(gateway, path), additional_headers={"Origin": gateway.url}
        ) as socket,
        pytest.raises(ConnectionClosed) as closed,
    ):
        socket.recv(timeout=5)

    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == code


# --- headless Chromium ---------------------------------------------------------------


@pytest.fixture
def page(browser: Any, gateway: Gateway, viewer: tuple[str, str]) -> Iterator[Any]:
    """A console tab logged in as the staff viewer (through the login form)."""
    with logged_in(browser, gateway, viewer) as tab:
        yield tab


def _count_since(gateway: Gateway, since: str, where: str = "1=1") -> int:
    return len(gateway.requests_log(f"created_at >= ? and {where}", since))


def test_overview_in_chromium_shows_the_chart_and_the_logged_numbers(
    gateway: Gateway, client: httpx.Client, upstream: Any, page: Any
):
    for _ in range(3):
        reply = client.post(
            "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
        )
        assert reply.status_code == 200

    page.click("#telemetry-dashboards a[href='/admin/telemetry/overview/']")
    page.select_option("#id_model", "pa/m1")
    page.click("#overview-filters input[type=submit]")
    page.wait_for_url("**model=pa%2Fm1**")

    since = page.get_attribute("#overview-since time", "datetime")
    assert since is not None
    since_db = datetime.fromisoformat(since).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    served = _count_since(gateway, since_db, "served_model = 'pa/m1'")
    assert served >= 3
    assert page.inner_text("#card-requests .value") == str(served)
    assert page.locator("#chart-traffic svg.omr-chart polyline").count() >= 1
    assert page.locator("#chart-traffic svg.omr-chart").is_visible()
    hours = page.locator("#data-traffic tbody tr")
    assert hours.count() == 24
    total = sum(int(hours.nth(i).locator("td").first.inner_text()) for i in range(24))
    assert total == served
    model_row = page.locator("#by-model tr[data-key='pa/m1'] td")
    attempts_db = _attempts_since(gateway, since_db)
    assert model_row.first.inner_text() == str(attempts_db)


def _attempts_since(gateway: Gateway, since: str) -> int:
    with gateway.db() as conn:
        row = conn.execute(
            "select count(*) from telemetry_attemptlog where started_at >= ? "
            "and provider = 'pa' and model = 'm1'",
            (since,),
        ).fetchone()
    return int(row[0])


def test_live_routing_in_chromium_shows_a_new_request(
    gateway: Gateway, client: httpx.Client, upstream: Any, page: Any
):
    page.click("#telemetry-dashboards a[href='/admin/telemetry/live-routing/']")
    page.wait_for_selector("#live-status[data-state='open']")
    assert page.locator("#live-routing tbody tr").count() == 0

    reply = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
    )
    assert reply.status_code == 200
    request_id = _newest_request_id(gateway)
    row = page.locator(f"#live-routing tbody tr[data-request-id='{request_id}']")
    row.wait_for()

    assert page.locator("#live-routing tbody tr").count() == 1
    assert row.locator("td.models").inner_text() == "pa/m1 → pa/m1"
    assert row.locator("td.status").inner_text() == "success 200"
    assert row.locator("td.key").inner_text() == "all"  # the key's name
    row.locator("td.attempts summary").click()
    assert row.locator("td.attempts pre").inner_text().startswith("pa/m1@main success")
    link = row.locator("td.request-id a").get_attribute("href")
    assert link == f"/admin/telemetry/requestlog/{request_id}/change/"

    # failed only hides it; pausing holds the next decision until resumed
    page.check("#filter-failed")
    assert row.is_hidden()
    page.uncheck("#filter-failed")
    page.fill("#filter-model", "pa/m1")
    assert row.is_visible()
    page.fill("#filter-model", "")
    # the Pause button can be seen: its text and background differ (audit)
    colours = page.eval_on_selector(
        "#live-pause",
        "b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]",
    )
    assert colours[0] != colours[1], colours
    page.click("#live-pause")
    page.wait_for_selector("#live-status[data-state='paused']")
    second = client.post(
        "/v1/chat/completions", json={"model": "pa/m1", "messages": MESSAGES}
    )
    assert second.status_code == 200
    page.wait_for_selector("#live-held:not([hidden])")
    assert page.locator("#live-routing tbody tr").count() == 1
    page.click("#live-pause")
    page.wait_for_function(
        "document.querySelectorAll('#live-routing tbody tr').length === 2"
    )
