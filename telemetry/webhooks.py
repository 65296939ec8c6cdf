"""Webhook events (spec 02 §12): placeholder wiring point for the delivery work."""

from __future__ import annotations

from typing import Any


def publish_events(events: list[dict[str, Any]], table: Any) -> None:
    """Hand finished-request events to the delivery machinery (never blocks)."""
    return
