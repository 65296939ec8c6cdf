"""Two gateway processes sharing one PostgreSQL database and one Redis (spec 08 §3, §6).

Worker A and worker B are separate uvicorn processes on their own ports, started with
the start logic of ``conftest.Gateway`` (the session gateway stays on SQLite and is not
touched).  They share a throwaway database created here and dropped at the end, and
Redis database 9, flushed before and after.  Each test uses state no other test uses:
its own provider, key or session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from providers.mock_upstream import RunningMock, start_in_thread
from tests.integration.cluster import (
    PgGateway,
    cluster_env,
    require_services,
    scratch_database,
)
from tests.integration.conftest import (
    KEY_ALL,
    base_config,
    free_port,
    post_chat,
)

pytestmark = pytest.mark.integration

REDIS_URL = "redis://127.0.0.1:6379/9"
KEY_RPM = "sk-or-test-mw-rpm-ten-000000000000000000000000"
KEY_TOGGLED = "sk-or-test-mw-toggled-00000000000000000000000"
CONFIG_BOUND_SECONDS = 2.0  # spec 08 §3.4: a change reaches every worker within 2 s
RPM = 10
CONCURRENT = 30
BREAKER_FAILURES = 5  # consecutive failures that open a breaker (spec 03 §8.1)
PROPAGATION_SECONDS = 1.0  # the bound for B to honour A's breaker
SLACK_SECONDS = 0.5  # scheduling on a loaded 2-core machine
AUTH = {"Authorization": f"Bearer {KEY_ALL}"}


def extra_config(mock_url: str) -> str:
    """A provider for the breaker test alone, a pin-capable combo and an rpm key."""
    return f"""
providers:
  - slug: pz
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pz-1234567890
    models:
      - id: mz
combos:
  - name: rotate
    strategy: round-robin
    config: {{stickyRoundRobinLimit: 1}}
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
  - name: least
    strategy: least-used
    targets: [{{model: pa/m1}}, {{model: pb/m2}}]
api_keys:
  - name: toggled
    key: {KEY_TOGGLED}
  - name: rpm-ten
    key: {KEY_RPM}
    rpm: {RPM}
