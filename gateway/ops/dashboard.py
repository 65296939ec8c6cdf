"""The admin home dashboard (issue #15).

Four panels, computed per request from bounded queries and the health board:

* **traffic**: requests, error rate and failover rate over the last 15 minutes, hour
  and 24 hours (one aggregate query per window on the indexed ``created_at``).  A
  request *failed over* when one of its upstream attempts failed and another was
  made after it (what ``omniroute_failovers_total`` counts, spec 06 §2): a combo
  moving to its next target, a key's ``failover_defaults`` chain (``failover``, spec
  06 §1.1) and a retry on another connection alike.  Refusals (spec 06: no upstream
  call) are counted apart, and ``no_healthy_candidate`` ones on their own: every
  target was filtered by health state, an outage;
* **health**: every connection with its state (auth disabled, open, half-open,
  cooling, locked models, healthy), the time left, its last failed attempt and its
  success rate over the last 15 minutes, the unhealthy ones first, each with Reset
  and Re-enable for staff who may change connections (each asks first, on a page
  of its own that names the connection: it works without JavaScript);
* **jobs**: each scheduled job's last run and next due time;
* **warnings**: no scheduler running, ``/metrics`` open without a token, the public
  demo key still active.

``dashboard_callback`` feeds the admin index (django-unfold's ``DASHBOARD_CALLBACK``);
``panel_view`` serves the same panels alone, which the page re-fetches every
``REFRESH_SECONDS``; ``health_action_view`` asks to confirm a row button, then acts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, Max, OuterRef, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils import timezone

from combos.models import ApiKey
from combos.services import hash_api_key
from gateway.ops.error_pages import admin_error
from providers import scheduler
from providers.console_access import may_open
from providers.health import board, connection_key, summarize
from providers.job_runner import job_statuses
from providers.models import Connection
from telemetry.models import AttemptLog, RequestLog

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 10
WINDOWS = (
    ("15 min", timedelta(minutes=15)),
    ("1 h", timedelta(hours=1)),
    ("24 h", timedelta(hours=24)),
)
RECENT = timedelta(minutes=15)
#: request outcomes the gateway failed to serve (refusals are the client's own)
FAILED = ("upstream_failed", "interrupted")
#: attempt results that are not a failure of the target (spec 06 §1.2, §3.4)
NOT_FAILED = ("success", "cancelled", "client_error")
#: the refusal of a request whose every target is unhealthy (spec 01, 02 §10)
NO_HEALTHY = "no_healthy_candidate"
#: the demo configuration's key (omniroute_site/demo.yaml): public, so a warning
DEMO_KEY = "sk-or-demo-0000000000000000000000000000000000000"
PANEL_TEMPLATE = "admin/dashboard_panels.html"
CONFIRM_TEMPLATE = "admin/dashboard_health_confirm.html"


@dataclass(frozen=True, slots=True)
class Window:
    label: str
    requests: int
    errors: int
    refused: int
    failovers: int
    no_healthy: int = 0

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @property
    def failover_rate(self) -> float | None:
        return self.failovers / self.requests if self.requests else None


@dataclass(slots=True)
class HealthRow:
    connection: Connection
    key: str
    state: str  # auth_disabled | open | half_open | cooling | locked | healthy
    badge: str  # omr-bad | omr-warn | omr-ok
    detail: str
    until: datetime | None
    attempts: int = 0
    successes: int = 0
    last_error: str | None = None
    last_error_at: datetime | None = None
    locked: list[str] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.attempts if self.attempts else None

    @property
    def unhealthy(self) -> bool:
        return self.state != "healthy"


_ORDER = {"auth_disabled": 0, "open": 1, "half_open": 2, "cooling": 3, "locked": 4}


def failed_over() -> Q:
    """Requests that moved on after a failed upstream attempt: a chain of models ran
    (``failover``), or more than one attempt was made and one of them failed (a
    fusion's panel calls that all succeed are not a failover)."""
    failed_attempt = AttemptLog.objects.filter(request=OuterRef("pk")).exclude(
        result__in=NOT_FAILED
    )
    return Q(failover=True) | Q(Q(attempt_count__gt=1), Exists(failed_attempt))


def traffic(now: datetime) -> list[Window]:
    windows = []
    for label, span in WINDOWS:
        row = RequestLog.objects.filter(created_at__gte=now - span).aggregate(
            requests=Count("id"),
            errors=Count("id", filter=Q(status__in=FAILED)),
            refused=Count("id", filter=Q(status="refused")),
            failovers=Count("id", filter=failed_over()),
            no_healthy=Count("id", filter=Q(status="refused", reason=NO_HEALTHY)),
        )
        windows.append(
            Window(
                label,
                row["requests"],
                row["errors"],
                row["refused"],
                row["failovers"],
                row["no_healthy"],
            )
        )
    return windows


def _when(epoch: float | None) -> datetime | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.get_current_timezone())


