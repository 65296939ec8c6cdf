"""run_job: one run at a time, a JobRun per run, failures recorded (spec 06 §3.1)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from providers import jobs
from providers.jobs import JobContext, JobError, JobResult, Outcome
from providers.models import JobLock, JobRun

pytestmark = pytest.mark.django_db


def succeed(ctx: JobContext) -> JobResult:
    return JobResult(
        outcome=Outcome.SUCCESS,
        counts={"created": 2},
        message="test: 2 rows",
        payload_sha256="ab" * 32,
    )


def test_a_run_records_outcome_counts_message_and_payload_hash(make_job) -> None:
    make_job(succeed)

    run = jobs.run_job("test_job", triggered_by="beat")

    stored = JobRun.objects.get()
    assert stored.pk == run.pk
    assert (stored.job, stored.outcome, stored.triggered_by) == (
        "test_job",
        "success",
        "beat",
    )
    assert stored.counts == {"created": 2}
    assert stored.message == "test: 2 rows"
    assert stored.payload_sha256 == "ab" * 32
    assert stored.finished_at is not None
    assert stored.finished_at >= stored.started_at


def test_the_function_gets_the_run_options(make_job) -> None:
    seen: list[JobContext] = []

    def record(ctx: JobContext) -> JobResult:
        seen.append(ctx)
        return JobResult(outcome=Outcome.SUCCESS)

    make_job(record, soft_s=7)

    jobs.run_job("test_job", source="/tmp/x.json", options={"days": 3})

    (ctx,) = seen
    assert (ctx.dry_run, ctx.source, ctx.triggered_by, ctx.soft_s) == (
        False,
        "/tmp/x.json",
        "command",
        7,
    )
    assert ctx.options == {"days": 3}
    assert ctx.past_soft_limit() is False


def test_the_lock_is_released_so_the_next_run_proceeds(make_job) -> None:
    make_job(succeed)

    first = jobs.run_job("test_job")
    second = jobs.run_job("test_job")

    assert [first.outcome, second.outcome] == ["success", "success"]
    assert JobLock.objects.get(job="test_job").locked_until <= timezone.now()


def test_a_held_lock_records_skipped_locked_and_does_not_call_the_job(
    make_job,
) -> None:
    calls: list[int] = []
    make_job(lambda ctx: calls.append(1) or JobResult(outcome=Outcome.SUCCESS))
    held_until = timezone.now() + timedelta(minutes=2)
    JobLock.objects.create(job="test_job", locked_until=held_until)

    run = jobs.run_job("test_job")

    assert run.outcome == "skipped_locked"
    assert calls == []
    assert JobLock.objects.get(job="test_job").locked_until == held_until


def test_the_lock_is_held_for_the_hard_limit_while_the_job_runs(make_job) -> None:
    seen = []

    def look(ctx: JobContext) -> JobResult:
        seen.append(JobLock.objects.get(job="test_job").locked_until)
        return JobResult(outcome=Outcome.SUCCESS)

    make_job(look, hard_s=180)
    before = timezone.now()

    jobs.run_job("test_job")

    assert (
        before + timedelta(seconds=179)
        < seen[0]
        <= timezone.now() + timedelta(seconds=180)
    )


def test_an_expired_lock_is_taken_over(make_job) -> None:
    make_job(succeed)
    JobLock.objects.create(
        job="test_job", locked_until=timezone.now() - timedelta(seconds=1)
    )

    assert jobs.run_job("test_job").outcome == "success"


def test_a_run_that_overran_leaves_the_next_holders_lock_alone(make_job) -> None:
    later = timezone.now() + timedelta(hours=1)

    def overrun(ctx: JobContext) -> JobResult:
        # Past this run's hard limit another run took the lock.
        JobLock.objects.filter(job="test_job").update(locked_until=later)
        return JobResult(outcome=Outcome.SUCCESS)

    make_job(overrun)

    jobs.run_job("test_job")

    assert JobLock.objects.get(job="test_job").locked_until == later


def test_acquire_creates_the_lock_row_once_and_refuses_a_second_holder() -> None:
    now = timezone.now()

    first = jobs.acquire_lock("fresh", now=now, hold_s=60)
    second = jobs.acquire_lock("fresh", now=now, hold_s=60)

    assert first == now + timedelta(seconds=60)
    assert second is None
    assert JobLock.objects.filter(job="fresh").count() == 1


def test_an_exception_becomes_a_failed_run_with_a_masked_message(make_job) -> None:
    def explode(ctx: JobContext) -> JobResult:
        raise RuntimeError(
            "upstream said no to Bearer abc.def and sk-or-AAAAAAAAAAAAAAAAAAAAAAAA"
        )

    make_job(explode)

    run = jobs.run_job("test_job")

    assert run.outcome == "failed"
    assert run.message == "RuntimeError: upstream said no to Bearer *** and ***"
    assert JobLock.objects.get(job="test_job").locked_until <= timezone.now()


def test_a_job_error_fails_with_its_message(make_job) -> None:
    def refuse(ctx: JobContext) -> JobResult:
        raise JobError("models.dev: 4 providers, fewer than 50")

    make_job(refuse)

    run = jobs.run_job("test_job")

    assert (run.outcome, run.message) == (
        "failed",
        "models.dev: 4 providers, fewer than 50",
    )


def test_the_stored_message_is_cut_to_1000_characters(make_job) -> None:
    make_job(lambda ctx: JobResult(outcome=Outcome.SUCCESS, message="x" * 5000))

    assert len(jobs.run_job("test_job").message) == 1000


def test_a_dry_run_is_recorded_as_dry_run_whatever_the_job_says(make_job) -> None:
    make_job(succeed)

    run = jobs.run_job("test_job", dry_run=True)

    assert run.outcome == "dry_run"


def test_a_job_returning_an_unknown_outcome_fails(make_job) -> None:
    make_job(lambda ctx: JobResult(outcome="skipped_locked"))

    run = jobs.run_job("test_job")

    assert run.outcome == "failed"
    assert "skipped_locked" in run.message


def test_an_unknown_job_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown job 'nope'"):
        jobs.run_job("nope")


def test_the_last_payload_hash_comes_from_the_last_successful_run() -> None:
    now = timezone.now()
    for minutes, outcome, sha in (
        (3, "success", "a"),
        (2, "failed", ""),
        (1, "dry_run", "c"),
    ):
        JobRun.objects.create(
            job="j",
            started_at=now - timedelta(minutes=minutes),
            outcome=outcome,
            payload_sha256=sha,
            triggered_by="beat",
        )

    assert jobs.last_payload_sha256("j") == "a"
    assert jobs.last_payload_sha256("other") is None


def test_summary_lines_per_outcome() -> None:
    start = timezone.now()
    ok = JobRun(
        job="j",
        started_at=start,
        finished_at=start + timedelta(milliseconds=230),
        outcome="success",
        message="models.dev: 7 models (7 created, 0 updated, 0 unchanged, 0 missing)",
    )
    failed = JobRun(
        job="j", started_at=start, finished_at=start, outcome="failed", message="boom"
    )
    locked = JobRun(
        job="j", started_at=start, finished_at=start, outcome="skipped_locked"
    )

    assert jobs.summary_line(ok) == (
        "models.dev: 7 models (7 created, 0 updated, 0 unchanged, 0 missing) in 0.2 s"
    )
    assert jobs.summary_line(failed) == "j: failed: boom in 0.0 s"
    assert jobs.summary_line(locked) == "j: skipped, another run holds the lock"


def test_read_source_reads_a_local_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"{}")

    assert jobs.read_source(str(path)) == b"{}"


def test_read_source_fails_on_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"cannot read .*missing\.json"):
        jobs.read_source(str(tmp_path / "missing.json"))


def test_read_source_refuses_a_file_over_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 11)

    with pytest.raises(JobError, match="larger than 10 bytes"):
        jobs.read_source(str(path), max_bytes=10)


def test_the_soft_limit_is_past_once_its_seconds_have_elapsed() -> None:
    fresh = JobContext(
        dry_run=False,
        source=None,
        triggered_by="beat",
        started=time.monotonic(),
        soft_s=60,
    )
    old = JobContext(
        dry_run=False,
        source=None,
        triggered_by="beat",
        started=time.monotonic() - 61,
        soft_s=60,
    )

    assert (fresh.past_soft_limit(), old.past_soft_limit()) == (False, True)
