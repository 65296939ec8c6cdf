"""Shared fixtures.  Integration fixtures (real gateway process, real mock upstream)
live in ``tests/integration/conftest.py``."""

from __future__ import annotations

import pytest

from tests.services import on_ci


@pytest.fixture(scope="session", autouse=True)
def _ci_services_present() -> None:
    """With CI=true a missing PostgreSQL is a failure, not a skip (settings_test)."""
    if on_ci():
        from django.conf import settings

        assert "postgresql" in settings.DATABASES["default"]["ENGINE"]


@pytest.fixture(scope="session", autouse=True)
def _stop_background_threads(django_db_setup):
    """Stop the config watcher and the statistics caches before the test database
    is dropped: a thread polling it at that moment makes DROP DATABASE fail.
    (Depending on ``django_db_setup`` makes this teardown run before the drop.)
    The target stats' Redis writer (only with ``REDIS_URL``) stops here too."""
    yield
    from gateway.auto.arena import cache as arena_cache
    from gateway.auto.stats import cache as stats_cache
    from gateway.config.state import tables
    from providers.target_stats import stats as target_stats

    target_stats.stop()

    holders = (tables, stats_cache, arena_cache)
    for holder in holders:
        holder.stop()
    for holder in holders:
        thread = getattr(holder, "_thread", None)
        if thread is not None:
            thread.join(timeout=5)
