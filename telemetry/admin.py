"""Read-only admin for the request and attempt log and webhook deliveries; the
webhook endpoint admin (secret write-only, "Send test event")."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html
from unfold.admin import ModelAdmin, TabularInline

from providers.models import Provider
from telemetry import services
from telemetry.models import (
    AttemptLog,
    ReliabilityStat,
    RequestLog,
    UsageHourly,
    WebhookDelivery,
    WebhookEndpoint,
)

logger = logging.getLogger(__name__)

SECRET_HELP = (
    "Write-only: signs each delivery (HMAC-SHA256). Leave empty to keep the stored "
    "secret; on a new endpoint, empty generates one (32 random bytes, hex), shown once."
)
SECRET_TEMPLATE = "admin/telemetry/webhookendpoint/secret_created.html"
_GENERATED_SECRET = "_omniroute_generated_webhook_secret"


class ReadOnlyAdmin(ModelAdmin):
    # no bulk actions: the logs are pruned by their job (spec 06 §3), and the
    # per-row checkbox was a third of the request log page's rendering time
    actions = None

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AttemptInline(TabularInline):
    """A request's attempts on its page; folded to fit the page's box at 1440 px
    (result with reason and detail, latency with TTFT, tokens, flags in words)."""

    model = AttemptLog
    extra = 0
    can_delete = False
    fields = (
        "attempt_no",
        "target",
        "slot",
        "via",
        "result_shown",
        "http_status",
        "latency_shown",
        "tokens_shown",
        "cost_usd",
        "flags_shown",
        "error_message",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="result")
    def result_shown(self, obj: AttemptLog) -> str:
        why = " · ".join(part for part in (obj.reason, obj.detail) if part)
        if not why:
            return str(obj.result)
        return format_html('{}<br><span class="omr-muted">{}</span>', obj.result, why)

    @admin.display(description="latency")
    def latency_shown(self, obj: AttemptLog) -> str:
        if obj.latency_ms is None:
            return "—"
        if obj.ttft_ms is None:
            return f"{obj.latency_ms} ms"
        return f"{obj.latency_ms} ms (TTFT {obj.ttft_ms})"

    @admin.display(description="tokens")
    def tokens_shown(self, obj: AttemptLog) -> str:
        if obj.prompt_tokens is None and obj.completion_tokens is None:
            return "—"
        return f"{obj.prompt_tokens or 0} + {obj.completion_tokens or 0}"

    @admin.display(description="flags")
    def flags_shown(self, obj: AttemptLog) -> str:
        flags = [
            name
            for name, on in (
                ("billable", obj.billable),
                ("passthrough", obj.passthrough),
            )
            if on
        ]
        if obj.dropped:
            flags.append("dropped " + ", ".join(map(str, obj.dropped)))
        return ", ".join(flags) or "—"


#: the status badge's colour on the request log list
_STATUS_TONE: dict[str, str] = {
    RequestLog.Status.SUCCESS: "omr-ok",
    RequestLog.Status.REFUSED: "omr-warn",
    RequestLog.Status.CLIENT_CLOSED: "omr-info",
}


# -- list filters that cost no scan of the log (issue #15: the request log page) ----
# Django's date hierarchy and its filters on plain columns each read the whole table
# (SELECT DISTINCT …) on every page view; these offer fixed choices, or the
# configured providers, and filter on indexed columns.

SPANS = {
    "15m": ("last 15 min", timedelta(minutes=15)),
    "1h": ("last hour", timedelta(hours=1)),
    "24h": ("last 24 h", timedelta(hours=24)),
    "7d": ("last 7 days", timedelta(days=7)),
}
#: spec 06 §1.1 (amended by spec 09 §2.11): the surfaces a request came in on
ENDPOINTS = (
    "chat",
    "responses",
    "messages",
    "count_tokens",
    "embeddings",
    "completions",
)
ROUTE_KINDS = {
    "direct": ("direct", Q(route="direct")),
    "chain": ("chain", Q(route="chain")),
    "combo": ("a combo", Q(route__startswith="combo:")),
    "auto": ("auto", Q(route="auto") | Q(route__startswith="auto/")),
    "unresolved": ("unresolved", Q(route="unresolved")),
}
STATUS_CLASSES = ("2xx", "4xx", "5xx")


def since_filter(field: str) -> type[admin.SimpleListFilter]:
    """A "when" filter on the indexed time column ``field``."""

    class Since(admin.SimpleListFilter):
        title = "time"
        parameter_name = "since"

        def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
            return [(key, label) for key, (label, _span) in SPANS.items()]

        def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
            found = SPANS.get(self.value() or "")
            if found is None:
                return queryset
            return queryset.filter(**{f"{field}__gte": timezone.now() - found[1]})

    return Since


class EndpointFilter(admin.SimpleListFilter):
    title = "endpoint"
    parameter_name = "endpoint"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return [(name, name) for name in ENDPOINTS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(endpoint=value) if value else queryset


class RouteFilter(admin.SimpleListFilter):
    title = "route"
    parameter_name = "route_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return [(key, label) for key, (label, _q) in ROUTE_KINDS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        found = ROUTE_KINDS.get(self.value() or "")
        return queryset.filter(found[1]) if found else queryset


class HttpStatusFilter(admin.SimpleListFilter):
    title = "HTTP status"
    parameter_name = "http_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return [(name, name) for name in STATUS_CLASSES]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value not in STATUS_CLASSES:
            return queryset
        low = int(value[0]) * 100
        return queryset.filter(http_status__gte=low, http_status__lt=low + 100)


def provider_filter(field: str) -> type[admin.SimpleListFilter]:
    """The configured providers (one small query), not the log's distinct values."""

    class ProviderFilter(admin.SimpleListFilter):
        title = "provider"
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
            slugs = Provider.objects.order_by("slug").values_list("slug", flat=True)
            return [(slug, slug) for slug in slugs]

        def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
            value = self.value()
            return queryset.filter(**{field: value}) if value else queryset

    return ProviderFilter


