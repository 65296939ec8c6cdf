"""Async Django views of the data plane and the ops endpoints."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import time

import orjson
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Max
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    JsonResponse,
)
from django.templatetags.static import static
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

from gateway import drain
from gateway.config.state import tables
from gateway.edge.auth import authenticate
from gateway.inbound.base import error_body
from gateway.inbound.messages import anthropic_error
from gateway.kernel.exchange import RequestError
from gateway.kernel.globs import matches
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.ops.auto_views import model_entries
from gateway.ops.error_pages import admin_error
from gateway.pipeline.result import Failure
from providers.http import product_version
from providers.models import JobRun
from telemetry import metrics

logger = logging.getLogger("omniroute.gateway")
READYZ_PING_MAX_S = 1.0  # a probe never waits longer on a silent Redis


FAVICON = "omniroute/favicon.svg"


def favicon_view(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, asked for by every browser: the OmniRoute icon (issue #15)."""
    return HttpResponsePermanentRedirect(static(FAVICON))


def _error(
    exc: RequestError,
    headers: dict[str, str] | None = None,
    *,
    anthropic: bool = False,
) -> HttpResponse:
    """The error in the OpenAI envelope, or Anthropic's for a client that sent
    ``anthropic-version`` (spec 09 §4.4, §4.6)."""
    if anthropic:
        failure = Failure(
            status=exc.status,
            code=exc.code,
            message=exc.message,
            error_type=exc.error_type,
            param=exc.param,
        )
        return HttpResponse(
            orjson.dumps(anthropic_error(failure)),
            status=exc.status,
            content_type="application/json",
            headers=headers,
        )
    body = error_body(
        message=exc.message, error_type=exc.error_type, code=exc.code, param=exc.param
    )
    return HttpResponse(
        orjson.dumps(body),
        status=exc.status,
        content_type="application/json",
        headers=headers,
    )


def _allowed(key: KeyPolicy, name: str) -> bool:
    if key.allowed_regexes is None:
        return True
    return any(matches(regex, name) for regex in key.allowed_regexes)


def model_list(table: RoutingTable, key: KeyPolicy) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for provider in table.providers.values():
        if not provider.connections:
            continue
        for model in provider.models.values():
            item: dict[str, object] = {
                "id": model.key,
                "object": "model",
                "created": 0,
                "owned_by": provider.slug,
            }
            if model.context_window:
                item["context_length"] = model.context_window
            if model.max_output_tokens:
                item["max_output_tokens"] = model.max_output_tokens
            entries.append(item)
    for combo in table.combos.values():
        if combo.active:
            entries.append(
                {"id": combo.name, "object": "model", "created": 0, "owned_by": "combo"}
            )
    entries += model_entries(table)
    return [e for e in entries if _allowed(key, str(e["id"]))]


def _get_only(request: HttpRequest) -> HttpResponse | None:
    if request.method in ("GET", "HEAD"):
        return None
    return _error(
        RequestError(405, "method_not_allowed", "Use GET"), headers={"Allow": "GET"}
    )


async def models_view(request: HttpRequest) -> HttpResponse:
    refused = _get_only(request)
    if refused is not None:
        return refused
    table = await tables.ensure()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        key = authenticate(headers, table, time.time())
    except RequestError as exc:
        metrics.bounded(metrics.REFUSALS, exc.code).inc()
        return _error(exc, anthropic=_anthropic(request))
    entries = model_list(table, key)
    if _anthropic(request):  # spec 09 §4.6: the anthropic SDK's shape
        listed = [_anthropic_model(entry) for entry in entries]
        data: dict[str, object] = {
            "data": listed,
            "has_more": False,
            "first_id": listed[0]["id"] if listed else None,
            "last_id": listed[-1]["id"] if listed else None,
        }
    else:
        data = {"object": "list", "data": entries}
    return HttpResponse(orjson.dumps(data), content_type="application/json")


def _anthropic(request: HttpRequest) -> bool:
    return "anthropic-version" in request.headers


#: the ``created_at`` of a model in the Anthropic shape (the catalog has no dates)
_EPOCH = "1970-01-01T00:00:00Z"


def _anthropic_model(entry: dict[str, object]) -> dict[str, object]:
    return {
        "type": "model",
        "id": entry["id"],
        "display_name": entry["id"],
        "created_at": _EPOCH,
    }


