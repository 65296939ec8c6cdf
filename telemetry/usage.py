"""Hourly usage rows for the dashboards (spec 06 §3.4, §4.1).

Each run of ``compute_reliability_24h`` rewrites the current UTC hour and the two
before it from the attempt log: one ``UsageHourly`` row per (hour, provider, model,
connection) that had attempts, by upsert, and the rows of those hours whose group has
no attempts any more are deleted.  Older hours are never touched, so a second run
over the same attempts changes nothing (idempotent).

Each row also records the run's clock (``computed_at``): the Overview dashboard reads
an hour from these rows only once a run has rewritten it after the hour ended.

Counting follows ``telemetry.attempt_counts``, as the 24 h statistics do: ``attempts``
are all rows, ``samples`` leave out ``cancelled`` and ``client_error``, ``failures``
are non-success samples, percentiles are nearest-rank over the successes.  Unlike the
24 h statistics, an hour reports its percentiles from the first success on: these are
descriptive figures for people, not routing inputs.  Tokens and cost sum every
attempt (a failed attempt may still be billed upstream); ``cost_usd`` is null when no
attempt had a known price.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from telemetry.attempt_counts import (
    AttemptRow,
    Tally,
    count_changes,
    percentile_or_none,
)

HOUR = timedelta(hours=1)
REWRITTEN_HOURS = 3  # spec 06 §3.4: the current hour and the two previous ones
MIN_PERCENTILE_COUNT = 1

UsageKey = tuple[datetime, str, str, str]


def hour_of(moment: datetime) -> datetime:
    """The UTC hour ``moment`` falls in."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def rewritten_hours(now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the hours one run rewrites."""
    end = hour_of(now) + HOUR
    return end - REWRITTEN_HOURS * HOUR, end


@dataclass(slots=True)
class _HourTally:
    counts: Tally = field(default_factory=Tally)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: Decimal | None = None

    def add(self, row: AttemptRow) -> None:
        self.counts.add(row)
        self.prompt_tokens += row.prompt_tokens or 0
        self.completion_tokens += row.completion_tokens or 0
        self.cached_tokens += row.cached_tokens or 0
        if row.cost_usd is not None:
            self.cost_usd = (self.cost_usd or Decimal(0)) + row.cost_usd


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord:
    """One ``UsageHourly`` row, as computed."""

    hour: datetime
    provider: str
    model: str
    connection: str
    attempts: int
    samples: int
    failures: int
    p50_latency_ms: int | None
    p95_latency_ms: int | None
    p95_ttft_ms: int | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: Decimal | None

    @property
    def key(self) -> UsageKey:
        return (self.hour, self.provider, self.model, self.connection)

    def as_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


KEY_FIELDS = ("hour", "provider", "model", "connection")
VALUE_FIELDS = tuple(f.name for f in fields(UsageRecord) if f.name not in KEY_FIELDS)


class HourlyTally:
    """Per-(hour, provider, model, connection) tallies of [start, end)."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start = start
        self.end = end
        self._groups: dict[UsageKey, _HourTally] = {}

    def add(self, row: AttemptRow) -> None:
        # An attempt stamped in a later hour (clock skew between workers) waits for
        # the run that rewrites that hour.
        if not self.start <= row.started_at < self.end:
            return
        key = (hour_of(row.started_at), row.provider, row.model, row.connection)
        tally = self._groups.get(key)
        if tally is None:
            tally = self._groups[key] = _HourTally()
        tally.add(row)

    def records(self) -> list[UsageRecord]:
        return [self._record(key, t) for key, t in sorted(self._groups.items())]

    @staticmethod
    def _record(key: UsageKey, tally: _HourTally) -> UsageRecord:
        counts = tally.counts
        return UsageRecord(
            hour=key[0],
            provider=key[1],
            model=key[2],
            connection=key[3],
            attempts=counts.attempts,
            samples=counts.samples,
            failures=counts.failures,
            p50_latency_ms=percentile_or_none(
                counts.latencies, 50, MIN_PERCENTILE_COUNT
            ),
            p95_latency_ms=percentile_or_none(
                counts.latencies, 95, MIN_PERCENTILE_COUNT
            ),
            p95_ttft_ms=percentile_or_none(counts.ttfts, 95, MIN_PERCENTILE_COUNT),
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            cached_tokens=tally.cached_tokens,
            cost_usd=tally.cost_usd,
        )


def compute_hourly(
    rows: Iterable[AttemptRow], start: datetime, end: datetime
) -> list[UsageRecord]:
    """The ``UsageHourly`` records of the hours in [start, end) (pure)."""
    tally = HourlyTally(start, end)
    for row in rows:
        tally.add(row)
    return tally.records()


@dataclass(frozen=True, slots=True, kw_only=True)
class UsagePlan:
    records: Sequence[UsageRecord]
    created: int
    updated: int
    unchanged: int
    #: primary keys of stored rows of the rewritten hours that have no record now
    deleted: Sequence[int]

    @property
    def is_change(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def plan(records: Sequence[UsageRecord], start: datetime, end: datetime) -> UsagePlan:
    """Diff the computed hours against the stored ones (one query)."""
    from telemetry.models import UsageHourly

    stored: dict[tuple[Any, ...], tuple[int, tuple[Any, ...]]] = {}
    query = UsageHourly.objects.filter(hour__gte=start, hour__lt=end)
    for pk, *values in query.values_list("pk", *KEY_FIELDS, *VALUE_FIELDS):
        split = len(KEY_FIELDS)
        stored[tuple(values[:split])] = (pk, tuple(values[split:]))
    created, updated, unchanged, deleted = count_changes(records, stored, VALUE_FIELDS)
    return UsagePlan(
        records=records,
        created=created,
        updated=updated,
        unchanged=unchanged,
        deleted=deleted,
    )


def apply(usage_plan: UsagePlan, *, computed_at: datetime) -> None:
    """Upsert the hours' rows and delete the stale ones; call inside a transaction.

    Every row is written, unchanged ones too, so ``computed_at`` tells the
    dashboards which hours were rewritten after they ended (complete); it is not
    compared by ``plan``, so an unchanged hour stays ``unchanged``."""
    from telemetry.models import UsageHourly

    if usage_plan.records:
        UsageHourly.objects.bulk_create(
            [
                UsageHourly(**record.as_fields(), computed_at=computed_at)
                for record in usage_plan.records
            ],
            update_conflicts=True,
            unique_fields=KEY_FIELDS,
            update_fields=(*VALUE_FIELDS, "computed_at"),
        )
    if usage_plan.deleted:
        UsageHourly.objects.filter(pk__in=usage_plan.deleted).delete()
