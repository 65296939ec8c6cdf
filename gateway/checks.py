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
