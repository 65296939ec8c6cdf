"""The Overview read from ``UsageHourly`` (spec 06 §4.1): finished hours that the
reliability job rewrote after they ended come from the hourly rows, every other hour
from the log, and the counts equal a read of the log alone."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.utils import timezone

from telemetry import reliability
from telemetry.models import AttemptLog, RequestLog, UsageHourly
from telemetry.overview import PERIODS, Filters, Overview, UsageRow, build_overview
from telemetry.overview_hourly import HOUR, Mean, split_hours

pytestmark = pytest.mark.django_db

OVERVIEW = "/admin/telemetry/overview/"
NOW = datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
THIS_HOUR = datetime(2025, 6, 1, 12, tzinfo=UTC)
EXACT = [
    pytest.param(
        True,
        marks=pytest.mark.skipif(
            connection.vendor != "postgresql", reason="percentile_disc is PostgreSQL's"
        ),
        id="database-percentiles",
    ),
    pytest.param(False, id="python-percentiles"),
]


def log_request(
    created_at: datetime, *attempts: dict[str, Any], **fields: Any
) -> RequestLog:
    """One request row and its attempts (1 ms apart, ``connection`` "main")."""
    values: dict[str, Any] = {
        "endpoint": "/v1/chat/completions",
        "status": "success",
        "http_status": 200,
        "route": "pa/m1",
        "api_key_prefix": "sk-or-aaa",
        **fields,
    }
    request = RequestLog.objects.create(
        id=uuid.uuid4(), created_at=created_at, **values
    )
    for number, attempt in enumerate(attempts, start=1):
        data = {"connection": "main", "result": "success", **attempt}
        AttemptLog.objects.create(
            request=request,
            attempt_no=number,
            started_at=created_at + timedelta(milliseconds=number),
            target=f"{data['provider']}/{data['model']}@{data['connection']}",
            **data,
        )
    return request


def hourly_row(hour: datetime, computed_at: datetime | None, **fields: Any) -> None:
    values: dict[str, Any] = {
        "provider": "pa",
        "model": "m1",
        "connection": "main",
        "attempts": 1,
        "samples": 1,
        "failures": 0,
        **fields,
    }
    UsageHourly.objects.create(hour=hour, computed_at=computed_at, **values)


def run_job_every_hour(first: datetime, last: datetime) -> None:
    """``compute_reliability_24h`` five minutes past each hour from ``first`` to
    ``last``, each run rewriting its hour and the two before it."""
    moment = first
    while moment <= last:
        reliability.refresh(moment + timedelta(minutes=5))
        moment += HOUR


def seeded_traffic(hours: int) -> None:
    """Three requests an hour over the ``hours`` before ``NOW``'s hour and in it:
    two targets, failovers, client-caused attempts, refusals, streams with TTFT."""
    rng = random.Random(6)
    for back in range(hours, -1, -1):
        for minute in (5, 25, 29):
            created = THIS_HOUR - back * HOUR + timedelta(minutes=minute)
            roll = rng.random()
            stream = rng.random() < 0.5
            served = {
                "provider": "pa",
                "model": rng.choice(["m1", "m2"]),
                "connection": rng.choice(["main", "spare"]),
                "latency_ms": rng.randrange(50, 900),
                "ttft_ms": rng.randrange(20, 200) if stream else None,
                "prompt_tokens": rng.randrange(1, 500),
                "completion_tokens": rng.randrange(1, 500),
                "cost_usd": Decimal(rng.randrange(1, 1000)) / 100_000,
            }
            if roll < 0.15:
                log_request(created, status="refused", http_status=429)
            elif roll < 0.4:
                log_request(
                    created,
                    {"provider": "pb", "model": "m9", "result": "server_error"},
                    {"provider": "pb", "model": "m9", "result": "cancelled"},
                    served,
                    stream=stream,
                    served_model=f"pa/{served['model']}",
                    provider="pa",
                    cost_usd=served["cost_usd"],
                )
            elif roll < 0.5:
                log_request(
                    created,
                    {"provider": "pb", "model": "m9", "result": "timeout"},
                    status="upstream_failed",
                    http_status=503,
                )
            else:
                log_request(
                    created,
                    served,
                    stream=stream,
                    served_model=f"pa/{served['model']}",
                    provider="pa",
                    cost_usd=served["cost_usd"],
                )


def counts(rows: list[UsageRow]) -> list[tuple[Any, ...]]:
    return [
        (
            r.provider,
            r.name,
            r.attempts,
            r.samples,
            r.ok,
            r.prompt_tokens,
            r.completion_tokens,
            r.cost,
        )
        for r in rows
    ]


def request_figures(found: Overview) -> list[tuple[Any, ...]]:
    return [(b.label, b.requests, b.ok, b.cost) for b in [*found.buckets, found.totals]]


# Which hours come from the rows.


def test_split_hours_makes_runs_and_leaves_the_last_log_run_open():
    start = datetime(2025, 6, 1, 6, tzinfo=UTC)
    covered = {start + HOUR, start + 2 * HOUR, start + 4 * HOUR}

    rows, log = split_hours(start, start + 6 * HOUR, covered)

    assert rows == [
        (start + HOUR, start + 3 * HOUR),
        (start + 4 * HOUR, start + 5 * HOUR),
    ]
    assert log == [
        (start, start + HOUR),
        (start + 3 * HOUR, start + 4 * HOUR),
        (start + 5 * HOUR, None),
    ]


def test_a_weighted_mean_ignores_parts_without_a_value():
    mean = Mean()

    mean.add(100, 3)
    mean.add(None, 5)
    mean.add(400, 1)
    mean.add(999, 0)

    assert mean.value == 175
    assert Mean().value is None


def test_the_reliability_job_stamps_each_hourly_row_with_its_clock():
    log_request(NOW - timedelta(minutes=10), {"provider": "pa", "model": "m1"})

    reliability.refresh(NOW)

    assert list(UsageHourly.objects.values_list("hour", "computed_at")) == [
        (THIS_HOUR, NOW)
    ]


# The numbers.


@pytest.mark.parametrize("exact", EXACT)
@pytest.mark.parametrize("period", ["24h", "7d"])
def test_hourly_rows_give_the_same_counts_as_the_log(exact: bool, period: str):
    seeded_traffic(hours=30)
    from_log = build_overview(PERIODS[period], Filters(), NOW, exact=exact)
    run_job_every_hour(THIS_HOUR - 30 * HOUR, THIS_HOUR)

    found = build_overview(PERIODS[period], Filters(), NOW, exact=exact)

    assert from_log.hourly_hours == 0
    # Every finished hour of the period was rewritten after it ended; the
    # current one comes from the log.
    assert found.hourly_hours == (23 if period == "24h" else 30)
    assert request_figures(found) == request_figures(from_log)
    assert counts(found.by_model) == counts(from_log.by_model)
    assert counts(found.by_connection) == counts(from_log.by_connection)
    assert [r.name for r in found.by_model] == ["m9", "m1", "m2"]
    assert found.totals.p95_latency_ms is not None
    assert found.buckets[-1].p95_latency_ms is not None  # the current hour, logged


@pytest.mark.parametrize(
    "computed_at",
    [
        pytest.param(datetime(2025, 6, 1, 11, 55, tzinfo=UTC), id="during-the-hour"),
        pytest.param(None, id="before-computed-at-existed"),
    ],
)
def test_an_hour_not_rewritten_after_its_end_is_read_from_the_log(
    computed_at: datetime | None,
):
    eleven = datetime(2025, 6, 1, 11, tzinfo=UTC)
    log_request(eleven + timedelta(minutes=40), {"provider": "pa", "model": "m1"})
    hourly_row(eleven, computed_at, attempts=50, samples=50)

    found = build_overview(PERIODS["24h"], Filters(), NOW)

    assert found.hourly_hours == 0
    assert [(r.name, r.attempts) for r in found.by_model] == [("m1", 1)]


def test_a_covered_hour_is_read_from_its_rows_and_the_current_hour_from_the_log():
    eleven = datetime(2025, 6, 1, 11, tzinfo=UTC)
    log_request(NOW - timedelta(minutes=5), {"provider": "pa", "model": "m1"})
    hourly_row(
        eleven,
        eleven + timedelta(minutes=65),
        attempts=50,
        samples=48,
        failures=8,
        prompt_tokens=1000,
        completion_tokens=2000,
        cost_usd=Decimal("0.25"),
        p50_latency_ms=300,
        p95_latency_ms=900,
        p95_ttft_ms=120,
    )
    hourly_row(THIS_HOUR, NOW, attempts=70)  # the current hour: never from rows

    found = build_overview(PERIODS["24h"], Filters(), NOW)

    assert found.hourly_hours == 1
    (row,) = found.by_model
    assert (row.attempts, row.samples, row.ok) == (51, 49, 41)
    assert (row.prompt_tokens, row.completion_tokens, row.cost) == (
        1000,
        2000,
        Decimal("0.25"),
    )
    by_label = {b.label: b for b in found.buckets}
    assert (by_label["11:00"].p95_latency_ms, by_label["11:00"].p95_ttft_ms) == (
        900,
        120,
    )
    assert by_label["11:00"].requests == 0  # requests always come from the log
    assert by_label["12:00"].requests == 1


def test_percentiles_of_several_hours_are_weighted_by_successes():
    for hour, p95, successes in ((9, 100, 3), (10, 400, 1)):
        start = datetime(2025, 6, 1, hour, tzinfo=UTC)
        hourly_row(
            start,
            start + 2 * HOUR,
            attempts=successes + 1,
            samples=successes + 1,
            failures=1,
            p50_latency_ms=p95 // 2,
            p95_latency_ms=p95,
            p95_ttft_ms=p95 // 10 if hour == 9 else None,
        )

    found = build_overview(PERIODS["7d"], Filters(), NOW)

    (row,) = found.by_model
    assert (row.p50_latency_ms, row.p95_latency_ms, row.p95_ttft_ms) == (88, 175, 10)
    assert found.buckets[-1].p95_latency_ms == 175
    assert found.totals.p95_latency_ms == 175


def test_provider_and_model_filters_apply_to_the_hourly_rows():
    eleven = datetime(2025, 6, 1, 11, tzinfo=UTC)
    done = eleven + timedelta(minutes=65)
    hourly_row(eleven, done, model="m1", attempts=5)
    hourly_row(eleven, done, model="m2", attempts=7)
    hourly_row(eleven, done, provider="pb", model="m1", attempts=11)

    by_provider = build_overview(PERIODS["24h"], Filters(provider="pa"), NOW)
    by_model = build_overview(PERIODS["24h"], Filters(model="pa/m2"), NOW)

    assert [(r.name, r.attempts) for r in by_provider.by_model] == [
        ("m2", 7),
        ("m1", 5),
    ]
    assert [(r.provider, r.name, r.attempts) for r in by_model.by_model] == [
        ("pa", "m2", 7)
    ]


@pytest.mark.parametrize(
    "filters",
    [Filters(route="pa/m1"), Filters(api_key="sk-or-aaa")],
    ids=["route", "api-key"],
)
def test_route_and_key_filters_read_only_the_log(filters: Filters):
    eleven = datetime(2025, 6, 1, 11, tzinfo=UTC)
    log_request(eleven + timedelta(minutes=40), {"provider": "pa", "model": "m1"})
    hourly_row(eleven, eleven + timedelta(minutes=65), attempts=50)

    found = build_overview(PERIODS["24h"], filters, NOW)

    assert found.hourly_hours == 0
    assert [(r.name, r.attempts) for r in found.by_model] == [("m1", 1)]


# The page.


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=("view_requestlog", "view_attemptlog"))
    )
    client = Client()
    client.force_login(user)
    return client


def test_overview_page_from_hourly_rows_says_so_within_ten_queries(
    staff_client: Client,
    django_assert_max_num_queries: Callable[..., Any],
):
    hour = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    before = hour - HOUR
    hourly_row(before, hour + timedelta(minutes=5), attempts=4, p95_latency_ms=250)
    log_request(
        before + timedelta(minutes=1),
        {"provider": "pa", "model": "m1", "latency_ms": 240},
        served_model="pa/m1",
        provider="pa",
    )

    with django_assert_max_num_queries(10):
        response = staff_client.get(OVERVIEW, {"period": "30d"})

    html = response.content.decode()
    assert response.status_code == 200
    assert '<h3>p95 attempt latency</h3><p class="value">250 ms</p>' in html
    assert "1 finished hour comes from the hourly usage rows" in html
    assert "p95 latency and p95 TTFT (successful attempts)" in html
    assert '<tr data-key="pa/m1"><th scope="row">pa/m1</th><td>4</td>' in html
