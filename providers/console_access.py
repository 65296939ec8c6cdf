"""Which console pages a user may open (issue #15): one table for the page's own
check, the sidebar and every link to it, so no link leads to a refusal.

It lives in the lowest app so that every app's page and every template can read it.
A page not listed here is open to all staff (the dashboard, explain route, the
traffic overview and the live feed).  Each listed page refuses (403) a user without
every permission named.
"""

from __future__ import annotations

from typing import Any

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

PAGES: dict[str, tuple[str, ...]] = {
    "playground": (PLAYGROUND_PERMISSION,),
    "config": EXPORT_PERMISSIONS,
    "jobs": (JOBS_PERMISSION,),
    # spec 10 §2 (gateway/ops/admin_probe.py): adding models changes the provider;
    # a test call spends the connection's credential
    "discover": ("providers.change_provider",),
    "test_connection": ("providers.change_connection",),
}


def may_open(user: Any, page: str) -> bool:
    """Whether ``user`` may open the console page ``page`` (a key of ``PAGES``)."""
    if not getattr(user, "is_staff", False) or not getattr(user, "is_active", False):
        return False
    return bool(user.has_perms(PAGES[page]))


__all__ = [
    "EXPORT_PERMISSIONS",
    "JOBS_PERMISSION",
    "PAGES",
    "PLAYGROUND_PERMISSION",
    "may_open",
]
