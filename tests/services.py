"""Tests that need a real service (PostgreSQL, Redis, Chromium): with ``CI=true`` its
absence fails the test; elsewhere the test skips."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(message: str, *, module: bool = False) -> NoReturn:
    """Fail under CI, else skip (``module``: from a test module's top level)."""
    if on_ci():
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message, allow_module_level=module)
