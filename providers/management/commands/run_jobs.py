"""``manage.py run_jobs [--loop] [--once JOB]``: the scheduled jobs without Celery.

Without options it runs the jobs that are due and exits (suits cron); ``--loop``
keeps running them on the schedule (embedded mode, spec 08 §2.1); ``--once JOB``
runs one job now, whatever the schedule.  Exit 1 when a run failed.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from providers.job_runner import run_due, run_loop
from providers.jobs import EXIT_CODES, Outcome, TriggeredBy, run_job, summary_line


class Command(BaseCommand):
    help = "Run the scheduled jobs that are due (embedded mode: no broker)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--loop", action="store_true", help="keep running jobs as they fall due"
        )
        group.add_argument("--once", metavar="JOB", help="run this job now and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            self._once(options["once"])
        elif options["loop"]:
            run_loop(report=self.stdout.write)
        else:
            runs = run_due(timezone.now(), report=self.stdout.write)
            failed = [run.job for run in runs if run.outcome == Outcome.FAILED]
            if failed:
                raise CommandError(f"failed: {', '.join(failed)}", returncode=1)

    def _once(self, name: str) -> None:
        try:
            run = run_job(name, triggered_by=TriggeredBy.COMMAND)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(summary_line(run))
        code = EXIT_CODES.get(Outcome(run.outcome), 1)
        if code:
            raise CommandError(f"{name}: {run.outcome}", returncode=code)