_BADGES = {"bad": "omr-bad", "warn": "omr-warn", "ok": "omr-ok"}


def _state(key: str, now: float) -> tuple[str, str, str, datetime | None, list[str]]:
    found = summarize(key, now)
    return (
        found.state,
        _BADGES[found.severity],
        found.detail,
        _when(found.until),
        list(found.locked),
    )


def health_rows(now: datetime) -> list[HealthRow]:
    epoch = now.timestamp()
    rows: dict[tuple[str, str], HealthRow] = {}
    for conn in Connection.objects.select_related("provider").order_by(
        "provider__slug", "priority", "name"
    ):
        key = connection_key(conn.provider.slug, conn.name)
        state, badge, detail, until, locked = _state(key, epoch)
        if not conn.active:
            state, badge, detail = "inactive", "omr-info", "inactive (not routed)"
        rows[(conn.provider.slug, conn.name)] = HealthRow(
            conn, key, state, badge, detail, until, locked=locked
        )
    recent = (
        AttemptLog.objects.filter(started_at__gte=now - RECENT)
        .values("provider", "connection")
        .annotate(
            attempts=Count("id"),
            successes=Count("id", filter=Q(result="success")),
            last_failure=Max("started_at", filter=~Q(result="success")),
        )
    )
    for stat in recent:
        row = rows.get((stat["provider"], stat["connection"]))
        if row is None:
            continue
        row.attempts, row.successes = stat["attempts"], stat["successes"]
        row.last_error_at = stat["last_failure"]
    for row in rows.values():
        if row.last_error_at is None and not row.unhealthy:
            continue
        failed = (
            AttemptLog.objects.filter(
                provider=row.connection.provider.slug,
                connection=row.connection.name,
                started_at__gte=now - timedelta(hours=24),
            )
            .exclude(result="success")
            .order_by("-started_at")
            .values("started_at", "reason", "http_status", "result")
            .first()
        )
        if failed is not None:
            row.last_error_at = failed["started_at"]
            status = f" {failed['http_status']}" if failed["http_status"] else ""
            row.last_error = f"{failed['reason'] or failed['result']}{status}"
    return sorted(
        rows.values(),
        key=lambda r: (
            _ORDER.get(r.state, 9 if r.state == "inactive" else 5),
            -(1 - (r.success_rate if r.success_rate is not None else 1)),
            r.key,
        ),
    )


def warnings(request: HttpRequest) -> list[str]:
    found = []
    status = scheduler.status()
    if status.warning:
        found.append(status.text)
    if not settings.OMNIROUTE_METRICS_TOKEN:
        found.append(
            "/metrics is open to anyone who can reach this address: set "
            "OMNIROUTE_METRICS_TOKEN, or keep the port private."
        )
    if ApiKey.objects.filter(key_hash=hash_api_key(DEMO_KEY), active=True).exists():
        found.append(
            "The demo API key (published in the README) is still active: "
            "disable it under API keys before exposing this gateway."
        )
    return found


