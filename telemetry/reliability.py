"""The 24 h reliability statistics (spec 06 §3.4) that the auto engine reads (04 §3.1).

Algorithm, over the ``AttemptLog`` rows with ``started_at >= now - 24 h``, grouped by
(provider, model, connection) and once more by (provider, model) under the connection
``"*"``:

* ``samples``: attempts except ``cancelled`` and ``client_error`` (the client's doing);
* ``failures``: samples whose result is not ``success`` (429, auth and not-found too);
* ``failure_rate = failures / samples``, ``reliability = 1 - failure_rate``: null
  below ``MIN_COUNT`` samples;
* ``good_rate = success / (success + empty_response + stream_interrupted)``: null when
  that denominator is below ``MIN_COUNT``;
* ``p50_latency_ms``, ``p95_latency_ms``: nearest-rank percentiles of the successes'
  ``latency_ms`` (null below ``MIN_COUNT`` successes); ``p95_ttft_ms`` the same over
  the ``ttft_ms`` of successful streaming attempts.

Invariants: a group with no samples yields no row; nearest rank is the value at
position ceil(p/100 * n) of the ascending list, which equals PostgreSQL's
``percentile_disc``, so every backend computes it here, in Python, identically.
``compute`` is pure (rows and ``now`` in, records out); ``refresh`` is the job's
database side and also rewrites the last three ``UsageHourly`` hours from the same
single pass over the rows.  The counting rules both tables share (``AttemptRow``,
``Tally``, nearest rank) are ``telemetry.attempt_counts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from telemetry import usage
from telemetry.attempt_counts import (
    AttemptRow,
    Tally,
    count_changes,
    percentile_or_none,
)
from telemetry.usage import UsagePlan

WINDOW = timedelta(hours=24)
MIN_COUNT = 10  # spec 06 §3.4: every statistic is null below ten of its inputs
ALL_CONNECTIONS = "*"
FETCH_CHUNK_ROWS = 5000


#: ORM paths of ``AttemptRow``'s fields, in order (``stream`` is the request's)
ROW_COLUMNS = tuple(
    "request__stream" if name == "stream" else name for name in AttemptRow._fields
)

GroupKey = tuple[str, str, str]


def as_row(row: AttemptRow | Mapping[str, Any] | tuple[Any, ...]) -> AttemptRow:
    """An ``AttemptRow`` from a mapping of its field names or a tuple in its order."""
    if isinstance(row, AttemptRow):
        return row
    if isinstance(row, Mapping):
        return AttemptRow(**{k: row[k] for k in AttemptRow._fields if k in row})
    return AttemptRow._make(row)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatRecord:
    """One ``ReliabilityStat`` row, as computed."""

    provider: str
    model: str
    connection: str
    samples: int
    failures: int
    failure_rate: float | None
    reliability: float | None
    good_rate: float | None
    p50_latency_ms: int | None
    p95_latency_ms: int | None
    p95_ttft_ms: int | None
    window_start: datetime
    window_end: datetime
    computed_at: datetime

    @property
    def key(self) -> GroupKey:
        return (self.provider, self.model, self.connection)

    def as_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: the fields that say whether a stored row changed (not the moving window)
STAT_FIELDS = (
    "samples",
    "failures",
    "failure_rate",
    "reliability",
    "good_rate",
    "p50_latency_ms",
    "p95_latency_ms",
    "p95_ttft_ms",
)


class ReliabilityTally:
    """Per-group tallies of the 24 h window; ``records`` turns them into rows."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.window_start = now - WINDOW
        self.groups: dict[GroupKey, Tally] = {}

    def add(self, row: AttemptRow) -> None:
        if row.started_at < self.window_start:
            return
        for key in (
            (row.provider, row.model, row.connection),
            (row.provider, row.model, ALL_CONNECTIONS),
        ):
            tally = self.groups.get(key)
            if tally is None:
                tally = self.groups[key] = Tally()
            tally.add(row)

    def records(self) -> list[StatRecord]:
        """One record per group with samples, sorted by key."""
        return [
            self._record(key, tally)
            for key, tally in sorted(self.groups.items())
            if tally.samples > 0
        ]

    def _record(self, key: GroupKey, tally: Tally) -> StatRecord:
        failure_rate = (
            tally.failures / tally.samples if tally.samples >= MIN_COUNT else None
        )
        good_base = tally.successes + tally.bad_output
        return StatRecord(
            provider=key[0],
            model=key[1],
            connection=key[2],
            samples=tally.samples,
            failures=tally.failures,
            failure_rate=failure_rate,
            reliability=None if failure_rate is None else 1.0 - failure_rate,
            good_rate=tally.successes / good_base if good_base >= MIN_COUNT else None,
            p50_latency_ms=percentile_or_none(tally.latencies, 50, MIN_COUNT),
            p95_latency_ms=percentile_or_none(tally.latencies, 95, MIN_COUNT),
            p95_ttft_ms=percentile_or_none(tally.ttfts, 95, MIN_COUNT),
            window_start=self.window_start,
            window_end=self.now,
            computed_at=self.now,
        )


