"""Target stats per (model, connection) (spec 03 §8.7), kept by each process.

In-flight counter (up before the call, down after) and one bucket per minute for the
last 10 minutes: calls started, successes, failures (breaker failures and rate
limits) and summed success latency.  ``snapshot()`` returns the totals a strategy
reads (``p2c``, ``least-used``, ``quota-weighted``).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

WINDOW_MINUTES = 10  # spec 03 §8.7


@dataclass(slots=True)
class _Minute:
    minute: int
    calls: int = 0
    successes: int = 0
    failures: int = 0
    latency_ms_sum: float = 0.0


@dataclass(slots=True)
class _Target:
    in_flight: int = 0
    minutes: deque[_Minute] = field(
        default_factory=lambda: deque(maxlen=WINDOW_MINUTES)
    )

    def bucket(self, now: float) -> _Minute:
        minute = int(now // 60)
        if not self.minutes or self.minutes[-1].minute != minute:
            self.minutes.append(_Minute(minute))
        return self.minutes[-1]


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    in_flight: int
    calls: int
    successes: int
    failures: int
    success_latency_ms_sum: float


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
        with self._lock:
            target = self._targets.get(key)
            if target is None:
                return TargetSnapshot(0, 0, 0, 0, 0.0)
            oldest = int(now // 60) - WINDOW_MINUTES + 1
            live = [m for m in target.minutes if m.minute >= oldest]
            return TargetSnapshot(
                in_flight=target.in_flight,
                calls=sum(m.calls for m in live),
                successes=sum(m.successes for m in live),
                failures=sum(m.failures for m in live),
                success_latency_ms_sum=sum(m.latency_ms_sum for m in live),
            )


stats = TargetStats()
