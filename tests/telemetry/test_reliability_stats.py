"""The 24 h statistics and the hourly usage rows (spec 06 §3.4)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from telemetry import reliability, usage
from telemetry.attempt_counts import nearest_rank
from telemetry.models import AttemptLog, ReliabilityStat, RequestLog, UsageHourly
from telemetry.reliability import AttemptRow, compute

NOW = datetime(2025, 6, 2, 12, 30, tzinfo=UTC)


def row(
    result: str = "success",
    *,
    hours_ago: float = 1.0,
    connection: str = "main",
    latency_ms: int | None = 500,
    ttft_ms: int | None = None,
    stream: bool = False,
    model: str = "gpt-4o-mini",
) -> AttemptRow:
    return AttemptRow(
        provider="openai",
        model=model,
        connection=connection,
        result=result,
        latency_ms=latency_ms,
        ttft_ms=ttft_ms,
        stream=stream,
        started_at=NOW - timedelta(hours=hours_ago),
    )


def spread(count: int, result: str = "success", **kwargs: Any) -> list[AttemptRow]:
    """``count`` rows spread over the 24 h window (23 h ago up to now)."""
    return [
        row(result, hours_ago=23 - 23 * i / max(count - 1, 1), **kwargs)
        for i in range(count)
    ]


def stat(records: list[reliability.StatRecord], connection: str = "main") -> Any:
    (found,) = [r for r in records if r.connection == connection]
    return found


# --- pure: compute() ---------------------------------------------------------------


def test_nine_samples_leave_every_rate_unknown() -> None:
    record = stat(compute([*spread(8), row("server_error")], NOW))

    assert record.samples == 9
    assert record.failures == 1
    assert record.failure_rate is None
    assert record.reliability is None
    assert record.good_rate is None
    assert record.p50_latency_ms is None


def test_ten_samples_with_one_server_error_give_reliability_0_9() -> None:
    record = stat(compute([*spread(9), row("server_error", hours_ago=12)], NOW))

    assert record.samples == 10
    assert record.failure_rate == pytest.approx(0.1)
    assert record.reliability == pytest.approx(0.9)


def test_failures_older_than_24_hours_are_excluded() -> None:
    old_failures = [row("server_error", hours_ago=h) for h in (24.01, 26, 28, 30)]

    record = stat(compute([*spread(9), row("server_error"), *old_failures], NOW))

    assert record.samples == 10
    assert record.reliability == pytest.approx(0.9)


def test_a_cancelled_attempt_or_client_error_changes_nothing() -> None:
    rows = [*spread(9), row("server_error")]

    with_noise = compute(
        [*rows, row("cancelled", latency_ms=1), row("client_error", latency_ms=1)], NOW
    )

    assert with_noise == compute(rows, NOW)


def test_latency_percentiles_are_nearest_rank_over_successes() -> None:
    rows = [row(latency_ms=ms) for ms in range(1000, 0, -100)]
    rows.append(row("server_error", latency_ms=5))  # failures have no say

    record = stat(compute(rows, NOW))

    assert record.p50_latency_ms == 500
    assert record.p95_latency_ms == 1000


def test_reliability_and_good_rate_count_different_failures() -> None:
    rows = [*spread(10), row("empty_response"), row("rate_limit")]

    record = stat(compute(rows, NOW))

    assert record.samples == 12
    assert record.failures == 2
    assert record.reliability == pytest.approx(0.8333, abs=5e-5)
    assert record.good_rate == pytest.approx(0.9091, abs=5e-5)


def test_good_rate_is_unknown_below_ten_quality_attempts() -> None:
    # 12 samples, but only 9 successes/empty/interrupted behind good_rate
    rows = [*spread(8), row("stream_interrupted"), *spread(3, "timeout")]

    record = stat(compute(rows, NOW))

    assert record.reliability == pytest.approx(8 / 12)
    assert record.good_rate is None


def test_p95_ttft_reads_successful_streaming_attempts_only() -> None:
    streamed = [row(stream=True, ttft_ms=ms) for ms in range(10, 110, 10)]
    not_streamed = [row(ttft_ms=9999)]
    failed = [row("stream_interrupted", stream=True, ttft_ms=9999)]

    record = stat(compute(streamed + not_streamed + failed, NOW))

    assert record.p95_ttft_ms == 100


def test_p95_ttft_is_unknown_below_ten_streaming_successes() -> None:
    rows = [row(stream=True, ttft_ms=50) for _ in range(9)] + spread(5)

    assert stat(compute(rows, NOW)).p95_ttft_ms is None


def test_star_row_aggregates_the_connections_of_a_model() -> None:
    rows = (
        spread(5, connection="a")
        + spread(4, connection="b")
        + [row("server_error", connection="b")]
    )

    records = compute(rows, NOW)

    assert [r.key for r in records] == [
        ("openai", "gpt-4o-mini", "*"),
        ("openai", "gpt-4o-mini", "a"),
        ("openai", "gpt-4o-mini", "b"),
    ]
    assert stat(records, "a").reliability is None
    star = stat(records, "*")
    assert (star.samples, star.failures) == (10, 1)
    assert star.reliability == pytest.approx(0.9)


def test_a_group_with_only_cancelled_attempts_has_no_row() -> None:
    assert compute([row("cancelled"), row("client_error")], NOW) == []


def test_rows_may_be_mappings_or_tuples() -> None:
    rows = spread(10)
    as_dicts = [r._asdict() for r in rows]
    as_tuples = [tuple(r) for r in rows]

    assert compute(as_dicts, NOW) == compute(as_tuples, NOW) == compute(rows, NOW)


def test_records_carry_the_window() -> None:
    record = stat(compute(spread(10), NOW))

    assert record.window_start == NOW - timedelta(hours=24)
    assert record.window_end == record.computed_at == NOW


@pytest.mark.parametrize(
    ("size", "percent", "expected"),
    [(1, 50, 1), (1, 95, 1), (2, 50, 1), (3, 50, 2), (20, 95, 19), (21, 95, 20)],
)
def test_nearest_rank_takes_position_ceil_p_times_n(
    size: int, percent: int, expected: int
) -> None:
    assert nearest_rank(list(range(1, size + 1)), percent) == expected


# --- pure: hourly usage --------------------------------------------------------------


def test_hourly_usage_buckets_the_three_rewritten_hours() -> None:
    start, end = usage.rewritten_hours(NOW)
    rows = [
        row(hours_ago=0.1, latency_ms=100),  # 12:24 -> 12:00
        row("server_error", hours_ago=0.6),  # 11:54 -> 11:00
        row("cancelled", hours_ago=0.6),
        row(hours_ago=2.4),  # 10:06 -> 10:00
        row(hours_ago=2.6),  # 09:54: not rewritten
    ]

    records = usage.compute_hourly(rows, start, end)

    assert (start, end) == (NOW.replace(minute=0) - timedelta(hours=2), end)
    assert [(r.hour.hour, r.attempts, r.samples, r.failures) for r in records] == [
        (10, 1, 1, 0),
        (11, 2, 1, 1),
        (12, 1, 1, 0),
    ]
    assert records[1].p50_latency_ms is None  # no success in that hour
    assert records[2].p95_latency_ms == 100


def test_hourly_usage_sums_tokens_and_known_costs() -> None:
    start, end = usage.rewritten_hours(NOW)
    base = row(hours_ago=0.1)
    rows = [
        base._replace(prompt_tokens=100, completion_tokens=10, cost_usd=Decimal("1.5")),
        base._replace(prompt_tokens=50, cached_tokens=20, cost_usd=None),
        base._replace(result="server_error", cost_usd=Decimal("0.25")),
    ]

    (record,) = usage.compute_hourly(rows, start, end)

    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (
        150,
        10,
        20,
    )
    assert record.cost_usd == Decimal("1.75")
    assert usage.compute_hourly([base], start, end)[0].cost_usd is None


# --- database: refresh() --------------------------------------------------------------


@pytest.fixture
def log_attempt() -> Callable[..., AttemptLog]:
    """``log_attempt(result, hours_ago=..., **fields)``: one stored request with one
    attempt, started ``hours_ago`` before ``NOW``."""

    def make(
        result: str = "success",
        *,
        hours_ago: float = 1.0,
        stream: bool = False,
        **fields: Any,
    ) -> AttemptLog:
        started = NOW - timedelta(hours=hours_ago)
        request = RequestLog.objects.create(
            created_at=started,
            endpoint="/v1/chat/completions",
            stream=stream,
            status="success",
            http_status=200,
        )
        values: dict[str, Any] = {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "connection": "main",
            "latency_ms": 500,
        }
        values.update(fields)
        values["target"] = (
            f"{values['provider']}/{values['model']}@{values['connection']}"
        )
        return AttemptLog.objects.create(
            request=request,
            attempt_no=1,
            started_at=started,
            result=result,
            **values,
        )

    return make


def stored(connection: str = "main") -> ReliabilityStat:
    return ReliabilityStat.objects.get(
        provider="openai", model="gpt-4o-mini", connection=connection
    )


@pytest.mark.django_db
def test_refresh_meets_the_acceptance_rows_spread_over_30_hours(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    for i in range(9):
        log_attempt(hours_ago=1 + 2.5 * i, latency_ms=100 * (i + 1))
    log_attempt("server_error", hours_ago=3)
    log_attempt("cancelled", hours_ago=4)
    for hours in (25, 27, 29.5):
        log_attempt("server_error", hours_ago=hours)

    reliability.refresh(NOW)

    row_ = stored()
    assert (row_.samples, row_.failures) == (10, 1)
    assert row_.reliability == pytest.approx(0.9)
    assert row_.p50_latency_ms is None  # 9 successes
    assert row_.window_start == NOW - timedelta(hours=24)
    assert row_.computed_at == NOW
    assert stored("*").reliability == pytest.approx(0.9)


@pytest.mark.django_db
def test_refresh_stores_percentiles_and_good_rate(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    for i in range(10):
        log_attempt(hours_ago=2 * i + 0.5, latency_ms=100 * (i + 1))
    log_attempt("empty_response", hours_ago=5)
    log_attempt("rate_limit", hours_ago=6)

    reliability.refresh(NOW)

    row_ = stored()
    assert (row_.p50_latency_ms, row_.p95_latency_ms) == (500, 1000)
    assert row_.reliability == pytest.approx(0.8333, abs=5e-5)
    assert row_.good_rate == pytest.approx(0.9091, abs=5e-5)


@pytest.mark.django_db
def test_refresh_reads_ttft_of_streaming_requests(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    for i in range(10):
        log_attempt(hours_ago=1, stream=True, ttft_ms=10 * (i + 1))

    reliability.refresh(NOW)

    assert stored().p95_ttft_ms == 100


@pytest.mark.django_db
def test_refresh_replaces_rows_and_drops_groups_without_samples(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    log_attempt(hours_ago=1, connection="a")
    log_attempt(hours_ago=23, connection="b")
    reliability.refresh(NOW)
    assert ReliabilityStat.objects.count() == 3  # a, b, *

    counts = reliability.refresh(NOW + timedelta(hours=2))

    assert sorted(ReliabilityStat.objects.values_list("connection", flat=True)) == [
        "*",
        "a",
    ]
    assert counts.as_counts()["deleted"] == 1
    assert stored("a").window_end == NOW + timedelta(hours=2)


@pytest.mark.django_db
def test_second_refresh_changes_nothing(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    for i in range(12):
        log_attempt(hours_ago=0.2 * i, cost_usd=Decimal("0.001"), prompt_tokens=10)
    first = reliability.refresh(NOW)
    snapshot = list(UsageHourly.objects.order_by("hour").values())

    second = reliability.refresh(NOW)

    assert first.is_change
    assert not second.is_change
    assert second.as_counts() == {
        "created": 0,
        "updated": 0,
        "unchanged": 2,
        "deleted": 0,
        "usage_created": 0,
        "usage_updated": 0,
        "usage_unchanged": 3,
        "usage_deleted": 0,
    }
    assert list(UsageHourly.objects.order_by("hour").values()) == snapshot


@pytest.mark.django_db
def test_refresh_rewrites_only_the_last_three_hours_of_usage(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    old_hour = datetime(2025, 6, 2, 8, tzinfo=UTC)
    UsageHourly.objects.create(
        hour=old_hour,
        provider="openai",
        model="gpt-4o-mini",
        connection="main",
        attempts=99,
        samples=99,
        failures=0,
    )
    stale = UsageHourly.objects.create(
        hour=datetime(2025, 6, 2, 11, tzinfo=UTC),
        provider="gone",
        model="m",
        connection="c",
        attempts=1,
        samples=1,
        failures=0,
    )
    log_attempt(hours_ago=0.1, prompt_tokens=7, cost_usd=Decimal("0.5"))
    log_attempt("timeout", hours_ago=0.2, latency_ms=30000)
    log_attempt(hours_ago=4)  # 08:30: older than the rewritten hours

    counts = reliability.refresh(NOW)

    assert counts.usage.deleted == [stale.pk]
    rows = list(
        UsageHourly.objects.order_by("hour").values_list(
            "hour", "attempts", "failures", "prompt_tokens", "cost_usd"
        )
    )
    assert rows == [
        (old_hour, 99, 0, 0, None),
        (datetime(2025, 6, 2, 12, tzinfo=UTC), 2, 1, 7, Decimal("0.5")),
    ]


@pytest.mark.django_db
def test_dry_run_refresh_writes_nothing(
    log_attempt: Callable[..., AttemptLog],
) -> None:
    log_attempt(hours_ago=0.5)

    counts = reliability.refresh(NOW, dry_run=True)

    assert counts.as_counts()["created"] == 2
    assert counts.usage.created == 1
    assert not ReliabilityStat.objects.exists()
    assert not UsageHourly.objects.exists()
