"""The telemetry jobs as commands, Celery tasks and registry entries (spec 06 §3.1)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from providers.jobs import REGISTRY, load_jobs
from providers.models import JobRun
from telemetry import tasks
from telemetry.models import AttemptLog, ReliabilityStat, RequestLog


def log_attempt(age: timedelta, result: str = "success") -> None:
    started = timezone.now() - age
    request = RequestLog.objects.create(
        created_at=started,
        endpoint="/v1/chat/completions",
        status="success",
        http_status=200,
    )
    AttemptLog.objects.create(
        request=request,
        attempt_no=1,
        started_at=started,
        provider="openai",
        model="gpt-4o-mini",
        connection="main",
        target="openai/gpt-4o-mini@main",
        result=result,
        latency_ms=400,
    )


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def test_both_jobs_are_registered_with_the_spec_schedule() -> None:
    load_jobs()
    reliability = REGISTRY["compute_reliability_24h"]
    prune = REGISTRY["prune_logs"]

    assert (reliability.schedule, reliability.soft_s, reliability.hard_s) == (
        600,
        240,
        300,
    )
    assert reliability.task == "telemetry.tasks.compute_reliability_24h_task"
    assert (prune.schedule, prune.soft_s, prune.hard_s) == ("41 4 * * *", 1500, 1800)
    assert prune.task == "telemetry.tasks.prune_logs_task"
    assert tasks.compute_reliability_24h_task.name == reliability.task
    assert tasks.prune_logs_task.name == prune.task


@pytest.mark.django_db
def test_run_job_permission_exists() -> None:
    assert Permission.objects.filter(
        content_type__app_label="telemetry", codename="run_job"
    ).exists()


@pytest.mark.django_db
def test_compute_reliability_command_records_a_run() -> None:
    for _ in range(10):
        log_attempt(timedelta(minutes=5))

    out = run("compute_reliability_24h")

    job_run = JobRun.objects.get(job="compute_reliability_24h")
    assert (job_run.outcome, job_run.triggered_by) == ("success", "command")
    assert job_run.counts["created"] == 2
    assert job_run.counts["usage_created"] == 1
    assert out.startswith("compute_reliability_24h: 2 statistics rows (2 created")
    assert ReliabilityStat.objects.get(connection="main").reliability == 1.0


@pytest.mark.django_db
def test_compute_reliability_dry_run_writes_only_the_run() -> None:
    log_attempt(timedelta(minutes=5))

    run("compute_reliability_24h", "--dry-run")

    assert JobRun.objects.get().outcome == "dry_run"
    assert not ReliabilityStat.objects.exists()


@pytest.mark.django_db
def test_prune_logs_command_honours_days_once() -> None:
    log_attempt(timedelta(days=8))
    log_attempt(timedelta(days=1))

    out = run("prune_logs", "--days", "7")

    job_run = JobRun.objects.get(job="prune_logs")
    assert job_run.outcome == "success"
    assert job_run.counts["attempt_log"] == 1
    assert job_run.counts["request_log"] == 1
    assert "prune_logs: 2 rows deleted" in out
    assert AttemptLog.objects.count() == 1


@pytest.mark.django_db
def test_prune_logs_dry_run_prints_counts_only() -> None:
    log_attempt(timedelta(days=40))

    out = run("prune_logs", "--dry-run")

    assert "2 rows due for deletion" in out
    assert JobRun.objects.get().outcome == "dry_run"
    assert AttemptLog.objects.count() == 1


@pytest.mark.django_db
def test_prune_logs_with_nothing_to_do_is_unchanged() -> None:
    run("prune_logs")

    assert JobRun.objects.get().outcome == "unchanged"


def test_prune_logs_rejects_a_bad_days_value() -> None:
    with pytest.raises(CommandError, match="days"):
        call_command("prune_logs", "--days", "0")


@pytest.mark.django_db
def test_celery_tasks_run_the_jobs_as_beat() -> None:
    tasks.compute_reliability_24h_task()
    tasks.prune_logs_task()

    assert sorted(JobRun.objects.values_list("job", "triggered_by")) == [
        ("compute_reliability_24h", "beat"),
        ("prune_logs", "beat"),
    ]
