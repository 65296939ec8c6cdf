"""The in-process target stats (spec 03 §8.7): ``snapshot_many`` and the store
chosen at start-up."""

from __future__ import annotations

from providers.target_stats import (
    EMPTY,
    TargetSnapshot,
    TargetStats,
    _configured,
)
from providers.target_stats_redis import SharedTargetStats

NOW = 60.0 * 1_000_000  # the start of a minute
A, B = "pa/m1@main", "pb/m2@main"


def test_snapshot_many_answers_each_key_as_snapshot_does():
    stats = TargetStats()
    stats.started(A, NOW)
    stats.started(A, NOW + 1)
    stats.finished(A, NOW + 2, success=True, latency_ms=120.0)
    stats.started(B, NOW)
    stats.finished(B, NOW + 3, success=False)

    found = stats.snapshot_many([A, B], NOW + 5)

    assert found == {
        A: TargetSnapshot(
            in_flight=1, calls=2, successes=1, failures=0, success_latency_ms_sum=120.0
        ),
        B: TargetSnapshot(
            in_flight=0, calls=1, successes=0, failures=1, success_latency_ms_sum=0.0
        ),
    }
    assert found[A] == stats.snapshot(A, NOW + 5)
    assert found[B] == stats.snapshot(B, NOW + 5)


def test_snapshot_many_gives_an_unknown_target_an_empty_snapshot():
    stats = TargetStats()
    stats.started(A, NOW)

    assert stats.snapshot_many(["nobody/m@main"], NOW) == {"nobody/m@main": EMPTY}
    assert stats.snapshot_many([], NOW) == {}


def test_snapshot_many_counts_the_last_ten_minutes_only():
    stats = TargetStats()
    stats.started(A, NOW)
    stats.finished(A, NOW + 1, success=True, latency_ms=50.0)
    stats.started(A, NOW + 5 * 60)

    nine_minutes_on = stats.snapshot_many([A], NOW + 9 * 60)[A]
    ten_minutes_on = stats.snapshot_many([A], NOW + 10 * 60)[A]

    assert (nine_minutes_on.calls, nine_minutes_on.successes) == (2, 1)
    assert ten_minutes_on == TargetSnapshot(
        in_flight=1, calls=1, successes=0, failures=0, success_latency_ms_sum=0.0
    )


def test_without_redis_url_the_stats_stay_in_the_process(settings):
    settings.REDIS_URL = None

    assert type(_configured()) is TargetStats


def test_with_redis_url_the_stats_are_shared(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"

    found = _configured()

    assert isinstance(found, SharedTargetStats)
    found.stop()  # never started: nothing was written


def test_forget_restarts_the_connections_counts_but_keeps_its_calls_in_flight():
    stats = TargetStats()
    for key in ("pa/m1@main", "pa/m2@main", "pa/m1@backup", "pb/m1@main"):
        stats.started(key, 600.0)
        stats.finished(key, 601.0, success=False)
    stats.started("pa/m1@main", 602.0)

    stats.forget("pa", "main")

    found = stats.snapshot_many(
        ["pa/m1@main", "pa/m2@main", "pa/m1@backup", "pb/m1@main"], 603.0
    )
    assert (found["pa/m1@main"].calls, found["pa/m1@main"].in_flight) == (0, 1)
    assert found["pa/m2@main"].failures == 0
    assert found["pa/m1@backup"].failures == 1
    assert found["pb/m1@main"].failures == 1
