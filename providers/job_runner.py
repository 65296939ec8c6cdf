"""Embedded scheduling: run due jobs without a broker (``manage.py run_jobs``).

The schedule is ``settings.OMNIROUTE_JOB_SCHEDULE``, the same table Celery beat
uses; a job's last start is its latest ``JobRun`` that is not a dry run, whoever
started it (beat, a command, the admin).  Due jobs run one after another in this
process under the usual lock, so ``run_jobs`` beside a Celery beat never doubles a
run.  ``run_loop`` sleeps until the earliest next due time (at least 1 s, at most
``MAX_SLEEP_SECONDS`` so a retimed job is noticed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from providers.jobs import (
    JobSpec,
    Outcome,
    Progress,
    TriggeredBy,
    load_jobs,
    run_job,
    summary_line,
)
from providers.models import JobRun
from providers.schedule import next_due, seconds_until

logger = logging.getLogger(__name__)

MIN_SLEEP_SECONDS = 1.0
MAX_SLEEP_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What the admin's Jobs page shows for one registered job."""

    spec: JobSpec
    schedule: str | int | None  # None: not in the schedule (disabled)
    last_run: JobRun | None  # the latest run of any kind
    next_due: datetime | None


def schedule_table() -> dict[str, str | int]:
    """job name -> crontab expression or seconds, from settings."""
    return {
        name: entry["schedule"]
        for name, entry in settings.OMNIROUTE_JOB_SCHEDULE.items()
    }


def _last_start(name: str) -> datetime | None:
    return (
        JobRun.objects.filter(job=name)
        .exclude(outcome=Outcome.DRY_RUN)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )


def due_times(now: datetime) -> dict[str, datetime]:
    """Scheduled and registered job -> when it is next due (≤ now: due)."""
    registry = load_jobs()
    due: dict[str, datetime] = {}
    for name, schedule in schedule_table().items():
        if name not in registry:
            logger.warning("run_jobs: %s is scheduled but no job is registered", name)
            continue
        due[name] = next_due(schedule, _last_start(name), now)
    return due


def run_due(
    now: datetime,
    *,
    progress: Progress | None = None,
    report: Callable[[str], None] = logger.info,
) -> list[JobRun]:
    """Run every job due at ``now``, in schedule order; one line each to ``report``."""
    runs = []
    for name, due in due_times(now).items():
        if due <= now:
            run = run_job(name, triggered_by=TriggeredBy.BEAT, progress=progress)
            report(summary_line(run))
            runs.append(run)
    return runs


def run_loop(
    *,
    clock: Callable[[], datetime] = timezone.now,
    sleep: Callable[[float], None] = time.sleep,
    report: Callable[[str], None] = logger.info,
    cycles: int | None = None,
) -> None:
    """Run due jobs, sleep until the next is due, repeat (``cycles`` bounds tests)."""
    done = 0
    while cycles is None or done < cycles:
        run_due(clock(), report=report)
        now = clock()
        wait = min(
            (seconds_until(due, now) for due in due_times(now).values()),
            default=MAX_SLEEP_SECONDS,
        )
        sleep(min(max(wait, MIN_SLEEP_SECONDS), MAX_SLEEP_SECONDS))
        done += 1


def job_statuses(now: datetime) -> list[JobStatus]:
    """Every registered job with its last run and next due time, by name."""
    schedules = schedule_table()
    statuses = []
    for name, spec in sorted(load_jobs().items()):
        schedule = schedules.get(name)
        last_run = JobRun.objects.filter(job=name).order_by("-started_at").first()
        statuses.append(
            JobStatus(
                spec=spec,
                schedule=schedule,
                last_run=last_run,
                next_due=None
                if schedule is None
                else next_due(schedule, _last_start(name), now),
            )
        )
    return statuses
