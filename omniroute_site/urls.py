"""URLs served by Django (the chat paths are served by ``gateway.edge.asgi``)."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView
from drf_spectacular.utils import extend_schema

from combos import admin_config
from gateway.ops import (
    admin_probe,
    auto_views,
    dashboard,
    playground,
    probe,
    responses_views,
    views,
)
from gateway.ops.admin_smart import smart_route_view
from gateway.ops.admin_views import explain_route_view
from telemetry.dashboards import live_routing_view, overview_view


@extend_schema(exclude=True)
class _AutoCombosSlash(auto_views.AutoCombosView):
    """``/api/combos/auto/``: the same view, listed once in the schema."""


urlpatterns = [
    *admin_config.urls(),  # issue #15: config as code in the admin
    # issue #15: the dashboard's panels (re-fetched) and its health buttons
    path(
        "admin/dashboard/panels/",
        admin.site.admin_view(dashboard.panel_view),
        name="admin-dashboard-panels",
    ),
    path(
        "admin/playground/",
        admin.site.admin_view(playground.playground_view),
        name="admin-playground",
    ),
    path(
        "admin/dashboard/health/",
        admin.site.admin_view(dashboard.health_action_view),
        name="admin-dashboard-health",
    ),
    path(
        "admin/explain-route/",
        admin.site.admin_view(explain_route_view),
        name="explain-route",
    ),
    path(
        "admin/smart-routes/<path:alias>/",
        admin.site.admin_view(smart_route_view),
        name="smart-route-detail",
    ),
    path(
        "admin/telemetry/overview/",
        admin.site.admin_view(overview_view),
        name="telemetry-overview",
    ),
    path(
        "admin/telemetry/live-routing/",
        admin.site.admin_view(live_routing_view),
        name="telemetry-live-routing",
    ),
    # spec 10 §2: discovery and Test connection in the admin
    path(
        "admin/providers/provider/<int:pk>/discover/",
        admin.site.admin_view(admin_probe.discover_view),
        name="admin-provider-discover",
    ),
    path(
        "admin/providers/connection/test/",
        admin.site.admin_view(admin_probe.test_connection_view),
        name="admin-connection-test",
    ),
    path("admin/", admin.site.urls),
    # Django's default LOGIN_REDIRECT_URL, kept from being a dead end for a bookmark
    path(
        "accounts/profile/",
        RedirectView.as_view(pattern_name="admin:index", permanent=False),
    ),
    path("api/combos/auto", auto_views.AutoCombosView.as_view(), name="combos-auto"),
    # the optional slash of the router's resources (combos/api_urls.py); one path
    # in the OpenAPI schema
    path("api/combos/auto/", _AutoCombosSlash.as_view()),
    # spec 10 §2: discovery and Test connection (before the router's resources)
    re_path(
        r"^api/providers/(?P<ref>[^/]+)/discover/?$",
        probe.DiscoverView.as_view(),
        name="provider-discover",
    ),
    re_path(
        r"^api/connections/(?P<pk>[0-9]+)/test/?$",
        probe.TestConnectionView.as_view(),
        name="connection-test",
    ),
    path("api/", include("combos.api_urls")),
    path("v1/models", csrf_exempt(views.models_view), name="v1-models"),
    path("v1/models/", csrf_exempt(views.models_view)),  # the optional slash
    path("models", csrf_exempt(views.models_view)),  # beside /chat/completions
    path("v1/models/<path:model_id>", csrf_exempt(views.model_view), name="v1-model"),
    # spec 09 §3.4: stored responses (POST /v1/responses is the ASGI front door's)
    re_path(
        r"^v1/responses/(?P<response_id>[^/]+)/input_items/?$",
        csrf_exempt(responses_views.input_items_view),
        name="v1-response-input-items",
    ),
    re_path(
        r"^v1/responses/(?P<response_id>[^/]+)/?$",
        csrf_exempt(responses_views.response_view),
        name="v1-response",
    ),
    # any channel, also one with a slash or none: the view answers 400 for it (spec 01)
    re_path(
        r"^v1/auto-combo/(?P<channel>.*)/candidates$",
        csrf_exempt(auto_views.candidates_view),
        name="auto-candidates",
    ),
    # spec 01 "All JSON": an unknown API path is a JSON 404, never Django's HTML page
    re_path(r"^(?:api|chat|v1)/(?P<rest>.*)$", csrf_exempt(views.v1_not_found)),
    path("", csrf_exempt(views.service_view), name="service"),
    path("favicon.ico", views.favicon_view, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
]

# spec 01: JSON errors everywhere but the admin
handler400 = "gateway.ops.views.bad_request"
handler403 = "gateway.ops.views.permission_denied"
handler404 = "gateway.ops.views.not_found"
handler500 = "gateway.ops.views.server_error"
