"""Target stats shared through Redis (spec 03 §8.7, 08 §3.1-3.3): two
``SharedTargetStats`` on one key prefix stand for two workers.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from shared_state_helpers import Links, Observer, dead_port, require_redis

import providers.target_stats_redis as shared_module
from providers.target_stats import EMPTY, TargetSnapshot, TargetStats
from providers.target_stats_redis import SharedTargetStats

NOW = 60.0 * 1_000_000  # the start of a minute
A, B = "pa/m1@main", "pb/m2@main"
NON_BLOCKING_S = 0.1  # 200 writes, far below one Redis timeout (0.5 s in tests)

Make = Callable[..., SharedTargetStats]


@pytest.fixture
def links() -> Iterator[Links]:
    found = Links(require_redis())
    yield found
    found.close()


@pytest.fixture
def worker(links: Links) -> Iterator[Make]:
    """``worker(**link_kwargs)`` -> a ``SharedTargetStats``, stopped at the end."""
    made: list[SharedTargetStats] = []

    def make(url: str | None = None, **kwargs: Any) -> SharedTargetStats:
        found = SharedTargetStats(links(url, **kwargs))
        made.append(found)
        return found

    yield make
    for found in made:
        found.stop()


def shared(reader: SharedTargetStats, *writers: SharedTargetStats) -> Any:
    """The reader's shared view of ``A`` once every writer has sent its batch."""
    for writer in writers:
        assert writer.flush()
    return reader.snapshot_many([A], NOW + 1)[A]


def test_a_call_started_on_one_worker_is_in_flight_on_the_other(worker):
    one, two = worker(), worker()

    one.started(A, NOW)
    one.started(A, NOW)
    two.started(A, NOW)

    assert shared(two, one, two).in_flight == 3
    assert shared(one, one, two).in_flight == 3
    assert two.snapshot(A, NOW).in_flight == 1  # ``snapshot`` stays this node's


def test_each_worker_reports_its_own_count_never_below_zero(worker):
    one, two = worker(), worker()
    one.started(A, NOW)
    one.started(A, NOW)
    two.started(A, NOW)
    assert shared(one, one, two).in_flight == 3

    one.finished(A, NOW, success=None)
    two.finished(A, NOW, success=None)
    two.finished(A, NOW, success=None)  # one more than it started: stays at 0
    assert shared(one, one, two).in_flight == 1
    assert shared(two, one, two).in_flight == 1


def test_a_crashed_workers_calls_stop_counting_after_ten_minutes(worker):
    crashed, busy = worker(), worker()
    crashed.started(A, NOW)
    crashed.started(A, NOW)
    assert crashed.flush()
    crashed.stop()  # never finishes its calls
    later = NOW + 9 * 60
    busy.started(A, later)  # traffic on the target keeps the hash alive
    assert busy.flush()
    assert busy.snapshot_many([A], later)[A].in_flight == 3
    assert busy.snapshot_many([A], NOW + 10 * 60 + 1)[A].in_flight == 1


def test_minute_buckets_sum_over_ten_minutes_and_older_ones_drop(worker):
    one, two = worker(), worker()
    one.started(A, NOW)
    one.finished(A, NOW + 1, success=True, latency_ms=100.5)
    two.started(A, NOW + 4 * 60)
    two.finished(A, NOW + 4 * 60 + 1, success=False)
    one.started(A, NOW + 9 * 60)
    one.finished(A, NOW + 9 * 60 + 1, success=True, latency_ms=20.25)
    one.started(A, NOW + 9 * 60)
    one.finished(A, NOW + 9 * 60 + 2, success=None)  # cancelled: neither
    assert one.flush()
    assert two.flush()

    at_nine = two.snapshot_many([A], NOW + 9 * 60 + 30)[A]
    at_ten = two.snapshot_many([A], NOW + 10 * 60)[A]
    at_nineteen = two.snapshot_many([A], NOW + 19 * 60)[A]

    assert at_nine == TargetSnapshot(
        in_flight=0, calls=4, successes=2, failures=1, success_latency_ms_sum=120.75
    )
    assert at_ten == TargetSnapshot(
        in_flight=0, calls=3, successes=1, failures=1, success_latency_ms_sum=20.25
    )
    assert at_nineteen == EMPTY


