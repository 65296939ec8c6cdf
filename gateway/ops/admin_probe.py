"""Admin pages of spec 10 §2 (staff only, wrapped by ``admin_site.admin_view``):

* ``discover_view``: a provider's upstream models not configured yet, with their
  catalog facts and a checkbox each; posting adds the chosen ones as model rows
  (``providers.services.add_discovered_models``).  Reached from the provider
  change form ("List upstream models") and the provider list's action.
* ``test_connection_view``: one minimal request with each listed connection's
  credential (``?ids=1,2``), reported as admin messages on the connection list
  (``&back=change``, from the connection form's "Test connection" button: on that
  form).

Both need the change permission of the model they probe; both feed no health.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from gateway.config.snapshot import probe_info
from gateway.ops.probe import Probe, discover, test_connection
from providers.console_access import refuse_unless
from providers.models import Connection, Provider
from providers.services import add_discovered_models

DISCOVER_TEMPLATE = "admin/providers/discover.html"


def discover_view(request: HttpRequest, pk: int) -> HttpResponse:
    refuse_unless(request.user, "discover")
    provider = get_object_or_404(Provider, pk=pk)
    change_url = reverse("admin:providers_provider_change", args=[provider.pk])
    if request.method == "POST":
        added = add_discovered_models(provider, request.POST.getlist("add_model"))
        messages.success(request, f"{provider}: added {added} model(s).")
        return HttpResponseRedirect(change_url)
    probe, offered = discover(probe_info(provider))
    return TemplateResponse(
        request,
        DISCOVER_TEMPLATE,
        {
            **admin.site.each_context(request),
            "title": f"Upstream models of {provider}",
            "provider": provider,
            "probe": probe,
            "offered": offered,
            "change_url": change_url,
            "opts": Provider._meta,
        },
    )


def _report(connection: Connection, probe: Probe) -> tuple[int, str]:
    if probe.ok:
        return (
            messages.SUCCESS,
            f"{connection}: OK, HTTP {probe.http_status} in {probe.latency_ms} ms",
        )
    status = f"HTTP {probe.http_status}" if probe.http_status else "no answer"
    detail = f", {probe.detail}" if probe.detail else ""
    said = f": {probe.message}" if probe.message else ""
    return (
        messages.ERROR,
        f"{connection}: failed ({probe.reason}{detail}; {status}, "
        f"{probe.latency_ms} ms){said}",
    )


def test_connection_view(request: HttpRequest) -> HttpResponse:
    refuse_unless(request.user, "test_connection")
    ids = [int(i) for i in request.GET.get("ids", "").split(",") if i.isdigit()]
    for connection in Connection.objects.filter(pk__in=ids).select_related("provider"):
        info = probe_info(connection.provider, connection)
        level, text = _report(connection, test_connection(info, info.connections[0]))
        messages.add_message(request, level, text)
    if request.GET.get("back") == "change" and len(ids) == 1:  # the form's button
        return HttpResponseRedirect(
            reverse("admin:providers_connection_change", args=[ids[0]])
        )
    return HttpResponseRedirect(reverse("admin:providers_connection_changelist"))
