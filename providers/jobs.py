"""Scheduled jobs: the registry, the one-run-at-a-time lock and the run record.

Spec 06 §3.1.  A job is a plain function ``JobContext -> JobResult`` registered with
a ``JobSpec``; the Celery task, the management command, ``run_jobs`` and the admin's
"Run now" all call ``run_job(name, …)``, which

1. takes the job's ``JobLock`` row by one conditional UPDATE (``locked_until < now``
   -> ``now + hard limit``); when another run holds it, records ``skipped_locked``
   and returns;
2. creates the ``JobRun`` row (blank outcome while running), calls the function and
   stores its outcome, counts, message (masked, ≤ 1 000 characters) and payload
   SHA-256; any exception becomes ``failed`` with its message;
3. always releases the lock it took (``locked_until = now``), and only that lock.

A dry run's outcome is always ``dry_run`` (or ``failed``): the job must write
nothing but what ``run_job`` writes.  Registration: a job module calls
``register(JobSpec(...))`` when imported; every app's ``tasks`` module is imported
before the registry is read (``load_jobs``), so register from ``tasks.py`` or from a
module it imports.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.utils import timezone
from django.utils.module_loading import autodiscover_modules

from providers import http
from providers.models import JobLock, JobRun
from providers.redact import redact

logger = logging.getLogger(__name__)

Outcome = JobRun.Outcome
TriggeredBy = JobRun.TriggeredBy
FETCH_MAX_BYTES = 50 * 1024 * 1024  # spec 06 §3.1
FETCH_TIMEOUT_SECONDS = 30.0  # spec 06 §3.1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RESULT_OUTCOMES = frozenset(
    {Outcome.SUCCESS, Outcome.UNCHANGED, Outcome.DRY_RUN, Outcome.FAILED}
)
#: command exit codes by outcome (spec 06 §3.1)
EXIT_CODES = {
    Outcome.SUCCESS: 0,
    Outcome.UNCHANGED: 0,
    Outcome.DRY_RUN: 0,
    Outcome.FAILED: 1,
    Outcome.SKIPPED_LOCKED: 3,
}

Progress = Callable[[int, int | None], None]


def _no_progress(done: int, total: int | None) -> None:
    """The default progress sink: ignore."""


class JobError(Exception):
    """An expected failure (bad payload, sanity rule): the run fails with this
    message and no traceback is logged."""


@dataclass
class JobContext:
    dry_run: bool
    source: str | None
    triggered_by: str
    started: float  # time.monotonic() at the start of the run
    soft_s: int
    progress: Progress = _no_progress
    #: job-specific command options (``prune_logs --days``); empty from beat/admin
    options: Mapping[str, object] = field(default_factory=dict)

    def past_soft_limit(self) -> bool:
        return time.monotonic() - self.started >= self.soft_s


@dataclass
class JobResult:
    outcome: str
    counts: dict[str, int] = field(default_factory=dict)
    message: str = ""
    payload_sha256: str | None = None


@dataclass
class JobSpec:
    name: str
    func: Callable[[JobContext], JobResult]
    soft_s: int
    hard_s: int
    schedule: str | int  # crontab "m h dom mon dow", or seconds
    task: str  # dotted Celery task name


REGISTRY: dict[str, JobSpec] = {}
_discovered = False


def register(spec: JobSpec) -> JobSpec:
    """Add (or replace, on re-import) a job; returns the spec."""
    if spec.hard_s < spec.soft_s:
        raise ValueError(f"job {spec.name}: hard limit below the soft limit")
    REGISTRY[spec.name] = spec
    return spec


def load_jobs() -> dict[str, JobSpec]:
    """The registry, after importing every installed app's ``tasks`` module once."""
    global _discovered  # once per process, like the admin's autodiscover
    if not _discovered:
        autodiscover_modules("tasks")
        _discovered = True
    return REGISTRY


def get_spec(name: str) -> JobSpec:
    try:
        return load_jobs()[name]
    except KeyError:
        raise ValueError(f"unknown job {name!r}") from None


# The lock (spec 06 §3.1: one run at a time).


def acquire_lock(job: str, *, now: datetime, hold_s: int) -> datetime | None:
    """Take the job's lock until ``now + hold_s``; None when another run holds it."""
    if not JobLock.objects.filter(job=job).exists():
        # Two first runs may race to create the row: the loser's insert fails and
        # both then compete in the conditional UPDATE below.
        with contextlib.suppress(IntegrityError), transaction.atomic():
            JobLock.objects.create(job=job, locked_until=_EPOCH)
    until = now + timedelta(seconds=hold_s)
    taken = JobLock.objects.filter(job=job, locked_until__lt=now).update(
        locked_until=until
    )
    return until if taken else None


def release_lock(job: str, *, held_until: datetime) -> None:
    """Release the lock taken until ``held_until``; a lock re-taken by another run
    after this one overran its hard limit is left alone."""
    JobLock.objects.filter(job=job, locked_until=held_until).update(
        locked_until=timezone.now()
    )


# Running.


