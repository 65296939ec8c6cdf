"""Series of removed providers, combos and aliases go at the next reload (06 §2)."""

from __future__ import annotations

from prometheus_client import generate_latest

from telemetry import metrics


def test_forgetting_a_provider_removes_its_series_only():
    metrics.bounded(metrics.UPSTREAM_ATTEMPTS, "gone1", "m", "main", "success").inc()
    metrics.bounded(metrics.UPSTREAM_ATTEMPTS, "kept1", "m", "main", "success").inc()
    metrics.bounded(metrics.ROUTING_IN_FLIGHT, "gone1/m@main").inc()
    metrics.bounded(metrics.REQUESTS, "chat", "combo:gonecombo", "none", "200").inc()
    removed = metrics.forget_labels({"gone1", "gonecombo"})
    assert removed == 3
    text = generate_latest().decode()
    assert 'provider="gone1"' not in text
    assert 'target="gone1/m@main"' not in text
    assert 'route="combo:gonecombo"' not in text
    assert 'provider="kept1"' in text
