"""The telemetry app's scheduled jobs (spec 06 §3.1, §3.4, §3.5), registered on import.

Each job function adapts ``providers.jobs.JobContext`` to one service call
(``reliability.refresh``, ``prune.prune``) and turns its counts into a ``JobResult``;
``run_job`` adds the lock and the ``JobRun`` row.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from providers.jobs import (
    JobContext,
    JobError,
    JobResult,
    JobSpec,
    Outcome,
    register,
)
from telemetry import prune, reliability

COMPUTE_RELIABILITY = "compute_reliability_24h"
PRUNE_LOGS = "prune_logs"


def compute_reliability_24h(ctx: JobContext) -> JobResult:
    """Rewrite ``ReliabilityStat`` and the last three ``UsageHourly`` hours."""
    result = reliability.refresh(timezone.now(), dry_run=ctx.dry_run)
    counts = result.as_counts()
    stats, hours = result.stats, result.usage
    message = (
        f"{COMPUTE_RELIABILITY}: {len(stats.records)} statistics rows "
        f"({stats.created} created, {stats.updated} updated, "
        f"{stats.unchanged} unchanged, {len(stats.deleted)} deleted), "
        f"{len(hours.records)} hourly usage rows "
        f"({hours.created} created, {hours.updated} updated, "
        f"{hours.unchanged} unchanged, {len(hours.deleted)} deleted)"
    )
    outcome = Outcome.SUCCESS if result.is_change else Outcome.UNCHANGED
    return JobResult(outcome=outcome, counts=counts, message=message)


def _retention_days(ctx: JobContext) -> int:
    days = ctx.options.get("days")
    if days is None:
        return int(settings.OMNIROUTE_LOG_RETENTION_DAYS)
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise JobError(f"--days must be a whole number of days >= 1, got {days!r}")
    return days


def prune_logs(ctx: JobContext) -> JobResult:
    """Delete rows past their retention, batch by batch, until the soft limit."""
    days = _retention_days(ctx)
    report = prune.prune(
        timezone.now(),
        days,
        dry_run=ctx.dry_run,
        should_stop=ctx.past_soft_limit,
    )
    verb = "due for deletion" if ctx.dry_run else "deleted"
    details = ", ".join(f"{label} {count}" for label, count in report.deleted.items())
    message = f"{PRUNE_LOGS}: {report.total} rows {verb} ({details})"
    if report.stopped_early:
        message += "; stopped at the soft time limit, the next run continues"
    return JobResult(
        outcome=Outcome.SUCCESS if report.total else Outcome.UNCHANGED,
        counts=report.as_counts(),
        message=message,
    )


register(
    JobSpec(
        name=COMPUTE_RELIABILITY,
        func=compute_reliability_24h,
        soft_s=240,
        hard_s=300,
        schedule=600,
        task="telemetry.tasks.compute_reliability_24h_task",
    )
)
register(
    JobSpec(
        name=PRUNE_LOGS,
        func=prune_logs,
        soft_s=1500,
        hard_s=1800,
        schedule="41 4 * * *",
        task="telemetry.tasks.prune_logs_task",
    )
)
