"""Gateway processes sharing one PostgreSQL database and one Redis (spec 08 §3, §6).

Each process is a ``conftest.Gateway`` (uvicorn, started the same way) whose
database is a throwaway PostgreSQL database made by ``scratch_database``.  Without
Redis or PostgreSQL on loopback the tests skip; under ``CI=true`` that is a failure.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.integration.conftest import Gateway, inherited_env
from tests.services import unavailable

PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def require_services() -> None:
    """Skip without Redis and PostgreSQL; with CI=true their absence is a failure."""
    missing = [
        name
        for name, port in (("Redis", 6379), ("PostgreSQL", 5432))
        if not _reachable(port)
    ]
    if not missing:
        return
    unavailable(f"{' and '.join(missing)} not reachable on 127.0.0.1")


class PgGateway(Gateway):
    """A ``Gateway`` whose database is PostgreSQL: the version is read with psycopg."""

    def __init__(self, data_dir: Path, port: int, env: dict[str, str]) -> None:
        super().__init__(data_dir, port, env)
        self.log = data_dir / f"gateway-{port}.log"

    def config_version(self) -> int:
        with psycopg.connect(self.env["DATABASE_URL"]) as conn:
            row = conn.execute(
                "select version from providers_configrevision"
            ).fetchone()
        return int(row[0]) if row else 0


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A fresh PostgreSQL database ``name`` (its URL), dropped on the way out."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgres://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def cluster_env(
    *, database_url: str, redis_url: str, data_dir: Path, **extra: str
) -> dict[str, str]:
    """The environment of every worker of one cluster (``extra``: more settings)."""
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            # one secret for all: the credentials are encrypted with a key derived
            # from it, and the processes read the same rows
            "DJANGO_SECRET_KEY": f"mw-{uuid.uuid4().hex}{uuid.uuid4().hex}",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "OMNIROUTE_LOG_FLUSH_MS": "100",
            # generous: these tests prove sharing, a timeout would fall back to local
            "OMNIROUTE_REDIS_TIMEOUT_MS": "2000",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env
