"""Two gateway processes while Redis becomes unreachable and comes back (spec 08 §3.3).

Workers A and B, and a lenient third one started with
``OMNIROUTE_READYZ_REQUIRE_REDIS=false``, share a throwaway PostgreSQL database and
reach Redis database 12 only through a ``RedisProxy`` on loopback, so an outage is a
cut of the proxy: the real Redis keeps running for everyone else.  The cut resets
every live connection and every new one (a stopped Redis, spec 03 §10 example 22).
Everything is checked over HTTP.

Each test owns its provider or key, so the tests do not depend on each other's state;
the ``outage`` fixture always restores Redis and waits until every worker is ready.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from openai import OpenAI

from providers.mock_upstream import RunningMock, start_in_thread
from tests.integration.cluster import (
    PgGateway,
    cluster_env,
    require_services,
    scratch_database,
)
from tests.integration.conftest import KEY_ALL, Gateway, free_port, post_chat
from tests.integration.redis_proxy import RedisProxy

pytestmark = pytest.mark.integration

REDIS_DB = 12  # no other test uses it; flushed before and after
KEY_RPM = "sk-or-test-ro-rpm-two-000000000000000000000000"
RPM = 2
BREAKER_FAILURES = 5  # consecutive failures that open a breaker (spec 03 §8.1)
# Spec 08 §3.3: the backoff is 1 s doubling to 5 s, and the health mirror resyncs
# on reconnection and every 5 s (§3.2); 15 s leaves room for a loaded machine.
RECOVERY_SECONDS = 15.0
CONFIG_SECONDS = 10.0  # a server that started after the import loads it at once
HTTP_TIMEOUT_SECONDS = 10.0  # a dead Redis must add no per-request wait (§3.3)
DEGRADED = {
    "status": "degraded",
    "db": "ok",
    "redis": "unreachable",
    "shared_state": "local",
}
READY = {"status": "ok", "db": "ok", "redis": "ok"}


def outage_config(mock_url: str) -> str:
    """Two healthy providers behind two combos, a provider per breaker scenario
    (``rx`` while Redis is cut, ``rz`` after it returns) and an rpm key.

    Pub/sub channels are not per Redis database, so the breaker providers have
    names no other test opens a breaker on.
    """
    providers = "".join(
        f"""
  - slug: {slug}
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-secret-{slug}-1234567890
    models:
      - id: {model}"""
        for slug, model in (("pa", "m1"), ("pb", "m2"), ("rx", "mx"), ("rz", "mz"))
    )
    return f"""
providers:{providers}
combos:
  - name: team
    strategy: priority
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
  - name: rotate
    strategy: round-robin
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
api_keys:
  - name: all
    key: {KEY_ALL}
  - name: rpm-two
    key: {KEY_RPM}
    rpm: {RPM}
"""


@dataclass(frozen=True, slots=True)
class Cluster:
    a: PgGateway
    b: PgGateway
    lenient: PgGateway  # OMNIROUTE_READYZ_REQUIRE_REDIS=false
    proxy: RedisProxy
    admin_token: str

    @property
    def workers(self) -> tuple[PgGateway, PgGateway, PgGateway]:
        return (self.a, self.b, self.lenient)


def _flush_redis() -> None:
    client = redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}")
    try:
        client.flushdb()
    finally:
        client.close()


def _admin_token(gateway: Gateway) -> str:
    created = gateway.manage(
        "createsuperuser", "--noinput", "--username", "ops", "--email", "o@example.com"
    )
    assert created.returncode == 0, created.stderr
    token = gateway.manage("create_admin_token", "ops")
    assert token.returncode == 0, token.stderr
    return token.stdout.strip()


@pytest.fixture(scope="module")
def own_mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture(scope="module")
def cluster(own_mock: RunningMock) -> Iterator[Cluster]:
    require_services()
    _flush_redis()
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-ro-"))
    with (
        RedisProxy() as proxy,
        scratch_database(f"omniroute_ro_{os.getpid()}") as database_url,
    ):
        env = cluster_env(
            database_url=database_url,
            redis_url=proxy.url(REDIS_DB),
            data_dir=data_dir,
        )
        lenient_env = {**env, "OMNIROUTE_READYZ_REQUIRE_REDIS": "false"}
        a, b = (PgGateway(data_dir, free_port(), env) for _ in range(2))
        lenient = PgGateway(data_dir, free_port(), lenient_env)
        try:
            migrated = a.manage("migrate", "--noinput", "-v0")
            assert migrated.returncode == 0, migrated.stderr
            # everything else at once: three servers, the config, an admin token
            with ThreadPoolExecutor(max_workers=5) as pool:
                started = [
                    pool.submit(gw.start, migrate=False) for gw in (a, b, lenient)
                ]
                imported = pool.submit(
                    a.manage, "import_config", "-", stdin=outage_config(own_mock.url)
                )
                token = pool.submit(_admin_token, a)
                for future in started:
                    future.result()
                assert imported.result().returncode == 0, imported.result().stderr
                admin_token = token.result()
            for gw in (a, b, lenient):
                gw.wait_for_version(a.config_version(), timeout=CONFIG_SECONDS)
            yield Cluster(a, b, lenient, proxy, admin_token)
        finally:
            for gw in (a, b, lenient):
                gw.stop()
            _flush_redis()
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def upstream(own_mock: RunningMock) -> Iterator[RunningMock]:
    own_mock.reset()
    yield own_mock
    own_mock.reset()


@pytest.fixture
def outage(cluster: Cluster) -> Iterator[RedisProxy]:
    """The proxy, for the test to cut; restored afterwards, every worker ready."""
    yield cluster.proxy
    cluster.proxy.restore()
    for gw in cluster.workers:
        _wait_for(partial(_is_ready, gw), "ready again")


# --- black-box helpers ----------------------------------------------------------------


def _chat(gateway: Gateway, **kwargs: Any) -> httpx.Response:
    return post_chat(gateway, timeout=HTTP_TIMEOUT_SECONDS, **kwargs)


def _readyz(gateway: Gateway) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{gateway.url}/readyz", timeout=HTTP_TIMEOUT_SECONDS)
    return response.status_code, response.json()


def _is_ready(gateway: Gateway) -> bool:
    return _readyz(gateway) == (200, READY)


def _metrics(gateway: Gateway) -> tuple[float, float]:
    """``omniroute_redis_up`` and the sum of ``…_shared_state_fallbacks_total``."""
    text = httpx.get(f"{gateway.url}/metrics", timeout=HTTP_TIMEOUT_SECONDS).text
    up = re.search(r"^omniroute_redis_up (\S+)$", text, re.M)
    fallbacks = re.findall(
        r"^omniroute_shared_state_fallbacks_total\{[^}]*\} (\S+)$", text, re.M
    )
    return (float(up.group(1)) if up else -1.0), sum(map(float, fallbacks))


def _redis_is_up(gateway: Gateway) -> bool:
    return _metrics(gateway)[0] == 1.0


def _circuit(cluster: Cluster, gateway: Gateway, provider: str) -> str:
    """The breaker of ``provider``'s connection as ``gateway`` sees it (its mirror)."""
    response = httpx.get(
        f"{gateway.url}/api/connections",
        headers={"Authorization": f"Bearer {cluster.admin_token}"},
        timeout=HTTP_TIMEOUT_SECONDS,
    )
    assert response.status_code == 200, response.text
    rows = response.json()
    found = [row for row in rows if row["provider"] == provider]
    assert len(found) == 1, rows
    return str(found[0]["health"]["circuit"])


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + RECOVERY_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {RECOVERY_SECONDS} s")
        time.sleep(0.1)


