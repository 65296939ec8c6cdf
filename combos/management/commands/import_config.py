"""``manage.py import_config FILE [--prune]`` (spec 07)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from combos.config_file import ConfigFileError, import_config


class Command(BaseCommand):
    help = "Upsert configuration from a YAML file (all-or-nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="YAML file, or - for standard input")
        parser.add_argument(
            "--prune",
            action="store_true",
            help="also delete rows of the listed kinds the file omits",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:  # missing, unreadable, not UTF-8
            raise CommandError(f"cannot read {path}: {exc}") from exc
        try:
            report = import_config(text, prune=options["prune"])
        except ConfigFileError as exc:
            for problem in exc.problems:
                self.stderr.write(f"error: {problem}")
            raise CommandError(
                f"{len(exc.problems)} problem(s); nothing was written"
            ) from exc
        for warning in report.warnings:
            self.stdout.write(f"warning: {warning}")
        for name, key in report.generated_keys:
            self.stdout.write(f"api key {name}: {key}  (shown once; store it now)")
        for kind, counts in report.counts.items():
            parts = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
            self.stdout.write(f"{kind}: {parts}")
        self.stdout.write("configuration changed" if report.changed else "no changes")
