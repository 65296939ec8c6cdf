"""The numbers of the telemetry Overview dashboard (spec 06 §4.1).

``build_overview(period, filters, now)`` covers a period (24 h in hours, 7 d or
30 d in UTC days) with exact-match filters (provider, served model, route, API key
prefix) and a fixed number of aggregate queries, whatever the row count.  It reads
one of two ways.

**From the log** (a route or API-key filter is set, or no hour of the period is
covered by ``UsageHourly``, see ``telemetry.overview_hourly``):

1. the filter choices: distinct (provider, served model, route, key prefix) of
   the period, at most ``CHOICE_ROWS``;
2. requests per bucket: count, successes, cost, p95 latency and TTFT;
3. attempts per provider/model and 4. per provider/connection: attempts,
   successes, samples, tokens, cost, percentiles, at most ``TABLE_ROWS`` each
   (without percentile aggregates, one query per (provider, model, connection)
   feeds both tables).

Percentiles are nearest-rank over successful requests (cards, latency chart) or
attempts (tables), the value at position ⌈p/100 × n⌉ as in spec 06 §3.4.  On
PostgreSQL they are ``percentile_disc`` aggregates inside queries 2-4, plus one
query for the period's cards.  Elsewhere (embedded SQLite) two capped samples of the
newest successful rows (requests, attempts; ``SAMPLE_ROWS`` each) are ranked in
Python; ``Overview.sampled`` tells when a cap was reached.  5 queries either way,
plus the coverage query of ``telemetry.overview_hourly`` when no route or API-key
filter is set.

**From hourly rows** (no route or API-key filter, and ``UsageHourly`` covers at
least one finished hour of the period), so that 30 days of a million log rows stay
under a second: requests per bucket (count, successes, cost) still come from
``RequestLog``, one pass with plain COUNT/SUM; every attempt figure (tables, the
latency chart, the p95 card) comes from ``UsageHourly`` for covered hours and from
``AttemptLog`` for the others, the current hour always among them.  Counts, rates,
tokens and costs are the same as from the log.  Latency figures are then per
successful *attempt*, and where hours or targets are combined they are means of
percentiles weighted by successes (``Overview.hourly_hours`` > 0 says so).  5 queries
with the coverage query (6 off PostgreSQL).

A request's success is ``status == success``; an attempt's success rate leaves out
client-caused attempts (``cancelled``, ``client_error``) as the reliability
statistics do.  Request cost is what keys were charged; attempt cost is every
attempt's upstream cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, Q, QuerySet, Sum
from django.db.models.functions import Trunc

from telemetry import overview_hourly as hourly
from telemetry.models import AttemptLog, RequestLog
from telemetry.overview_hourly import (
    CLIENT_CAUSED,
    PercentileDisc,
    UsageRow,
    nearest_rank,
)

CHOICE_ROWS = 2000  # distinct filter combinations read for the dropdowns
TABLE_ROWS = 100  # provider/model and connection rows shown, busiest first
SAMPLE_ROWS = 50_000  # newest successful rows ranked in Python off PostgreSQL
FILTER_MAX_CHARS = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Period:
    key: str
    label: str
    unit: str  # "minute" | "hour" | "day": the Trunc kind and the chart's step
    buckets: int

    @property
    def step(self) -> timedelta:
        return {
            "minute": timedelta(minutes=1),
            "hour": timedelta(hours=1),
            "day": timedelta(days=1),
        }[self.unit]

    def starts(self, now: datetime) -> list[datetime]:
        """Bucket starts, oldest first; the last one holds ``now`` (UTC)."""
        end = self.floor(now)
        return [end - self.step * (self.buckets - 1 - i) for i in range(self.buckets)]

    def floor(self, moment: datetime) -> datetime:
        moment = moment.astimezone(UTC).replace(second=0, microsecond=0)
        if self.unit == "minute":
            return moment
        moment = moment.replace(minute=0)
        return moment if self.unit == "hour" else moment.replace(hour=0)

    def short_label(self, start: datetime) -> str:
        return start.strftime(_SHORT[self.unit])

    def long_label(self, start: datetime) -> str:
        return start.strftime(_LONG[self.unit])


_SHORT = {"minute": "%H:%M", "hour": "%H:00", "day": "%m-%d"}
_LONG = {"minute": "%Y-%m-%d %H:%M", "hour": "%Y-%m-%d %H:00", "day": "%Y-%m-%d"}

PERIODS = {
    p.key: p
    for p in (
        # issue #15: the last hour by minute (an incident is more than one dot)
        Period(key="1h", label="1 h", unit="minute", buckets=60),
        Period(key="24h", label="24 h", unit="hour", buckets=24),
        Period(key="7d", label="7 d", unit="day", buckets=7),
        Period(key="30d", label="30 d", unit="day", buckets=30),
    )
}
DEFAULT_PERIOD = "24h"


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    """Exact-match filters; an empty string means "all"."""

    provider: str = ""
    model: str = ""  # a served model, "provider/model"
    route: str = ""
    api_key: str = ""  # the key's display prefix

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        def read(name: str) -> str:
            return str(query.get(name, "")).strip()[:FILTER_MAX_CHARS]

        return cls(
            provider=read("provider"),
            model=read("model"),
            route=read("route"),
            api_key=read("api_key"),
        )

    @property
    def active(self) -> bool:
        return any((self.provider, self.model, self.route, self.api_key))

    def requests(self) -> Q:
        q = Q()
        if self.provider:
            q &= Q(provider=self.provider)
        if self.model:
            q &= Q(served_model=self.model)
        if self.route:
            q &= Q(route=self.route)
        if self.api_key:
            q &= Q(api_key_prefix=self.api_key)
        return q

    def attempts(self) -> Q:
        q = Q()
        if self.provider:
            q &= Q(provider=self.provider)
        if self.model:
            provider, _, model = self.model.partition("/")
            q &= Q(provider=provider, model=model)
        if self.route:
            q &= Q(request__route=self.route)
        if self.api_key:
            q &= Q(request__api_key_prefix=self.api_key)
        return q


def _exact_percentiles() -> bool:
    return connection.vendor == "postgresql"


@dataclass(slots=True, kw_only=True)
class Bucket:
    start: datetime
    label: str
    long_label: str
    requests: int = 0
    ok: int = 0
    cost: Decimal | None = None
    p95_latency_ms: int | None = None
    p95_ttft_ms: int | None = None

    @property
    def success_pct(self) -> float | None:
        return 100.0 * self.ok / self.requests if self.requests else None


@dataclass(slots=True, kw_only=True)
class Overview:
    period: Period
    since: datetime
    buckets: list[Bucket]
    totals: Bucket
    by_model: list[UsageRow]
    by_connection: list[UsageRow]
    choices: dict[str, list[str]]
    exact: bool  # percentiles of log rows by the database over every row
    sampled: bool = False  # a Python sample reached SAMPLE_ROWS
    tables_capped: bool = False
    #: finished hours whose attempt figures came from ``UsageHourly``; when > 0 the
    #: latency figures are per attempt and combined as weighted means (module doc)
    hourly_hours: int = 0
    notes: list[str] = field(default_factory=list)


def _request_percentiles(exact: bool) -> dict[str, Aggregate]:
    if not exact:
        return {}
    ok = Q(status=RequestLog.Status.SUCCESS)
    return {
        "p95_latency_ms": PercentileDisc("latency_ms", 95, filter=ok),
        "p95_ttft_ms": PercentileDisc("ttft_ms", 95, filter=ok),
    }


def _attempt_percentiles(exact: bool) -> dict[str, Aggregate]:
    if not exact:
        return {}
    ok = Q(result=AttemptLog.Result.SUCCESS)
    return {
        "p50_latency_ms": PercentileDisc("latency_ms", 50, filter=ok),
        "p95_latency_ms": PercentileDisc("latency_ms", 95, filter=ok),
        "p95_ttft_ms": PercentileDisc("ttft_ms", 95, filter=ok),
    }


def _choices(since: datetime) -> dict[str, list[str]]:
    combos = (
        RequestLog.objects.filter(created_at__gte=since)
        .order_by()
        .values_list("provider", "served_model", "route", "api_key_prefix")
        .distinct()[:CHOICE_ROWS]
    )
    found: dict[str, set[str]] = defaultdict(set)
    for provider, model, route, key in combos:
        for name, value in (
            ("provider", provider),
            ("model", model),
            ("route", route),
            ("api_key", key),
        ):
            if value:
                found[name].add(value)
    return {
        name: sorted(found[name]) for name in ("provider", "model", "route", "api_key")
    }


def _buckets(
    period: Period, requests: QuerySet[RequestLog], starts: list[datetime], exact: bool
) -> list[Bucket]:
    by_start = {
        start: Bucket(
            start=start,
            label=period.short_label(start),
            long_label=period.long_label(start),
        )
        for start in starts
    }
    rows = (
        requests.annotate(bucket=Trunc("created_at", period.unit, tzinfo=UTC))
        .values("bucket")
        .annotate(
            requests=Count("id"),
            ok=Count("id", filter=Q(status=RequestLog.Status.SUCCESS)),
            cost=Sum("cost_usd"),
            **_request_percentiles(exact),
        )
    )
    for row in rows:
        bucket = by_start.get(period.floor(row["bucket"]))
        if bucket is None:
            continue  # a clock ahead of this one; not in the period's buckets
        values: dict[str, Any] = dict(row)
        bucket.requests, bucket.ok, bucket.cost = (
            values["requests"],
            values["ok"],
            values["cost"],
        )
        bucket.p95_latency_ms = values.get("p95_latency_ms")
        bucket.p95_ttft_ms = values.get("p95_ttft_ms")
    return [by_start[start] for start in starts]


def _totals(buckets: Iterable[Bucket]) -> Bucket:
    items = list(buckets)
    costs = [b.cost for b in items if b.cost is not None]
    return Bucket(
        start=items[0].start,
        label="total",
        long_label="total",
        requests=sum(b.requests for b in items),
        ok=sum(b.ok for b in items),
        cost=sum(costs, Decimal(0)) if costs else None,
    )


def _sampled_request_percentiles(
    period: Period,
    requests: QuerySet[RequestLog],
    buckets: list[Bucket],
    totals: Bucket,
) -> bool:
    """Fill the p95s from the newest successful rows; True when capped."""
    rows = list(
        requests.filter(status=RequestLog.Status.SUCCESS)
        .order_by("-created_at")
        .values_list("created_at", "latency_ms", "ttft_ms")[:SAMPLE_ROWS]
    )
    latency: dict[datetime, list[int]] = defaultdict(list)
    ttft: dict[datetime, list[int]] = defaultdict(list)
    for created, latency_ms, ttft_ms in rows:
        start = period.floor(created)
        latency[start].append(latency_ms)
        if ttft_ms is not None:
            ttft[start].append(ttft_ms)
    for bucket in buckets:
        bucket.p95_latency_ms = nearest_rank(latency[bucket.start], 95)
        bucket.p95_ttft_ms = nearest_rank(ttft[bucket.start], 95)
    totals.p95_latency_ms = nearest_rank([v for vs in latency.values() for v in vs], 95)
    totals.p95_ttft_ms = nearest_rank([v for vs in ttft.values() for v in vs], 95)
    return len(rows) == SAMPLE_ROWS


def _usage_rows(
    attempts: QuerySet[AttemptLog], key: str, exact: bool
) -> tuple[list[UsageRow], bool]:
    rows = (
        attempts.values("provider", key)
        .annotate(
            attempts=Count("id"),
            samples=Count("id", filter=~Q(result__in=CLIENT_CAUSED)),
            ok=Count("id", filter=Q(result=AttemptLog.Result.SUCCESS)),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cost=Sum("cost_usd"),
            **_attempt_percentiles(exact),
        )
        .order_by("-attempts", "provider", key)[: TABLE_ROWS + 1]
    )
    found = [
        UsageRow(
            provider=row["provider"],
            name=row[key],
            attempts=row["attempts"],
            samples=row["samples"],
            ok=row["ok"],
            prompt_tokens=row["prompt_tokens"] or 0,
            completion_tokens=row["completion_tokens"] or 0,
            cost=row["cost"],
            p50_latency_ms=row.get("p50_latency_ms"),
            p95_latency_ms=row.get("p95_latency_ms"),
            p95_ttft_ms=row.get("p95_ttft_ms"),
        )
        for row in rows
    ]
    return found[:TABLE_ROWS], len(found) > TABLE_ROWS


def _sampled_attempt_percentiles(
    attempts: QuerySet[AttemptLog], by_model: list[UsageRow], by_conn: list[UsageRow]
) -> bool:
    rows = list(
        attempts.filter(result=AttemptLog.Result.SUCCESS)
        .order_by("-started_at")
        .values_list("provider", "model", "connection", "latency_ms", "ttft_ms")[
            :SAMPLE_ROWS
        ]
    )
    latency: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    ttft: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for provider, model, conn, latency_ms, ttft_ms in rows:
        for group in (("m", provider, model), ("c", provider, conn)):
            if latency_ms is not None:
                latency[group].append(latency_ms)
            if ttft_ms is not None:
                ttft[group].append(ttft_ms)
    for kind, table in (("m", by_model), ("c", by_conn)):
        for row in table:
            group = (kind, row.provider, row.name)
            row.p50_latency_ms = nearest_rank(latency[group], 50)
            row.p95_latency_ms = nearest_rank(latency[group], 95)
            row.p95_ttft_ms = nearest_rank(ttft[group], 95)
    return len(rows) == SAMPLE_ROWS


def build_overview(
    period: Period, filters: Filters, now: datetime, *, exact: bool | None = None
) -> Overview:
    """The Overview page's numbers (see the module docstring for the queries)."""
    exact = _exact_percentiles() if exact is None else exact
    starts = period.starts(now)
    since = starts[0]
    requests = (
        RequestLog.objects.filter(created_at__gte=since)
        .filter(filters.requests())
        .order_by()
    )
    covered: set[datetime] = set()
    # UsageHourly has no request fields, and no minutes
    if not (filters.route or filters.api_key) and period.unit != "minute":
        covered = hourly.covered_hours(since, hourly.hour_of(now))
    if covered:
        overview = _from_hourly_rows(period, filters, now, requests, covered, exact)
    else:
        overview = _from_log(period, filters, requests, starts, exact)
    overview.choices = _choices(since)
    return overview


