"""The Overview's attempt figures from ``UsageHourly`` and the log (spec 06 §4.1).

``compute_reliability_24h`` rewrites ``UsageHourly`` for the current UTC hour and the
two before it every 10 minutes, so an hour has rows only if the job ran during it or
within two hours after it.  An hour is *covered* when it has rows and every one was
written at or after the hour's end (``computed_at``): only then do they hold all its
attempts.  The Overview reads covered hours from ``UsageHourly`` and every other hour
of the period (the current one, hours the job missed or last wrote while they were
still running, rows older than ``computed_at``) from ``AttemptLog``, so attempts,
success rates, tokens and costs equal a read of the log alone.

Queries, each over an index range of its table:

1. ``covered_hours``: the period's hours that have rows (at most 24 x 30 result rows);
2. ``hourly_parts``: covered rows summed per (bucket, provider, model, connection);
3. ``log_parts``: the log's attempts of the other hours, grouped the same way, with
   ``percentile_disc`` on PostgreSQL; elsewhere one more query ranks a capped sample
   of the newest successful attempts in Python.

``table`` turns parts into the Overview's provider/model and connection rows (the
log read without percentile aggregates uses it too, over ``target_parts``).

Percentiles of different hours cannot be merged exactly.  A part carries its p50,
p95 and p95 TTFT, each with a weight (its successful attempts with a latency, or with
a TTFT), and a bucket, table row or card shows the weighted mean of its parts'
percentiles: exact for a single part, an approximation otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    IntegerField,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Cast, Trunc

HOUR = timedelta(hours=1)
SUCCESS = "success"
CLIENT_CAUSED = ("cancelled", "client_error")  # not samples (spec 06 §3.4)

#: [start, end) of consecutive hours; an end of None leaves the range open
Range = tuple[datetime, datetime | None]
#: (bucket, provider, model, connection)
GroupKey = tuple[datetime, str, str, str]
K = TypeVar("K", bound=Hashable)


class PercentileDisc(Aggregate):
    """PostgreSQL's ``percentile_disc(p) WITHIN GROUP (ORDER BY expr)``."""

    function = "PERCENTILE_DISC"
    name = "PercentileDisc"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: str, percent: int, **extra: Any) -> None:
        if not 0 < percent <= 100:  # noqa: PLR2004
            raise ValueError("percent must be in 1..100")
        super().__init__(
            expression,
            fraction=f"{percent / 100:.2f}",
            output_field=IntegerField(),
            **extra,
        )