def panels(request: HttpRequest) -> dict[str, Any]:
    started = time.perf_counter()
    now = timezone.now()
    health = health_rows(now)
    windows = traffic(now)
    found = warnings(request)
    if windows[0].no_healthy:
        found.append(
            f"{windows[0].no_healthy} request(s) in the last {windows[0].label} were "
            "refused with 503 no_healthy_candidate: every target they could use was "
            "unhealthy (see Health)."
        )
    context = {
        "traffic": windows,
        "health": health,
        "unhealthy_count": sum(
            1 for row in health if row.unhealthy and row.state != "inactive"
        ),
        "jobs": job_statuses(now) if may_open(request.user, "jobs") else [],
        "warnings": found,
        "can_change_connections": request.user.has_perm("providers.change_connection"),
        "generated_at": now,
        "refresh_seconds": REFRESH_SECONDS,
    }
    context["server_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return context


def dashboard_callback(request: HttpRequest, context: dict[str, Any]) -> dict[str, Any]:
    """django-unfold's ``DASHBOARD_CALLBACK``: the admin index's panels."""
    context.update(panels(request))
    return context


def panel_view(request: HttpRequest) -> HttpResponse:
    """The panels alone, re-fetched by the dashboard every ``REFRESH_SECONDS``."""
    html = render_to_string(PANEL_TEMPLATE, panels(request), request=request)
    return HttpResponse(html)


#: what each health button does, in the confirmation's words
ACTIONS = {
    "reset": (
        "Reset",
        "clears its breaker, cooldown, auth disable and locked models: requests are "
        "routed to it again at once, even if the upstream is still failing",
    ),
    "reenable": (
        "Re-enable",
        "clears its auth disable: requests are routed to it again at once, with the "
        "credential that was refused",
    ),
}


def health_action_view(request: HttpRequest) -> HttpResponse:
    """A health board button: ``connection=<id>&action=reset|reenable``.

    The board's buttons GET the confirmation page, which names the connection, its
    state and what the action clears; its POST (``confirm=yes``, CSRF-checked) acts
    and returns to the dashboard with a message saying what was done.  A POST
    without ``confirm`` (a dashboard page served before this step existed) gets the
    confirmation page too: nothing acts without it."""
    if request.method not in ("GET", "POST"):
        return HttpResponseBadRequest("GET or POST only")
    if not request.user.has_perm("providers.change_connection"):
        raise PermissionDenied(
            "Resetting a connection needs the permission: providers.change_connection."
        )
    data = request.POST if request.method == "POST" else request.GET
    action = data.get("action")
    pk = data.get("connection") or ""
    conn = (
        Connection.objects.select_related("provider")
        .filter(pk=int(pk) if pk.isdigit() else 0)
        .first()
    )
    if conn is None or action not in ACTIONS:
        return admin_error(
            request,
            400,
            "Nothing to do",
            "No connection has that id, or the action is neither reset nor "
            "re-enable. Use the buttons on the dashboard's health board.",
        )
    key = connection_key(conn.provider.slug, conn.name)
    if request.method == "GET" or data.get("confirm") != "yes":
        return _confirm(request, conn, key, action)
    if action == "reset":
        board.reset(key)
        messages.success(
            request, f"Reset {key}: breaker, cooldown, auth disable and locks cleared."
        )
    else:
        was_disabled = summarize(key).state == "auth_disabled"
        board.reenable(key)
        if was_disabled:
            messages.success(request, f"Re-enabled {key}.")
        else:
            messages.info(
                request, f"{key} was not auth-disabled; nothing to re-enable."
            )
    logger.info("admin %s: %s health of %s", request.user, action, key)
    return redirect("admin:index")


def _confirm(
    request: HttpRequest, conn: Connection, key: str, action: str
) -> HttpResponse:
    verb, effect = ACTIONS[action]
    found = summarize(key)
    context = {
        **admin.site.each_context(request),
        "title": f"{verb} {key}?",
        "connection": conn,
        "key": key,
        "action": action,
        "verb": verb,
        "effect": effect,
        "state": found.state,
        "badge": _BADGES[found.severity],
        "detail": found.detail,
        "until": _when(found.until),
    }
    return TemplateResponse(request, CONFIRM_TEMPLATE, context)