@admin.register(RequestLog)
class RequestLogAdmin(ReadOnlyAdmin):
    # fits 1440 px: requested -> served with the route under it, one outcome column
    # (status, HTTP status, reason), latency with its TTFT; the rest is on the row
    list_display = (
        "created_at",
        "key_shown",
        "endpoint",
        "models_shown",
        "outcome_shown",
        "attempts_shown",
        "latency_shown",
        "cost_shown",
    )
    list_filter = (
        since_filter("created_at"),
        "status",
        HttpStatusFilter,
        "stream",
        RouteFilter,
        provider_filter("provider"),
        EndpointFilter,
    )
    search_fields = (
        "id",
        "requested_model",
        "served_model",
        "api_key_prefix",
        "reason",
        "session_id",
    )
    # one COUNT(*) per page, not a second one for the unfiltered total
    show_full_result_count = False
    list_per_page = 50
    inlines = (AttemptInline,)

    @admin.display(description="key", ordering="api_key_prefix")
    def key_shown(self, obj: RequestLog) -> str:
        return obj.api_key_prefix or "—"

    @admin.display(description="attempts", ordering="attempt_count")
    def attempts_shown(self, obj: RequestLog) -> int:
        return obj.attempt_count

    @admin.display(description="cost (USD)", ordering="cost_usd")
    def cost_shown(self, obj: RequestLog) -> str:
        return "—" if obj.cost_usd is None else f"{obj.cost_usd:.6f}"

    @admin.display(description="requested → served", ordering="requested_model")
    def models_shown(self, obj: RequestLog) -> str:
        served = obj.served_model or "—"
        if served == obj.requested_model:
            served = "same"
        return format_html(
            '{} → {}<br><span class="omr-muted">{}</span>',
            obj.requested_model or "—",
            served,
            obj.route or "—",
        )

    @admin.display(description="outcome", ordering="http_status")
    def outcome_shown(self, obj: RequestLog) -> str:
        return format_html(
            '<span class="omr-badge {}">{} {}</span>{}',
            _STATUS_TONE.get(obj.status, "omr-bad"),
            obj.get_status_display(),
            obj.http_status,
            format_html('<br><span class="omr-muted">{}</span>', obj.reason)
            if obj.reason
            else "",
        )

    @admin.display(description="latency", ordering="latency_ms")
    def latency_shown(self, obj: RequestLog) -> str:
        if obj.ttft_ms is None:
            return f"{obj.latency_ms} ms"
        return format_html(
            '{} ms<br><span class="omr-muted">TTFT {} ms</span>',
            obj.latency_ms,
            obj.ttft_ms,
        )


