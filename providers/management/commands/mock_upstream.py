"""``manage.py mock_upstream``: serve the built-in mock LLM provider over HTTP.

A thin front door over ``providers.mock_upstream.serve`` (the same runner as
``python -m providers.mock_upstream``), for demos, integration runs and benchmarks.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from providers import mock_upstream


class Command(BaseCommand):
    help = "Serve the mock LLM provider (OpenAI + Anthropic wire formats) until Ctrl-C."
    # The mock needs no database, credentials or app config: never block it on checks.
    requires_system_checks = ()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=mock_upstream.DEFAULT_HOST)
        parser.add_argument("--port", type=int, default=mock_upstream.DEFAULT_PORT)
        parser.add_argument(
            "--models",
            default=",".join(mock_upstream.DEFAULT_MODEL_IDS),
            help="comma-separated model ids listed by GET /v1/models",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        state = mock_upstream.MockState(
            model_ids=mock_upstream.model_ids_from(options["models"])
        )
        try:
            mock_upstream.serve(
                options["host"], options["port"], state=state, on_ready=self._announce
            )
        except KeyboardInterrupt:
            self.stdout.write("mock upstream stopped")

    def _announce(self, url: str) -> None:
        self.stdout.write(f"mock upstream listening on {url}")
        self.stdout.flush()
