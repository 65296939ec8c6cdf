"""``manage.py export_config`` (spec 07): the configuration as YAML on stdout."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from combos.config_export import export_yaml


class Command(BaseCommand):
    help = "Print the current configuration in the import_config format."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(export_yaml(), ending="")
