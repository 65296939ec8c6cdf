"""The Django-served endpoints answer as spec 01 lists: the candidates endpoint's
channel, key and allow-list errors, the REST API's JSON 404s, the metrics token, and a
request without a key counted in ``omniroute_requests_total``.

Driven through Django's test client against the real (PostgreSQL) database; the
routing table is built from an imported config.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client

from combos.config_file import import_config
from gateway.config.snapshot import build_table
from gateway.config.state import tables

pytestmark = pytest.mark.django_db(transaction=True)
KEY_ALL = "sk-or-audit-all-00000000000000000000000000000000"
KEY_AUTO_ZZ = "sk-or-audit-auto-zz-000000000000000000000000000"
CONFIG = f"""
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{{name: main, api_key: sk-upstream-audit-000000000}}]
    models: [{{id: m1}}]
combos:
  - name: team
    strategy: priority
    targets: [{{model: pa/m1}}]
api_keys:
  - name: all
    key: {KEY_ALL}
  - name: auto-zz
    key: {KEY_AUTO_ZZ}
    allowed_models: ["auto*", "zz/*"]
"""


@pytest.fixture
def configured() -> Iterator[None]:
    before = tables.table
    try:
        import_config(CONFIG)
        tables.table = build_table()
    finally:
        connections.close_all()
    yield
    tables.table = before


def _error(response, status: int, code: str, param: str | None, error_type: str):
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (code, param, error_type)
    assert error["message"]


@pytest.mark.parametrize(
    "channel", ["auto/coding", "", "coding%2Ffast", "a" * 65, "bad channel"]
)
def test_a_channel_outside_the_pattern_is_400_invalid_auto_channel(configured, channel):
    response = Client().get(
        f"/v1/auto-combo/{channel}/candidates",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
    )
    _error(response, 400, "invalid_auto_channel", "channel", "invalid_request_error")


def test_a_bad_channel_still_needs_a_key(configured):
    response = Client().get("/v1/auto-combo/auto/coding/candidates")
    _error(response, 401, "invalid_api_key", None, "authentication_error")


def test_an_allow_list_that_leaves_no_candidate_is_403(configured):
    response = Client().get(
        "/v1/auto-combo/auto/candidates",
        headers={"Authorization": f"Bearer {KEY_AUTO_ZZ}"},
    )
    _error(response, 403, "model_not_allowed", "channel", "permission_error")


def test_an_allowed_channel_still_lists_its_pool(configured):
    response = Client().get(
        "/v1/auto-combo/auto/candidates",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
    )
    assert response.status_code == 200
    assert [c["key"] for c in response.json()["candidates"]] == ["pa/m1@main"]


# --- the control-plane REST API ------------------------------------------------------


@pytest.fixture
def staff() -> Client:
    client = Client()
    user = User.objects.create_user("ops", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__in=("view_combo", "view_apikey"))
    )
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "path", ["/api/combos/abc", "/api/combos/abc/", "/api/api-keys/1x"]
)
def test_a_non_numeric_id_is_a_json_404(configured, staff, path):
    response = staff.get(path)
    _error(response, 404, "not_found", None, "not_found_error")


def test_an_unknown_id_is_a_404_not_found_error(configured, staff):
    _error(staff.get("/api/combos/999999"), 404, "not_found", None, "not_found_error")


def test_the_auto_listing_also_answers_with_a_trailing_slash(configured, staff):
    response = staff.get("/api/combos/auto/")
    assert response.status_code == 200
    assert response.json()["combos"][0]["id"] == "auto"


@pytest.mark.parametrize("path", ["/api/webhooks", "/chat/foo", "/v1/embeddings"])
def test_an_unknown_api_path_is_a_json_404(configured, staff, path):
    _error(staff.get(path), 404, "not_found", None, "not_found_error")


def test_metrics_refuse_a_wrong_token(settings):
    settings.OMNIROUTE_METRICS_TOKEN = "s3cret-token"
    client = Client()
    assert (
        client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code
        == 401
    )
    assert client.get("/metrics").status_code == 401
    ok = client.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200


def test_a_request_without_a_key_counts_in_requests_total():
    from prometheus_client import REGISTRY

    from gateway.edge.asgi import authenticate_request
    from gateway.inbound.chat import WIRE as CHAT
    from gateway.pipeline.context import ChatContext
    from gateway.pipeline.result import Failure
    from tests.engine.conftest import build_table

    labels = {
        "endpoint": "chat",
        "route": "unresolved",
        "served_model": "none",
        "status": "401",
    }

    def count() -> float:
        return REGISTRY.get_sample_value("omniroute_requests_total", labels) or 0.0

    before = count()
    ctx = ChatContext(
        endpoint="/v1/chat/completions",
        headers={},
        table=build_table({"pa": ["m1"]}),
        record=lambda run: None,
    )
    reply = authenticate_request(CHAT, ctx)
    assert isinstance(reply, Failure)
    assert reply.status == 401
    assert count() == before + 1
