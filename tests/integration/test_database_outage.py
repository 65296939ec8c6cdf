"""A PostgreSQL outage fails fast (issue #16 point 4), over HTTP against real gateway
processes whose database is reached through a TCP proxy that the test cuts (the
real PostgreSQL keeps running for everyone else):

* ``/readyz`` answers 503 and ``/metrics`` 200 within 2 s while the database is down;
  the REST API answers 503 ``database_unavailable``; chat requests keep being served
  from memory;
* a shutdown honours its flush deadline and spills the rows it could not write;
* of two workers starting at once on the same data folder, exactly one imports
  each spill file, with no traceback, and every row lands once.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from providers.mock_upstream import start_in_thread
from tests.integration.cluster import (
    PgGateway,
    cluster_env,
    require_services,
    scratch_database,
)
from tests.integration.conftest import KEY_ALL, free_port, post_chat
from tests.integration.redis_proxy import RedisProxy

pytestmark = pytest.mark.integration

PROBE_BOUND_S = 2.0


def _config(mock_url: str) -> str:
    return f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock_url}
    connections: [{{name: main, api_key: sk-upstream-secret-pa-1234567890}}]
    models: [{{id: m1}}]
api_keys:
  - name: all
    key: {KEY_ALL}
"""


def _timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def _rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(
            conn.execute("select count(*) from telemetry_requestlog").fetchone()[0]
        )


def _while_down(gateway: PgGateway, token: str) -> None:
    ready, took = _timed(lambda: httpx.get(f"{gateway.url}/readyz", timeout=10))
    assert (ready.status_code, ready.json()["db"]) == (503, "unreachable")
    assert took < PROBE_BOUND_S
    scrape, took = _timed(lambda: httpx.get(f"{gateway.url}/metrics", timeout=10))
    assert scrape.status_code == 200
    assert took < PROBE_BOUND_S
    rest = httpx.get(
        f"{gateway.url}/api/providers",
        headers={"Authorization": f"Bearer {token}"},
        timeout=15,
    )
    assert rest.status_code == 503
    assert rest.json()["error"]["code"] == "database_unavailable"
    # the hot path needs no database: answers go on, rows wait in memory
    for _ in range(5):
        assert post_chat(gateway, model="pa/m1").status_code == 200


def test_a_database_outage_fails_fast_and_loses_no_row():
    require_services()
    name = f"omr_dbout_{uuid.uuid4().hex[:8]}"
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-dbout-"))
    proxy = RedisProxy(target=("127.0.0.1", 5432)).start()
    gateways: list[PgGateway] = []
    try:
        with scratch_database(name) as direct_url, start_in_thread() as mock:
            proxied = f"postgres://postgres@127.0.0.1:{proxy.port}/{name}"
            env = cluster_env(
                database_url=proxied,
                redis_url="",
                data_dir=data_dir,
                OMNIROUTE_DB_POOL_TIMEOUT_S="3",
            )
            first = PgGateway(data_dir, free_port(), env)
            gateways.append(first)
            first.start()
            assert (
                first.manage(
                    "createsuperuser",
                    "--noinput",
                    "--username",
                    "ops",
                    "--email",
                    "ops@example.com",
                ).returncode
                == 0
            )
            token = first.manage("create_admin_token", "ops").stdout.strip()
            result = first.apply(_config(mock.url))
            assert result.returncode == 0, result.stderr

            proxy.cut()
            _while_down(first, token)

            stop_started = time.monotonic()
            first.stop()
            assert time.monotonic() - stop_started < 20  # 10 s flush deadline
            spilled = list((data_dir / "log-spill").glob("*.jsonl"))
            assert spilled, first.log.read_text()

            proxy.restore()
            # two workers start at once on the same folder: one imports each file
            second = PgGateway(data_dir, free_port(), env)
            third = PgGateway(data_dir, free_port(), env)
            gateways += [second, third]
            second.start(migrate=False)
            third.start(migrate=False)
            deadline = time.monotonic() + 15
            while _rows(direct_url) < 5 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _rows(direct_url) == 5
            assert not list((data_dir / "log-spill").glob("*.jsonl*"))
            logs = "".join(g.log.read_text() for g in (second, third))
            assert "Traceback" not in logs
    finally:
        for gateway in gateways:
            gateway.stop()
        proxy.restore()
        proxy.close()
        shutil.rmtree(data_dir, ignore_errors=True)
