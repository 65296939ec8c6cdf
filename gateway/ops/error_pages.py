"""Error pages inside the console: the admin's frame (sidebar, header), what went
wrong and the way back, for a staff user who meets a bad address or a missing row
(issue #15 re-audit: such errors were bare text outside the console)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

ADMIN_ERROR_TEMPLATE = "admin/omr_error.html"


def admin_error(
    request: HttpRequest, status: int, heading: str, reason: str
) -> HttpResponse:
    """An error page inside the admin's frame (sidebar, header), for staff."""
    context = {
        **admin.site.each_context(request),
        "title": heading,
        "heading": heading,
        "reason": reason,
    }
    return TemplateResponse(
        request, ADMIN_ERROR_TEMPLATE, context, status=status
    ).render()