def nearest_rank(values: Sequence[int], percent: int) -> int | None:
    """The value at position ⌈percent/100 × n⌉ of the sorted values (1-based)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, -(-percent * len(ordered) // 100) - 1)]


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def bucket_of(moment: datetime, unit: str) -> datetime:
    """The start of the ``unit`` ("hour" or "day", UTC) that ``moment`` falls in."""
    hour = hour_of(moment)
    return hour if unit == "hour" else hour.replace(hour=0)


@dataclass(slots=True)
class Mean:
    """A weighted mean of percentiles: ``total`` is the sum of value x weight."""

    total: float = 0.0
    weight: int = 0

    def add(self, value: float | None, weight: int) -> None:
        if value is not None and weight > 0:
            self.total += value * weight
            self.weight += weight

    def merge(self, other: Mean) -> None:
        self.total += other.total
        self.weight += other.weight

    @property
    def value(self) -> int | None:
        return round(self.total / self.weight) if self.weight else None


@dataclass(slots=True, kw_only=True)
class UsageRow:
    """One provider/model or provider/connection over the period."""

    provider: str
    name: str  # the model id or the connection name
    attempts: int = 0
    samples: int = 0  # attempts, less client-caused ones
    ok: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: Decimal | None = None
    p50_latency_ms: int | None = None
    p95_latency_ms: int | None = None
    p95_ttft_ms: int | None = None

    @property
    def success_pct(self) -> float | None:
        return 100.0 * self.ok / self.samples if self.samples else None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(slots=True, kw_only=True)
class Part:
    """The attempts of one bucket and target, from hourly rows or from the log."""

    bucket: datetime
    provider: str
    model: str
    connection: str
    attempts: int = 0
    samples: int = 0  # attempts, less client-caused ones
    ok: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: Decimal | None = None
    p50_latency: Mean = field(default_factory=Mean)
    p95_latency: Mean = field(default_factory=Mean)
    p95_ttft: Mean = field(default_factory=Mean)

    def merge(self, other: Part) -> None:
        self.attempts += other.attempts
        self.samples += other.samples
        self.ok += other.ok
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        if other.cost is not None:
            self.cost = (self.cost or Decimal(0)) + other.cost
        self.p50_latency.merge(other.p50_latency)
        self.p95_latency.merge(other.p95_latency)
        self.p95_ttft.merge(other.p95_ttft)


def rollup(parts: Iterable[Part], key: Callable[[Part], K]) -> dict[K, Part]:
    """The parts merged by ``key`` into new parts (the inputs stay as they are)."""
    merged: dict[K, Part] = {}
    for part in parts:
        name = key(part)
        total = merged.get(name)
        if total is None:
            total = merged[name] = Part(
                bucket=part.bucket,
                provider=part.provider,
                model=part.model,
                connection=part.connection,
            )
        total.merge(part)
    return merged


def table(parts: Iterable[Part], key: str, limit: int) -> tuple[list[UsageRow], bool]:
    """The per-(provider, ``key``) table ("model" or "connection"), busiest first as
    the log query orders it, at most ``limit`` rows; True when rows were cut."""
    merged = rollup(parts, lambda p: (p.provider, getattr(p, key)))
    rows = sorted(
        (
            UsageRow(
                provider=provider,
                name=name,
                attempts=part.attempts,
                samples=part.samples,
                ok=part.ok,
                prompt_tokens=part.prompt_tokens,
                completion_tokens=part.completion_tokens,
                cost=part.cost,
                p50_latency_ms=part.p50_latency.value,
                p95_latency_ms=part.p95_latency.value,
                p95_ttft_ms=part.p95_ttft.value,
            )
            for (provider, name), part in merged.items()
        ),
        key=lambda row: (-row.attempts, row.provider, row.name),
    )
    return rows[:limit], len(rows) > limit


# Which hours come from where.


def covered_hours(start: datetime, end: datetime) -> set[datetime]:
    """The hours in [start, end) whose rows all were written after the hour ended."""
    from telemetry.models import UsageHourly

    rows = (
        UsageHourly.objects.filter(hour__gte=start, hour__lt=end)
        .order_by()
        .values("hour")
        .annotate(
            first_computed=Min("computed_at"),
            unknown=Count("pk", filter=Q(computed_at__isnull=True)),
        )
    )
    return {
        hour_of(row["hour"])
        for row in rows
        if not row["unknown"] and row["first_computed"] >= row["hour"] + HOUR
    }


def split_hours(
    start: datetime, end: datetime, covered: set[datetime]
) -> tuple[list[Range], list[Range]]:
    """[start, end), hour by hour, as runs of covered hours and runs of the others.

    The last run of other hours is left open, so attempts stamped ahead of this
    clock count as they do in a read of the log alone."""
    runs: dict[bool, list[Range]] = {True: [], False: []}
    hour = start
    while hour < end:
        same = runs[hour in covered]
        if same and same[-1][1] == hour:
            same[-1] = (same[-1][0], hour + HOUR)
        else:
            same.append((hour, hour + HOUR))
        hour += HOUR
    others = runs[False]
    if others and others[-1][1] == end:
        others[-1] = (others[-1][0], None)
    return runs[True], others


def in_ranges(field_name: str, ranges: Sequence[Range]) -> Q:
    found = Q()
    for start, end in ranges:
        bounds = {f"{field_name}__gte": start}
        if end is not None:
            bounds[f"{field_name}__lt"] = end
        found |= Q(**bounds)
    return found


# The two sources.


def hourly_parts(ranges: Sequence[Range], unit: str, where: Q) -> list[Part]:
    """Covered ``UsageHourly`` rows summed per (bucket, provider, model, connection)."""
    from telemetry.models import UsageHourly

    if not ranges:
        return []
    ok = Cast(F("samples") - F("failures"), FloatField())
    rows = (
        UsageHourly.objects.filter(in_ranges("hour", ranges))
        .filter(where)
        .order_by()
        .annotate(bucket=Trunc("hour", unit, tzinfo=UTC))
        .values("bucket", "provider", "model", "connection")
        .annotate(
            n_attempts=Sum("attempts"),
            n_samples=Sum("samples"),
            n_failures=Sum("failures"),
            n_prompt=Sum("prompt_tokens"),
            n_completion=Sum("completion_tokens"),
            n_cost=Sum("cost_usd"),
            p50_total=Sum(Cast("p50_latency_ms", FloatField()) * ok),
            p95_total=Sum(Cast("p95_latency_ms", FloatField()) * ok),
            latency_weight=Sum(ok, filter=Q(p95_latency_ms__isnull=False)),
            ttft_total=Sum(Cast("p95_ttft_ms", FloatField()) * ok),
            ttft_weight=Sum(ok, filter=Q(p95_ttft_ms__isnull=False)),
        )
    )
    parts = []
    for row in rows:
        samples, failures = int(row["n_samples"]), int(row["n_failures"])
        latency_weight = int(row["latency_weight"] or 0)
        ttft_weight = int(row["ttft_weight"] or 0)
        parts.append(
            Part(
                bucket=bucket_of(row["bucket"], unit),
                provider=row["provider"],
                model=row["model"],
                connection=row["connection"],
                attempts=int(row["n_attempts"]),
                samples=samples,
                ok=samples - failures,
                prompt_tokens=int(row["n_prompt"] or 0),
                completion_tokens=int(row["n_completion"] or 0),
                cost=row["n_cost"],
                p50_latency=Mean(float(row["p50_total"] or 0), latency_weight),
                p95_latency=Mean(float(row["p95_total"] or 0), latency_weight),
                p95_ttft=Mean(float(row["ttft_total"] or 0), ttft_weight),
            )
        )
    return parts


def log_parts(
    ranges: Sequence[Range], unit: str, where: Q, *, exact: bool, sample_rows: int
) -> tuple[list[Part], bool]:
    """The log's attempts in ``ranges`` per (bucket, provider, model, connection);
    True when the Python sample of successful attempts reached ``sample_rows``."""
    from telemetry.models import AttemptLog

    if not ranges:
        return [], False
    attempts = (
        AttemptLog.objects.filter(in_ranges("started_at", ranges))
        .filter(where)
        .order_by()
    )
    ok = Q(result=SUCCESS)
    percentiles: dict[str, Aggregate] = {}
    if exact:
        percentiles = {
            "p50": PercentileDisc("latency_ms", 50, filter=ok),
            "p95": PercentileDisc("latency_ms", 95, filter=ok),
            "ttft95": PercentileDisc("ttft_ms", 95, filter=ok),
        }
    rows = (
        attempts.annotate(bucket=Trunc("started_at", unit, tzinfo=UTC))
        .values("bucket", "provider", "model", "connection")
        .annotate(
            n_attempts=Count("id"),
            n_samples=Count("id", filter=~Q(result__in=CLIENT_CAUSED)),
            n_ok=Count("id", filter=ok),
            n_prompt=Sum("prompt_tokens"),
            n_completion=Sum("completion_tokens"),
            n_cost=Sum("cost_usd"),
            n_latency=Count("latency_ms", filter=ok),
            n_ttft=Count("ttft_ms", filter=ok),
            **percentiles,
        )
    )
    found: dict[GroupKey, tuple[Part, dict[str, Any]]] = {}
    for row in rows:
        values: dict[str, Any] = dict(row)
        part = Part(
            bucket=bucket_of(row["bucket"], unit),
            provider=row["provider"],
            model=row["model"],
            connection=row["connection"],
            attempts=row["n_attempts"],
            samples=row["n_samples"],
            ok=row["n_ok"],
            prompt_tokens=int(row["n_prompt"] or 0),
            completion_tokens=int(row["n_completion"] or 0),
            cost=row["n_cost"],
        )
        found[(part.bucket, part.provider, part.model, part.connection)] = (
            part,
            values,
        )
    sampled = False
    if not exact:
        sampled = _rank_sample(attempts, found, unit, sample_rows)
    for part, values in found.values():
        part.p50_latency.add(values.get("p50"), values["n_latency"])
        part.p95_latency.add(values.get("p95"), values["n_latency"])
        part.p95_ttft.add(values.get("ttft95"), values["n_ttft"])
    return [part for part, _ in found.values()], sampled


def _rank_sample(
    attempts: QuerySet[Any],
    found: dict[GroupKey, tuple[Part, dict[str, Any]]],
    unit: str,
    sample_rows: int,
) -> bool:
    """Fill p50/p95/TTFT of each group from the newest successful attempts."""
    rows = list(
        attempts.filter(result=SUCCESS)
        .order_by("-started_at")
        .values_list(
            "started_at", "provider", "model", "connection", "latency_ms", "ttft_ms"
        )[:sample_rows]
    )
    latency: dict[GroupKey, list[int]] = defaultdict(list)
    ttft: dict[GroupKey, list[int]] = defaultdict(list)
    for started, provider, model, conn, latency_ms, ttft_ms in rows:
        key = (bucket_of(started, unit), provider, model, conn)
        if latency_ms is not None:
            latency[key].append(latency_ms)
        if ttft_ms is not None:
            ttft[key].append(ttft_ms)
    for key, (_, values) in found.items():
        values["p50"] = nearest_rank(latency[key], 50)
        values["p95"] = nearest_rank(latency[key], 95)
        values["ttft95"] = nearest_rank(ttft[key], 95)
    return len(rows) == sample_rows


def target_parts(attempts: QuerySet[Any], since: datetime) -> list[Part]:
    """The log's attempts per (provider, model, connection) in one query, no
    percentile: both tables of a log read without percentile aggregates."""
    rows = attempts.values("provider", "model", "connection").annotate(
        n_attempts=Count("id"),
        n_samples=Count("id", filter=~Q(result__in=CLIENT_CAUSED)),
        n_ok=Count("id", filter=Q(result=SUCCESS)),
        n_prompt=Sum("prompt_tokens"),
        n_completion=Sum("completion_tokens"),
        n_cost=Sum("cost_usd"),
    )
    return [
        Part(
            bucket=since,
            provider=row["provider"],
            model=row["model"],
            connection=row["connection"],
            attempts=row["n_attempts"],
            samples=row["n_samples"],
            ok=row["n_ok"],
            prompt_tokens=row["n_prompt"] or 0,
            completion_tokens=row["n_completion"] or 0,
            cost=row["n_cost"],
        )
        for row in rows
    ]
