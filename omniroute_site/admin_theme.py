"""The admin console's theme and navigation (issue #15).

The theme is django-unfold: a maintained Django admin theme (Tailwind, light and dark,
fonts and icons shipped in the package, so nothing loads from a CDN) that keeps the
admin's own views, permissions and URLs, and adds a navigation sidebar, a dashboard
hook and expandable rows.  The navigation groups the pages by the operator's tasks;
each entry shows only to staff who may see it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest
from django.templatetags.static import static
from django.urls import reverse_lazy


def _perm(*names: str) -> Callable[[HttpRequest], bool]:
    def allowed(request: HttpRequest) -> bool:
        return bool(request.user.has_perms(names))

    return allowed


def _staff(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_staff", False))


def _page(name: str) -> Callable[[HttpRequest], bool]:
    """A console page's own check (``providers.console_access``), so the sidebar
    never links a page that refuses the user."""

    def allowed(request: HttpRequest) -> bool:
        # imported on use: this module is read by the settings, before the apps load
        from providers.console_access import may_open

        return may_open(request.user, name)

    return allowed


def _item(title: str, icon: str, link: Any, *perms: str) -> dict[str, Any]:
    return {
        "title": title,
        "icon": icon,
        "link": link,
        "permission": _perm(*perms) if perms else _staff,
    }


def _changelist(app: str, model: str) -> Any:
    return reverse_lazy(f"admin:{app}_{model}_changelist")


NAVIGATION = [
    {
        "title": "Overview",
        "items": [
            _item("Dashboard", "dashboard", reverse_lazy("admin:index")),
            {
                **_item(
                    "Traffic overview", "monitoring", reverse_lazy("telemetry-overview")
                ),
                "permission": _page("overview"),
            },
            {
                **_item(
                    "Live routing", "stream", reverse_lazy("telemetry-live-routing")
                ),
                "permission": _page("live_routing"),
            },
            _item("Explain route", "alt_route", reverse_lazy("explain-route")),
            {
                **_item("Playground", "science", reverse_lazy("admin-playground")),
                "permission": _page("playground"),
            },
        ],
    },
    {
        "title": "Upstreams",
        "collapsible": True,
        "items": [
            _item(
                "Providers",
                "dns",
                _changelist("providers", "provider"),
                "providers.view_provider",
            ),
            _item(
                "Connections",
                "power",
                _changelist("providers", "connection"),
                "providers.view_connection",
            ),
            _item(
                "Models",
                "deployed_code",
                _changelist("providers", "providermodel"),
                "providers.view_providermodel",
            ),
            _item(
                "Catalog (models.dev)",
                "menu_book",
                _changelist("providers", "catalogmodel"),
                "providers.view_catalogmodel",
            ),
        ],
    },
    {
        "title": "Routing",
        "collapsible": True,
        "items": [
            _item("Combos", "hub", _changelist("combos", "combo"), "combos.view_combo"),
            _item(
                "Model → combo mappings",
                "call_split",
                _changelist("combos", "modelcombomapping"),
                "combos.view_modelcombomapping",
            ),
            _item(
                "Smart routes",
                "psychology",
                _changelist("combos", "smartroute"),
                "combos.view_smartroute",
            ),
            _item(
                "Gateway settings",
                "tune",
                _changelist("combos", "gatewaysettings"),
                "combos.view_gatewaysettings",
            ),
        ],
    },
    {
        "title": "Access",
        "collapsible": True,
        "items": [
            _item(
                "API keys", "key", _changelist("combos", "apikey"), "combos.view_apikey"
            ),
            _item(
                "Candidate overrides",
                "filter_alt",
                _changelist("combos", "candidateoverride"),
                "combos.view_candidateoverride",
            ),
            _item(
                "Admin tokens",
                "badge",
                _changelist("combos", "admintoken"),
                "combos.view_admintoken",
            ),
            _item("Users", "person", _changelist("auth", "user"), "auth.view_user"),
        ],
    },
    {
        "title": "Telemetry",
        "collapsible": True,
        "items": [
            _item(
                "Request log",
                "receipt_long",
                _changelist("telemetry", "requestlog"),
                "telemetry.view_requestlog",
            ),
            _item(
                "Attempts",
                "replay",
                _changelist("telemetry", "attemptlog"),
                "telemetry.view_attemptlog",
            ),
            _item(
                "Reliability (24 h)",
                "verified",
                _changelist("telemetry", "reliabilitystat"),
                "telemetry.view_reliabilitystat",
            ),
            _item(
                "Usage by hour",
                "bar_chart",
                _changelist("telemetry", "usagehourly"),
                "telemetry.view_usagehourly",
            ),
            _item(
                "Webhooks",
                "webhook",
                _changelist("telemetry", "webhookendpoint"),
                "telemetry.view_webhookendpoint",
            ),
        ],
    },
    {
        "title": "Operations",
        "collapsible": True,
        "items": [
            {
                **_item("Jobs", "schedule", reverse_lazy("admin:providers_jobs")),
                "permission": _page("jobs"),
            },
            {
                **_item("Configuration as code", "code", reverse_lazy("admin-config")),
                "permission": _page("config"),
            },
            _item(
                "Arena scores",
                "emoji_events",
                _changelist("providers", "arenascore"),
                "providers.view_arenascore",
            ),
        ],
    },
]

UNFOLD: dict[str, Any] = {
    "SITE_TITLE": "OmniRoute",
    "SITE_HEADER": "OmniRoute",
    "SITE_SUBHEADER": "LLM routing gateway",
    "SITE_SYMBOL": "route",
    "SITE_FAVICONS": [
        {
            "rel": "icon",
            "type": "image/svg+xml",
            "href": lambda request: static("omniroute/favicon.svg"),
        }
    ],
    "SITE_URL": "/",
    "SHOW_VIEW_ON_SITE": False,
    "SHOW_HISTORY": True,
    "STYLES": [lambda request: static("omniroute/admin.css")],
    "SCRIPTS": [lambda request: static("omniroute/admin.js")],
    "DASHBOARD_CALLBACK": "gateway.ops.dashboard.dashboard_callback",
    "SIDEBAR": {
        "show_search": True,
        "show_all_applications": True,
        "navigation": NAVIGATION,
    },
}