def _open_breaker(gateway: Gateway, model: str) -> None:
    for _ in range(BREAKER_FAILURES):
        response = _chat(gateway, model=model)
        assert response.status_code == 502, response.text


def _streamed_text(gateway: Gateway) -> str:
    with OpenAI(
        base_url=f"{gateway.url}/v1",
        api_key=KEY_ALL,
        timeout=HTTP_TIMEOUT_SECONDS,
        max_retries=0,
    ) as client:
        stream = client.chat.completions.create(
            model="pb/m2",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
        )
        return "".join(
            chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
        )


# --- tests ----------------------------------------------------------------------------


def test_while_redis_is_cut_requests_are_served_and_readyz_reports_degraded(
    cluster, upstream, outage
):
    a, b = cluster.a, cluster.b
    for gw in cluster.workers:
        assert _readyz(gw) == (200, READY)
    for gw in (a, b):
        assert _metrics(gw)[0] == 1.0

    outage.cut()

    for gw in (a, b):
        for body in (
            {"model": "pb/m2"},
            {"model": "team"},
            {"model": "rotate"},
            {"model": "rotate", "stream": True},
        ):
            response = _chat(gw, **body)
            assert response.status_code == 200, (gw.url, body, response.text)
        pinned = _chat(gw, model="rotate", headers={"X-Session-Id": uuid.uuid4().hex})
        assert pinned.status_code == 200, pinned.text
        assert _streamed_text(gw)
        assert _readyz(gw) == (503, DEGRADED)
        up, fallbacks = _metrics(gw)
        assert up == 0.0
        assert fallbacks > 0
    # the same body, but a load balancer keeps this node (spec 01 /readyz)
    assert _readyz(cluster.lenient) == (200, DEGRADED)


def test_while_redis_is_cut_key_limits_hold_per_worker(cluster, upstream, outage):
    a, b = cluster.a, cluster.b
    outage.cut()

    on_a = [_chat(a, key=KEY_RPM, model="pb/m2").status_code for _ in range(RPM + 1)]
    on_b = [_chat(b, key=KEY_RPM, model="pb/m2").status_code for _ in range(RPM)]

    # spec 08 §3.3: up to N× over-admission across N workers while degraded
    assert on_a == [200] * RPM + [429]
    assert on_b == [200] * RPM


def test_after_redis_returns_a_breaker_opened_on_a_is_honoured_by_b(
    cluster, upstream, outage
):
    a, b = cluster.a, cluster.b
    upstream.add("mx", status=500)
    upstream.add("mz", status=500)
    outage.cut()
    # while degraded a breaker is the worker's own (spec 08 §3.3)
    _open_breaker(a, "rx/mx")
    assert (_circuit(cluster, a, "rx"), _circuit(cluster, b, "rx")) == (
        "open",
        "closed",
    )

    outage.restore()

    # each worker finds Redis again by itself (no /readyz probe here helps it)
    for gw in (a, b):
        _wait_for(partial(_redis_is_up, gw), "redis_up 1")
    for gw in cluster.workers:
        assert _readyz(gw) == (200, READY)
    # A's mirror resynced from Redis: local state is not merged back (03 §8.8)
    _wait_for(lambda: _circuit(cluster, a, "rx") == "closed", "rx resynced on A")
    # and Redis is shared again: a breaker opened through A reaches B's mirror
    _open_breaker(a, "rz/mz")
    _wait_for(lambda: _circuit(cluster, b, "rz") == "open", "rz open on B")
    response = _chat(b, models=["rz/mz", "pb/m2"])
    assert response.status_code == 200, response.text
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["model"], first["status"], first["reason"], first["calls"]) == (
        "rz/mz",
        "skipped",
        "circuit_open",
        0,
    )
    assert [r["model"] for r in upstream.requests()].count("mz") == BREAKER_FAILURES
