"""Test overlay: star-imports the real settings and changes what tests need.

The suite runs on PostgreSQL when it is reachable (always with ``CI=true``, where a
missing server is a failure, not a skip) and on SQLite otherwise.
"""

from __future__ import annotations

import os
import socket

from django.core.exceptions import ImproperlyConfigured

from omniroute_site.settings import *  # noqa: F403
from omniroute_site.settings import DATABASES

_PG_URL = os.environ.get(
    "OMNIROUTE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/omniroute"
)


def _postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            return True
    except OSError:
        return False


if os.environ.get("OMNIROUTE_TEST_DB", "auto") != "sqlite":
    if _postgres_reachable():
        import dj_database_url

        DATABASES = {"default": dict(dj_database_url.parse(_PG_URL, conn_max_age=0))}
    elif os.environ.get("CI", "").lower() == "true":
        raise ImproperlyConfigured("CI=true but PostgreSQL at 127.0.0.1:5432 is down")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
OMNIROUTE_LOG_SYNC = True
OMNIROUTE_CONFIG_POLL_MS = 100
# tests start the scheduler themselves (tests/providers/test_scheduler.py)
OMNIROUTE_SCHEDULER = "off"
