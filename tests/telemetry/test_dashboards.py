"""The telemetry dashboards (spec 06 §4.1): Overview numbers from the request and
attempt log, the inline SVG charts with their data tables, staff-only access, the
query budget, and the Live routing page (spec 06 §4.2)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.utils import timezone

from telemetry import overview as overview_module
from telemetry.models import AttemptLog, RequestLog
from telemetry.overview import PERIODS, Filters, build_overview, nearest_rank

pytestmark = pytest.mark.django_db

OVERVIEW = "/admin/telemetry/overview/"
LIVE = "/admin/telemetry/live-routing/"
NOW = datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
ON_POSTGRES = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="percentile_disc is PostgreSQL's"
)


class _Tables(HTMLParser):
    """Text of every ``<table id=...>`` as rows of cells (th and td alike)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.cards: dict[str, str] = {}
        self._table: str | None = None
        self._card: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and found.get("id"):
            self._table = found["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in {"td", "th"} and self._table:
            self._cell = []
        elif tag == "div" and (found.get("id") or "").startswith("card-"):
            self._card = (found["id"] or "")[5:]
        elif tag == "p" and self._card and "value" in (found.get("class") or ""):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in {"td", "th"} and self._table and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "p" and self._card and self._cell is not None:
            self.cards[self._card] = "".join(self._cell).strip()
            self._cell, self._card = None, None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: bytes) -> _Tables:
    parser = _Tables()
    parser.feed(html.decode())
    return parser


@pytest.fixture
def log() -> Callable[..., RequestLog]:
    """``log(created_at, status=..., attempts=[{...}], **fields)``: one request row
    and its attempt rows (``target`` is derived; attempts start 1 ms apart)."""

    def make(
        created_at: datetime,
        *,
        attempts: tuple[dict[str, Any], ...] = (),
        **fields: Any,
    ) -> RequestLog:
        values: dict[str, Any] = {
            "endpoint": "/v1/chat/completions",
            "status": "success",
            "http_status": 200,
            "requested_model": "pa/m1",
            "route": "pa/m1",
            "api_key_prefix": "sk-or-aaa",
            **fields,
        }
        request = RequestLog.objects.create(
            id=uuid.uuid4(), created_at=created_at, **values
        )
        for number, attempt in enumerate(attempts, start=1):
            data = {"connection": "main", "result": "success", **attempt}
            AttemptLog.objects.create(
                request=request,
                attempt_no=number,
                started_at=created_at + timedelta(milliseconds=number),
                target=f"{data['provider']}/{data['model']}@{data['connection']}",
                **data,
            )
        return request

    return make


def pa(**fields: Any) -> dict[str, Any]:
    return {"provider": "pa", "model": "m1", **fields}


def pb(**fields: Any) -> dict[str, Any]:
    return {"provider": "pb", "model": "m2", **fields}


@pytest.fixture
def traffic(log: Callable[..., RequestLog]) -> Callable[[datetime], None]:
    """Four requests in the 24 h before ``now`` and one two days earlier:

    * 12:10 ``pa/m1`` served at once (100 ms, TTFT 50 ms, $0.001);
    * 11:50 ``combo:team``: ``pb/m2`` 503, then ``pa/m1`` served (300 ms, $0.002);
    * 11:40 ``combo:team``: ``pa/m1`` timed out, a ``pb/m2`` call was cancelled;
    * 02:05 refused with 429, no attempt;
    * two days back, one success (only the 7 d and 30 d periods see it).
    """

    def make(now: datetime) -> None:
        hour = now.replace(minute=0, second=0, microsecond=0)
        log(
            hour + timedelta(minutes=10),
            provider="pa",
            served_model="pa/m1",
            latency_ms=100,
            ttft_ms=50,
            cost_usd=Decimal("0.001"),
            attempts=(
                pa(
                    latency_ms=90,
                    ttft_ms=40,
                    prompt_tokens=10,
                    completion_tokens=20,
                    cost_usd=Decimal("0.001"),
                ),
            ),
        )
        log(
            hour - timedelta(minutes=10),
            provider="pa",
            served_model="pa/m1",
            route="combo:team",
            api_key_prefix="sk-or-bbb",
            latency_ms=300,
            cost_usd=Decimal("0.002"),
            attempts=(
                pb(result="server_error", http_status=503, latency_ms=50),
                pa(
                    latency_ms=250,
                    prompt_tokens=30,
                    completion_tokens=40,
                    cost_usd=Decimal("0.002"),
                ),
            ),
        )
        log(
            hour - timedelta(minutes=20),
            status="upstream_failed",
            http_status=503,
            route="combo:team",
            api_key_prefix="sk-or-bbb",
            latency_ms=500,
            attempts=(pa(result="timeout", latency_ms=400), pb(result="cancelled")),
        )
        log(
            hour - timedelta(hours=10, minutes=-5),
            status="refused",
            http_status=429,
            latency_ms=1,
        )
        log(
            hour - timedelta(days=2),
            provider="pa",
            served_model="pa/m1",
            latency_ms=700,
            cost_usd=Decimal("0.004"),
            attempts=(pa(latency_ms=650, cost_usd=Decimal("0.004")),),
        )

    return make


