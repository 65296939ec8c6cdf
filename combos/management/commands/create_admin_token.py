"""``manage.py create_admin_token USERNAME [--name NAME]``: a REST token, shown once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from combos.api_auth import issue_admin_token


class Command(BaseCommand):
    help = "Create an admin token (omr-adm-…) for a staff user; printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None or not user.is_staff:
            raise CommandError(f"no staff user named {options['username']!r}")
        self.stdout.write(issue_admin_token(user, options["name"]))
