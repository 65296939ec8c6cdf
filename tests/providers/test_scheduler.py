"""The in-process scheduler (issue #15): the embedded default runs the beat schedule.

One process leads through a lease row; the others wait and take over when it is
released or lapses.  The Jobs page says which scheduler runs the jobs.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from providers import scheduler as scheduler_module
from providers.jobs import JobContext, JobResult, Outcome
from providers.models import JobLock, JobRun
from providers.scheduler import LEASE, LEASE_SECONDS, TICK_SECONDS, Scheduler

T0 = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def jobs(make_job, settings) -> list[str]:
    ran: list[str] = []

    def job(name: str):
        def run(ctx: JobContext) -> JobResult:
            ran.append(name)
            return JobResult(outcome=Outcome.SUCCESS, message=f"{name}: done")

        return run

    make_job(job("every_10_min"), name="every_10_min", schedule=600)
    make_job(job("daily"), name="daily", schedule="0 3 * * *")
    settings.OMNIROUTE_JOB_SCHEDULE = {
        "every_10_min": {"task": "t1", "schedule": 600, "expires": 600},
        "daily": {"task": "t2", "schedule": "0 3 * * *", "expires": 86400},
    }
    return ran


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The scheduler's clock; job runs are stamped with it too."""
    fake = Clock(T0)
    monkeypatch.setattr(timezone, "now", fake)
    return fake


@pytest.mark.django_db
def test_the_leader_runs_due_jobs_and_waits_for_the_next(jobs, clock) -> None:
    leader = Scheduler(clock=clock)

    wait = leader.tick()

    assert jobs == ["every_10_min", "daily"]  # never ran: due at once
    assert leader.leading
    assert wait == TICK_SECONDS  # the next is 600 s away; wake up to renew the lease
    assert set(JobRun.objects.values_list("triggered_by", flat=True)) == {"beat"}
    lease = JobLock.objects.get(job=LEASE)
    assert lease.locked_until == T0 + timedelta(seconds=LEASE_SECONDS)


@pytest.mark.django_db
def test_a_second_process_runs_nothing_while_the_leader_holds_the_lease(
    jobs, clock
) -> None:
    leader, other = Scheduler(clock=clock), Scheduler(clock=clock)
    leader.tick()
    clock.now += timedelta(seconds=601)  # every_10_min is due again
    leader._hold(LEASE_SECONDS)  # the leader renewed on its last wake-up

    other.tick()

    assert not other.leading
    assert jobs == ["every_10_min", "daily"]


@pytest.mark.django_db
def test_a_released_lease_is_taken_over_at_once(jobs, clock) -> None:
    leader, other = Scheduler(clock=clock), Scheduler(clock=clock)
    leader.tick()
    leader.release()
    clock.now += timedelta(seconds=601)

    other.tick()

    assert other.leading
    assert not leader.leading
    assert jobs == ["every_10_min", "daily", "every_10_min"]


@pytest.mark.django_db
def test_a_lapsed_lease_is_taken_over_and_the_old_leader_steps_back(
    jobs, clock
) -> None:
    leader, other = Scheduler(clock=clock), Scheduler(clock=clock)
    leader.tick()
    clock.now += timedelta(seconds=601)  # the leader hung or died; a job is due

    other.tick()
    leader.tick()  # wakes up late: its renewal fails, the lease is held

    assert other.leading
    assert not leader.leading
    assert jobs == ["every_10_min", "daily", "every_10_min"]


@pytest.mark.django_db
def test_the_lease_outlives_a_long_job(make_job, settings, clock) -> None:
    seen: list[datetime] = []

    def slow(ctx: JobContext) -> JobResult:
        seen.append(JobLock.objects.get(job=LEASE).locked_until)
        return JobResult(outcome=Outcome.SUCCESS)

    make_job(slow, name="slow", soft_s=500, hard_s=600)
    settings.OMNIROUTE_JOB_SCHEDULE = {
        "slow": {"task": "t", "schedule": 3600, "expires": 3600}
    }

    Scheduler(clock=clock).tick()

    assert seen == [T0 + timedelta(seconds=600 + LEASE_SECONDS)]


