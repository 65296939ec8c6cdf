"""The admin playground (issue #15): one real request as a key, everything it did."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from combos.config_file import import_config
from gateway.config.snapshot import build_table
from gateway.config.state import tables
from telemetry.models import AttemptLog, RequestLog

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
providers:
  - slug: demo
    kind: mock
    connections: [{name: main}]
    models: [{id: mock-small}, {id: mock-large}]
combos:
  - name: demo-chain
    strategy: priority
    targets: [{model: demo/mock-small}, {model: demo/mock-large}]
api_keys:
  - name: team
    key: sk-or-playground-0000000000000000000000000000000001
"""
PAGE = "/admin/playground/"


@pytest.fixture
def configured() -> Iterator[None]:
    import_config(CONFIG)
    before, tables.table = tables.table, build_table()
    yield
    tables.table = before


@pytest.fixture
def admin_client() -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_a_request_from_the_playground_is_served_routed_and_logged(
    configured, admin_client
):
    page = admin_client.post(
        PAGE,
        {"key": "team", "model": "demo-chain", "message": "hello", "max_tokens": 16},
    ).content.decode()

    assert 'id="playground-status">HTTP 200</span>' in page
    assert 'id="playground-text"' in page
    assert "x-omniroute-route" in page.lower()
    assert '<tr data-result="success">' in page
    row = RequestLog.objects.get()
    assert row.requested_model == "demo-chain"
    assert row.api_key.name == "team"
    assert AttemptLog.objects.filter(request=row, result="success").count() == 1
    assert f"/admin/telemetry/requestlog/{row.pk}/change/" in page


def test_a_refusal_shows_the_error_and_no_attempt(configured, admin_client):
    page = admin_client.post(
        PAGE, {"key": "team", "model": "nope/x", "message": "hi", "max_tokens": 16}
    ).content.decode()

    assert 'id="playground-status">HTTP 404</span>' in page
    assert "model_not_found" in page
    assert "No upstream was called" in page


def test_the_page_prefills_from_links_and_offers_the_routes(configured, admin_client):
    page = admin_client.get(PAGE + "?model=demo-chain&key=team").content.decode()

    assert 'value="demo-chain"' in page
    assert '<option value="team" selected>team</option>' in page
    assert '<option value="demo/mock-small">' in page
    combo = admin_client.get("/admin/combos/combo/").content.decode()
    assert "Playground" in combo  # in the navigation


def test_sending_needs_the_permission_to_change_keys(configured):
    user = get_user_model().objects.create_user("viewer", "v@example.com", "pw")
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_apikey"))
    client = Client()
    client.force_login(user)

    assert client.get(PAGE).status_code == 403
    refused = client.post(
        PAGE, {"key": "team", "model": "demo-chain", "message": "hi", "max_tokens": 4}
    )
    assert refused.status_code == 403
    assert not RequestLog.objects.exists()
