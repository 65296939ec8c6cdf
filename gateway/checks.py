"""Gateway system checks."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import Warning, register


@register()
def check_shared_state(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    workers = os.environ.get("WEB_CONCURRENCY", "1")
    if (
        not settings.REDIS_URL
        and workers.isdecimal()
        and workers.isascii()
        and int(workers) > 1
    ):
        return [
            Warning(
                "REDIS_URL is unset while WEB_CONCURRENCY > 1: routing state and "
                "limits hold per worker.",
                id="omniroute.W002",
            )
        ]
    return []


@register()
def check_open_metrics(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``/metrics`` answers anyone without ``OMNIROUTE_METRICS_TOKEN``: fine on a
    laptop, a leak of routes, models and traffic in production."""
    if settings.IS_PRODUCTION and not settings.OMNIROUTE_METRICS_TOKEN:
        return [
            Warning(
                "OMNIROUTE_METRICS_TOKEN is unset in production: /metrics is open to "
                "anyone who can reach the gateway.",
                hint="Set OMNIROUTE_METRICS_TOKEN and give it to the Prometheus "
                "scraper (Authorization: Bearer <token>).",
                id="omniroute.W003",
            )
        ]
    return []
