"""``manage.py sync_arena_elo``: LMArena ratings into ``ArenaScore`` (spec 06 §3.3).

``--source`` may be given several times, and each value may hold several
comma-separated URLs or files (the syntax of ``OMNIROUTE_ARENA_URLS``); together
they replace the configured list.  ``--format`` overrides ``OMNIROUTE_ARENA_FORMAT``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from providers.arena import JOB_NAME
from providers.arena_formats import Format
from providers.management.job_command import JobCommand


class Command(JobCommand):
    help = "Sync LMArena leaderboard ratings into ArenaScore rows."
    job_name = JOB_NAME
    accepts_source = False  # replaced below by a repeatable --source

    def add_job_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--source",
            action="append",
            metavar="URL|FILE",
            help="read these URLs or files (repeatable, comma-separated) instead "
            "of OMNIROUTE_ARENA_URLS",
        )
        parser.add_argument(
            "--format",
            choices=[str(f) for f in Format],
            help="payload format (default: OMNIROUTE_ARENA_FORMAT)",
        )

    def job_options(self, options: dict[str, Any]) -> dict[str, object]:
        return {"format": options["format"]} if options.get("format") else {}

    def handle(self, *args: Any, **options: Any) -> None:
        options["source"] = ",".join(options.get("source") or ()) or None
        super().handle(*args, **options)
