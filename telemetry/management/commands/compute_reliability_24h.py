"""``manage.py compute_reliability_24h [--dry-run] [--no-progress]`` (spec 06 §3.4)."""

from __future__ import annotations

from providers.management.job_command import JobCommand
from telemetry.jobs import COMPUTE_RELIABILITY


class Command(JobCommand):
    help = (
        "Recompute the 24 h reliability statistics and the last three hours of usage."
    )
    job_name = COMPUTE_RELIABILITY
    accepts_source = False
