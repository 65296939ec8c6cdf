"""The in-process scheduler: the beat schedule run inside the gateway process.

The embedded default has no broker and no beat, so without this nothing would run the
scheduled jobs (the 24 h reliability statistics that feed ``auto`` would never be
computed).  With ``OMNIROUTE_SCHEDULER=in-process`` (the embedded default) every
gateway process starts one daemon thread that runs ``providers.job_runner``'s due
jobs on ``settings.OMNIROUTE_JOB_SCHEDULE``, the table Celery beat reads.

Only one process schedules: the thread first takes a lease, a ``JobLock`` row named
``LEASE`` held ``LEASE_SECONDS`` ahead and renewed on every wake-up (at most every
``TICK_SECONDS``), before each job for that job's hard limit.  A process that does
not hold it keeps trying, so a second worker takes over when the first exits (its
lease is released at shutdown) or dies (its lease lapses).  Each job keeps its own
lock too, so this thread beside a Celery beat or ``run_jobs`` never doubles a run.

The Jobs page and the dashboard read the lease to say which scheduler is running
(``status``): a released or lapsed lease means the in-process scheduler stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from providers.job_runner import due_times
from providers.jobs import (
    TriggeredBy,
    acquire_lock,
    load_jobs,
    run_job,
    summary_line,
)
from providers.models import JobLock, JobRun
from providers.schedule import seconds_until

logger = logging.getLogger(__name__)

LEASE = "~in-process-scheduler"
LEASE_SECONDS = 90
TICK_SECONDS = 30.0
MIN_WAIT_SECONDS = 1.0
IN_PROCESS = "in-process"
OFF = "off"
MODES = (IN_PROCESS, OFF)


class Scheduler:
    """One process's scheduling thread (``start``/``stop``); ``tick`` is one wake-up."""

    def __init__(self, *, clock: Callable[[], datetime] = timezone.now) -> None:
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held_until: datetime | None = None

    # -- the lease ---------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self._held_until is not None

    def _hold(self, seconds: float) -> bool:
        """Take or renew the lease until now + ``seconds`` (False: another has it)."""
        now = self._clock()
        until = now + timedelta(seconds=seconds)
        if self._held_until is not None:
            renewed = JobLock.objects.filter(
                job=LEASE, locked_until=self._held_until
            ).update(locked_until=until)
            if renewed:
                self._held_until = until
                return True
            self._held_until = None  # lapsed and taken by another process
        taken = acquire_lock(LEASE, now=now, hold_s=int(seconds))
        self._held_until = taken
        if taken is not None:
            logger.info("scheduler: this process runs the scheduled jobs")
        return taken is not None

    def release(self) -> None:
        if self._held_until is not None:
            JobLock.objects.filter(job=LEASE, locked_until=self._held_until).update(
                locked_until=self._clock()
            )
            self._held_until = None

    # -- one wake-up -------------------------------------------------------------

    def tick(self) -> float:
        """Run the due jobs if this process leads; seconds until the next wake-up."""
        if not self._hold(LEASE_SECONDS):
            return TICK_SECONDS
        specs = load_jobs()
        for name, due in due_times(self._clock()).items():
            if self._stop.is_set():
                break
            if due > self._clock():
                continue
            # the lease must outlive the longest this job may run
            if not self._hold(specs[name].hard_s + LEASE_SECONDS):
                return TICK_SECONDS
            run = run_job(name, triggered_by=TriggeredBy.BEAT)
            logger.info("scheduler: %s", summary_line(run))
        self._hold(LEASE_SECONDS)
        now = self._clock()
        wait = min(
            (seconds_until(due, now) for due in due_times(now).values()),
            default=TICK_SECONDS,
        )
        return min(max(wait, MIN_WAIT_SECONDS), TICK_SECONDS)

    # -- the thread --------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="omniroute-scheduler", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop waking up; a job still running finishes in the (daemon) thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                logger.info("scheduler: a job is still running at shutdown")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                close_old_connections()
                try:
                    wait = self.tick()
                except Exception:  # a database outage: try again on the next tick
                    logger.exception("scheduler: could not run the due jobs")
                    self._held_until = None
                    wait = TICK_SECONDS
                self._stop.wait(wait)
            try:
                self.release()
            except Exception:
                logger.warning("scheduler: could not release the lease", exc_info=True)
        finally:
            connections.close_all()


scheduler = Scheduler()


def start() -> bool:
    """Start this process's scheduler when the setting asks for it."""
    if settings.OMNIROUTE_SCHEDULER != IN_PROCESS:
        return False
    scheduler.start()
    return True


def stop() -> None:
    scheduler.stop()


# -- what the Jobs page says ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SchedulerStatus:
    #: "in-process", "celery-beat" or "none"
    kind: str
    #: one sentence for the operator
    text: str
    #: True when nothing is known to be running the schedule
    warning: bool


def status(now: datetime | None = None) -> SchedulerStatus:
    """Which scheduler runs the jobs, as far as this database tells.

    The in-process scheduler's lease says it at once: held ahead, it is running; once
    released (shutdown) or lapsed (``LEASE_SECONDS`` after its process died), it is
    not.  Celery beat (or ``run_jobs --loop``) leaves no lease, only runs triggered by
    the schedule: one within twice the shortest interval that started *after* the
    lease ended says something else runs the schedule; the in-process scheduler's
    own last runs do not (issue #15: after a restart with the scheduler off, those
    runs read as "Celery beat" for minutes)."""
    now = now or timezone.now()
    held = (
        JobLock.objects.filter(job=LEASE).values_list("locked_until", flat=True).first()
    )
    if held is not None and held > now:
        here = " (this process)" if scheduler.leading else ""
        return SchedulerStatus(
            IN_PROCESS,
            f"In-process scheduler running{here}: the gateway runs the jobs on the "
            "schedule below.",
            warning=False,
        )
    window = 2 * _shortest_interval_seconds()
    since = now - timedelta(seconds=window)
    if held is not None:
        since = max(since, held)
    recent = JobRun.objects.filter(
        triggered_by=TriggeredBy.BEAT, started_at__gt=since
    ).exists()
    if recent:
        return SchedulerStatus(
            "celery-beat",
            "Jobs run by Celery beat (or manage.py run_jobs --loop): a scheduled run "
            "started recently.",
            warning=False,
        )
    return SchedulerStatus(
        "none",
        "No scheduler is running: jobs run only when started here or by manage.py "
        "run_jobs. Set OMNIROUTE_SCHEDULER=in-process or run Celery beat (this "
        f"process has OMNIROUTE_SCHEDULER={settings.OMNIROUTE_SCHEDULER}).",
        warning=True,
    )


def _shortest_interval_seconds() -> int:
    intervals = [
        int(entry["schedule"])
        for entry in settings.OMNIROUTE_JOB_SCHEDULE.values()
        if isinstance(entry["schedule"], int)
    ]
    # crontab-only schedules: a day covers every entry of the default table
    return min(intervals, default=24 * 3600)
