"""The 24 h statistics in memory: ``ReliabilityStat`` rows for the auto engine.

Spec 04 §3.1 sources 1 and 2 are the job's rows of a candidate's (provider, model,
connection) and of its (provider, model, ``*``).  A request must never query the
database, so a daemon thread loads every row with one query at start-up and then
every ``REFRESH_SECONDS``, converts each row to the engine's ``Stats`` once, and swaps
the whole map in (one assignment).  A failed refresh keeps the previous map.

A row "has data" when at least one of its statistics is known; the job writes nulls
below ten samples (spec 06 §3.4), and such a row gives way to the next source.
``std`` is derived from the percentiles, never stored:
``max(10, (p95 - p50) / 1.645)``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from gateway.auto.engine.decide import Stats
from gateway.config.refreshed import RefreshedCache

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 60.0
MIN_STD_MS = 10.0  # spec 04 §3.1
Z_95 = 1.645  # (p95 - p50) / z95 is the spread of a normal distribution
ALL_CONNECTIONS = "*"  # telemetry.models.ReliabilityStat.ALL_CONNECTIONS
COLUMNS = (
    "provider",
    "model",
    "connection",
    "failure_rate",
    "good_rate",
    "p50_latency_ms",
    "p95_latency_ms",
)

StatsKey = tuple[str, str, str]


def derived_std_ms(p50_ms: float | None, p95_ms: float | None) -> float | None:
    if p50_ms is None or p95_ms is None:
        return None
    return max(MIN_STD_MS, (p95_ms - p50_ms) / Z_95)


def stats_of(
    failure_rate: float | None,
    good_rate: float | None,
    p50_ms: float | None,
    p95_ms: float | None,
) -> Stats | None:
    """The engine's view of one row; None when the row knows nothing."""
    if failure_rate is None and good_rate is None and p95_ms is None:
        return None
    return Stats(
        p95_ms=None if p95_ms is None else float(p95_ms),
        std_ms=derived_std_ms(p50_ms, p95_ms),
        failure_rate=failure_rate,
        good_rate=good_rate,
    )


def build_map(rows: Iterable[tuple[Any, ...]]) -> dict[StatsKey, Stats]:
    """``COLUMNS``-ordered rows -> the lookup map (rows without data left out)."""
    found: dict[StatsKey, Stats] = {}
    for provider, model, connection, failure, good, p50, p95 in rows:
        stats = stats_of(failure, good, p50, p95)
        if stats is not None:
            found[(provider, model, connection)] = stats
    return found


class StatsCache(RefreshedCache[StatsKey, Stats]):
    label = "stats"
    refresh_seconds = REFRESH_SECONDS

    def lookup(self, provider: str, model: str, connection: str) -> Stats | None:
        """Source 1, else source 2 of spec 04 §3.1; None when neither has data."""
        rows = self._rows
        found = rows.get((provider, model, connection))
        if found is None:
            found = rows.get((provider, model, ALL_CONNECTIONS))
        return found

    def refresh(self) -> int:
        """Reload every row now (sync ORM; never on the event loop thread)."""
        from telemetry.models import ReliabilityStat

        found = build_map(ReliabilityStat.objects.values_list(*COLUMNS))
        self.load(found)
        return len(found)


cache = StatsCache()
