"""Scheduled jobs through a real Celery worker and the real Redis broker (spec 06 §3.1).

Celery's own pytest fixtures (``celery_app``, ``celery_worker``) start a worker in a
thread of this process, consuming a spare Redis database.  Each test publishes the
message that beat would publish for an entry of ``CELERY_BEAT_SCHEDULE`` (task name
and options, no arguments) and waits for the ``JobRun`` row the worker commits, so
the tests use ``transaction=True``: the worker thread has its own connection.

Without Redis at 127.0.0.1:6379 the tests skip, except under ``CI=true``, where a
missing service is a failure (as ``settings_test`` does for PostgreSQL).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest
import redis
from celery import Celery
from django.conf import settings as django_settings
from django.utils import timezone

from providers import tasks as provider_tasks
from providers.models import CatalogModel, JobRun
from telemetry import tasks as telemetry_tasks
from telemetry.models import AttemptLog, ReliabilityStat, RequestLog
from tests.providers.conftest import MODELS_DEV_FIXTURE
from tests.services import unavailable

# Celery's plugin is not auto-loaded since Celery 5; enabling it here only adds its
# (unused elsewhere) fixtures and the ``celery`` marker.
pytest_plugins = ("celery.contrib.pytest",)

BROKER_URL = "redis://127.0.0.1:6379/11"  # a database no other test or service uses
RUN_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.05

pytestmark = pytest.mark.django_db(transaction=True)


def _broker_up() -> bool:
    client = redis.Redis.from_url(BROKER_URL, socket_connect_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def celery_config() -> Mapping[str, Any]:
    """The worker's settings: the project's delivery settings, with the spare Redis
    database as broker.  Results stay on (the test app's in-process store) for the
    fixture's start-up ping; the job tasks ignore theirs (``ignore_result=True``)."""
    return {
        "broker_url": BROKER_URL,
        "broker_connection_retry_on_startup": False,
        "task_acks_late": django_settings.CELERY_TASK_ACKS_LATE,
        "worker_prefetch_multiplier": django_settings.CELERY_WORKER_PREFETCH_MULTIPLIER,
    }


@pytest.fixture
def broker() -> Iterator[None]:
    """An empty broker database before and after the test (or a skip without one)."""
    if not _broker_up():
        unavailable(f"Redis at {BROKER_URL} is down")
    client = redis.Redis.from_url(BROKER_URL)
    client.flushdb()
    yield
    client.flushdb()
    client.close()


@pytest.fixture
def worker(broker: None, celery_app: Celery, celery_worker: Any) -> Celery:
    """The app whose worker is consuming; publish beat's messages with it.

    The task modules are imported at the top of this file, before the fixture saves
    Celery's app-finalize hooks: a module first imported during one test would have
    its ``shared_task`` hooks dropped at that test's teardown, and the next test's
    app would not know its tasks."""
    for task in (
        provider_tasks.sync_models_dev_task,
        telemetry_tasks.compute_reliability_24h_task,
    ):
        assert task.name in celery_app.tasks
    return celery_app


def send_as_beat(app: Celery, task: str) -> None:
    """Publish what beat publishes for the task's schedule entry: its name and
    options (``expires``), no arguments."""
    entry = django_settings.CELERY_BEAT_SCHEDULE[task]
    options = entry["options"]
    assert isinstance(options, dict)
    app.send_task(str(entry["task"]), **options)


def wait_for_runs(job: str, count: int) -> list[JobRun]:
    """The job's first ``count`` finished runs, oldest first, once committed."""
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    while True:
        runs = list(
            JobRun.objects.filter(job=job, finished_at__isnull=False).order_by(
                "started_at", "id"
            )
        )
        if len(runs) >= count:
            return runs[:count]
        if time.monotonic() > deadline:
            pytest.fail(
                f"{job}: {len(runs)} of {count} runs after {RUN_TIMEOUT_SECONDS} s"
            )
        time.sleep(POLL_SECONDS)


@pytest.fixture
def log_attempt() -> Callable[..., None]:
    def log(result: str = "success", *, minutes_ago: int = 5) -> None:
        started = timezone.now() - timedelta(minutes=minutes_ago)
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

    return log


def test_beat_message_runs_compute_reliability_in_the_worker(
    worker: Celery, log_attempt: Callable[..., None]
) -> None:
    for _ in range(9):
        log_attempt()
    log_attempt("server_error")

    send_as_beat(worker, "telemetry.tasks.compute_reliability_24h_task")

    (run,) = wait_for_runs("compute_reliability_24h", 1)
    assert (run.outcome, run.triggered_by) == ("success", "beat")
    assert run.counts["created"] == 2  # the connection row and its "*" aggregate
    stat = ReliabilityStat.objects.get(connection="main")
    assert (stat.samples, stat.failures, stat.reliability) == (10, 1, 0.9)


def test_beat_messages_sync_models_dev_in_the_worker_then_find_it_unchanged(
    worker: Celery, settings: Any
) -> None:
    settings.OMNIROUTE_MODELS_DEV_URL = str(MODELS_DEV_FIXTURE)  # read at run time
    settings.OMNIROUTE_MODELS_DEV_MIN_PROVIDERS = 1

    send_as_beat(worker, "providers.tasks.sync_models_dev_task")
    wait_for_runs("sync_models_dev", 1)
    send_as_beat(worker, "providers.tasks.sync_models_dev_task")

    first, second = wait_for_runs("sync_models_dev", 2)
    assert (first.outcome, first.triggered_by) == ("success", "beat")
    assert first.counts["created"] == 7
    assert (second.outcome, second.triggered_by) == ("unchanged", "beat")
    assert second.payload_sha256 == first.payload_sha256
    assert CatalogModel.objects.count() == 7


def test_a_failing_source_is_a_failed_run_not_a_worker_error(
    worker: Celery, settings: Any, tmp_path: Any
) -> None:
    settings.OMNIROUTE_MODELS_DEV_URL = str(tmp_path / "missing.json")

    send_as_beat(worker, "providers.tasks.sync_models_dev_task")

    (run,) = wait_for_runs("sync_models_dev", 1)
    assert (run.outcome, run.triggered_by) == ("failed", "beat")
    assert run.message.startswith(f"cannot read {tmp_path / 'missing.json'}")
    assert not CatalogModel.objects.exists()
