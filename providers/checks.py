"""System checks for settings and credentials (stable IDs, spec 08 §1)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

from gateway.engine.session import CREDENTIAL_HEADERS


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    production = settings.IS_PRODUCTION
    if not settings.OMNIROUTE_ENCRYPTION_KEYS:
        problems.append(
            Error(
                "No provider credential key: set OMNIROUTE_ENCRYPTION_KEY.",
                id="omniroute.E002" if production else "providers.E001",
            )
        )
    elif settings.OMNIROUTE_ENCRYPTION_KEY_DERIVED:
        problems.append(
            Warning(
                "OMNIROUTE_ENCRYPTION_KEY is derived from DJANGO_SECRET_KEY: changing "
                "the secret key makes stored provider secrets unreadable.",
                id="omniroute.W001",
            )
        )
    engine = str(settings.DATABASES["default"]["ENGINE"])
    if settings.DATABASES["default"].get("CONN_MAX_AGE", 0) != 0:
        problems.append(
            Error("CONN_MAX_AGE must be 0 under ASGI.", id="omniroute.E001")
        )
    credential = sorted(
        set(settings.OMNIROUTE_SESSION_EXTRA_HEADERS) & CREDENTIAL_HEADERS
    )
    if credential:
        problems.append(
            Error(
                "OMNIROUTE_SESSION_EXTRA_HEADERS names credential headers "
                f"({', '.join(credential)}): session ids are written to the log.",
                id="omniroute.E010",
            )
        )
    if production:
        missing = [
            name
            for name, ok in (
                ("DJANGO_SECRET_KEY", settings.SECRET_KEY_FROM_ENV),
                ("DATABASE_URL", bool(settings.DATABASE_URL)),
                ("DJANGO_ALLOWED_HOSTS", bool(settings.ALLOWED_HOSTS)),
            )
            if not ok
        ]
        if engine.endswith("sqlite3") or missing:
            problems.append(
                Error(
                    "Production needs PostgreSQL and "
                    + (", ".join(missing) or "its mandatory settings"),
                    id="omniroute.E003",
                )
            )
        if settings.DEBUG:
            problems.append(
                Error(
                    "DJANGO_DEBUG=true is refused in production.", id="omniroute.E004"
                )
            )
    return problems
