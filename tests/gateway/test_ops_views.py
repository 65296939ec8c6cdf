"""Ops endpoints through Django's test client, against the real PostgreSQL and Redis."""

from __future__ import annotations

import re
import socket

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_healthz_answers_while_the_process_is_up():
    assert Client().get("/healthz").json() == {"status": "ok"}


def test_readyz_is_ok_with_the_database_and_no_redis(settings):
    settings.REDIS_URL = None
    response = Client().get("/readyz")
    assert (response.status_code, response.json()) == (
        200,
        {"status": "ok", "db": "ok"},
    )


def test_readyz_checks_a_configured_redis(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "db": "ok", "redis": "ok"}


def test_readyz_is_503_degraded_when_redis_is_unreachable(settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{_dead_port()}/0"
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "degraded",
        "db": "ok",
        "redis": "unreachable",
        "shared_state": "local",
    }


def test_a_degraded_readyz_is_no_error_line_in_the_log(settings, caplog):
    settings.REDIS_URL = f"redis://127.0.0.1:{_dead_port()}/0"
    with caplog.at_level("WARNING", logger="django.request"):
        assert Client().get("/readyz").status_code == 503
    assert [r for r in caplog.records if r.name == "django.request"] == []


def test_the_readyz_ping_waits_at_most_a_second_on_a_slow_redis(settings, monkeypatch):
    import redis

    from gateway.ops import views

    seen: list[float] = []

    class Recording(redis.Redis):
        @classmethod
        def from_url(cls, url, **kwargs):
            seen.append(kwargs["socket_timeout"])
            return super().from_url(url, **kwargs)

    monkeypatch.setattr(redis, "Redis", Recording)
    for per_operation_ms, probe_s in ((50, 0.5), (2000, 2.0), (300, 1.0)):
        settings.OMNIROUTE_REDIS_TIMEOUT_MS = per_operation_ms
        views._redis_ok("redis://127.0.0.1:6379/0")
        assert seen[-1] == probe_s


def test_readyz_keeps_200_when_redis_is_not_required(settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{_dead_port()}/0"
    settings.OMNIROUTE_READYZ_REQUIRE_REDIS = False
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json()["redis"] == "unreachable"


def test_metrics_require_the_token_when_one_is_set(settings):
    settings.OMNIROUTE_METRICS_TOKEN = "s3cret-token"
    assert Client().get("/metrics").status_code == 401
    ok = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200
    assert b"omniroute_requests_total" in ok.content


def test_startup_warns_once_about_combos_named_like_models(caplog):
    from gateway.config.state import warn_shadowing_combos
    from gateway.kernel.types import ComboInfo, RoutingTable

    table = RoutingTable(
        combos={
            "m1": ComboInfo(id=1, name="m1", strategy="priority"),
            "team": ComboInfo(id=2, name="team", strategy="priority"),
        },
        bare_models={"m1": (("pb", "m1"), ("pa", "m1"))},
    )
    with caplog.at_level("WARNING", logger="gateway.config.state"):
        warn_shadowing_combos(table)
    assert [r.getMessage() for r in caplog.records] == [
        "COMBO_NAME_SHADOWS_MODEL: m1 (pa/m1)"
    ]
    caplog.clear()
    warn_shadowing_combos(RoutingTable())
    assert caplog.records == []


@pytest.mark.django_db(transaction=True)
def test_metrics_carry_each_jobs_last_success():
    from datetime import UTC, datetime

    from gateway.ops import views
    from providers.models import JobRun

    finished = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    JobRun.objects.create(
        job="sync_models_dev",
        started_at=finished,
        finished_at=finished,
        outcome="success",
        counts={},
        triggered_by="command",
    )
    views._job_gauge_read[0] = -views.JOB_GAUGE_CACHE_SECONDS
    body = Client().get("/metrics").content.decode()
    line = next(
        x
        for x in body.splitlines()
        if x.startswith(
            'omniroute_job_last_success_timestamp_seconds{job="sync_models_dev"}'
        )
    )
    assert float(line.split()[-1]) == finished.timestamp()


def test_metrics_aggregate_worker_files_in_multiprocess_mode(monkeypatch, tmp_path):
    from gateway.ops import views

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert views._exposition() == b""  # no worker has written a file yet
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    assert b"omniroute_requests_total" in views._exposition()


def test_the_base_url_answers_with_the_service_and_its_version():
    from providers.http import product_version

    got = Client().get("/")
    head = Client().head("/")

    assert got.status_code == 200
    assert got.json() == {"service": "omniroute", "version": product_version()}
    assert head.status_code == 200


def test_the_base_url_refuses_other_methods_naming_the_allowed_ones():
    response = Client().post("/", data=b"{}", content_type="application/json")

    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_browser_at_the_base_url_gets_a_landing_page_linking_admin_and_api_docs():
    page = Client().get("/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")

    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert 'href="/admin/"' in html
    assert 'href="/api/docs/"' in html
    # an SDK or probe asking for anything else still gets the JSON
    assert Client().get("/", HTTP_ACCEPT="*/*").json()["service"] == "omniroute"


@pytest.mark.django_db
def test_the_api_docs_page_serves_swagger_ui_from_this_install_to_staff():
    from django.contrib.auth import get_user_model

    anonymous = Client().get("/api/docs/")
    assert anonymous.status_code in (401, 403)
    staff = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    browser = Client()
    browser.force_login(staff)
    page = browser.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    assert "cdn.jsdelivr.net" not in html  # no internet needed
    assert "/api/schema/" in html
    bundle = re.search(r'src="([^"]*swagger-ui-bundle\.js)"', html)
    assert bundle is not None
    assert browser.get(bundle.group(1)).status_code == 200
