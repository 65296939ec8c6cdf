"""Which console pages a user may open (issue #15): one table for the page's own
check, the sidebar and every link to it, so no link leads to a refusal.

It lives in the lowest app so that every app's page and every template can read it.
A page not listed here is open to all staff (the dashboard and explain route).  Each
listed page refuses (403) a user without every permission named, saying which
(``refuse_unless``); the live feed's socket closes such a user with ``4403``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

#: sending a real request spends like a client (gateway/ops/playground.py)
PLAYGROUND_PERMISSION = "combos.change_apikey"
#: the download holds every kind (combos/admin_config.py)
EXPORT_PERMISSIONS = (
    "providers.view_provider",
    "providers.view_connection",
    "combos.view_combo",
    "combos.view_apikey",
    "combos.view_smartroute",
)
#: the Jobs page shows the job runs' outcomes and messages: the Job runs list's right
JOBS_PERMISSION = "providers.view_jobrun"
#: the traffic overview and the live routing feed show what the request and attempt
#: logs hold (every request's key, model, route, cost and attempts): those lists' rights
TRAFFIC_PERMISSIONS = ("telemetry.view_requestlog", "telemetry.view_attemptlog")

PAGES: dict[str, tuple[str, ...]] = {
    "playground": (PLAYGROUND_PERMISSION,),
    "config": EXPORT_PERMISSIONS,
    "jobs": (JOBS_PERMISSION,),
    # spec 10 §2 (gateway/ops/admin_probe.py): adding models changes the provider;
    # a test call spends the connection's credential
    "discover": ("providers.change_provider",),
    "test_connection": ("providers.change_connection",),
    "overview": TRAFFIC_PERMISSIONS,
    "live_routing": TRAFFIC_PERMISSIONS,
}
#: the page's name in a refusal
TITLES = {
    "playground": "The playground",
    "config": "Configuration as code",
    "jobs": "The Jobs page",
    "discover": "List upstream models",
    "test_connection": "Test connection",
    "overview": "The traffic overview",
    "live_routing": "Live routing",
}


def may_open(user: Any, page: str) -> bool:
    """Whether ``user`` may open the console page ``page`` (a key of ``PAGES``)."""
    if not getattr(user, "is_staff", False) or not getattr(user, "is_active", False):
        return False
    return bool(user.has_perms(PAGES[page]))


def refuse_unless(user: Any, page: str) -> None:
    """Raise ``PermissionDenied`` (a 403 in the admin's style, one log line) unless
    ``user`` may open ``page``; its message names the permissions the page needs."""
    if not may_open(user, page):
        needed = ", ".join(PAGES[page])
        raise PermissionDenied(f"{TITLES[page]} needs the permissions: {needed}.")


__all__ = [
    "EXPORT_PERMISSIONS",
    "JOBS_PERMISSION",
    "PAGES",
    "PLAYGROUND_PERMISSION",
    "TRAFFIC_PERMISSIONS",
    "may_open",
    "refuse_unless",
]
