"""Health state shared through Redis and read from each worker's mirror (spec 08
§3.2, 05 §3.6): two boards stand for two workers sharing one Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from shared_state_helpers import Clock, FlakyProxy, Links, Observer, require_redis

from gateway.kernel.breaker import Breaker, HealthConfig
from providers.health import HealthBoard
from providers.state_mirror import MirroredStore

CONN = "pa@main"
CONFIG = HealthConfig()
LATENCY_S = 10.0  # a bound to give up at, not a target: a loaded CI runner is slow


@pytest.fixture
def links() -> Iterator[Links]:
    found = Links(require_redis())
    yield found
    found.close()


@pytest.fixture
def proxy() -> Iterator[FlakyProxy]:
    require_redis()
    found = FlakyProxy()
    yield found
    found.close()


def board(links: Links, **kwargs: Any) -> HealthBoard:
    resync_s = kwargs.pop("resync_s", 5.0)
    store = MirroredStore(links(**kwargs), resync_s=resync_s)
    store.start()
    return HealthBoard(store)


def mirror_of(b: HealthBoard) -> MirroredStore:
    assert isinstance(b.store, MirroredStore)
    return b.store


def eventually(check: Callable[[], bool], within_s: float = LATENCY_S) -> float:
    """Seconds until ``check()`` held; fails after ``within_s``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > within_s:
            pytest.fail(f"not within {within_s} s")
        time.sleep(0.002)
    return time.monotonic() - started


def fail(b: HealthBoard, outcome: tuple[str, str | None], times: int = 1) -> None:
    now = time.time()
    for _ in range(times):
        b.record(CONN, "m1", outcome[0], outcome[1], now=now, config=CONFIG)


def skip(b: HealthBoard, model: str = "m1") -> str | None:
    found = b.skip_reason(CONN, model, 0, time.time())
    return None if found is None else found.reason


def test_a_breaker_opened_by_one_worker_is_skipped_by_the_other(links):
    a, b = board(links), board(links)
    assert skip(b) is None

    fail(a, ("server_error", None), times=5)

    assert skip(a) == "circuit_open"  # the writer's own mirror, at once
    latency = eventually(lambda: skip(b) == "circuit_open")
    assert latency < LATENCY_S


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (("rate_limit", None), "cooldown"),
        (("server_error", "auth_failed"), "auth_disabled"),
        (("server_error", "model_not_found"), "model_locked"),
    ],
)
def test_cooldowns_auth_disables_and_model_locks_reach_the_other_worker(
    links, outcome, reason
):
    a, b = board(links), board(links)
    fail(a, outcome)
    eventually(lambda: skip(b) == reason)
    if reason == "model_locked":
        assert list(b.describe(CONN, time.time()).locked_models) == ["m1"]
        assert skip(b, model="m2") is None


def test_a_reset_on_one_worker_clears_the_other(links):
    a, b = board(links), board(links)
    fail(a, ("server_error", None), times=5)
    fail(a, ("server_error", "model_not_found"))
    eventually(lambda: skip(b) == "circuit_open")

    a.reset(CONN)

    eventually(lambda: skip(b) is None)
    assert b.describe(CONN, time.time()).locked_models == {}


def test_reading_health_never_touches_redis(links, proxy):
    observer = Observer()
    a, b = board(links), board(links, url=proxy.url, observer=observer)
    fail(a, ("server_error", None), times=5)
    eventually(lambda: skip(b) == "circuit_open")

    proxy.down()
    started = time.perf_counter()
    for _ in range(1000):
        assert skip(b) == "circuit_open"
    assert time.perf_counter() - started < 0.5
    assert observer.fallbacks == []  # no call went to Redis, so none fell back


def test_a_lost_message_is_repaired_by_the_periodic_resync(links, monkeypatch):
    a = board(links)
    deaf = MirroredStore(links(), resync_s=0.2)
    monkeypatch.setattr(deaf, "on_message", lambda data: None)  # hears nothing
    deaf.start()
    b = HealthBoard(deaf)

    fail(a, ("server_error", None), times=5)
    eventually(lambda: skip(b) == "circuit_open")
    a.reset(CONN)
    eventually(lambda: skip(b) is None)


def test_a_late_message_never_overwrites_a_newer_value(links):
    a = board(links)
    store = mirror_of(a)
    store.set("breaker:x", Breaker(consecutive=1), None)
    store.set("breaker:x", Breaker(consecutive=2), None)
    epoch = store._epoch
    store.on_message(
        f'{epoch} 1 {{"k":"breaker:x","t":null,"v":null}}'.encode()
    )  # a delete older than both writes
    assert store.get("breaker:x") == Breaker(consecutive=2)


def test_while_redis_is_down_health_is_kept_locally_then_redis_state_wins(links, proxy):
    clock, observer = Clock(), Observer()
    a = board(links, url=proxy.url, observer=observer, clock=clock)
    b = board(links)

    proxy.down()
    fail(a, ("server_error", None), times=5)
    assert skip(a) == "circuit_open"  # fail open: this worker still protects itself
    assert mirror_of(a).flush_behind()  # outcomes are written behind the response
    assert observer.fallbacks.count("update") == 5  # (a resync may fail as well)
    assert observer.up[-1] is False
    time.sleep(0.2)
    assert skip(b) is None  # not shared while degraded

    proxy.up()
    clock.now += 1  # the backoff has passed
    mirror_of(a).resync()
    assert observer.up[-1] is True
    assert skip(a) is None  # the local breaker is not merged back: Redis has none