async def service_view(request: HttpRequest) -> HttpResponse:
    """``GET /`` and ``HEAD /`` (spec 09 §1): clients probe the base URL."""
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse(
            error_body(
                message="Use GET or HEAD",
                error_type="invalid_request_error",
                code="method_not_allowed",
            ),
            status=405,
        )
        response["Allow"] = "GET, HEAD"
        return response
    if "text/html" in request.headers.get("Accept", ""):
        # a browser (issue #15): a small landing page; SDKs and probes get the JSON
        return await asyncio.to_thread(_landing_page, request)
    return JsonResponse({"service": "omniroute", "version": product_version()})


def _landing_page(request: HttpRequest) -> HttpResponse:
    from django.template.loader import render_to_string

    html = render_to_string(
        "landing.html", {"version": product_version()}, request=request
    )
    return HttpResponse(html, content_type="text/html; charset=utf-8")


async def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


def _db_ok() -> bool:
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # noqa: BLE001 - any failure means "not ready"
        return False
    else:
        return True
    finally:
        connection.close()


def _redis_ok(url: str) -> bool:
    """A fresh PING with 10x the per-operation timeout, at most 1 s (a probe, not the
    hot path, but a load balancer's probe must not time out on a silent Redis); its
    result also moves the shared state's backoff (spec 08 §3.3)."""
    import redis

    from providers.redis_store import shared_link

    per_operation = settings.OMNIROUTE_REDIS_TIMEOUT_MS / 1000
    timeout = max(0.05, per_operation, min(per_operation * 10, READYZ_PING_MAX_S))
    client = redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout
    )
    try:
        ok = bool(client.ping())
    except redis.RedisError:
        ok = False
    finally:
        client.close()
    link = shared_link()
    if link is not None and link.url == url:
        link.report_ping(ok)
    return ok


def _probe_answer(body: dict[str, str], status: int) -> JsonResponse:
    """A readiness answer; a 503 here is a state, not a server error, so Django's
    request logger does not write an ERROR line for every load balancer probe."""
    response = JsonResponse(body, status=status)
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


async def readyz(request: HttpRequest) -> HttpResponse:
    if drain.is_draining():  # spec 08 §4 step 1: load balancers take the node out
        return _probe_answer({"status": "draining"}, 503)
    try:  # a probe answers within its bound while the database is down (issue #16)
        db_ok = await asyncio.wait_for(asyncio.to_thread(_db_ok), READYZ_DB_TIMEOUT_S)
    except TimeoutError:
        db_ok = False
    if not db_ok:
        return JsonResponse({"status": "unavailable", "db": "unreachable"}, status=503)
    if settings.REDIS_URL:
        if not await asyncio.to_thread(_redis_ok, settings.REDIS_URL):
            from providers.redis_store import shared_state_mode

            body = {
                "status": "degraded",
                "db": "ok",
                "redis": "unreachable",
                "shared_state": shared_state_mode(),
            }
            status = 503 if settings.OMNIROUTE_READYZ_REQUIRE_REDIS else 200
            return _probe_answer(body, status)
        return JsonResponse({"status": "ok", "db": "ok", "redis": "ok"})
    return JsonResponse({"status": "ok", "db": "ok"})


async def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.OMNIROUTE_METRICS_TOKEN
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if token and (
        scheme.lower() != "bearer"
        or not hmac.compare_digest(presented.strip().encode(), token.encode())
    ):
        return HttpResponse("unauthorized\n", status=401, content_type="text/plain")
    table = tables.table
    if table is not None:
        metrics.CONFIG_VERSION.set(table.version)
    if time.monotonic() - _job_gauge_read[0] >= JOB_GAUGE_CACHE_SECONDS:
        _job_gauge_read[0] = time.monotonic()
        try:  # bounded: a scrape never waits on a database that is down
            await asyncio.wait_for(
                asyncio.to_thread(_read_job_successes), METRICS_DB_TIMEOUT_S
            )
        except Exception:  # noqa: BLE001 - a scrape never fails for this gauge
            logger.warning("metrics: could not read the last job successes")
    return HttpResponse(_exposition(), content_type=CONTENT_TYPE_LATEST)


