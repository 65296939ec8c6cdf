"""Celery tasks of the telemetry app: thin wrappers over services (style §2.10).

The scheduled jobs (spec 06 §3.1) run through ``providers.jobs.run_job``, which takes
the job's lock and records the ``JobRun``."""

from __future__ import annotations

from celery import shared_task
from celery.utils.log import get_task_logger

from providers.jobs import run_job
from telemetry import jobs, webhook_delivery

logger = get_task_logger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def deliver_webhook_task(delivery_id: int) -> None:
    """One try of one webhook delivery; the service schedules the next try itself.

    Idempotent: a duplicate or early message finds the row claimed, finished or not
    yet due, and does nothing.
    """
    result = webhook_delivery.deliver(delivery_id)
    if result is None:
        logger.info("webhook delivery %s: nothing due", delivery_id)
    else:
        logger.info(
            "webhook delivery %s: try %d %s", delivery_id, result.tries, result.status
        )


@shared_task(ignore_result=True, soft_time_limit=240, time_limit=300)
def compute_reliability_24h_task(triggered_by: str = "beat") -> None:
    run = run_job(jobs.COMPUTE_RELIABILITY, triggered_by=triggered_by)
    logger.info("%s: %s", run.job, run.outcome)


@shared_task(ignore_result=True, soft_time_limit=1500, time_limit=1800)
def prune_logs_task(triggered_by: str = "beat") -> None:
    run = run_job(jobs.PRUNE_LOGS, triggered_by=triggered_by)
    logger.info("%s: %s", run.job, run.outcome)
