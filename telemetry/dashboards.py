"""Admin dashboards under ``/admin/telemetry/`` (spec 06 §4.1, §4.2), staff only;
``omniroute_site.urls`` wraps each view in ``admin_site.admin_view``.  Each also needs
the request and attempt logs' view permissions (``providers.console_access``): it
shows what they hold; staff without them get a 403.

* ``overview_view``: the period and filter form, four cards, three inline-SVG
  charts (``telemetry.charts``), each with its data table, and the provider/model
  and connection tables; the numbers come from ``telemetry.overview``.
* ``live_routing_view``: the last ``LIVE_ROWS`` decisions of ``/ws/routing/``,
  drawn by ``telemetry/static/telemetry/live_routing.js`` (no CDN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.safestring import mark_safe

from gateway.templatetags.omr import omr_time
from providers.console_access import refuse_unless
from telemetry import charts
from telemetry.overview import (
    DEFAULT_PERIOD,
    PERIODS,
    SAMPLE_ROWS,
    TABLE_ROWS,
    Bucket,
    Filters,
    Overview,
    UsageRow,
    build_overview,
)

OVERVIEW_TEMPLATE = "admin/telemetry/overview.html"
LIVE_TEMPLATE = "admin/telemetry/live_routing.html"
LIVE_ROWS = 100  # spec 06 §4.2: the live page keeps the last 100 decisions


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """One chart and its data table (spec 06 §4.1: numbers stay readable)."""

    slug: str
    title: str
    svg: str  # escaped by ``telemetry.charts``
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Card:
    slug: str
    label: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTable:
    slug: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FilterField:
    name: str
    label: str
    choices: tuple[str, ...]
    value: str


def fmt_int(value: int | None) -> str:
    return "—" if value is None else str(value)


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} %"


def fmt_usd(value: Decimal | float | None) -> str:
    return "—" if value is None else f"{value:.6f}"


def _pct_axis(value: float) -> str:
    return f"{value:.0f} %"


def _ms_axis(value: float) -> str:
    return f"{charts.compact(value)} ms"


def _usd_axis(value: float) -> str:
    return f"${charts.compact(value)}"


def overview_charts(overview: Overview) -> list[Chart]:
    buckets = overview.buckets
    labels = [b.label for b in buckets]
    first_column, when = _time_column(overview)
    newest_first = buckets[::-1]  # the recent minutes (an incident) on top
    traffic = charts.multi_line_chart(
        labels,
        [
            charts.Series(
                name="Requests", values=tuple(float(b.requests) for b in buckets)
            ),
            charts.Series(
                name="Success rate",
                values=tuple(b.success_pct for b in buckets),
                color=charts.PALETTE[1],
                right_axis=True,
            ),
        ],
        title="Requests and success rate",
        right_format=_pct_axis,
        right_top=100,
    )
    latency = charts.multi_line_chart(
        labels,
        [
            charts.Series(
                name="p95 latency",
                values=tuple(_float(b.p95_latency_ms) for b in buckets),
            ),
            charts.Series(
                name="p95 TTFT",
                values=tuple(_float(b.p95_ttft_ms) for b in buckets),
                color=charts.PALETTE[1],
            ),
        ],
        title="p95 latency and p95 TTFT",
        left_format=_ms_axis,
    )
    cost = charts.line_chart(
        [(b.label, _float(b.cost)) for b in buckets],
        title="Cost (USD)",
        unit_format=_usd_axis,
        color=charts.PALETTE[2],
    )
    return [
        Chart(
            slug="traffic",
            title="Requests and success rate",
            svg=traffic,
            columns=(first_column, "Requests", "Successful", "Success rate"),
            rows=tuple(
                (when(b), str(b.requests), str(b.ok), fmt_pct(b.success_pct))
                for b in newest_first
            ),
        ),
        Chart(
            slug="latency",
            title=f"p95 latency and p95 TTFT ({_latency_basis(overview)})",
            svg=latency,
            columns=(first_column, "p95 latency (ms)", "p95 TTFT (ms)"),
            rows=tuple(
                (when(b), fmt_int(b.p95_latency_ms), fmt_int(b.p95_ttft_ms))
                for b in newest_first
            ),
        ),
        Chart(
            slug="cost",
            title="Cost (USD, charged to keys)",
            svg=cost,
            columns=(first_column, "Cost (USD)"),
            rows=tuple((when(b), fmt_usd(b.cost)) for b in newest_first),
        ),
    ]


def _time_column(overview: Overview) -> tuple[str, Callable[[Bucket], str]]:
    """The data tables' first column: a minute or an hour is the console's time
    element (the browser's local time, with seconds); a day is a UTC date."""
    unit = overview.period.unit
    if unit == "day":
        return "Day (UTC)", lambda bucket: bucket.long_label
    return unit.capitalize(), lambda bucket: omr_time(bucket.start)


def _latency_basis(overview: Overview) -> str:
    """What the latency figures are over: requests from the log, attempts when
    finished hours came from ``UsageHourly`` (``telemetry.overview_hourly``)."""
    return "successful attempts" if overview.hourly_hours else "successful requests"


def cards(overview: Overview) -> list[Card]:
    totals = overview.totals
    latency = totals.p95_latency_ms
    return [
        Card(slug="requests", label="Requests", value=str(totals.requests)),
        Card(
            slug="success-rate", label="Success rate", value=fmt_pct(totals.success_pct)
        ),
        Card(
            slug="p95-latency",
            label="p95 attempt latency" if overview.hourly_hours else "p95 latency",
            value="—" if latency is None else f"{latency} ms",
        ),
        Card(slug="cost", label="Cost (USD)", value=fmt_usd(totals.cost)),
    ]


USAGE_COLUMNS = (
    "Attempts",
    "Success rate",
    "p50 latency (ms)",
    "p95 latency (ms)",
    "p95 TTFT (ms)",
    "Prompt tokens",
    "Completion tokens",
    "Cost (USD)",
)


def usage_tables(overview: Overview) -> list[UsageTable]:
    def cells(row: UsageRow, name: str) -> tuple[str, ...]:
        return (
            name,
            str(row.attempts),
            fmt_pct(row.success_pct),
            fmt_int(row.p50_latency_ms),
            fmt_int(row.p95_latency_ms),
            fmt_int(row.p95_ttft_ms),
            str(row.prompt_tokens),
            str(row.completion_tokens),
            fmt_usd(row.cost),
        )

    return [
        UsageTable(
            slug="by-model",
            title="By provider / model",
            columns=("Provider / model", *USAGE_COLUMNS),
            rows=tuple(cells(r, f"{r.provider}/{r.name}") for r in overview.by_model),
        ),
        UsageTable(
            slug="by-connection",
            title="By connection",
            columns=("Provider · connection", *USAGE_COLUMNS),
            rows=tuple(
                cells(r, f"{r.provider} · {r.name}") for r in overview.by_connection
            ),
        ),
    ]


def _float(value: Decimal | int | None) -> float | None:
    return None if value is None else float(value)


def filter_fields(overview: Overview, filters: Filters) -> list[FilterField]:
    """The dropdowns; a chosen value missing from the period's rows stays listed."""
    found = []
    for name, label in (
        ("provider", "Provider"),
        ("model", "Model"),
        ("route", "Route"),
        ("api_key", "API key"),
    ):
        value = getattr(filters, name)
        choices = overview.choices.get(name, [])
        if value and value not in choices:
            choices = sorted([*choices, value])
        found.append(
            FilterField(name=name, label=label, choices=tuple(choices), value=value)
        )
    return found


def overview_view(request: HttpRequest) -> HttpResponse:
    refuse_unless(request.user, "overview")
    period = PERIODS.get(request.GET.get("period", ""), PERIODS[DEFAULT_PERIOD])
    filters = Filters.from_query(request.GET)
    overview = build_overview(period, filters, timezone.now())
    context = {
        **admin.site.each_context(request),
        "title": "Telemetry overview",
        "overview": overview,
        "periods": list(PERIODS.values()),
        "filters": filters,
        "charts": [
            # every text inside the SVG was escaped by ``telemetry.charts``
            (chart, mark_safe(chart.svg))
            for chart in overview_charts(overview)
        ],
        "filter_fields": filter_fields(overview, filters),
        "cards": cards(overview),
        "usage_tables": usage_tables(overview),
        "sample_rows": SAMPLE_ROWS,
        "table_rows": TABLE_ROWS,
    }
    return TemplateResponse(request, OVERVIEW_TEMPLATE, context)


def live_routing_view(request: HttpRequest) -> HttpResponse:
    refuse_unless(request.user, "live_routing")
    context = {
        **admin.site.each_context(request),
        "title": "Live routing",
        "socket_path": "/ws/routing/",
        "max_rows": LIVE_ROWS,
    }
    return TemplateResponse(request, LIVE_TEMPLATE, context)
