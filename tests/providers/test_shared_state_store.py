"""The state store contract (spec 03 §8.8) over LocalStore, RedisStore and the
health mirror, atomic updates across threads and processes, and fail-open (08 §3.3).

Redis is the real one on 127.0.0.1:6379 (``shared_state_helpers``): each test works
under its own key prefix and deletes it afterwards.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_state_helpers import (
    Clock,
    FlakyProxy,
    Links,
    Observer,
    dead_port,
    require_redis,
)

from gateway.kernel.breaker import AuthDisable, Breaker, Cooldown
from providers.redis_store import RedisLink, RedisStore
from providers.state_codec import decode, encode
from providers.state_mirror import MirroredStore
from providers.state_store import LocalStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def make_link() -> Iterator[Links]:
    """``make_link(url=, **kwargs)``: links sharing one fresh key prefix."""
    links = Links(require_redis())
    yield links
    links.close()


@pytest.fixture
def proxy() -> Iterator[FlakyProxy]:
    require_redis()
    found = FlakyProxy()
    yield found
    found.close()


# --- the contract ---------------------------------------------------------------------

KINDS = ["local", "redis", "mirrored-health", "mirrored-other"]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> tuple[Any, str]:
    """``(store, key prefix)``: the mirror is tried with a health key and another."""
    kind = request.param
    if kind == "local":
        return LocalStore(), "state:"
    link = request.getfixturevalue("make_link")()
    if kind == "redis":
        return RedisStore(link), "state:"
    return MirroredStore(link), "breaker:" if kind == "mirrored-health" else "state:"


VALUES = [
    1,
    2.5,
    "pa/m1",
    True,
    [1, "two", None],
    {"next": 2, "sticky": {"key": "pa/m1", "count": 1}},
    {"keys": ["a", "b"], "deck": ["b"], "last": "a"},
    Breaker(consecutive=2, window=((1000.25, 3, 2), (1001.5, 1, 0))),
    Breaker(open_until=1030.0, open_seconds=30.0, probe_until=1045.0),
    Cooldown(until=1060.0, level=2, last_rate_limit_at=1000.0),
    AuthDisable(until=1300.0, failures=1, reason="auth_failed", message="bad key"),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_reads_back_equal(store, value):
    s, p = store
    s.set(f"{p}v", value, None)
    assert s.get(f"{p}v") == value
    assert s.get_many([f"{p}v"]) == [value]


def test_missing_keys_read_as_none_in_order(store):
    s, p = store
    s.set(f"{p}b", "B", None)
    assert s.get(f"{p}a") is None
    assert s.get_many([f"{p}a", f"{p}b", f"{p}c"]) == [None, "B", None]
    assert s.get_many([]) == []


def test_delete_removes_and_ignores_missing_keys(store):
    s, p = store
    s.set(f"{p}a", 1, None)
    s.delete(f"{p}a")
    s.delete(f"{p}never")
    assert s.get(f"{p}a") is None
    assert s.keys(p) == []


def test_none_is_the_same_as_missing(store):
    s, p = store
    s.set(f"{p}a", 1, None)
    s.set(f"{p}a", None, None)
    assert s.get(f"{p}a") is None
    assert s.keys(p) == []


def test_incr_counts_from_zero_and_returns_an_int(store):
    s, p = store
    assert s.incr(f"{p}n", 2, None) == 2
    assert s.incr(f"{p}n", -5, None) == -3
    assert s.get(f"{p}n") == -3


def test_update_sees_none_then_the_stored_value(store):
    s, p = store
    seen: list[Any] = []

    def bump(old: Any) -> dict[str, int]:
        seen.append(old)
        return {"n": (old or {"n": 0})["n"] + 1}

    assert s.update(f"{p}u", bump, None) == {"n": 1}
    assert s.update(f"{p}u", bump, None) == {"n": 2}
    assert seen == [None, {"n": 1}]
    assert s.get(f"{p}u") == {"n": 2}


def test_update_returning_none_deletes(store):
    s, p = store
    s.set(f"{p}u", 1, None)
    assert s.update(f"{p}u", lambda old: None, None) is None
    assert s.get(f"{p}u") is None
    assert s.keys(p) == []


def test_keys_lists_live_keys_under_a_literal_prefix(store):
    s, p = store
    s.set(f"{p}a*b:1", 1, None)
    s.set(f"{p}a*b:2", 2, 60)
    s.set(f"{p}axb:3", 3, None)
    s.set(f"{p}gone", 4, 0)
    assert sorted(s.keys(f"{p}a*b:")) == [f"{p}a*b:1", f"{p}a*b:2"]
    assert sorted(s.keys(p)) == [f"{p}a*b:1", f"{p}a*b:2", f"{p}axb:3"]


#: short enough to wait for, long enough that a loaded machine reads the values
#: before they expire (0.15 s was not, on a CI runner shared with other jobs)
SHORT_TTL = 1.0


def test_values_expire_after_their_ttl(store):
    s, p = store
    s.set(f"{p}short", "x", SHORT_TTL)
    s.set(f"{p}long", "y", 60)
    assert s.incr(f"{p}n", 1, SHORT_TTL) == 1
    s.update(f"{p}u", lambda old: "z", SHORT_TTL)
    assert s.get_many([f"{p}short", f"{p}n", f"{p}u"]) == ["x", 1, "z"]
    time.sleep(SHORT_TTL + 0.2)
    assert s.get_many([f"{p}short", f"{p}n", f"{p}u", f"{p}long"]) == [
        None,
        None,
        None,
        "y",
    ]
    assert s.keys(p) == [f"{p}long"]


def test_every_write_sets_the_ttl_again(store):
    s, p = store
    s.set(f"{p}a", 1, SHORT_TTL)
    s.set(f"{p}a", 1, None)  # no TTL any more
    s.set(f"{p}b", 1, 60)
    s.update(f"{p}b", lambda old: old, SHORT_TTL)  # the same value, a new TTL
    s.set(f"{p}c", 1, SHORT_TTL)
    s.update(f"{p}c", lambda old: old, None)  # the same value, no TTL any more
    time.sleep(SHORT_TTL + 0.2)
    assert s.get_many([f"{p}a", f"{p}b", f"{p}c"]) == [1, None, 1]


def test_a_ttl_of_zero_or_less_stores_nothing(store):
    s, p = store
    s.set(f"{p}a", 1, 0)
    s.update(f"{p}b", lambda old: 1, -1)
    assert s.get_many([f"{p}a", f"{p}b"]) == [None, None]


# --- redis specifics ------------------------------------------------------------------


def test_keys_values_and_ttls_are_native_redis(make_link):
    link = make_link()
    RedisStore(link).set("state:rr:1", {"next": 1}, 30)
    raw = link.client
    assert raw.get(f"{link.namespace}state:rr:1") == b'{"next":1}'
    assert 29_000 < raw.pttl(f"{link.namespace}state:rr:1") <= 30_000


def test_the_codec_rejects_unknown_objects_and_drops_unreadable_values():
    class Other:
        pass

    with pytest.raises(TypeError):
        encode(Other())
    assert decode(b"{not json") is None
    assert decode(b'{"__state__": "Nope"}') is None


# --- atomic update --------------------------------------------------------------------

HAMMER = """
import sys
from providers.redis_store import RedisLink, RedisStore
link = RedisLink(sys.argv[1], timeout_s=2.0, namespace=sys.argv[2])
store = RedisStore(link)
for _ in range(int(sys.argv[3])):
    store.update("state:hammer", lambda old: (old or 0) + 1, None)
    store.incr("state:counter", 1, None)