"""


def _flush_redis() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.flushdb()
    finally:
        client.close()


@pytest.fixture(scope="module")
def own_mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture(scope="module")
def workers(own_mock: RunningMock) -> Iterator[tuple[PgGateway, PgGateway]]:
    require_services()
    _flush_redis()
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-mw-"))
    with scratch_database(f"omniroute_mw_{os.getpid()}") as database_url:
        env = cluster_env(
            database_url=database_url, redis_url=REDIS_URL, data_dir=data_dir
        )
        first = PgGateway(data_dir, free_port(), env)
        second = PgGateway(data_dir, free_port(), env)
        try:
            first.start()  # runs migrate once; the second one finds nothing to do
            second.start()
            for yaml_text in (base_config(own_mock.url), extra_config(own_mock.url)):
                result = first.apply(yaml_text)
                assert result.returncode == 0, result.stderr
            second.wait_for_version(first.config_version())
            yield first, second
        finally:
            first.stop()
            second.stop()
            _flush_redis()
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def upstream(own_mock: RunningMock) -> Iterator[RunningMock]:
    own_mock.reset()
    yield own_mock
    own_mock.reset()


_chat = post_chat


def test_a_breaker_opened_through_a_is_honoured_by_b(workers, upstream):
    a, b = workers
    upstream.add("mz", status=500)
    for _ in range(BREAKER_FAILURES):
        assert _chat(a, model="pz/mz").status_code == 502
    opened_at = time.monotonic()
    calls_before = [r["model"] for r in upstream.requests()].count("mz")
    assert calls_before == BREAKER_FAILURES
    first: dict[str, Any] = {}
    while time.monotonic() - opened_at < PROPAGATION_SECONDS + SLACK_SECONDS:
        response = _chat(b, models=["pz/mz", "pb/m2"])
        assert response.status_code == 200, response.text
        first = response.json()["omniroute"]["failover"]["attempts"][0]
        if first["status"] == "skipped":
            break
        time.sleep(0.05)
    assert (first["model"], first["status"], first["reason"], first["calls"]) == (
        "pz/mz",
        "skipped",
        "circuit_open",
        0,
    )
    # and from then on B never calls the open connection
    seen = [r["model"] for r in upstream.requests()].count("mz")
    for _ in range(3):
        response = _chat(b, models=["pz/mz", "pb/m2"])
        assert response.json()["omniroute"]["served_model"] == "pb/m2"
    assert [r["model"] for r in upstream.requests()].count("mz") == seen


def test_rpm_10_hit_through_both_workers_admits_exactly_10(workers, upstream):
    a, b = workers
    targets = [a if i % 2 else b for i in range(CONCURRENT)]
    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        responses = list(
            pool.map(lambda gw: _chat(gw, key=KEY_RPM, model="pb/m2"), targets)
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * RPM + [429] * (CONCURRENT - RPM)
    for refused in (r for r in responses if r.status_code == 429):
        assert refused.json()["error"]["code"] == "key_rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
    assert len(upstream.requests()) == RPM


def test_a_session_pin_made_on_a_is_used_by_b(workers, upstream):
    a, b = workers
    session = {"X-Session-Id": f"mw-{uuid.uuid4().hex}"}
    first = _chat(a, model="rotate", headers=session)
    assert first.status_code == 200, first.text
    pinned = first.json()["omniroute"]["served_model"]
    # without the pin the shared rotation (limit 1) would alternate targets
    served = [
        _chat(b, model="rotate", headers=session).json()["omniroute"]["served_model"]
        for _ in range(4)
    ]
    assert served == [pinned] * 4
    # fresh sessions on B still rotate: the pin, not the counter, held B
    fresh = {
        _chat(b, model="rotate", headers={"X-Session-Id": uuid.uuid4().hex}).json()[
            "omniroute"
        ]["served_model"]
        for _ in range(4)
    }
    assert fresh == {"pa/m1", "pb/m2"}


def test_concurrent_requests_through_both_workers_take_distinct_rotation_steps(
    workers, upstream
):
    a, b = workers
    targets = [a if i % 2 else b for i in range(CONCURRENT)]
    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        responses = list(pool.map(lambda gw: _chat(gw, model="rotate"), targets))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    served = [r.json()["omniroute"]["served_model"] for r in responses]
    # one shared counter, stepped by compare-and-set: never two requests on one step
    assert sorted(served) == ["pa/m1"] * (CONCURRENT // 2) + ["pb/m2"] * (
        CONCURRENT // 2
    )


def test_least_used_on_b_counts_a_call_in_flight_on_a(workers, upstream):
    a, b = workers
    upstream.add("m1", times=1, latency_ms=3000)
    with ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(_chat, a, model="least")
        deadline = time.monotonic() + 10
        while not [r for r in upstream.requests() if r["model"] == "m1"]:
            assert time.monotonic() < deadline, "the slow call never reached m1"
            time.sleep(0.02)
        time.sleep(0.2)  # A's writer thread sends its in-flight count
        served = [
            _chat(b, model="least").json()["omniroute"]["served_model"]
            for _ in range(2)
        ]
        assert slow.result().json()["omniroute"]["served_model"] == "pa/m1"
    assert served == ["pb/m2", "pb/m2"]


def test_a_key_disabled_through_a_is_refused_by_b_within_two_seconds(workers, upstream):
    a, b = workers
    created = a.manage(
        "createsuperuser", "--noinput", "--username", "mw-ops", "--email", "o@x.io"
    )
    assert created.returncode == 0, created.stderr
    token = a.manage("create_admin_token", "mw-ops").stdout.strip()
    admin = {"Authorization": f"Bearer {token}"}
    assert _chat(b, key=KEY_TOGGLED, model="pb/m2").status_code == 200  # cached on B
    keys = httpx.get(f"{a.url}/api/api-keys", headers=admin, timeout=10).json()
    rows = keys["results"] if isinstance(keys, dict) else keys
    key_id = next(row["id"] for row in rows if row["name"] == "toggled")

    changed = httpx.patch(
        f"{a.url}/api/api-keys/{key_id}",
        headers=admin,
        json={"active": False},
        timeout=10,
    )
    assert changed.status_code == 200, changed.text
    saved_at = time.monotonic()
    while True:
        response = _chat(b, key=KEY_TOGGLED, model="pb/m2")
        if response.status_code == 401:
            break
        assert time.monotonic() - saved_at < CONFIG_BOUND_SECONDS + SLACK_SECONDS
        time.sleep(0.05)
    assert response.json()["error"]["code"] == "key_disabled"
