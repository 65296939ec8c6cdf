"""The reliability and hourly usage tables in the admin (spec 06 §4.1)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client

from telemetry.models import ReliabilityStat, UsageHourly

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


@pytest.fixture
def staff() -> Client:
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_reliability_rows_show_unknown_values_as_a_dash(staff):
    ReliabilityStat.objects.create(
        provider="pa",
        model="m1",
        connection="main",
        samples=12,
        failures=1,
        failure_rate=1 / 12,
        reliability=11 / 12,
        good_rate=None,
        p50_latency_ms=500,
        p95_latency_ms=1000,
        p95_ttft_ms=None,
        window_start=NOW,
        window_end=NOW,
        computed_at=NOW,
    )
    page = staff.get("/admin/telemetry/reliabilitystat/").content.decode()
    assert "0.9167" in page
    assert "—" in page
    assert "pa/m1@main" in page  # one column for provider, model and connection
    assert staff.get("/admin/telemetry/reliabilitystat/add/").status_code == 403


def test_hourly_usage_is_listed(staff):
    UsageHourly.objects.create(
        hour=NOW,
        provider="pa",
        model="m1",
        connection="main",
        attempts=3,
        samples=3,
        failures=0,
        prompt_tokens=40,
        completion_tokens=60,
    )
    response = staff.get("/admin/telemetry/usagehourly/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "pa/m1@main" in page
    assert "40 + 60" in page