def run_job(
    name: str,
    *,
    triggered_by: str = TriggeredBy.COMMAND,
    dry_run: bool = False,
    source: str | None = None,
    progress: Progress | None = None,
    options: Mapping[str, object] | None = None,
) -> JobRun:
    """Run one job now under its lock and return its ``JobRun`` row (saved)."""
    spec = get_spec(name)
    now = timezone.now()
    # A command prints its own summary line, the one line it puts on stdout (where
    # the application log also goes, spec 08): its run is logged at DEBUG only.
    level = logging.DEBUG if triggered_by == TriggeredBy.COMMAND else logging.INFO
    held_until = acquire_lock(spec.name, now=now, hold_s=spec.hard_s)
    if held_until is None:
        logger.log(level, "job %s: skipped, another run holds the lock", spec.name)
        return JobRun.objects.create(
            job=spec.name,
            started_at=now,
            finished_at=now,
            outcome=Outcome.SKIPPED_LOCKED,
            message="another run holds the lock",
            triggered_by=triggered_by,
        )
    try:
        run = JobRun.objects.create(
            job=spec.name, started_at=now, triggered_by=triggered_by
        )
        context = JobContext(
            dry_run=dry_run,
            source=source,
            triggered_by=triggered_by,
            started=time.monotonic(),
            soft_s=spec.soft_s,
            progress=progress or _no_progress,
            options=dict(options or {}),
        )
        result = _call(spec, context)
        run.outcome = result.outcome
        run.counts = {str(k): int(v) for k, v in result.counts.items()}
        run.message = redact(result.message)
        run.payload_sha256 = result.payload_sha256 or ""
        run.finished_at = timezone.now()
        run.save(
            update_fields=(
                "outcome",
                "counts",
                "message",
                "payload_sha256",
                "finished_at",
            )
        )
    finally:
        release_lock(spec.name, held_until=held_until)
    logger.log(level, "job %s: %s %s", spec.name, run.outcome, run.message)
    return run


def _call(spec: JobSpec, context: JobContext) -> JobResult:
    try:
        result = spec.func(context)
    except (JobError, http.FetchError) as exc:
        expected = context.triggered_by == TriggeredBy.COMMAND  # in the summary
        logger.log(
            logging.DEBUG if expected else logging.WARNING,
            "job %s failed: %s",
            spec.name,
            redact(exc),
        )
        return JobResult(outcome=Outcome.FAILED, message=str(exc))
    except Exception as exc:  # any error of a job is a failed run, logged once
        logger.exception("job %s failed", spec.name)
        return JobResult(outcome=Outcome.FAILED, message=f"{type(exc).__name__}: {exc}")
    if result.outcome not in _RESULT_OUTCOMES:
        return JobResult(
            outcome=Outcome.FAILED,
            message=f"job returned the outcome {result.outcome!r}",
        )
    if context.dry_run and result.outcome != Outcome.FAILED:
        result.outcome = Outcome.DRY_RUN
    return result


def last_payload_sha256(job: str) -> str | None:
    """The payload SHA-256 of the job's last successful (or unchanged) run."""
    sha = (
        JobRun.objects.filter(job=job, outcome__in=(Outcome.SUCCESS, Outcome.UNCHANGED))
        .order_by("-started_at", "-id")
        .values_list("payload_sha256", flat=True)
        .first()
    )
    return sha or None


def summary_line(run: JobRun) -> str:
    """The command's one stdout line, e.g. ``models.dev: 7 models (…) in 0.2 s``."""
    seconds = run.duration_seconds or 0.0
    if run.outcome == Outcome.SKIPPED_LOCKED:
        return f"{run.job}: skipped, another run holds the lock"
    if run.outcome == Outcome.FAILED:
        return f"{run.job}: failed: {run.message} in {seconds:.1f} s"
    text = run.message or f"{run.job}: {run.outcome}"
    return f"{text} in {seconds:.1f} s"


def start_job(name: str, *, triggered_by: str = TriggeredBy.ADMIN) -> str:
    """Start a run off the caller's thread: the Celery task when a broker is
    configured (``REDIS_URL``) and the scheduler is not in-process, else a background
    thread of this process (embedded mode).  Returns
    ``"queued"`` or ``"started"``."""
    spec = get_spec(name)
    # With the in-process scheduler there is no Celery worker to take the task.
    if settings.REDIS_URL and settings.OMNIROUTE_SCHEDULER != "in-process":
        from celery import current_app

        transaction.on_commit(
            lambda: current_app.send_task(
                spec.task, kwargs={"triggered_by": triggered_by}
            )
        )
        return "queued"
    thread = threading.Thread(
        target=_run_in_thread,
        args=(spec.name, triggered_by),
        name=f"job-{spec.name}",
        daemon=True,
    )
    thread.start()
    return "started"


def _run_in_thread(name: str, triggered_by: str) -> None:
    try:
        run_job(name, triggered_by=triggered_by)
    finally:
        connections.close_all()  # this thread's connections only


# Sources (spec 06 §3.1 HTTP rules).


def fetch(
    url: str,
    *,
    max_bytes: int = FETCH_MAX_BYTES,
    timeout: float = FETCH_TIMEOUT_SECONDS,
    sleep: Callable[[float], None] | None = None,
) -> bytes:
    """GET ``url`` (https-only redirects, capped body, 3 retries); raises
    ``http.FetchError``, which ``run_job`` turns into a failed run."""
    return http.sync_fetch(url, max_bytes=max_bytes, timeout_s=timeout, sleep=sleep)


def read_source(source: str, *, max_bytes: int = FETCH_MAX_BYTES) -> bytes:
    """The bytes of an ``http(s)://`` URL (``fetch``) or of a local file."""
    if source.startswith(("http://", "https://")):
        return fetch(source, max_bytes=max_bytes)
    path = Path(source)
    try:
        if path.stat().st_size > max_bytes:
            raise JobError(f"{source}: larger than {max_bytes} bytes")
        return path.read_bytes()
    except OSError as exc:
        raise JobError(f"cannot read {source}: {exc.strerror or exc}") from exc