def test_a_redis_restart_resets_the_sequence_and_the_mirrors_follow(links):
    a, b = board(links), board(links)
    fail(a, ("server_error", None), times=5)
    eventually(lambda: skip(b) == "circuit_open")

    raw = mirror_of(a).link.client  # a flush: the counter and the epoch are gone
    for key in raw.scan_iter(match=f"{links.namespace}*"):
        raw.delete(key)
    mirror_of(b).resync()
    assert skip(b) is None

    fail(a, ("server_error", "model_not_found"))  # seq 1 of a new epoch
    eventually(lambda: skip(b) == "model_locked")


def test_a_closed_breaker_costs_no_redis_write_when_an_attempt_begins(links):
    a = board(links)
    raw = mirror_of(a).link.client
    assert a.begin(CONN, time.time(), 10.0)
    a.end(CONN)
    assert raw.exists(f"{links.namespace}breaker:{CONN}") == 0


def test_only_one_of_two_workers_claims_the_half_open_probe(links):
    a, b = board(links), board(links)
    fail(a, ("server_error", None), times=5)
    eventually(lambda: skip(b) == "circuit_open")
    later = time.time() + 31  # the breaker reads HALF_OPEN

    claims = [a.begin(CONN, later, 10.0), b.begin(CONN, later, 10.0)]

    assert sorted(claims) == [False, True]


def test_an_update_on_a_stale_mirror_runs_again_on_the_value_in_redis(
    links, monkeypatch
):
    deaf = MirroredStore(links())
    monkeypatch.setattr(deaf, "on_message", lambda data: None)
    deaf.start()
    other = MirroredStore(links())
    other.set("breaker:x", 5, None)  # the deaf mirror never hears of it
    seen: list[Any] = []

    def bump(old: Any) -> int:
        seen.append(old)
        return (old or 0) + 1

    assert deaf.update("breaker:x", bump, None) == 6
    assert seen == [None, 5]
    assert deaf.get("breaker:x") == 6


def test_start_up_loads_the_mirror_before_the_first_request(links, monkeypatch):
    from providers import health

    MirroredStore(links()).set("breaker:x", Breaker(consecutive=3), None)
    store = MirroredStore(links())
    monkeypatch.setattr(health.board, "store", store)

    health.start_shared_state()

    assert store.mirror.get("breaker:x") == Breaker(consecutive=3)


def test_start_up_without_redis_does_nothing(monkeypatch):
    from providers import health
    from providers.state_store import LocalStore

    monkeypatch.setattr(health.board, "store", LocalStore())
    health.start_shared_state()


def test_an_outcome_is_answered_from_the_mirror_and_written_behind(links):
    a, b = mirror_of(board(links)), mirror_of(board(links))

    assert a.update_behind("breaker:wb", lambda s: (s or 0) + 1, None) == 1
    assert a.get("breaker:wb") == 1  # at once, before any round trip
    assert a.flush_behind()
    eventually(lambda: b.get("breaker:wb") == 1)

    b.update("breaker:wb", lambda s: s + 10, None)  # another worker's write ...
    a.update_behind("breaker:wb", lambda s: (s or 0) + 1, None)  # ... not seen yet
    assert a.flush_behind()
    # the queued outcome ran again on Redis's value: nothing lost, nothing doubled
    eventually(lambda: a.get("breaker:wb") == 12 and b.get("breaker:wb") == 12)


def test_the_board_records_outcomes_behind_and_reports_the_opening(links):
    a = board(links)
    triggers = [
        a.record(CONN, "m1", "server_error", None, now=1000.0 + i, config=CONFIG)
        for i in range(5)
    ]
    assert triggers == [None, None, None, None, "server_error"]
    assert mirror_of(a).flush_behind()
    assert mirror_of(board(links)).get(f"breaker:{CONN}").open_until is not None


def test_redis_news_never_undoes_outcomes_still_written_behind(links, monkeypatch):
    a, b = mirror_of(board(links)), mirror_of(board(links))
    b.set("breaker:held", 10, None)
    eventually(lambda: a.get("breaker:held") == 10)
    monkeypatch.setattr(a, "_start_writer", lambda: None)  # outcomes stay queued

    for _ in range(3):
        a.update_behind("breaker:held", lambda s: (s or 0) + 1, None)
    b.set("breaker:held", 100, None)  # another worker's write reaches a meanwhile
    eventually(lambda: b.get("breaker:held") == 100)
    time.sleep(0.3)  # the pub/sub message has had time to arrive
    assert a.get("breaker:held") == 13  # a's own outcomes are not undone

    assert a.flush_behind()  # each outcome is applied again on Redis's value
    assert a.get("breaker:held") == 103
    eventually(lambda: b.get("breaker:held") == 103)
