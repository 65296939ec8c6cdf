"""The target stats of this process (spec 03 §8.7), chosen once at start-up.

``stats`` is what the strategies read (``p2c``, ``least-used``, ``quota-weighted``)
and the gateway feeds: without ``REDIS_URL`` the in-process ``TargetStats``
(``providers.target_stats_local``); with it a ``SharedTargetStats``
(``providers.target_stats_redis``): the same counts summed over every worker for
``snapshot_many()``, this process's own for ``snapshot()``.  The readers' types are
re-exported here.
"""

from __future__ import annotations

from providers.target_stats_local import EMPTY, TargetSnapshot, TargetStats


def _configured() -> TargetStats:
    """``SharedTargetStats`` when ``REDIS_URL`` is set, else the in-process stats."""
    try:
        from django.conf import settings

        url = getattr(settings, "REDIS_URL", None)
    except Exception:  # noqa: BLE001 - settings not configured (pure tests)
        return TargetStats()
    if not url:
        return TargetStats()
    from providers.redis_store import shared_link
    from providers.target_stats_redis import SharedTargetStats

    link = shared_link()
    assert link is not None
    return SharedTargetStats(link)


stats = _configured()

__all__ = ["EMPTY", "TargetSnapshot", "TargetStats", "stats"]