@pytest.fixture
def superuser_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def test_nearest_rank_is_the_value_at_the_ceiling_position():
    values = list(range(100, 1001, 100))  # spec 06 §3.4: 10 successes

    assert nearest_rank(values, 50) == 500
    assert nearest_rank(values, 95) == 1000
    assert nearest_rank([300, 100], 95) == 300
    assert nearest_rank([7], 50) == 7
    assert nearest_rank([], 95) is None


@pytest.mark.parametrize("exact", [pytest.param(True, marks=ON_POSTGRES), False])
def test_overview_counts_requests_and_attempts_of_the_last_24_hours(
    traffic: Callable[[datetime], None], exact: bool
):
    traffic(NOW)

    found = build_overview(PERIODS["24h"], Filters(), NOW, exact=exact)

    totals = found.totals
    assert (totals.requests, totals.ok, totals.cost) == (4, 2, Decimal("0.003"))
    assert (totals.p95_latency_ms, totals.p95_ttft_ms) == (300, 50)
    assert found.since == datetime(2025, 5, 31, 13, 0, tzinfo=UTC)
    assert [b.label for b in found.buckets][-3:] == ["10:00", "11:00", "12:00"]
    by_label = {b.label: b for b in found.buckets}
    assert (by_label["11:00"].requests, by_label["11:00"].ok) == (2, 1)
    assert by_label["11:00"].p95_latency_ms == 300
    assert by_label["12:00"].p95_ttft_ms == 50
    assert (by_label["02:00"].requests, by_label["02:00"].success_pct) == (1, 0.0)
    assert by_label["03:00"].requests == 0
    assert by_label["03:00"].success_pct is None
    assert by_label["03:00"].p95_latency_ms is None
    pa_m1, pb_m2 = found.by_model
    assert (pa_m1.provider, pa_m1.name, pa_m1.attempts, pa_m1.ok) == ("pa", "m1", 3, 2)
    assert (pa_m1.p50_latency_ms, pa_m1.p95_latency_ms, pa_m1.p95_ttft_ms) == (
        90,
        250,
        40,
    )
    assert (pa_m1.prompt_tokens, pa_m1.completion_tokens) == (40, 60)
    assert pa_m1.cost == Decimal("0.003")
    assert (pb_m2.attempts, pb_m2.samples, pb_m2.ok) == (2, 1, 0)  # cancelled left out
    assert pb_m2.success_pct == 0.0
    assert pb_m2.cost is None
    assert [(r.provider, r.name, r.attempts) for r in found.by_connection] == [
        ("pa", "main", 3),
        ("pb", "main", 2),
    ]
    assert found.choices == {
        "provider": ["pa"],
        "model": ["pa/m1"],
        "route": ["combo:team", "pa/m1"],
        "api_key": ["sk-or-aaa", "sk-or-bbb"],
    }