def test_keys_are_named_per_target_and_minute_with_their_ttls(worker, links):
    one = worker()
    one.started(A, NOW)
    one.finished(A, NOW + 1, success=True, latency_ms=7.5)
    one.started(A, NOW + 61)
    assert one.flush()

    raw = one.link.client
    minute = int(NOW // 60)
    in_flight = f"{links.namespace}tstat:{A}:if"
    bucket = f"{links.namespace}tstat:{A}:{minute}"
    assert one.in_flight_key(A) == in_flight
    assert one.bucket_key(A, minute) == bucket
    written_ms = int((NOW + 61) * 1000)
    assert raw.hgetall(in_flight) == {one.token.encode(): f"1|{written_ms}".encode()}
    assert 590_000 < raw.pttl(in_flight) <= 600_000  # the 10 min safety TTL
    assert raw.hgetall(bucket) == {
        b"calls": b"1",
        b"successes": b"1",
        b"latency_ms_sum": b"7.5",
    }
    assert 650_000 < raw.pttl(bucket) <= 660_000
    assert raw.hgetall(f"{links.namespace}tstat:{A}:{minute + 1}") == {b"calls": b"1"}


def test_snapshot_many_reads_every_target_in_one_round_trip(worker, monkeypatch):
    one = worker()
    one.started(A, NOW)
    one.started(B, NOW)
    assert one.flush()
    one.snapshot_many([A], NOW)  # loads the script once
    client = one.link.client
    commands: list[Any] = []
    send = client.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        commands.append(args[0])
        return send(*args, **options)

    monkeypatch.setattr(client, "execute_command", counted)

    found = one.snapshot_many([A, B, "nobody/m@main"], NOW + 1)

    assert commands == ["EVALSHA"]
    assert found[A].in_flight == found[B].in_flight == 1
    assert found["nobody/m@main"] == EMPTY


def test_this_workers_unsent_writes_count_at_once(worker, monkeypatch):
    one = worker()
    monkeypatch.setattr(one, "_start_writer", lambda: None)  # nothing reaches Redis

    one.started(A, NOW)
    one.finished(A, NOW, success=False)
    one.started(A, NOW)

    assert one.link.client.get(one.in_flight_key(A)) is None
    assert one.snapshot_many([A], NOW)[A] == TargetSnapshot(
        in_flight=1, calls=2, successes=0, failures=1, success_latency_ms_sum=0.0
    )


def test_redis_unreachable_answers_the_local_view_and_counts_the_fallback(worker):
    observer = Observer()
    down = worker(f"redis://127.0.0.1:{dead_port()}/0", observer=observer)

    down.started(A, NOW)
    down.started(A, NOW)
    down.finished(A, NOW + 1, success=True, latency_ms=30.0)
    assert down.flush()  # the writer tried, failed over and dropped the batch

    found = down.snapshot_many([A, B], NOW + 2)

    assert found == TargetStats.snapshot_many(down, [A, B], NOW + 2)
    assert found[A] == TargetSnapshot(
        in_flight=1, calls=2, successes=1, failures=0, success_latency_ms_sum=30.0
    )
    assert "target_stats" in observer.fallbacks
    assert observer.up == [False]
    assert not down.link.is_up()


def test_writes_never_wait_for_a_redis_that_does_not_answer(worker):
    observer = Observer()
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never replies
        stuck = worker(
            f"redis://127.0.0.1:{silent.getsockname()[1]}/0", observer=observer
        )

        started = time.perf_counter()
        for _ in range(100):
            stuck.started(A, NOW)
            stuck.finished(A, NOW + 1, success=True, latency_ms=1.0)
        elapsed = time.perf_counter() - started

        assert elapsed < NON_BLOCKING_S
        assert stuck.flush(timeout_s=3.0)  # the writer waited out its timeout
    assert stuck.snapshot(A, NOW + 2).calls == 100
    assert "target_stats" in observer.fallbacks


def test_a_full_batch_drops_the_write_and_counts_it(worker, monkeypatch):
    observer = Observer()
    one = worker(observer=observer)
    monkeypatch.setattr(one, "_start_writer", lambda: None)
    monkeypatch.setattr(shared_module, "MAX_PENDING", 1)

    one.started(A, NOW)
    one.started(B, NOW)  # a second target: no room

    assert observer.fallbacks == ["target_stats"]
    assert one.snapshot(B, NOW).in_flight == 1  # the local view still has it


def test_the_writer_outlives_an_unexpected_error(worker, monkeypatch, caplog):
    one = worker()
    send = one._send
    failures = iter([True])

    def broken_once(client: Any, batch: Any, counts: Any) -> None:
        if next(failures, False):
            raise RuntimeError("boom")
        send(client, batch, counts)

    monkeypatch.setattr(one, "_send", broken_once)
    with caplog.at_level(logging.ERROR, logger="providers.target_stats_redis"):
        one.started(A, NOW)  # this batch is lost
        assert one.flush()
    one.started(B, NOW)
    assert one.flush()

    assert "writing to Redis failed" in caplog.text
    assert one._thread is not None
    assert one._thread.is_alive()
    found = worker().snapshot_many([A, B], NOW)  # what the other workers see
    assert (found[A].in_flight, found[B].in_flight) == (0, 1)


def test_stop_sends_what_is_pending_and_ends_the_writer(worker):
    one, two = worker(), worker()
    one.started(A, NOW)
    assert one.flush()
    one.finished(A, NOW + 1, success=True, latency_ms=10.0)

    one.stop()

    assert one._thread is not None
    assert not one._thread.is_alive()
    assert two.snapshot_many([A], NOW + 2)[A] == TargetSnapshot(
        in_flight=0, calls=1, successes=1, failures=0, success_latency_ms_sum=10.0
    )
    one.started(A, NOW + 3)  # after the stop: local only
    assert one.snapshot(A, NOW + 3).in_flight == 1
    assert two.snapshot_many([A], NOW + 3)[A].in_flight == 0


def test_forget_clears_the_connections_buckets_on_every_worker(worker):
    one, two = worker(), worker()
    other = "pa/m1@backup"
    for key in (A, other):
        one.started(key, NOW)
        one.finished(key, NOW + 1, success=False)
    one.started(A, NOW + 2)  # still running when the operator resets
    assert one.flush()

    two.forget(*_provider_and_connection(A))

    after = one.snapshot_many([A, other], NOW + 3)
    assert (after[A].calls, after[A].failures, after[A].in_flight) == (0, 0, 1)
    assert (after[other].calls, after[other].failures) == (1, 1)


def _provider_and_connection(target: str) -> tuple[str, str]:
    model, _, connection = target.rpartition("@")
    return model.partition("/")[0], connection
