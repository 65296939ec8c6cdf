"""``JobCommand``: the management command shape every scheduled job shares.

Spec 06 §3.1: ``--dry-run``, ``--source URL|FILE``, ``--no-progress``; a progress
bar on stderr when stderr is a TTY; one summary line on stdout; exit codes 0
(``success``, ``unchanged``, ``dry_run``), 1 (``failed``), 3 (``skipped_locked``).
A subclass sets ``job_name`` and may add options with ``add_job_arguments`` and
hand them to the job with ``job_options`` (they reach ``JobContext.options``).
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError, OutputWrapper

from providers.jobs import EXIT_CODES, Outcome, TriggeredBy, run_job, summary_line

BAR_WIDTH = 30


class ProgressBar:
    """``[#####-----] 12/40`` redrawn in place on a terminal stream."""

    def __init__(self, stream: OutputWrapper) -> None:
        self.stream = stream
        self.drawn = False

    def __call__(self, done: int, total: int | None) -> None:
        if total:
            filled = min(BAR_WIDTH, BAR_WIDTH * done // total)
            text = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total}"
        else:
            text = f"{done} done"
        self.stream.write(f"\r{text}", ending="")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n", ending="")


class JobCommand(BaseCommand):
    job_name = ""
    accepts_source = True

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="parse and plan, print counts, write nothing but the run record",
        )
        if self.accepts_source:
            parser.add_argument(
                "--source",
                metavar="URL|FILE",
                help="read this URL or file instead of the configured source",
            )
        parser.add_argument(
            "--no-progress", action="store_true", help="no progress bar on stderr"
        )
        self.add_job_arguments(parser)

    def add_job_arguments(self, parser: ArgumentParser) -> None:
        """Hook: the job's own options."""

    def job_options(self, options: dict[str, Any]) -> dict[str, object]:
        """Hook: the parsed options the job reads from ``JobContext.options``."""
        return {}

    def handle(self, *args: Any, **options: Any) -> None:
        bar = None
        if not options["no_progress"] and self.stderr.isatty():
            bar = ProgressBar(self.stderr)
        try:
            run = run_job(
                self.job_name,
                triggered_by=TriggeredBy.COMMAND,
                dry_run=options["dry_run"],
                source=options.get("source"),
                progress=bar,
                options=self.job_options(options),
            )
        finally:
            if bar is not None:
                bar.close()
        self.stdout.write(summary_line(run))
        code = EXIT_CODES.get(Outcome(run.outcome), 1)
        if code:
            raise CommandError(
                f"{self.job_name}: {run.outcome}: {run.message}", returncode=code
            )
