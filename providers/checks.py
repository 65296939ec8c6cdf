"""System checks for settings and credentials (stable IDs, spec 08 §1)."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError

from gateway.kernel.session import CREDENTIAL_HEADERS


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    production = settings.IS_PRODUCTION
    problems += _encryption_key_problems(production)
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
                (
                    "DJANGO_ALLOWED_HOSTS",
                    settings.ALLOWED_HOSTS_FROM_ENV and bool(settings.ALLOWED_HOSTS),
                ),
            )
            if not ok
        ]
        problems += [
            Error(f"{name} is mandatory in production.", id="omniroute.E003")
            for name in missing
        ]
        if engine.endswith("sqlite3") and "DATABASE_URL" not in missing:
            problems.append(
                Error(
                    "Production needs PostgreSQL: DATABASE_URL names SQLite.",
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


def _encryption_key_problems(production: bool) -> list[Any]:
    keys = settings.OMNIROUTE_ENCRYPTION_KEYS
    if not keys:
        return [
            Error(
                "No provider credential key: set OMNIROUTE_ENCRYPTION_KEY.",
                id="omniroute.E002" if production else "providers.E001",
            )
        ]
    bad = [n for n, key in enumerate(keys, 1) if not _is_fernet_key(key)]
    if bad:
        # the position only: a key is never echoed
        return [
            Error(
                f"OMNIROUTE_ENCRYPTION_KEY: key {n} of {len(keys)} is not a Fernet "
                "key (32 url-safe base64-encoded bytes).",
                id="omniroute.E002",
            )
            for n in bad
        ]
    if settings.OMNIROUTE_ENCRYPTION_KEY_DERIVED:
        return [
            Warning(
                "OMNIROUTE_ENCRYPTION_KEY is derived from DJANGO_SECRET_KEY: changing "
                "the secret key makes stored provider secrets unreadable.",
                id="omniroute.W001",
            )
        ]
    return []


def _is_fernet_key(key: str) -> bool:
    try:
        Fernet(key.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        return False
    return True


@register(Tags.database)
def check_tls_verification(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Spec 10 §4: a provider's ``verify: false`` exists only with
    ``DJANGO_DEBUG=1``.  Reads the providers table, so it runs where Django runs the
    database checks (``migrate``, ``manage.py check --database default``); the
    snapshot ignores such a setting without debug in any case."""
    if settings.DEBUG or not kwargs.get("databases"):
        return []
    from providers.models import Provider

    try:
        slugs = sorted(
            Provider.objects.filter(settings__verify=False).values_list(
                "slug", flat=True
            )
        )
    except DatabaseError:  # not migrated yet: nothing stored to refuse
        return []
    if not slugs:
        return []
    return [
        Error(
            f"verify: false on provider(s) {', '.join(slugs)}: TLS verification "
            "can be turned off only with DJANGO_DEBUG=1.",
            id="providers.E010",
        )
    ]
