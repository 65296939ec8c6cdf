"""docker-compose.yml has the stack of docs/deploy.md (no Docker engine here)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_long_running_service_has_a_health_check():
    services = _compose()["services"]
    assert set(services) == {"db", "redis", "migrate", "gateway", "worker", "beat"}
    for name in ("db", "redis", "gateway", "worker", "beat"):
        assert "healthcheck" in services[name], name


def test_app_services_wait_for_healthy_dependencies():
    services = _compose()["services"]
    for name in ("gateway", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["db"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["migrate"]["condition"] == "service_completed_successfully"


def test_exactly_one_beat_with_the_database_scheduler():
    beat = _compose()["services"]["beat"]
    assert beat["deploy"]["replicas"] == 1
    assert "django_celery_beat.schedulers:DatabaseScheduler" in beat["command"]