def _from_log(
    period: Period,
    filters: Filters,
    requests: QuerySet[RequestLog],
    starts: list[datetime],
    exact: bool,
) -> Overview:
    attempts = (
        AttemptLog.objects.filter(started_at__gte=starts[0])
        .filter(filters.attempts())
        .order_by()
    )
    buckets = _buckets(period, requests, starts, exact)
    totals = _totals(buckets)
    if exact:
        by_model, model_capped = _usage_rows(attempts, "model", exact)
        by_conn, conn_capped = _usage_rows(attempts, "connection", exact)
    else:  # no percentile in the aggregate: both tables from one query
        parts = hourly.target_parts(attempts, starts[0])
        by_model, model_capped = hourly.table(parts, "model", TABLE_ROWS)
        by_conn, conn_capped = hourly.table(parts, "connection", TABLE_ROWS)
    sampled = False
    if exact:
        cards = requests.aggregate(**_request_percentiles(exact))
        totals.p95_latency_ms = cards["p95_latency_ms"]
        totals.p95_ttft_ms = cards["p95_ttft_ms"]
    else:
        sampled = _sampled_request_percentiles(period, requests, buckets, totals)
        sampled = _sampled_attempt_percentiles(attempts, by_model, by_conn) or sampled
    return Overview(
        period=period,
        since=starts[0],
        buckets=buckets,
        totals=totals,
        by_model=by_model,
        by_connection=by_conn,
        choices={},
        exact=exact,
        sampled=sampled,
        tables_capped=model_capped or conn_capped,
    )