link.close()
"""


def test_two_processes_and_two_threads_never_lose_an_update(make_link):
    link = make_link(timeout_s=2.0)
    store = RedisStore(link)
    n = 150
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, link.url, link.namespace, str(n)], cwd=ROOT
        )
        for _ in range(2)
    ]

    def hammer() -> None:
        for _ in range(n):
            store.update("state:hammer", lambda old: (old or 0) + 1, None)
            store.incr("state:counter", 1, None)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [w.wait(timeout=60) for w in workers] == [0, 0]

    assert store.get("state:hammer") == 4 * n
    assert store.get("state:counter") == 4 * n


def test_two_mirrors_hammering_one_health_key_lose_nothing_and_converge(make_link):
    a, b = (
        MirroredStore(make_link(timeout_s=2.0)),
        MirroredStore(make_link(timeout_s=2.0)),
    )
    n = 150

    def hammer(store: MirroredStore) -> None:
        for _ in range(n):
            store.update("breaker:pa@main", lambda old: (old or 0) + 1, None)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert a.remote.get("breaker:pa@main") == 2 * n
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and (
        a.get("breaker:pa@main") != 2 * n or b.get("breaker:pa@main") != 2 * n
    ):
        time.sleep(0.01)
    assert (a.get("breaker:pa@main"), b.get("breaker:pa@main")) == (2 * n, 2 * n)


def test_update_runs_fn_again_on_the_value_another_worker_committed(make_link):
    link, other = make_link(), RedisStore(make_link())
    store = RedisStore(link)
    store.set("state:x", 1, None)
    seen: list[Any] = []

    def fn(old: Any) -> Any:
        seen.append(old)
        if len(seen) == 1:
            other.set("state:x", 10, None)  # lands between the read and the write
        return old + 1

    assert store.update("state:x", fn, None) == 11
    assert seen == [1, 10]


def test_update_with_the_value_just_read_is_one_round_trip(make_link):
    link = make_link()
    store = RedisStore(link)
    store.set("state:rr", {"next": 1}, None)
    counting = link.client = Counting(link.client)

    after = store.update(
        "state:rr", lambda s: {"next": s["next"] + 1}, 60, known={"next": 1}
    )

    assert after == {"next": 2}
    assert counting.calls == 1
    assert store.get("state:rr") == {"next": 2}
    assert 0 < link.client.pttl(link.key("state:rr")) <= 60_000


def test_a_stale_known_value_makes_fn_run_again_on_the_stored_one(make_link):
    store = RedisStore(make_link())
    store.set("state:x", 5, None)
    seen: list[Any] = []

    def fn(old: Any) -> Any:
        seen.append(old)
        return old + 1

    assert store.update("state:x", fn, None, known=3) == 6
    assert seen == [3, 5]
    assert store.get("state:x") == 6


def test_a_known_absent_value_conflicts_with_a_stored_one_and_vice_versa(make_link):
    store = RedisStore(make_link())
    store.set("state:y", 1, None)
    assert store.update("state:y", lambda old: (old or 0) + 1, None, known=None) == 2
    store.delete("state:y")
    assert store.update("state:y", lambda old: (old or 0) + 1, None, known=7) == 1


def test_local_and_mirrored_stores_accept_a_known_value(make_link):
    for store in (LocalStore(), MirroredStore(make_link())):
        store.set("breaker:a", 1, None)
        store.set("state:a", 1, None)
        assert store.update("breaker:a", lambda old: old + 1, None, known=1) == 2
        assert store.update("state:a", lambda old: old + 1, None, known=0) == 2


# --- fail open (spec 08 §3.3) ---------------------------------------------------------


class Counting:
    """The real client, counting the commands the store sends through it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        self.calls += 1
        return getattr(self.client, name)


