"""Retention (spec 06 §1.6, §3.5): batches, order, cut-offs, the soft limit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry import prune
from telemetry.models import AttemptLog, RequestLog, UsageHourly

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def log_request() -> Callable[..., RequestLog]:
    """``log_request(days_ago, attempts=1)``: a stored request and its attempts,
    the attempts starting ``attempt_delay`` after the request."""

    def make(
        days_ago: float, attempts: int = 1, attempt_delay: timedelta = timedelta(0)
    ) -> RequestLog:
        created = NOW - days_ago * DAY
        request = RequestLog.objects.create(
            created_at=created,
            endpoint="/v1/chat/completions",
            status="success",
            http_status=200,
        )
        AttemptLog.objects.bulk_create(
            AttemptLog(
                request=request,
                attempt_no=n,
                started_at=created + attempt_delay,
                provider="openai",
                model="gpt-4o-mini",
                connection="main",
                target="openai/gpt-4o-mini@main",
                result="success",
            )
            for n in range(1, attempts + 1)
        )
        return request

    return make


def usage_row(days_ago: float) -> UsageHourly:
    return UsageHourly.objects.create(
        hour=(NOW - days_ago * DAY).replace(minute=0),
        provider="openai",
        model="gpt-4o-mini",
        connection="main",
        attempts=1,
        samples=1,
        failures=0,
    )


@pytest.mark.django_db
def test_prune_deletes_logs_older_than_the_retention(
    log_request: Callable[..., RequestLog],
) -> None:
    old = log_request(31, attempts=2)
    kept = log_request(29, attempts=1)

    report = prune.prune(NOW, 30)

    assert list(RequestLog.objects.values_list("id", flat=True)) == [kept.id]
    assert not AttemptLog.objects.filter(request_id=old.id).exists()
    assert AttemptLog.objects.filter(request_id=kept.id).count() == 1
    assert (report.deleted["attempt_log"], report.deleted["request_log"]) == (2, 1)
    assert not report.stopped_early


@pytest.mark.django_db
def test_an_old_request_takes_its_younger_attempts_along(
    log_request: Callable[..., RequestLog],
) -> None:
    log_request(30.001, attempt_delay=timedelta(hours=1))

    report = prune.prune(NOW, 30)

    assert not RequestLog.objects.exists()
    assert not AttemptLog.objects.exists()
    assert report.deleted["attempt_log"] == 1  # by cascade, in the request step


@pytest.mark.django_db
def test_prune_deletes_usage_after_400_days() -> None:
    usage_row(401)
    kept = usage_row(399)

    report = prune.prune(NOW, 30)

    assert list(UsageHourly.objects.values_list("pk", flat=True)) == [kept.pk]
    assert report.deleted["usage_hourly"] == 1


@pytest.mark.django_db
def test_prune_works_in_batches_oldest_first(
    log_request: Callable[..., RequestLog], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prune, "BATCH_ROWS", 2)
    for days in (35, 34, 33, 32, 31):
        log_request(days)
    calls = iter([False, False, True])  # two batches, then the soft limit

    report = prune.prune(NOW, 30, should_stop=lambda: next(calls))

    assert report.stopped_early
    assert report.deleted["attempt_log"] == 4
    remaining = AttemptLog.objects.get()
    assert remaining.started_at == NOW - 31 * DAY  # the youngest waits
    assert RequestLog.objects.count() == 5  # the request step was not reached


@pytest.mark.django_db
def test_a_stopped_run_is_continued_by_the_next(
    log_request: Callable[..., RequestLog], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prune, "BATCH_ROWS", 2)
    for days in (35, 34, 33):
        log_request(days)
    prune.prune(NOW, 30, should_stop=iter([False, True]).__next__)

    report = prune.prune(NOW, 30)

    assert not RequestLog.objects.exists()
    assert not AttemptLog.objects.exists()
    assert report.deleted["attempt_log"] == 1
    assert report.deleted["request_log"] == 3


@pytest.mark.django_db
def test_each_batch_is_its_own_transaction(
    log_request: Callable[..., RequestLog], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prune, "BATCH_ROWS", 2)
    for days in (34, 33, 32, 31):
        log_request(days)
    all_steps = prune.steps
    monkeypatch.setattr(prune, "steps", lambda now, days: all_steps(now, days)[:1])

    with CaptureQueriesContext(connection) as queries:
        prune.prune(NOW, 30)

    savepoints = [q for q in queries if q["sql"].startswith("SAVEPOINT")]
    assert len(savepoints) == 2  # atomic() inside the test's transaction


@pytest.mark.django_db
def test_dry_run_counts_and_deletes_nothing(
    log_request: Callable[..., RequestLog],
) -> None:
    log_request(40, attempts=3)
    log_request(10)
    usage_row(500)

    report = prune.prune(NOW, 30, dry_run=True)

    assert report.deleted["attempt_log"] == 3
    assert report.deleted["request_log"] == 1
    assert report.deleted["usage_hourly"] == 1
    assert RequestLog.objects.count() == 2
    assert AttemptLog.objects.count() == 4
    assert UsageHourly.objects.count() == 1


@pytest.mark.django_db
def test_the_retention_is_a_parameter(
    log_request: Callable[..., RequestLog],
) -> None:
    log_request(8)
    log_request(6)

    report = prune.prune(NOW, 7)

    assert RequestLog.objects.count() == 1
    assert report.as_counts()["deleted"] == 2  # one request, one attempt


@pytest.mark.django_db
def test_prune_deletes_job_runs_after_90_days() -> None:
    job_run: Any = apps.get_model("providers.JobRun")
    for days in (91, 89):
        job_run.objects.create(
            job="prune_logs",
            started_at=NOW - days * DAY,
            finished_at=NOW - days * DAY,
            outcome="success",
            triggered_by="beat",
        )

    report = prune.prune(NOW, 30)

    assert job_run.objects.count() == 1
    assert report.deleted["job_run"] == 1


@pytest.mark.django_db
def test_prune_steps_include_expired_arena_scores() -> None:
    labels = [step.label for step in prune.steps(NOW, 30)]

    assert labels.index("arena_score") == labels.index("request_log") + 1
    (arena,) = [s for s in prune.steps(NOW, 30) if s.label == "arena_score"]
    assert (arena.date_field, arena.cutoff) == ("expires_at", NOW)


def test_steps_run_in_the_spec_order() -> None:
    labels = [step.label for step in prune.steps(NOW, 30)]

    expected = ["attempt_log", "request_log", "arena_score", "usage_hourly", "job_run"]
    assert labels == [label for label in expected if label in labels]
    assert labels[:2] == ["attempt_log", "request_log"]


@pytest.mark.django_db
def test_prune_deletes_expired_stored_responses() -> None:
    """Spec 09 §3.4: the daily job deletes stored Responses past their TTL."""
    from combos.models import ApiKey
    from gateway.models import StoredResponse

    key = ApiKey.objects.create(name="k", key_hash="h" * 64, prefix="sk-or-k")
    for name, days in (("old", -1), ("live", 1)):
        StoredResponse.objects.create(
            id=f"resp_{name}",
            api_key=key,
            created_at=NOW - 30 * DAY,
            expires_at=NOW + days * DAY,
            response={},
            root_id=f"resp_{name}",
        )

    report = prune.prune(NOW, 30)

    assert list(StoredResponse.objects.values_list("id", flat=True)) == ["resp_live"]
    assert report.deleted["stored_response"] == 1