@pytest.mark.django_db
def test_status_names_the_running_scheduler(jobs, clock) -> None:
    assert scheduler_module.status(T0).kind == "none"
    assert scheduler_module.status(T0).warning

    Scheduler(clock=clock).tick()

    in_process = scheduler_module.status(T0 + timedelta(seconds=10))
    assert in_process.kind == "in-process"
    assert not in_process.warning
    # the lease lapsed (its process died): the runs it started do not say another
    # scheduler runs the jobs (issue #15 audit: "Celery beat" for minutes)
    later = T0 + timedelta(seconds=LEASE_SECONDS + 1)
    assert scheduler_module.status(later).kind == "none"
    assert scheduler_module.status(later).warning


@pytest.mark.django_db
def test_a_released_lease_says_no_scheduler_at_once(jobs, clock, settings) -> None:
    """A restart with OMNIROUTE_SCHEDULER=off: the old leader released its lease."""
    leader = Scheduler(clock=clock)
    leader.tick()
    clock.now = T0 + timedelta(seconds=5)
    leader.release()
    settings.OMNIROUTE_SCHEDULER = "off"

    found = scheduler_module.status(T0 + timedelta(seconds=6))

    assert found.kind == "none"
    assert found.warning
    assert "this process has OMNIROUTE_SCHEDULER=off" in found.text


@pytest.mark.django_db
def test_beat_runs_after_the_lease_ended_name_celery_beat(jobs, clock) -> None:
    leader = Scheduler(clock=clock)
    leader.tick()
    clock.now = T0 + timedelta(seconds=5)
    leader.release()
    JobRun.objects.create(
        job="every_10_min",
        started_at=T0 + timedelta(seconds=60),
        triggered_by=JobRun.TriggeredBy.BEAT,
    )

    assert scheduler_module.status(T0 + timedelta(seconds=90)).kind == "celery-beat"
    assert scheduler_module.status(T0 + timedelta(hours=2)).kind == "none"


def test_the_embedded_default_runs_the_schedule_in_process() -> None:
    from omniroute_site import settings as real_settings

    expected = "off" if real_settings.IS_PRODUCTION else "in-process"
    assert expected == real_settings.OMNIROUTE_SCHEDULER


def test_start_does_nothing_when_the_scheduler_is_off(settings) -> None:
    settings.OMNIROUTE_SCHEDULER = "off"
    assert scheduler_module.start() is False


@pytest.mark.django_db(transaction=True)
def test_the_thread_runs_due_jobs_and_releases_its_lease_on_stop(
    jobs, settings
) -> None:
    settings.OMNIROUTE_SCHEDULER = "in-process"
    thread_scheduler = Scheduler()
    thread_scheduler.start()
    try:
        deadline = time.monotonic() + 20
        while len(jobs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        thread_scheduler.stop()
    assert jobs == ["every_10_min", "daily"]
    assert JobLock.objects.get(job=LEASE).locked_until <= timezone.now()


@pytest.mark.django_db
def test_the_jobs_page_says_which_scheduler_runs_and_colours_outcomes(
    jobs, clock
) -> None:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    browser = Client()
    browser.force_login(user)

    page = browser.get("/admin/providers/jobrun/jobs/").content.decode()
    assert 'data-scheduler="none"' in page
    assert "No scheduler is running" in page

    Scheduler(clock=clock).tick()
    page = browser.get("/admin/providers/jobrun/jobs/").content.decode()
    assert 'data-scheduler="in-process"' in page
    assert 'class="outcome outcome-success"' in page
    assert 'http-equiv="refresh"' not in page  # nothing running

    started = clock.now + timedelta(seconds=1)
    JobRun.objects.create(job="daily", started_at=started, triggered_by="admin")
    page = browser.get("/admin/providers/jobrun/jobs/").content.decode()
    assert 'class="outcome outcome-running"' in page
    assert 'http-equiv="refresh"' in page
