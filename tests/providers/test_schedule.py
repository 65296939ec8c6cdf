"""The job schedule: §3.1's table in Celery beat, and ``run_jobs`` without a broker.

Due times are computed with an injected clock; nothing sleeps for real.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from celery.schedules import crontab
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from omniroute_site.celery import app
from providers import job_runner
from providers.jobs import JobContext, JobResult, Outcome, load_jobs
from providers.models import JobRun
from providers.schedule import next_cron_time, next_due, parse_cron

T0 = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)  # a Tuesday

#: spec 06 §3.1
SPEC_SCHEDULE = {
    "providers.tasks.sync_models_dev_task": (crontab("17", "*/6"), 6 * 3600),
    "providers.tasks.sync_arena_elo_task": (crontab("23", "3"), 24 * 3600),
    "telemetry.tasks.compute_reliability_24h_task": (600, 600),
    "telemetry.tasks.prune_logs_task": (crontab("41", "4"), 24 * 3600),
}


# Beat (spec 06 §5: every task name is registered, schedules equal §3.1).


def test_the_beat_schedule_equals_the_spec_table() -> None:
    beat = django_settings.CELERY_BEAT_SCHEDULE

    assert {name: entry["task"] for name, entry in beat.items()} == {
        name: name for name in SPEC_SCHEDULE
    }
    for name, (schedule, expires) in SPEC_SCHEDULE.items():
        assert beat[name]["schedule"] == schedule, name
        assert beat[name]["options"]["expires"] == expires, name
        assert beat[name]["options"]["expire_seconds"] == expires, name


def test_beat_uses_the_database_scheduler() -> None:
    assert (
        django_settings.CELERY_BEAT_SCHEDULER
        == "django_celery_beat.schedulers:DatabaseScheduler"
    )
    assert "django_celery_beat" in django_settings.INSTALLED_APPS


@pytest.mark.parametrize("task", list(SPEC_SCHEDULE))
def test_every_beat_task_is_registered_with_the_celery_app(task: str) -> None:
    app.loader.import_default_modules()

    assert task in app.tasks


def test_each_registered_jobs_spec_matches_its_schedule_entry() -> None:
    table = django_settings.OMNIROUTE_JOB_SCHEDULE

    for name, spec in load_jobs().items():
        assert table[name]["task"] == spec.task, name
        assert table[name]["schedule"] == spec.schedule, name


def test_disabling_the_arena_sync_leaves_it_out_of_the_schedule() -> None:
    env = {**os.environ, "OMNIROUTE_ARENA_ELO_SYNC_ENABLED": "false"}
    code = (
        "import json, omniroute_site.settings as s; "
        "print(json.dumps([sorted(s.CELERY_BEAT_SCHEDULE), "
        "sorted(s.OMNIROUTE_JOB_SCHEDULE)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=django_settings.BASE_DIR,
    ).stdout

    beat, jobs = json.loads(out.strip().splitlines()[-1])
    assert "providers.tasks.sync_arena_elo_task" not in beat
    assert jobs == ["compute_reliability_24h", "prune_logs", "sync_models_dev"]


# Cron arithmetic.


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("17 */6 * * *", T0, T0.replace(minute=17)),
        ("17 */6 * * *", T0.replace(minute=17), T0.replace(hour=6, minute=17)),
        ("17 */6 * * *", T0.replace(hour=18, minute=17), T0.replace(day=11, minute=17)),
        (
            "23 3 * * *",
            T0.replace(hour=3, minute=23),
            T0.replace(day=11, hour=3, minute=23),
        ),
        (
            "41 4 * * *",
            T0.replace(hour=4, minute=40, second=59),
            T0.replace(hour=4, minute=41),
        ),
        ("0,30 * * * *", T0.replace(minute=1), T0.replace(minute=30)),
        ("5-7 1 * * *", T0.replace(hour=1, minute=5), T0.replace(hour=1, minute=6)),
        ("0 0 * * 0", T0, datetime(2026, 3, 15, tzinfo=UTC)),  # next Sunday
        ("0 0 * * 7", T0, datetime(2026, 3, 15, tzinfo=UTC)),  # 7 is Sunday too
        (
            "0 0 1 * *",
            datetime(2026, 12, 15, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
        ),
        ("0 0 29 2 *", T0, datetime(2028, 2, 29, tzinfo=UTC)),
        # both day fields restricted: either matches (the 13th, or a Thursday)
        ("0 0 13 * 4", T0, datetime(2026, 3, 12, tzinfo=UTC)),
    ],
)
def test_next_cron_time(expression: str, after: datetime, expected: datetime) -> None:
    assert next_cron_time(expression, after) == expected


@pytest.mark.parametrize(
    "expression", ["* * * *", "60 * * * *", "*/0 * * * *", "a * * * *", "0 0 31 2 *"]
)
def test_bad_or_impossible_expressions_are_refused(expression: str) -> None:
    with pytest.raises(ValueError, match="crontab"):
        next_cron_time(expression, T0)


def test_parse_cron_expands_steps() -> None:
    assert parse_cron("17 */6 * * *").hours == frozenset({0, 6, 12, 18})


def test_a_job_that_never_ran_is_due_now() -> None:
    assert next_due("17 */6 * * *", None, T0) == T0
    assert next_due(600, None, T0) == T0


def test_an_interval_job_is_due_its_interval_after_its_last_start() -> None:
    assert next_due(600, T0, T0) == T0 + timedelta(seconds=600)


def test_a_late_crontab_job_is_due_once_not_for_every_missed_slot() -> None:
    last = T0 - timedelta(days=3)

    assert next_due("17 */6 * * *", last, T0) == last.replace(minute=17)


# run_jobs (embedded mode).


@pytest.fixture
def two_jobs(make_job, settings) -> list[str]:
    ran: list[str] = []

    def job(name: str):
        def run(ctx: JobContext) -> JobResult:
            ran.append(name)
            return JobResult(outcome=Outcome.SUCCESS, message=f"{name}: done")

        return run

    make_job(job("every_10_min"), name="every_10_min", schedule=600)
    make_job(job("six_hourly"), name="six_hourly", schedule="17 */6 * * *")
    settings.OMNIROUTE_JOB_SCHEDULE = {
        "every_10_min": {"task": "t1", "schedule": 600, "expires": 600},
        "six_hourly": {"task": "t2", "schedule": "17 */6 * * *", "expires": 21600},
        "not_registered": {"task": "t3", "schedule": 60, "expires": 60},
    }
    return ran


def _ran_at(job: str, when: datetime, outcome: str = "success") -> None:
    JobRun.objects.create(
        job=job, started_at=when, finished_at=when, outcome=outcome, triggered_by="beat"
    )


@pytest.mark.django_db
def test_run_due_runs_only_the_jobs_that_are_due(two_jobs: list[str]) -> None:
    now = T0.replace(hour=6, minute=20)
    _ran_at("every_10_min", now - timedelta(minutes=5))
    _ran_at("six_hourly", T0.replace(minute=17))
    lines: list[str] = []

    runs = job_runner.run_due(now, report=lines.append)

    assert two_jobs == ["six_hourly"]
    assert [run.triggered_by for run in runs] == ["beat"]
    assert lines[0].startswith("six_hourly: done in ")


@pytest.mark.django_db
def test_dry_runs_do_not_count_as_the_last_start(two_jobs: list[str]) -> None:
    now = T0.replace(hour=1)
    _ran_at("every_10_min", now - timedelta(minutes=1), outcome="dry_run")
    _ran_at("six_hourly", now - timedelta(minutes=1))

    job_runner.run_due(now)

    assert two_jobs == ["every_10_min"]


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch):
    """A clock that only ``sleep`` moves; runs are stamped with it too."""
    state = {"now": T0}
    sleeps: list[float] = []

    def clock() -> datetime:
        return state["now"]

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        state["now"] += timedelta(seconds=seconds)

    monkeypatch.setattr(timezone, "now", clock)
    return clock, sleep, sleeps


@pytest.mark.django_db
def test_the_loop_runs_each_job_when_it_falls_due(
    two_jobs: list[str], fake_time
) -> None:
    clock, sleep, sleeps = fake_time

    job_runner.run_loop(clock=clock, sleep=sleep, cycles=5)

    # 00:00 both (never ran); 00:10 every_10_min; 00:17 six_hourly
    assert two_jobs == ["every_10_min", "six_hourly", "every_10_min", "six_hourly"]
    assert sleeps == [300.0, 300.0, 300.0, 120.0, 180.0]
    assert list(
        JobRun.objects.order_by("started_at").values_list("started_at", flat=True)
    ) == [
        T0,
        T0,
        T0 + timedelta(seconds=600),
        T0 + timedelta(seconds=1020),
    ]


@pytest.mark.django_db
def test_the_loop_never_sleeps_less_than_a_second(
    two_jobs: list[str], fake_time
) -> None:
    clock, sleep, sleeps = fake_time
    _ran_at("every_10_min", T0 - timedelta(seconds=599.5))
    _ran_at("six_hourly", T0)

    job_runner.run_loop(clock=clock, sleep=sleep, cycles=1)

    assert two_jobs == []
    assert sleeps == [1.0]


@pytest.mark.django_db
def test_run_jobs_once_runs_the_named_job(two_jobs: list[str]) -> None:
    out = io.StringIO()

    call_command("run_jobs", "--once", "six_hourly", stdout=out)

    assert two_jobs == ["six_hourly"]
    assert out.getvalue().startswith("six_hourly: done in ")
    assert JobRun.objects.get().triggered_by == "command"


@pytest.mark.django_db
def test_run_jobs_once_refuses_an_unknown_job(two_jobs: list[str]) -> None:
    with pytest.raises(CommandError, match="unknown job"):
        call_command("run_jobs", "--once", "nope", stdout=io.StringIO())


@pytest.mark.django_db
def test_run_jobs_without_options_runs_what_is_due_and_exits(
    two_jobs: list[str],
) -> None:
    out = io.StringIO()

    call_command("run_jobs", stdout=out)

    assert sorted(two_jobs) == ["every_10_min", "six_hourly"]
    assert len(out.getvalue().splitlines()) == 2


@pytest.mark.django_db
def test_run_jobs_exits_1_when_a_run_failed(make_job, settings) -> None:
    def fail(ctx: JobContext) -> JobResult:
        return JobResult(outcome=Outcome.FAILED, message="nope")

    make_job(fail, name="broken")
    settings.OMNIROUTE_JOB_SCHEDULE = {
        "broken": {"task": "t", "schedule": 600, "expires": 600}
    }

    with pytest.raises(CommandError) as caught:
        call_command("run_jobs", stdout=io.StringIO())

    assert caught.value.returncode == 1
