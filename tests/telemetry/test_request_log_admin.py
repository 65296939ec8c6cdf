"""The request and attempt log pages (issue #15 audit: ~600 ms with 10 000 rows):
their filters offer fixed choices or the configured providers instead of reading
the log (no date hierarchy, no SELECT DISTINCT), one COUNT(*) per page, no bulk
action checkboxes; and the filters still narrow the rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from providers.models import Provider
from telemetry.models import AttemptLog, RequestLog

pytestmark = pytest.mark.django_db

LIST = "/admin/telemetry/requestlog/"


@pytest.fixture
def ops() -> Client:
    client = Client()
    client.force_login(
        get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    )
    return client


def _row(minutes_ago: float, route: str, provider: str, status: int) -> RequestLog:
    row = RequestLog.objects.create(
        created_at=timezone.now() - timedelta(minutes=minutes_ago),
        endpoint="chat",
        requested_model=route,
        route=route,
        provider=provider,
        status="success" if status < 400 else "upstream_failed",
        http_status=status,
    )
    AttemptLog.objects.create(
        request=row,
        attempt_no=1,
        started_at=row.created_at,
        provider=provider,
        model="m1",
        connection="main",
        target=f"{provider}/m1@main",
        result="success" if status < 400 else "server_error",
    )
    return row


@pytest.fixture
def rows() -> dict[str, RequestLog]:
    Provider.objects.create(slug="pa", kind="openai", base_url="http://127.0.0.1:9/v1")
    return {
        "recent combo": _row(5, "combo:team", "pa", 200),
        "old direct": _row(60 * 30, "direct", "pb", 502),
    }


def _ids(page) -> set[str]:
    return {str(row.pk) for row in page.context["cl"].result_list}


@pytest.mark.parametrize("path", [LIST, "/admin/telemetry/attemptlog/"])
def test_the_log_pages_do_not_scan_the_log_for_their_filters(ops, rows, path):
    with CaptureQueriesContext(connection) as queries:
        page = ops.get(path)

    assert page.status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in statements if "DISTINCT" in sql]
    assert sum("COUNT(*)" in sql for sql in statements) == 1
    assert 'name="_selected_action"' not in page.content.decode()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("since=1h", {"recent combo"}),
        ("since=7d", {"recent combo", "old direct"}),
        ("route_kind=combo", {"recent combo"}),
        ("route_kind=direct", {"old direct"}),
        ("http_class=5xx", {"old direct"}),
        ("endpoint=chat", {"recent combo", "old direct"}),
        ("provider=pa", {"recent combo"}),
    ],
)
def test_the_filters_narrow_the_rows(ops, rows, query, expected):
    page = ops.get(f"{LIST}?{query}")

    assert page.status_code == 200
    assert _ids(page) == {str(rows[name].pk) for name in expected}


def test_the_provider_filter_lists_the_configured_providers(ops, rows):
    page = ops.get(LIST).content.decode()
    assert "?provider=pa" in page
    assert "?provider=pb" not in page  # only in the log: not read for the filter


def test_a_related_row_links_only_for_a_user_who_may_open_it(ops):
    """The audit's limited user: the request's key linked to a 403 page."""
    from django.contrib.auth.models import Permission

    from combos.models import ApiKey

    key = ApiKey.objects.create(name="team-key", key_hash="k" * 64, prefix="sk-or-t")
    row = _row(1, "pa/m1", "pa", 200)
    row.api_key = key
    row.save(update_fields=["api_key"])
    page = f"{LIST}{row.pk}/change/"
    key_url = f"/admin/combos/apikey/{key.pk}/change/"

    viewer = get_user_model().objects.create_user(
        "viewer", "viewer@example.com", "pw", is_staff=True
    )
    viewer.user_permissions.set(Permission.objects.filter(codename="view_requestlog"))
    limited = Client()
    limited.force_login(viewer)
    seen = limited.get(page)
    assert seen.status_code == 200
    text = seen.content.decode()
    assert "team-key" in text
    assert key_url not in text
    assert limited.get(key_url).status_code == 403

    assert key_url in ops.get(page).content.decode()
