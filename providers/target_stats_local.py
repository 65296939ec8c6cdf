"""Target stats per (model, connection) (spec 03 §8.7), kept in this process.

In-flight counter (up before the call, down after) and one bucket per minute for the
last 10 minutes: calls started, successes, failures (breaker failures and rate
limits) and summed success latency.  ``snapshot()`` returns the totals a strategy
reads (``p2c``, ``least-used``, ``quota-weighted``); ``snapshot_many()`` the same
for every candidate of a plan at once.

``TargetStats`` is the stats without Redis, and the local view that
``providers.target_stats_redis.SharedTargetStats`` extends;
``providers.target_stats`` picks one of the two at start-up.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

WINDOW_MINUTES = 10  # spec 03 §8.7


@dataclass(slots=True)
class Minute:
    """One minute of a target's calls (also a pending batch's bucket in Redis)."""

    minute: int
    calls: int = 0
    successes: int = 0
    failures: int = 0
    latency_ms_sum: float = 0.0


@dataclass(slots=True)
class _Target:
    in_flight: int = 0
    minutes: deque[Minute] = field(default_factory=lambda: deque(maxlen=WINDOW_MINUTES))

    def bucket(self, now: float) -> Minute:
        minute = minute_of(now)
        if not self.minutes or self.minutes[-1].minute != minute:
            self.minutes.append(Minute(minute))
        return self.minutes[-1]


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    in_flight: int
    calls: int
    successes: int
    failures: int
    success_latency_ms_sum: float


EMPTY = TargetSnapshot(0, 0, 0, 0, 0.0)


def minute_of(now: float) -> int:
    return int(now // 60)


def window_start(now: float) -> int:
    """The oldest minute still inside the window at ``now``."""
    return minute_of(now) - WINDOW_MINUTES + 1


def of_connection(key: str, provider: str, connection: str) -> bool:
    """Whether ``<provider>/<model>@<connection>`` is a target of the connection."""
    return key.startswith(f"{provider}/") and key.endswith(f"@{connection}")


class TargetStats:
    def __init__(self) -> None:
        self._targets: dict[str, _Target] = {}
        self._lock = threading.Lock()

    def _get(self, key: str) -> _Target:
        target = self._targets.get(key)
        if target is None:
            target = self._targets[key] = _Target()
        return target

    def started(self, key: str, now: float) -> None:
        with self._lock:
            target = self._get(key)
            target.in_flight += 1
            target.bucket(now).calls += 1

    def finished(
        self, key: str, now: float, *, success: bool | None, latency_ms: float = 0.0
    ) -> None:
        """``success`` None = neither (cancelled, client-caused)."""
        with self._lock:
            target = self._get(key)
            target.in_flight = max(0, target.in_flight - 1)
            bucket = target.bucket(now)
            if success is True:
                bucket.successes += 1
                bucket.latency_ms_sum += latency_ms
            elif success is False:
                bucket.failures += 1

    def snapshot(self, key: str, now: float) -> TargetSnapshot:
        """This process's counts for ``key`` (never any I/O)."""
        with self._lock:
            return self._snapshot(key, now)

    def snapshot_many(
        self, keys: Iterable[str], now: float
    ) -> dict[str, TargetSnapshot]:
        """``snapshot()`` of each key, under one lock (never any I/O)."""
        with self._lock:
            return {key: self._snapshot(key, now) for key in keys}

    def forget(self, provider: str, connection: str) -> None:
        """Admin "Reset health state": the connection's targets count afresh (the
        calls in flight stay counted, they are still running)."""
        with self._lock:
            for key, target in self._targets.items():
                if of_connection(key, provider, connection):
                    target.minutes.clear()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Nothing to stop: every count lives in this process (see the shared one)."""

    def _snapshot(self, key: str, now: float) -> TargetSnapshot:
        target = self._targets.get(key)
        if target is None:
            return EMPTY
        oldest = window_start(now)
        live = [m for m in target.minutes if m.minute >= oldest]
        return TargetSnapshot(
            in_flight=target.in_flight,
            calls=sum(m.calls for m in live),
            successes=sum(m.successes for m in live),
            failures=sum(m.failures for m in live),
            success_latency_ms_sum=sum(m.latency_ms_sum for m in live),
        )