def test_with_redis_unreachable_every_operation_runs_locally_and_is_counted(make_link):
    observer = Observer()
    store = RedisStore(
        make_link(f"redis://127.0.0.1:{dead_port()}/0", observer=observer)
    )
    store.set("state:a", {"n": 1}, None)
    assert store.get("state:a") == {"n": 1}
    assert store.get_many(["state:a", "state:b"]) == [{"n": 1}, None]
    assert store.incr("state:n", 3, None) == 3
    assert store.update("state:n", lambda old: old * 2, None) == 6
    assert sorted(store.keys("state:")) == ["state:a", "state:n"]
    store.delete("state:a")
    assert store.get("state:a") is None

    assert observer.fallbacks == [
        "set",
        "get",
        "get_many",
        "incr",
        "update",
        "keys",
        "delete",
        "get",
    ]
    assert observer.up == [False]


def test_after_a_failure_redis_is_skipped_1_2_4_5_5_seconds(make_link):
    clock = Clock(100.0)
    link = make_link(f"redis://127.0.0.1:{dead_port()}/0", clock=clock)
    counting = link.client = Counting(link.client)
    store = RedisStore(link)
    tried_at: list[float] = []
    for tenth in range(200):  # 20 s of calls, ten a second
        clock.now = 100.0 + tenth / 10
        before = counting.calls
        store.get("state:a")
        if counting.calls > before:
            tried_at.append(round(clock.now - 100.0, 1))
    assert tried_at == [0.0, 1.0, 3.0, 7.0, 12.0, 17.0]


def test_a_timeout_costs_the_timeout_once_then_nothing_while_backed_off(make_link):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        link = make_link(
            f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout_s=0.05
        )
        store = RedisStore(link)
        started = time.perf_counter()
        store.set("state:a", 1, None)
        first = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(100):
            assert store.get("state:a") == 1
        rest = time.perf_counter() - started
    assert 0.04 < first < 0.5
    assert rest < 0.05  # 100 calls, no network


def test_one_warning_per_minute_while_redis_stays_down(make_link, caplog):
    clock = Clock(0.0)
    store = RedisStore(make_link(f"redis://127.0.0.1:{dead_port()}/0", clock=clock))
    with caplog.at_level("WARNING", logger="providers.redis_store"):
        for second in range(130):
            clock.now = float(second)
            store.get("state:a")
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 3  # at 0 s, ~60 s and ~120 s
    assert "Redis unreachable" in warnings[0].getMessage()


def test_on_recovery_redis_is_used_again_and_local_writes_are_not_merged(
    make_link, proxy
):
    clock, observer = Clock(0.0), Observer()
    store = RedisStore(make_link(proxy.url, clock=clock, observer=observer))
    store.set("state:a", "shared", None)

    proxy.down()
    store.set("state:a", "local only", None)
    store.set("state:b", "local only", None)
    assert store.get("state:a") == "local only"
    proxy.up()
    assert store.get("state:a") == "local only"  # still backed off (1 s)

    clock.now = 1.0
    assert store.get_many(["state:a", "state:b"]) == ["shared", None]
    assert observer.up == [True, False, True]
    assert observer.fallbacks == ["set", "set", "get", "get"]


def test_channels_carry_the_database_number_except_on_database_zero():
    zero = RedisLink("redis://127.0.0.1:6379/0", timeout_s=0.5)
    nine = RedisLink("redis://127.0.0.1:6379/9", timeout_s=0.5)
    try:
        assert zero.channel("state") == "omniroute:state"  # spec 08 §3.1
        assert nine.channel("state") == "omniroute:state@9"  # pub/sub ignores the db
        assert nine.key("state:rr:1") == "omniroute:state:rr:1"
    finally:
        zero.close()
        nine.close()
