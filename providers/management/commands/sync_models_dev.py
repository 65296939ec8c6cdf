"""``manage.py sync_models_dev``: the models.dev catalog sync (spec 06 §3.2)."""

from __future__ import annotations

from providers.management.job_command import JobCommand
from providers.models_dev import JOB_NAME


class Command(JobCommand):
    help = "Sync the models.dev catalog into CatalogModel rows."
    job_name = JOB_NAME
