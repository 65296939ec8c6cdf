"""Retention (spec 06 §1.6, §3.5): delete old log, usage and job rows in small batches.

Order: ``AttemptLog`` then ``RequestLog`` older than the retention period (an older
request's younger attempts go with it, by cascade), then expired ``ArenaScore`` rows,
``UsageHourly`` older than 400 days, ``JobRun`` older than 90 days and expired stored
Responses (spec 09 §3.4).  Each step
deletes at most ``BATCH_ROWS`` rows at a time, oldest first, each batch in its own
short transaction, so the tables stay writable for the gateway's flusher.

Invariants: the cut-offs are fixed once per run; ``should_stop`` is asked before every
batch, and a run that stops there has deleted only whole batches, so the next run
simply continues.  Models of other apps that do not exist (yet) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db import models, transaction

BATCH_ROWS = 5000  # spec 06 §3.5
USAGE_RETENTION_DAYS = 400  # spec 06 §1.6
JOB_RUN_RETENTION_DAYS = 90  # spec 06 §1.6


@dataclass(frozen=True, slots=True)
class Step:
    """One table to prune: the rows of ``model`` whose ``date_field`` < ``cutoff``."""

    label: str
    model: type[models.Model]
    date_field: str
    cutoff: datetime


@dataclass(slots=True)
class PruneReport:
    #: rows deleted (or, on a dry run, due) per table label
    deleted: dict[str, int] = field(default_factory=dict)
    stopped_early: bool = False

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def as_counts(self) -> dict[str, int]:
        return {"deleted": self.total, **self.deleted}


def _optional_model(label: str) -> type[models.Model] | None:
    try:
        return apps.get_model(label)
    except LookupError:
        return None


def steps(now: datetime, retention_days: int) -> list[Step]:
    """The tables to prune, in order, with their cut-offs."""
    from telemetry.models import AttemptLog, RequestLog, UsageHourly

    log_cutoff = now - timedelta(days=retention_days)
    found = [
        Step("attempt_log", AttemptLog, "started_at", log_cutoff),
        Step("request_log", RequestLog, "created_at", log_cutoff),
    ]
    arena = _optional_model("providers.ArenaScore")
    if arena is not None:
        found.append(Step("arena_score", arena, "expires_at", now))
    found.append(
        Step(
            "usage_hourly",
            UsageHourly,
            "hour",
            now - timedelta(days=USAGE_RETENTION_DAYS),
        )
    )
    job_run = _optional_model("providers.JobRun") or _optional_model("telemetry.JobRun")
    if job_run is not None:
        found.append(
            Step(
                "job_run",
                job_run,
                "started_at",
                now - timedelta(days=JOB_RUN_RETENTION_DAYS),
            )
        )
    return found


def other_steps(now: datetime) -> list[Step]:
    """What else expires daily, after the log tables: stored Responses past their
    ``expires_at`` (spec 09 §3.4, ``OMNIROUTE_RESPONSES_TTL_DAYS``)."""
    responses = _optional_model("gateway.StoredResponse")
    if responses is None:
        return []
    return [Step("stored_response", responses, "expires_at", now)]


def _due(step: Step) -> models.QuerySet[Any]:
    return step.model._default_manager.filter(**{f"{step.date_field}__lt": step.cutoff})


def _next_batch(step: Step) -> list[Any]:
    """Primary keys of the oldest due rows, at most ``BATCH_ROWS``."""
    query = _due(step).order_by(step.date_field, "pk").values_list("pk", flat=True)
    return list(query[:BATCH_ROWS])


def _delete_batch(step: Step, pks: list[Any]) -> dict[str, int]:
    """Rows deleted per model label (a request takes its remaining attempts)."""
    with transaction.atomic():
        _, per_model = step.model._default_manager.filter(pk__in=pks).delete()
    return per_model


def prune(
    now: datetime,
    retention_days: int,
    *,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> PruneReport:
    """Delete (or, on a dry run, count) every row past its retention."""
    plan = steps(now, retention_days) + other_steps(now)
    labels = {step.model._meta.label: step.label for step in plan}
    report = PruneReport(deleted={step.label: 0 for step in plan})
    for step in plan:
        if dry_run:
            report.deleted[step.label] = _due(step).count()
            continue
        while True:
            if should_stop():
                report.stopped_early = True
                return report
            pks = _next_batch(step)
            if not pks:
                break
            for label, count in _delete_batch(step, pks).items():
                if label in labels:
                    report.deleted[labels[label]] += count
    return report
