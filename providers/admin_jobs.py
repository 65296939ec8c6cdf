"""Admin for scheduled jobs (run records, the Jobs page) and the models.dev catalog.

The Jobs page (``admin:providers_jobs``, spec 06 §3.1) lists each registered job's
last run, outcome, duration, counts, message and next due time, for staff who may
view job runs (the same rows the Job runs list shows).  Users
with ``telemetry.run_job`` also get **Run now**: the Celery task when a broker is
configured, else a background thread of this process (embedded mode).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from unfold.admin import ModelAdmin

from providers import scheduler, services
from providers.console_access import refuse_unless
from providers.job_runner import job_statuses
from providers.jobs import TriggeredBy, load_jobs, start_job
from providers.models import CatalogModel, JobRun

logger = logging.getLogger(__name__)

RUN_JOB_PERMISSION = "telemetry.run_job"  # spec 06 §3.1
MESSAGE_PREVIEW_CHARS = 120
#: the Jobs page cuts a message to about a line of its column (the rest expands)
JOBS_PAGE_PREVIEW_CHARS = 70


def _preview(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _count_items(counts: Any) -> list[str]:
    """``{"updated": 3, "missing": 1}`` -> ``["3 updated", "1 missing"]``."""
    if not isinstance(counts, dict):
        return []
    return [f"{value} {name}" for name, value in counts.items()]


def _counts_text(counts: Any) -> str:
    return ", ".join(_count_items(counts)) or "—"


@admin.register(JobRun)
class JobRunAdmin(ModelAdmin):
    list_display = (
        "job",
        "started_at",
        "outcome_text",
        "duration",
        "triggered_by",
        "counts_text",
        "message_preview",
    )
    list_filter = ("job", "outcome", "triggered_by")
    search_fields = ("job", "message", "payload_sha256")
    date_hierarchy = "started_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # prune_logs removes rows older than 90 days

    @admin.display(description="outcome", ordering="outcome")
    def outcome_text(self, obj: JobRun) -> str:
        return obj.outcome or "running"

    @admin.display(description="duration")
    def duration(self, obj: JobRun) -> str:
        seconds = obj.duration_seconds
        return "—" if seconds is None else f"{seconds:.1f} s"

    @admin.display(description="counts")
    def counts_text(self, obj: JobRun) -> str:
        return _counts_text(obj.counts)

    @admin.display(description="message")
    def message_preview(self, obj: JobRun) -> str:
        return _preview(obj.message or "", MESSAGE_PREVIEW_CHARS)

    def get_urls(self) -> list[URLPattern]:
        jobs = path(
            "jobs/",
            self.admin_site.admin_view(self.jobs_view),
            name="providers_jobs",
        )
        return [jobs, *super().get_urls()]

    def jobs_view(self, request: HttpRequest) -> HttpResponse:
        """GET: the Jobs page (``console_access.JOBS_PERMISSION``).

        POST ``job=<name>``: Run now (``RUN_JOB_PERMISSION``)."""
        refuse_unless(request.user, "jobs")
        can_run = request.user.has_perm(RUN_JOB_PERMISSION)
        if request.method == "POST":
            if not can_run:
                raise PermissionDenied(
                    f"Run now needs the permission: {RUN_JOB_PERMISSION}."
                )
            name = request.POST.get("job", "")
            if name not in load_jobs():
                return HttpResponseBadRequest("unknown job")
            how = start_job(name, triggered_by=TriggeredBy.ADMIN)
            logger.info("admin %s: job %s %s", request.user, name, how)
            self.message_user(request, f"{name}: {how}.")
            return redirect("admin:providers_jobs")
        rows = [
            {
                "name": status.spec.name,
                "schedule": status.schedule,
                # an interval in seconds reads "every 600 s", a crontab as written
                "every": isinstance(status.schedule, int),
                "run": status.last_run,
                "outcome": (status.last_run.outcome or "running")
                if status.last_run
                else "",
                "duration": self.duration(status.last_run) if status.last_run else "",
                # one item each, so the column wraps between items, never in one
                "counts": _count_items(status.last_run.counts)
                if status.last_run
                else [],
                "next_due": status.next_due,
                "message_preview": _preview(
                    status.last_run.message or "", JOBS_PAGE_PREVIEW_CHARS
                )
                if status.last_run
                else "",
            }
            for status in job_statuses(timezone.now())
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": "Jobs",
            "rows": rows,
            "can_run": can_run,
            "scheduler": scheduler.status(),
            "any_running": any(row["outcome"] == "running" for row in rows),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/providers/jobs.html", context)


@admin.register(CatalogModel)
class CatalogModelAdmin(ModelAdmin):
    """models.dev rows: read-only; staff may delete (the sync never does)."""

    list_display = (
        "__str__",
        "name",
        "model_class",
        "input_cost",
        "output_cost",
        "context_window",
        "status",
        "missing_since",
    )
    list_filter = (
        "model_class",
        "status",
        ("missing_since", admin.EmptyFieldListFilter),
        "source_provider",
    )
    search_fields = ("model_id", "name", "source_provider", "family")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @transaction.atomic
    def delete_model(self, request: HttpRequest, obj: CatalogModel) -> None:
        super().delete_model(request, obj)
        services.bump_config_revision()

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset)
        services.bump_config_revision()