@admin.register(AttemptLog)
class AttemptLogAdmin(ReadOnlyAdmin):
    list_display = (
        "started_at",
        "target",
        "result",
        "reason",
        "detail",
        "http_status",
        "latency_ms",
        "ttft_ms",
        "billable",
    )
    list_filter = (
        since_filter("started_at"),
        "result",
        provider_filter("provider"),
        "billable",
        "passthrough",
    )
    search_fields = ("target", "model", "request__id")
    show_full_result_count = False
    list_per_page = 50


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(
        max_length=2000, assume_scheme="https", help_text="http:// or https://"
    )
    secret = forms.CharField(
        required=False,
        strip=True,
        label="Signing secret",
        help_text=SECRET_HELP,
        # render_value: a secret typed into a form that fails to save comes back
        # in it (an unbound form has none to render: the stored one never shows)
        widget=forms.PasswordInput(
            render_value=True, attrs={"autocomplete": "new-password"}
        ),
    )
    events = forms.MultipleChoiceField(
        required=False,
        choices=WebhookEndpoint.Event.choices,
        initial=[WebhookEndpoint.Event.MODEL_FAILOVER],
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("url", "events", "active")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ModelAdmin):
    form = WebhookEndpointForm
    list_display = ("url", "event_list", "active", "secret_display", "updated_at")
    list_filter = ("active",)
    search_fields = ("url",)
    fields = ("url", "secret", "secret_display", "events", "active")
    readonly_fields = ("secret_display",)
    actions = ("send_test_event",)

    @admin.display(description="events")
    def event_list(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.events or ()) or "—"

    @admin.display(description="signing secret")
    def secret_display(self, obj: WebhookEndpoint) -> str:
        """Whether one is set; no part of it (issue #15)."""
        return f"signing secret {obj.secret_display or 'not set'}"

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool
    ) -> None:
        generated = services.save_webhook_endpoint(
            obj, secret=form.cleaned_data.get("secret") or None
        )
        setattr(request, _GENERATED_SECRET, generated)

    def response_add(
        self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: Any = None
    ) -> HttpResponse:
        generated = getattr(request, _GENERATED_SECRET, None)
        if not generated:
            return super().response_add(request, obj, post_url_continue)
        # Shown once, in this response only: never stored in messages or the page.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "endpoint": obj,
            "secret": generated,
            "title": "Webhook endpoint created",
        }
        return TemplateResponse(request, SECRET_TEMPLATE, context)

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        services.delete_webhook_endpoints([obj])

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        services.delete_webhook_endpoints(queryset)

    @admin.action(description="Send test event", permissions=("change",))
    def send_test_event(self, request: HttpRequest, queryset: Any) -> None:
        endpoints = list(queryset)
        sent = services.send_test_event(endpoints)
        skipped = len(endpoints) - len(sent)
        logger.info(
            "admin %s queued a test event for %d webhook endpoint(s)",
            request.user,
            len(sent),
        )
        note = f" ({skipped} inactive endpoint(s) skipped)" if skipped else ""
        self.message_user(
            request,
            f"Test event queued for {len(sent)} endpoint(s){note}; "
            "see Webhook deliveries for the result.",
            messages.SUCCESS if sent else messages.WARNING,
        )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "event",
        "event_id",
        "endpoint",
        "status",
        "tries",
        "last_status_code",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event", "endpoint")
    search_fields = ("event_id", "endpoint__url")
    list_select_related = ("endpoint",)
    date_hierarchy = "created_at"


def _target(provider: str, model: str, connection: str | None) -> str:
    """One column for the three keys (the list fits 1440 px)."""
    return f"{provider}/{model}@{connection}" if connection else f"{provider}/{model}"


def _dash(value: Any) -> Any:
    return "—" if value is None else value


@admin.register(ReliabilityStat)
class ReliabilityStatAdmin(ReadOnlyAdmin):
    """The 24 h statistics the auto engine scores with (spec 06 §3.4, §4.1)."""

    list_display = (
        "target_shown",
        "samples",
        "failures",
        "shown_reliability",
        "shown_good_rate",
        "shown_p50",
        "shown_p95",
        "shown_ttft",
        "computed_at",
    )
    list_filter = ("provider", "connection")
    search_fields = ("provider", "model", "connection")
    ordering = ("provider", "model", "connection")

    @admin.display(description="provider/model@connection", ordering="provider")
    def target_shown(self, obj: ReliabilityStat) -> str:
        return _target(obj.provider, obj.model, obj.connection)

    @admin.display(description="reliability", ordering="reliability")
    def shown_reliability(self, obj: ReliabilityStat) -> Any:
        return _dash(None if obj.reliability is None else round(obj.reliability, 4))

    @admin.display(description="good rate", ordering="good_rate")
    def shown_good_rate(self, obj: ReliabilityStat) -> Any:
        return _dash(None if obj.good_rate is None else round(obj.good_rate, 4))

    @admin.display(description="p50 ms", ordering="p50_latency_ms")
    def shown_p50(self, obj: ReliabilityStat) -> Any:
        return _dash(obj.p50_latency_ms)

    @admin.display(description="p95 ms", ordering="p95_latency_ms")
    def shown_p95(self, obj: ReliabilityStat) -> Any:
        return _dash(obj.p95_latency_ms)

    @admin.display(description="p95 TTFT ms", ordering="p95_ttft_ms")
    def shown_ttft(self, obj: ReliabilityStat) -> Any:
        return _dash(obj.p95_ttft_ms)


@admin.register(UsageHourly)
class UsageHourlyAdmin(ReadOnlyAdmin):
    list_display = (
        "hour",
        "target_shown",
        "attempts",
        "failures",
        "p95_shown",
        "tokens_shown",
        "cost_shown",
        "computed_at",
    )
    list_filter = ("provider",)
    date_hierarchy = "hour"
    ordering = ("-hour", "provider", "model")

    @admin.display(description="provider/model@connection", ordering="provider")
    def target_shown(self, obj: UsageHourly) -> str:
        return _target(obj.provider, obj.model, obj.connection)

    @admin.display(description="p95 ms", ordering="p95_latency_ms")
    def p95_shown(self, obj: UsageHourly) -> Any:
        return _dash(obj.p95_latency_ms)

    @admin.display(description="tokens (prompt + completion)")
    def tokens_shown(self, obj: UsageHourly) -> str:
        return f"{obj.prompt_tokens} + {obj.completion_tokens}"

    @admin.display(description="cost (USD)", ordering="cost_usd")
    def cost_shown(self, obj: UsageHourly) -> str:
        return "—" if obj.cost_usd is None else f"{obj.cost_usd:.6f}"