def compute(
    rows: Iterable[AttemptRow | Mapping[str, Any] | tuple[Any, ...]], now: datetime
) -> list[StatRecord]:
    """The ``ReliabilityStat`` records of the 24 h before ``now`` (pure)."""
    tally = ReliabilityTally(now)
    for row in rows:
        tally.add(as_row(row))
    return tally.records()


def fetch_rows(since: datetime) -> Iterator[AttemptRow]:
    """Every attempt that started at or after ``since``: one query, streamed."""
    from telemetry.models import AttemptLog

    query = AttemptLog.objects.filter(started_at__gte=since).order_by()
    for values in query.values_list(*ROW_COLUMNS).iterator(chunk_size=FETCH_CHUNK_ROWS):
        yield AttemptRow._make(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatPlan:
    records: list[StatRecord]
    created: int
    updated: int
    unchanged: int
    #: primary keys of stored rows whose group had no samples in the window
    deleted: list[int]

    @property
    def is_change(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def plan(records: list[StatRecord]) -> StatPlan:
    """Diff the records against the stored rows (one query)."""
    from telemetry.models import ReliabilityStat

    stored: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]] = {}
    rows = ReliabilityStat.objects.values_list(
        "pk", "provider", "model", "connection", *STAT_FIELDS
    )
    for pk, provider, model, connection, *values in rows:
        stored[(provider, model, connection)] = (pk, tuple(values))
    created, updated, unchanged, deleted = count_changes(records, stored, STAT_FIELDS)
    return StatPlan(
        records=records,
        created=created,
        updated=updated,
        unchanged=unchanged,
        deleted=deleted,
    )


def apply(stat_plan: StatPlan) -> None:
    """Replace the rows: upsert every record (the window moves on unchanged rows
    too) and delete the groups without samples; call inside a transaction."""
    from telemetry.models import ReliabilityStat

    if stat_plan.records:
        ReliabilityStat.objects.bulk_create(
            [ReliabilityStat(**record.as_fields()) for record in stat_plan.records],
            update_conflicts=True,
            unique_fields=("provider", "model", "connection"),
            update_fields=(
                *STAT_FIELDS,
                "window_start",
                "window_end",
                "computed_at",
            ),
        )
    if stat_plan.deleted:
        ReliabilityStat.objects.filter(pk__in=stat_plan.deleted).delete()


@dataclass(frozen=True, slots=True, kw_only=True)
class RefreshResult:
    stats: StatPlan
    usage: UsagePlan

    @property
    def is_change(self) -> bool:
        return self.stats.is_change or self.usage.is_change

    def as_counts(self) -> dict[str, int]:
        """``JobRun.counts``: the statistics rows, then the hourly rows."""
        return {
            "created": self.stats.created,
            "updated": self.stats.updated,
            "unchanged": self.stats.unchanged,
            "deleted": len(self.stats.deleted),
            "usage_created": self.usage.created,
            "usage_updated": self.usage.updated,
            "usage_unchanged": self.usage.unchanged,
            "usage_deleted": len(self.usage.deleted),
        }


def refresh(now: datetime, *, dry_run: bool = False) -> RefreshResult:
    """The job's work: one pass over the attempts of the window feeds both the
    24 h statistics and the last three hours of usage; then both tables are
    rewritten in one transaction (nothing is written on a dry run)."""
    from django.db import transaction

    stats = ReliabilityTally(now)
    hours_start, hours_end = usage.rewritten_hours(now)
    hourly = usage.HourlyTally(hours_start, hours_end)
    for row in fetch_rows(min(stats.window_start, hours_start)):
        stats.add(row)
        hourly.add(row)
    counts = RefreshResult(
        stats=plan(stats.records()),
        usage=usage.plan(hourly.records(), hours_start, hours_end),
    )
    if not dry_run:
        with transaction.atomic():
            apply(counts.stats)
            usage.apply(counts.usage, computed_at=now)
    return counts
