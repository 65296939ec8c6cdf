"""The admin home dashboard (issue #15): traffic, health board, jobs, warnings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from combos.config_file import import_config
from combos.models import Combo
from gateway.kernel.breaker import HealthConfig
from gateway.templatetags.omr import omr_left, span_text
from providers.health import board, summarize
from providers.models import Connection
from telemetry.models import AttemptLog, RequestLog

pytestmark = pytest.mark.django_db

CONFIG = """
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}, {name: backup, priority: 1}]
    models: [{id: m1}]
  - slug: pb
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m2}]
api_keys:
  - name: demo
    key: sk-or-demo-0000000000000000000000000000000000000
"""
CONNECTIONS = ("pa@main", "pa@backup", "pb@main")


def _forget() -> None:
    for conn in CONNECTIONS:
        board.reset(conn)


@pytest.fixture
def configured() -> Iterator[None]:
    import_config(CONFIG)
    _forget()
    yield
    _forget()


@pytest.fixture
def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _request(minutes_ago: float, status: str = "success", failover: bool = False):
    created = timezone.now() - timedelta(minutes=minutes_ago)
    return RequestLog.objects.create(
        created_at=created,
        endpoint="chat",
        requested_model="pa/m1",
        status=status,
        http_status=200 if status == "success" else 502,
        failover=failover,
    )


def _attempt(request: RequestLog, provider: str, conn: str, result: str, **more):
    AttemptLog.objects.create(
        request=request,
        attempt_no=1,
        started_at=request.created_at,
        provider=provider,
        model="m1",
        connection=conn,
        target=f"{provider}/m1@{conn}",
        result=result,
        **more,
    )


def test_traffic_counts_errors_and_failovers_per_window(configured, admin_client):
    _request(5)
    _request(6, failover=True)
    _request(7, status="upstream_failed")
    _request(30)  # in the hour, not in the last 15 min
    _request(60 * 5, status="refused")  # only in the 24 h

    page = admin_client.get("/admin/").content.decode()

    assert '<div class="omr-card" data-window="15 min">' in page
    windows = page.split('data-window="')[1:]
    fifteen, hour, day = windows
    assert '<div class="omr-figure">3</div>' in fifteen
    assert "33.3 %" in fifteen  # one error and one failover in three
    assert '<div class="omr-figure">4</div>' in hour
    assert '<div class="omr-figure">5</div>' in day
    assert "refused</span> 1" in day


def test_a_combo_moving_to_its_next_target_counts_as_a_failover(
    configured, admin_client
):
    """Issue #15 audit: a chain inside a combo failed over on every request
    (3 attempts, ``failover`` false) and the dashboard said 0.0 %."""
    moved = _request(5)
    moved.attempt_count = 3
    moved.save(update_fields=["attempt_count"])
    _attempt(moved, "pa", "main", "server_error", http_status=503)
    _attempt(moved, "pa", "backup", "timeout")
    _attempt(moved, "pb", "main", "success")
    fused = _request(5)  # a fusion's panel: two calls, none failed
    fused.attempt_count = 2
    fused.save(update_fields=["attempt_count"])
    _attempt(fused, "pa", "main", "success")
    _attempt(fused, "pb", "main", "success")
    _request(5, failover=True)  # a key's failover_defaults chain
    _request(5)

    page = admin_client.get("/admin/").content.decode()

    fifteen = page.split('data-window="')[1]
    assert "failed over</span> <strong" in fifteen
    assert '<strong class="omr-failovers">50.0 %</strong> (2)' in fifteen


def test_refusals_with_no_healthy_target_show_as_an_outage(configured, admin_client):
    for _ in range(2):
        row = _request(3, status="refused")
        row.http_status, row.reason = 503, "no_healthy_candidate"
        row.save(update_fields=["http_status", "reason"])
    _request(3, status="refused")  # e.g. a key over its budget: not an outage

    page = admin_client.get("/admin/").content.decode()

    fifteen = page.split('data-window="')[1]
    assert "refused</span> 3" in fifteen
    assert "no healthy target</span> 2 refused with 503" in fifteen
    assert "2 request(s) in the last 15 min were refused with 503" in page


def test_the_health_board_lists_unhealthy_connections_first_with_their_last_error(
    configured, admin_client
):
    for _ in range(5):
        board.record(
            "pb@main",
            "m2",
            "server_error",
            None,
            now=time.time(),
            config=HealthConfig(),
        )
    failed = _request(1, status="upstream_failed")
    _attempt(
        failed, "pb", "main", "server_error", reason="server_error", http_status=503
    )
    ok = _request(1)
    _attempt(ok, "pa", "main", "success")

    page = admin_client.get("/admin/").content.decode()

    rows = page.split('<tr data-connection="')[1:]
    assert rows[0].startswith('pb@main" data-state="open"')
    assert "server_error 503" in rows[0]
    assert "0.0 %" in rows[0]  # none of its recent attempts succeeded
    assert 'class="omr-time" ' in rows[0]
    assert "left</time>" in rows[0]
    assert "1 unhealthy" in page
    assert all('data-state="healthy"' in row.split(">")[0] for row in rows[1:])


def test_reset_and_reenable_from_the_board(configured, admin_client):
    board.record(
        "pa@backup",
        "m1",
        "auth_error",
        "auth_failed",
        now=time.time(),
        config=HealthConfig(),
        message="bad key",
    )
    page = admin_client.get("/admin/").content.decode()
    row = page.split('<tr data-connection="pa@backup"')[1].split("</tr>")[0]
    assert 'data-state="auth_disabled"' in row
    assert 'value="reenable"' in row
    connection_id = row.split('name="connection" value="')[1].split('"')[0]
    reenable = {"connection": connection_id, "action": "reenable", "confirm": "yes"}

    done = admin_client.post("/admin/dashboard/health/", reenable)

    assert done.status_code == 302
    page = admin_client.get("/admin/").content.decode()
    assert '<tr data-connection="pa@backup" data-state="healthy"' in page
    assert "Re-enabled pa@backup." in page  # the confirmation, once
    again = admin_client.post(
        "/admin/dashboard/health/", reenable, follow=True
    ).content.decode()
    assert "pa@backup was not auth-disabled; nothing to re-enable." in again
    reset = admin_client.post(
        "/admin/dashboard/health/",
        {"connection": connection_id, "action": "reset", "confirm": "yes"},
        follow=True,
    ).content.decode()
    cleared = "Reset pa@backup: breaker, cooldown, auth disable and locks cleared."
    assert cleared in reset


@pytest.mark.parametrize(
    ("action", "verb", "clears"),
    [
        ("reset", "Reset", "breaker, cooldown"),
        ("reenable", "Re-enable", "auth disable"),
    ],
)
def test_the_board_buttons_ask_first_naming_the_connection(
    configured, admin_client, action: str, verb: str, clears: str
):
    board.record(
        "pa@backup",
        "m1",
        "auth_error",
        "auth_failed",
        now=time.time(),
        config=HealthConfig(),
        message="bad key",
    )
    page = admin_client.get("/admin/").content.decode()
    row = page.split('<tr data-connection="pa@backup"')[1].split("</tr>")[0]
    form = row.split("<form")[1]
    assert 'method="get"' in form.split(">")[0]  # opens the question, acts on nothing
    connection_id = row.split('name="connection" value="')[1].split('"')[0]

    asked = admin_client.get(
        "/admin/dashboard/health/", {"connection": connection_id, "action": action}
    )
    # a POST from a board served before the question existed is asked too
    unconfirmed = admin_client.post(
        "/admin/dashboard/health/", {"connection": connection_id, "action": action}
    )

    for response in (asked, unconfirmed):
        assert response.status_code == 200
        html = response.content.decode()
        heading = html.split('id="omr-confirm-heading">')[1].split("</h2>")[0]
        assert heading.startswith(f"{verb} <a ")
        assert heading.endswith("pa@backup</a>?")
        assert clears in html
        assert "auth disabled" in html  # the state it is in now
        assert f">Yes, {verb.lower()} pa@backup</button>" in html
        assert 'name="confirm" value="yes"' in html
        assert 'id="nav-sidebar"' in html  # a page of the admin, not a bare one
    assert summarize("pa@backup").state == "auth_disabled"  # nothing was done

    done = admin_client.post(
        "/admin/dashboard/health/",
        {"connection": connection_id, "action": action, "confirm": "yes"},
        follow=True,
    ).content.decode()

    assert summarize("pa@backup").state == "healthy"
    said = "Re-enabled pa@backup." if action == "reenable" else "Reset pa@backup: "
    assert said in done


def test_the_question_refuses_an_unknown_connection_or_action(configured, admin_client):
    for query in ({"connection": "999999", "action": "reset"}, {"connection": "x"}):
        refused = admin_client.get("/admin/dashboard/health/", query)
        assert refused.status_code == 400
        html = refused.content.decode()
        assert 'id="omr-error-reason"' in html  # in the console's frame
        assert "No connection has that id" in html


def test_board_buttons_need_the_change_permission(configured):
    user = get_user_model().objects.create_user("viewer", "v@example.com", "pw")
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_connection"))
    client = Client()
    client.force_login(user)

    page = client.get("/admin/").content.decode()
    refused = client.post(
        "/admin/dashboard/health/",
        {"connection": "1", "action": "reset", "confirm": "yes"},
    )
    not_asked = client.get(
        "/admin/dashboard/health/", {"connection": "1", "action": "reset"}
    )

    assert 'value="reset"' not in page
    assert refused.status_code == 403
    assert not_asked.status_code == 403


def test_warnings_name_the_demo_key_open_metrics_and_a_missing_scheduler(
    configured, admin_client, settings
):
    settings.OMNIROUTE_METRICS_TOKEN = ""
    page = admin_client.get("/admin/").content.decode()
    assert "The demo API key" in page
    assert "/metrics is open" in page
    assert "No scheduler is running" in page

    settings.OMNIROUTE_METRICS_TOKEN = "t" * 32
    page = admin_client.get("/admin/").content.decode()
    assert "/metrics is open" not in page


def test_the_panels_endpoint_serves_the_same_panels_for_the_refresh(
    configured, admin_client
):
    _request(1)
    panels = admin_client.get("/admin/dashboard/panels/")

    assert panels.status_code == 200
    html = panels.content.decode()
    assert 'id="omr-traffic"' in html
    assert 'id="omr-health"' in html
    assert "<html" not in html
    assert Client().get("/admin/dashboard/panels/").status_code == 302  # login


def test_the_dashboard_names_the_console_and_links_every_tool(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "Dashboard | OmniRoute</title>" in page
    for link in (
        "/admin/explain-route/",
        "/admin/config/",
        "/admin/providers/jobrun/jobs/",
        "/admin/telemetry/live-routing/",
    ):
        assert f'href="{link}"' in page


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (23.4, "23 s"),
        (65, "1 min 5 s"),
        (600, "10 min"),
        (3600, "1 h"),
        (3720, "1 h 2 min"),
        (3 * 86400, "3 d"),
    ],
)
def test_durations_are_written_one_way(seconds: float, text: str) -> None:
    assert span_text(seconds) == text


def test_a_time_left_renders_as_a_time_element_counting_down() -> None:
    when = timezone.now() + timedelta(seconds=23.2)
    html = omr_left(when)
    assert html.startswith('<time class="omr-time" datetime="')
    assert 'data-mode="left"' in html
    assert ">23 s left</time>" in html or ">22 s left</time>" in html
    assert omr_left(None) == '<span class="omr-muted">—</span>'


CONSOLE_LINKS = {
    "playground": 'href="/admin/playground/',
    "config": 'href="/admin/config/"',
    "jobs": 'href="/admin/providers/jobrun/jobs/"',
    # the request log's view right alone is not enough: they show the attempts too
    "overview": 'href="/admin/telemetry/overview/"',
    "live_routing": 'href="/admin/telemetry/live-routing/"',
}


def test_a_limited_user_sees_no_link_to_a_page_that_refuses_them(configured):
    """Issue #15 audit: staff with view rights on combos, connections and the
    request log saw Playground, Configuration as code and Jobs, each a 403."""
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    for app, codename in (
        ("combos", "view_combo"),
        ("providers", "view_connection"),
        ("telemetry", "view_requestlog"),
    ):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    client = Client()
    client.force_login(user)
    import_config(
        "combos:\n  - {name: team, strategy: priority, targets: [{model: pa/m1}]}\n"
    )
    team = Combo.objects.get(name="team")

    dashboard = client.get("/admin/").content.decode()
    combo_page = client.get(f"/admin/combos/combo/{team.pk}/change/").content.decode()
    connection = Connection.objects.first()
    assert connection is not None
    connection_page = client.get(
        f"/admin/providers/connection/{connection.pk}/change/"
    ).content.decode()
    assert (
        client.get(f"/admin/providers/connection/{connection.pk}/change/").status_code
        == 200
    )
    assert 'id="test-connection"' not in connection_page  # needs change_connection
    assert (
        client.get(f"/admin/providers/connection/test/?ids={connection.pk}").status_code
        == 403
    )

    for page in (dashboard, combo_page):
        for link in CONSOLE_LINKS.values():
            assert link not in page
    assert 'id="omr-jobs"' not in dashboard
    assert "omr-explain-link" in combo_page  # explain route is open to staff
    assert client.get("/admin/playground/").status_code == 403
    assert client.get("/admin/config/").status_code == 403
    assert client.get("/admin/providers/jobrun/jobs/").status_code == 403
    assert client.get("/admin/telemetry/overview/").status_code == 403
    assert client.get("/admin/telemetry/live-routing/").status_code == 403


def test_a_superuser_sees_every_console_link(configured, admin_client):
    dashboard = admin_client.get("/admin/").content.decode()
    for link in CONSOLE_LINKS.values():
        assert link in dashboard
    assert 'id="omr-jobs"' in dashboard
