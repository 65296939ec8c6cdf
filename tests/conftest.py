"""Shared fixtures.  Integration fixtures (real gateway process, real mock upstream)
live in ``tests/integration/conftest.py``."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _ci_services_present() -> None:
    """With CI=true a missing PostgreSQL is a failure, not a skip (settings_test)."""
    if os.environ.get("CI", "").lower() == "true":
        from django.conf import settings

        assert "postgresql" in settings.DATABASES["default"]["ENGINE"]