@pytest.mark.parametrize("exact", [pytest.param(True, marks=ON_POSTGRES), False])
def test_seven_day_overview_has_day_buckets_and_the_older_request(
    traffic: Callable[[datetime], None], exact: bool
):
    traffic(NOW)

    found = build_overview(PERIODS["7d"], Filters(), NOW, exact=exact)

    assert [b.label for b in found.buckets] == [
        "05-26",
        "05-27",
        "05-28",
        "05-29",
        "05-30",
        "05-31",
        "06-01",
    ]
    assert (found.totals.requests, found.totals.cost) == (5, Decimal("0.007"))
    assert found.buckets[-3].requests == 1  # two days back
    assert found.totals.p95_latency_ms == 700
    assert found.by_model[0].attempts == 4


@pytest.mark.parametrize(
    ("filters", "requests", "ok", "model_attempts"),
    [
        pytest.param(Filters(provider="pb"), 0, 0, [("pb", "m2", 2)], id="provider"),
        pytest.param(
            Filters(model="pa/m1"), 2, 2, [("pa", "m1", 3)], id="served-model"
        ),
        pytest.param(
            Filters(route="combo:team"),
            2,
            1,
            [("pa", "m1", 2), ("pb", "m2", 2)],
            id="route",
        ),
        pytest.param(
            Filters(api_key="sk-or-aaa"), 2, 1, [("pa", "m1", 1)], id="api-key"
        ),
    ],
)
def test_overview_filters_narrow_requests_and_attempts(
    traffic: Callable[[datetime], None],
    filters: Filters,
    requests: int,
    ok: int,
    model_attempts: list[tuple[str, str, int]],
):
    traffic(NOW)

    found = build_overview(PERIODS["24h"], filters, NOW)

    assert (found.totals.requests, found.totals.ok) == (requests, ok)
    assert [(r.provider, r.name, r.attempts) for r in found.by_model] == (
        model_attempts
    )


def test_sampled_percentiles_say_when_the_cap_was_reached(
    traffic: Callable[[datetime], None], monkeypatch: pytest.MonkeyPatch
):
    traffic(NOW)
    monkeypatch.setattr(overview_module, "SAMPLE_ROWS", 1)

    found = build_overview(PERIODS["24h"], Filters(), NOW, exact=False)

    assert found.sampled
    assert found.totals.p95_latency_ms == 100  # only the newest success was read


# --- the pages -----------------------------------------------------------------------


@pytest.mark.parametrize("url", [OVERVIEW, LIVE])
def test_dashboards_send_anonymous_users_to_the_login_page(url: str):
    response = Client().get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


@pytest.mark.parametrize("url", [OVERVIEW, LIVE])
def test_dashboards_refuse_users_who_are_not_staff(url: str):
    client = Client()
    client.force_login(User.objects.create_user("someone", password="pw"))

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_overview_page_shows_cards_charts_and_tables(
    superuser_client: Client,
    traffic: Callable[[datetime], None],
    django_assert_max_num_queries: Any,
):
    traffic(timezone.now())

    with django_assert_max_num_queries(10):
        response = superuser_client.get(OVERVIEW)

    assert response.status_code == 200
    html = response.content
    page = parse(html)
    assert page.cards == {
        "requests": "4",
        "success-rate": "50.0 %",
        "p95-latency": "300 ms",
        "cost": "0.003000",
    }
    assert html.count(b'<svg xmlns="http://www.w3.org/2000/svg" class="omr-chart"') == 3
    assert b"<polyline" in html
    # no JS of this page's own (the theme's scrollbar script closes every page)
    scripts = re.findall(rb"<script[^>]*>", html.split(b'id="content"')[1])
    assert scripts == [b'<script src="/static/unfold/js/simplebar/simplebar.js">']
    assert page.tables["by-model"] == [
        [
            "Provider / model",
            "Attempts",
            "Success rate",
            "p50 latency (ms)",
            "p95 latency (ms)",
            "p95 TTFT (ms)",
            "Prompt tokens",
            "Completion tokens",
            "Cost (USD)",
        ],
        ["pa/m1", "3", "66.7 %", "90", "250", "40", "40", "60", "0.003000"],
        ["pb/m2", "2", "0.0 %", "—", "—", "—", "0", "0", "—"],
    ]
    assert page.tables["by-connection"][1:] == [
        ["pa · main", "3", "66.7 %", "90", "250", "40", "40", "60", "0.003000"],
        ["pb · main", "2", "0.0 %", "—", "—", "—", "0", "0", "—"],
    ]
    traffic_rows = page.tables["data-traffic"]
    assert traffic_rows[0] == ["Hour", "Requests", "Successful", "Success rate"]
    assert len(traffic_rows) == 25
    hours = re.findall(
        r'<th scope="row"><time class="omr-time" datetime="([^"]+)"',
        html.decode().split('id="data-traffic"')[1].split("</table>")[0],
    )
    assert len(hours) == 24
    assert hours == sorted(hours, reverse=True)
    assert sum(int(row[1]) for row in traffic_rows[1:]) == 4
    cost_rows = page.tables["data-cost"][1:]
    assert sum(Decimal(r[1]) for r in cost_rows if r[1] != "—") == Decimal("0.003")