def _exposition() -> bytes:
    """This process's metrics, or every worker's when ``PROMETHEUS_MULTIPROC_DIR``
    is set (spec 08 §2.2: one scrape covers all workers of a node)."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return generate_latest()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


JOB_GAUGE_CACHE_SECONDS = 30.0  # spec 06 §2
#: the longest /readyz and /metrics wait on the database (issue #16: answer in 2 s)
READYZ_DB_TIMEOUT_S = 1.5
METRICS_DB_TIMEOUT_S = 1.0
_job_gauge_read = [-JOB_GAUGE_CACHE_SECONDS]


def _read_job_successes() -> None:
    """``omniroute_job_last_success_timestamp_seconds{job}`` from ``JobRun``."""
    try:
        rows = (
            JobRun.objects.filter(outcome__in=("success", "unchanged"))
            .values("job")
            .annotate(last=Max("finished_at"))
        )
        for row in rows:
            if row["last"] is not None:
                metrics.bounded(metrics.JOB_LAST_SUCCESS, row["job"]).set(
                    row["last"].timestamp()
                )
    finally:
        close_old_connections()


async def model_view(request: HttpRequest, model_id: str) -> HttpResponse:
    """``GET /v1/models/{id}``: one entry of the list this key sees, else 404."""
    refused = _get_only(request)
    if refused is not None:
        return refused
    table = await tables.ensure()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        key = authenticate(headers, table, time.time())
    except RequestError as exc:
        metrics.bounded(metrics.REFUSALS, exc.code).inc()
        return _error(exc, anthropic=_anthropic(request))
    for entry in model_list(table, key):
        if entry["id"] == model_id:
            shown = _anthropic_model(entry) if _anthropic(request) else entry
            return HttpResponse(orjson.dumps(shown), content_type="application/json")
    return _error(
        RequestError(
            404,
            "model_not_found",
            f"The model '{model_id}' does not exist",
            param="model",
            error_type="not_found_error",
        ),
        anthropic=_anthropic(request),
    )


def _unknown_endpoint(request: HttpRequest) -> HttpResponse:
    return _error(
        RequestError(
            404,
            "not_found",
            f"Unknown endpoint {request.path}",
            error_type="not_found_error",
        )
    )


async def v1_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any other ``/v1/…``, ``/chat/…`` or ``/api/…`` path: an OpenAI-style 404,
    never an HTML page (spec 01: all JSON)."""
    return _unknown_endpoint(request)


def _html_ok(request: HttpRequest) -> bool:
    """The admin (and its login) renders Django's own error pages."""
    return request.path.startswith("/admin/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: a refused request (e.g. a ``Host`` outside ``ALLOWED_HOSTS``)
    gets the OpenAI error envelope, never an HTML page (spec 01: all JSON)."""
    if _html_ok(request):
        from django.views.defaults import bad_request as django_bad_request

        return django_bad_request(request, exception)
    return _error(RequestError(400, "bad_request", "Bad request"))


ADMIN_FORBIDDEN_TEMPLATE = "admin/403.html"


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler403``: staff refused a console page get a page in the admin's style
    (its sidebar and header) that says why (issue #15); anywhere else the
    ``permission_denied`` envelope (spec 01: all JSON).  Django logs the refusal
    either way, one line (``omniroute_site.log_filters``)."""
    user = getattr(request, "user", None)
    staff = getattr(user, "is_staff", False) and getattr(user, "is_active", False)
    if _html_ok(request) and staff:
        from django.contrib import admin
        from django.template.response import TemplateResponse

        context = {
            **admin.site.each_context(request),
            "title": "Not allowed",
            "reason": str(exception),
        }
        return TemplateResponse(
            request, ADMIN_FORBIDDEN_TEMPLATE, context, status=403
        ).render()
    if _html_ok(request):
        from django.views.defaults import permission_denied as django_denied

        return django_denied(request, exception)
    return _error(
        RequestError(
            403, "permission_denied", "Forbidden", error_type="permission_error"
        )
    )


def _console_staff(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(
        request.path.startswith("/admin/")
        and getattr(user, "is_staff", False)
        and getattr(user, "is_active", False)
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: any unknown path outside the admin is an OpenAI-style 404;
    staff meet a missing console page or row inside the admin's frame."""
    if _html_ok(request) and _console_staff(request):
        reason = str(exception) if exception.args else ""
        return admin_error(
            request, 404, "Not found", reason or "There is nothing at this address."
        )
    if _html_ok(request):
        from django.views.defaults import page_not_found

        return page_not_found(request, exception)
    return _unknown_endpoint(request)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an unexpected error is the ``internal_error`` envelope."""
    if _html_ok(request):
        from django.views.defaults import server_error as django_server_error

        return django_server_error(request)
    return _error(
        RequestError(500, "internal_error", "Internal error", error_type="api_error")
    )
