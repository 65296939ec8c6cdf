"""Which console pages a user may open (issue #15): one table for the page's own
check, the sidebar and every link to it, so no link leads to a refusal.

A page not listed here is open to all staff (the dashboard, explain route, the
traffic overview and the live feed).  Each listed page refuses (403) a user without
every permission named.
"""

from __future__ import annotations

from typing import Any

from combos.admin_config import EXPORT_PERMISSIONS
from providers.admin_jobs import JOBS_PERMISSION

#: sending a real request spends like a client (playground.py)
PLAYGROUND_PERMISSION = "combos.change_apikey"

PAGES: dict[str, tuple[str, ...]] = {
    "playground": (PLAYGROUND_PERMISSION,),
    "config": EXPORT_PERMISSIONS,
    "jobs": (JOBS_PERMISSION,),
}


def may_open(user: Any, page: str) -> bool:
    """Whether ``user`` may open the console page ``page`` (a key of ``PAGES``)."""
    if not getattr(user, "is_staff", False) or not getattr(user, "is_active", False):
        return False
    return bool(user.has_perms(PAGES[page]))


__all__ = ["PAGES", "PLAYGROUND_PERMISSION", "may_open"]
