"""Read-only admin for the request and attempt log."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from telemetry.models import AttemptLog, RequestLog


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AttemptInline(admin.TabularInline):
    model = AttemptLog
    extra = 0
    can_delete = False
    fields = (
        "attempt_no",
        "target",
        "slot",
        "via",
        "result",
        "reason",
        "detail",
        "http_status",
        "latency_ms",
        "ttft_ms",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "billable",
        "error_message",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RequestLog)
class RequestLogAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "api_key_prefix",
        "requested_model",
        "route",
        "served_model",
        "status",
        "http_status",
        "reason",
        "attempt_count",
        "latency_ms",
        "ttft_ms",
        "cost_usd",
    )
    list_filter = ("status", "http_status", "stream", "route", "provider", "endpoint")
    search_fields = (
        "id",
        "requested_model",
        "served_model",
        "api_key_prefix",
        "reason",
        "session_id",
    )
    date_hierarchy = "created_at"
    inlines = (AttemptInline,)


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
    list_filter = ("result", "provider", "billable")
    search_fields = ("target", "model", "request__id")
    date_hierarchy = "started_at"
