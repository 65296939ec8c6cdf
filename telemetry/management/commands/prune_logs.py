"""``manage.py prune_logs [--days N] [--dry-run] [--no-progress]`` (spec 06 §3.5)."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from providers.management.job_command import JobCommand
from telemetry.jobs import PRUNE_LOGS


def _days(value: str) -> int:
    try:
        days = int(value)
    except ValueError:
        days = 0
    if days < 1:
        raise ArgumentTypeError(f"expected a whole number of days >= 1, got {value!r}")
    return days


class Command(JobCommand):
    help = "Delete log, usage and job rows past their retention, in batches."
    job_name = PRUNE_LOGS
    accepts_source = False

    def add_job_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--days",
            type=_days,
            metavar="N",
            help="keep N days of request logs this time "
            "(default: OMNIROUTE_LOG_RETENTION_DAYS)",
        )

    def job_options(self, options: dict[str, Any]) -> dict[str, object]:
        return {} if options["days"] is None else {"days": options["days"]}