def test_overview_page_applies_the_period_and_filters_from_the_query(
    superuser_client: Client, traffic: Callable[[datetime], None]
):
    traffic(timezone.now())

    response = superuser_client.get(OVERVIEW, {"period": "7d", "route": "combo:team"})

    page = parse(response.content)
    assert page.cards["requests"] == "2"
    assert page.tables["data-traffic"][0][0] == "Day (UTC)"
    assert len(page.tables["data-traffic"]) == 8
    assert b'<option value="combo:team" selected>' in response.content


def test_overview_page_for_plain_staff_stays_within_ten_queries(
    traffic: Callable[[datetime], None], django_assert_max_num_queries: Any
):
    traffic(timezone.now())
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=("view_requestlog", "view_attemptlog"))
    )
    client = Client()
    client.force_login(user)

    with django_assert_max_num_queries(10):
        response = client.get(OVERVIEW, {"period": "30d", "provider": "pa"})

    assert response.status_code == 200
    assert parse(response.content).cards["requests"] == "3"


def test_overview_page_without_traffic_draws_empty_charts(superuser_client: Client):
    response = superuser_client.get(OVERVIEW)

    page = parse(response.content)
    assert page.cards == {
        "requests": "0",
        "success-rate": "—",
        "p95-latency": "—",
        "cost": "—",
    }
    assert response.content.count(b"No data") == 2  # the latency and cost charts
    assert page.tables["by-model"][1] == ["No attempt in this period."]


def test_live_routing_page_loads_its_script_from_static_files(
    superuser_client: Client,
):
    response = superuser_client.get(LIVE)

    assert response.status_code == 200
    assert b'<script src="/static/telemetry/live_routing.js" defer>' in (
        response.content
    )
    assert b'data-socket-path="/ws/routing/"' in response.content
    assert b'data-max-rows="100"' in response.content
    script = finders.find("telemetry/live_routing.js")
    assert script is not None
    assert "innerHTML" not in Path(script).read_text(encoding="utf-8")


def test_admin_home_and_telemetry_index_link_the_dashboards(superuser_client: Client):
    for url in ("/admin/", "/admin/telemetry/"):
        html = superuser_client.get(url).content
        assert f'href="{OVERVIEW}"'.encode() in html, url
        assert f'href="{LIVE}"'.encode() in html, url
    # and the navigation sidebar links them from every admin page
    assert f'href="{OVERVIEW}"'.encode() in superuser_client.get("/admin/auth/").content


def test_the_overview_has_the_last_hour_by_minute(superuser_client: Client):
    from datetime import timedelta

    from django.utils import timezone

    from telemetry.models import RequestLog

    now = timezone.now()
    for minutes_ago in (1, 1, 30):
        RequestLog.objects.create(
            created_at=now - timedelta(minutes=minutes_ago),
            endpoint="chat",
            requested_model="pa/m1",
            status="success",
            http_status=200,
        )

    page = superuser_client.get(OVERVIEW + "?period=1h")
    html = page.content.decode()

    assert page.status_code == 200
    overview = page.context["overview"]
    assert len(overview.buckets) == 60
    assert overview.totals.requests == 3
    assert sorted(b.requests for b in overview.buckets if b.requests) == [1, 2]
    assert "by minute" in html
    assert 'http-equiv="refresh" content="30"' in html