def _from_hourly_rows(
    period: Period,
    filters: Filters,
    now: datetime,
    requests: QuerySet[RequestLog],
    covered: set[datetime],
    exact: bool,
) -> Overview:
    starts = period.starts(now)
    buckets = _buckets(period, requests, starts, exact=False)  # no percentiles
    totals = _totals(buckets)
    from_rows, from_log = hourly.split_hours(
        starts[0], hourly.hour_of(now) + hourly.HOUR, covered
    )
    where = filters.attempts()  # provider and model only: both are columns here
    parts = hourly.hourly_parts(from_rows, period.unit, where)
    logged, sampled = hourly.log_parts(
        from_log, period.unit, where, exact=exact, sample_rows=SAMPLE_ROWS
    )
    parts += logged
    by_model, model_capped = hourly.table(parts, "model", TABLE_ROWS)
    by_conn, conn_capped = hourly.table(parts, "connection", TABLE_ROWS)
    per_bucket = hourly.rollup(parts, lambda p: p.bucket)
    for bucket in buckets:
        part = per_bucket.get(bucket.start)
        if part is not None:
            bucket.p95_latency_ms = part.p95_latency.value
            bucket.p95_ttft_ms = part.p95_ttft.value
    every = hourly.rollup(parts, lambda p: True).get(True)
    if every is not None:
        totals.p95_latency_ms = every.p95_latency.value
        totals.p95_ttft_ms = every.p95_ttft.value
    return Overview(
        period=period,
        since=starts[0],
        buckets=buckets,
        totals=totals,
        by_model=by_model,
        by_connection=by_conn,
        choices={},
        exact=exact,
        sampled=sampled,
        tables_capped=model_capped or conn_capped,
        hourly_hours=len(covered),
    )
