"""Every date-time the admin renders is the console's <time> element (issue #15):
list columns and read-only fields on detail pages alike, so the
browser shows each in local time with seconds (``gateway/ops/admin_display.py``)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.admin import helpers
from django.contrib.admin.templatetags import admin_list
from django.contrib.auth.models import User
from django.test import Client
from unfold import fields as unfold_fields
from unfold.templatetags import unfold_list

from gateway.ops import admin_display
from telemetry.models import AttemptLog, RequestLog

pytestmark = pytest.mark.django_db
WHEN = datetime(2026, 12, 2, 6, 40, 12, tzinfo=UTC)
TIME = (
    '<time class="omr-time" datetime="2026-12-02T06:40:12+00:00" data-mode="abs" '
    'title="2026-12-02 06:40:12 UTC">2026-12-02 06:40:12 UTC</time>'
)


@pytest.fixture
def client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def logged() -> RequestLog:
    request = RequestLog.objects.create(
        id=uuid.uuid4(),
        created_at=WHEN,
        endpoint="/v1/chat/completions",
        status="success",
        http_status=200,
        requested_model="pa/m1",
        route="pa/m1",
    )
    AttemptLog.objects.create(
        request=request,
        attempt_no=1,
        started_at=WHEN,
        provider="pa",
        model="m1",
        connection="main",
        target="pa/m1@main",
        result="success",
    )
    return request


def test_a_list_column_renders_the_time_element(client: Client, logged: RequestLog):
    page = client.get("/admin/telemetry/requestlog/").content.decode()

    assert TIME in page
    assert not re.search(r">\s*2026-12-02 06:40:12\s*<", page)  # no bare UTC text


def test_a_detail_page_renders_its_read_only_times_alike(
    client: Client, logged: RequestLog
):
    page = client.get(
        f"/admin/telemetry/requestlog/{logged.pk}/change/"
    ).content.decode()

    assert TIME in page  # created_at, a read-only field


def test_a_date_time_returned_by_a_column_method_is_rendered_alike():
    assert unfold_list.display_for_value(WHEN, "-") == TIME
    assert unfold_list.display_for_value(7, "-") == "7"
    assert unfold_list.display_for_value(None, "-") == "-"


def test_install_wraps_each_renderer_once():
    wrapped = (
        helpers.display_for_field,
        admin_list.display_for_field,
        unfold_fields.display_for_field,
        unfold_list.display_for_field,
    )

    admin_display.install()

    assert (
        helpers.display_for_field,
        admin_list.display_for_field,
        unfold_fields.display_for_field,
        unfold_list.display_for_field,
    ) == wrapped


def test_a_request_without_skips_or_signals_shows_a_dash_not_null(
    client: Client, logged: RequestLog
):
    page = client.get(
        f"/admin/telemetry/requestlog/{logged.pk}/change/"
    ).content.decode()

    for label in ("Skips", "Auto decision", "Tier signals"):
        row = page.split(f">{label}</label>")[1].split("</div>\n")[0:3]
        assert "null" not in "".join(row)
    assert ">null<" not in page
    assert "null</" not in page


def test_the_request_log_list_folds_its_columns_to_fit(
    client: Client, logged: RequestLog
):
    RequestLog.objects.filter(pk=logged.pk).update(
        status="refused", http_status=404, reason="model_not_found", served_model=None
    )

    page = client.get("/admin/telemetry/requestlog/").content.decode()

    assert "pa/m1 → —" in page
    assert '<span class="omr-badge omr-warn">Refused 404</span>' in page
    assert '<span class="omr-muted">model_not_found</span>' in page


def test_a_request_page_folds_its_attempts_to_fit(client: Client, logged: RequestLog):
    AttemptLog.objects.filter(request=logged).update(
        result="failed",
        reason="upstream_5xx",
        detail="http_503",
        latency_ms=120,
        ttft_ms=40,
        prompt_tokens=8,
        completion_tokens=4,
        billable=True,
        dropped=["tools", "seed"],
    )

    page = client.get(
        f"/admin/telemetry/requestlog/{logged.pk}/change/"
    ).content.decode()

    assert '<span class="omr-muted">upstream_5xx · http_503</span>' in page
    assert "120 ms (TTFT 40)" in page
    assert "8 + 4" in page
    assert "billable, dropped tools, seed" in page
