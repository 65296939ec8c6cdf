"""Celery tasks of the providers app: thin wrappers over ``run_job`` (spec 06 §3.1).

Beat sends them with no arguments; the admin's "Run now" passes
``triggered_by="admin"``.  Idempotent: the job lock turns a duplicate into a
``skipped_locked`` run, and a repeated payload into ``unchanged``.
"""

from __future__ import annotations

from celery import shared_task
from celery.utils.log import get_task_logger

from providers import arena, models_dev
from providers.jobs import TriggeredBy, run_job

logger = get_task_logger(__name__)


@shared_task(
    name="providers.tasks.sync_models_dev_task",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=models_dev.SOFT_LIMIT_SECONDS,
    time_limit=models_dev.HARD_LIMIT_SECONDS,
)
def sync_models_dev_task(triggered_by: str = TriggeredBy.BEAT) -> str:
    run = run_job(models_dev.JOB_NAME, triggered_by=triggered_by)
    logger.info("%s: %s", models_dev.JOB_NAME, run.outcome)
    return str(run.outcome)


@shared_task(
    name="providers.tasks.sync_arena_elo_task",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=arena.SOFT_LIMIT_SECONDS,
    time_limit=arena.HARD_LIMIT_SECONDS,
)
def sync_arena_elo_task(triggered_by: str = TriggeredBy.BEAT) -> str:
    run = run_job(arena.JOB_NAME, triggered_by=triggered_by)
    logger.info("%s: %s", arena.JOB_NAME, run.outcome)
    return str(run.outcome)
