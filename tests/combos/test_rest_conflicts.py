"""REST writes: one that collides with a stored row answers 400 with the field, never
a bare 500 page (spec 01 "Control-plane REST API": validation errors are 400 with
field names); a provider posted in the YAML shape keeps its nested connections."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from combos.models import Combo
from providers.models import Provider

pytestmark = pytest.mark.django_db


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


def test_a_second_identical_mapping_is_a_400_on_pattern(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("team")
    body = {"pattern": "gpt-*", "combo": "team", "priority": 3}
    assert post(operator_client, "/api/model-combo-mappings", body).status_code == 201

    response = post(operator_client, "/api/model-combo-mappings", body)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_config"
    assert response.json()["error"]["param"] == "pattern"
    assert response.json()["pattern"] == [
        "a mapping of 'gpt-*' to combo 'team' already exists"
    ]


def test_a_second_override_for_one_key_and_channel_is_a_400_on_channel(
    world: dict[str, Provider],
    operator_client: Client,
    make_api_key: Callable[..., Any],
) -> None:
    make_api_key("ci")
    body = {"api_key": "ci", "channel": "auto", "exclude": []}
    assert post(operator_client, "/api/candidate-overrides", body).status_code == 201

    response = post(operator_client, "/api/candidate-overrides", body)

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "channel"


def test_a_second_smart_route_with_one_alias_is_a_400_on_alias(
    world: dict[str, Provider], operator_client: Client
) -> None:
    body = {"alias": "sr1", "easy": "pa/m1", "hard": "pb/m2"}
    assert post(operator_client, "/api/smart-routes", body).status_code == 201

    response = post(operator_client, "/api/smart-routes", body)

    assert response.status_code == 400
    assert response.json()["alias"] == ["already exists"]


def test_an_alias_that_is_another_routes_target_is_refused(
    world: dict[str, Provider],
    operator_client: Client,
    make_combo: Callable[..., Combo],
) -> None:
    make_combo("normal-easy")
    body = {"alias": "normal", "easy": "normal-easy", "hard": "pb/m2"}
    assert post(operator_client, "/api/smart-routes", body).status_code == 201

    response = post(
        operator_client,
        "/api/smart-routes",
        {"alias": "normal-easy", "easy": "pa/m1", "hard": "pb/m2"},
    )

    assert response.status_code == 400
    assert response.json()["alias"] == ["is a target of smart route 'normal'"]


def test_an_unexpected_error_is_a_json_500_envelope(
    world: dict[str, Provider], operator_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from combos import api

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(api.ComboViewSet, "list", broken)
    operator_client.raise_request_exception = False

    response = operator_client.get("/api/combos")

    assert response.status_code == 500
    assert response["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "internal_error"


def test_a_provider_posted_with_connections_creates_them(
    superuser_client: Client,
) -> None:
    from providers.models import Connection

    response = post(
        superuser_client,
        "/api/providers",
        {
            "slug": "pz",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "connections": [{"name": "main", "api_key": "sk-pz-secret-12345678"}],
            "models": [{"id": "z1"}],
        },
    )

    assert response.status_code == 201, response.json()
    connection = Connection.objects.get(provider__slug="pz")
    assert connection.name == "main"
    assert connection.has_api_key
    assert "sk-pz-secret" not in json.dumps(response.json())


def test_saving_a_connections_key_over_rest_clears_its_auth_disable(
    world: dict[str, Provider],
    superuser_client: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway.kernel.breaker import HealthConfig
    from providers.health import board, connection_key
    from providers.models import Connection
    from providers.state_store import LocalStore

    monkeypatch.setattr(board, "store", LocalStore())
    key = connection_key("pa", "main")
    board.record(
        key, "m1", "server_error", "auth_failed", now=1.0, config=HealthConfig()
    )
    connection = Connection.objects.get(provider__slug="pa", name="main")
    assert board.skip_reason(key, "m1", 0, 2.0) is not None

    response = superuser_client.patch(
        f"/api/connections/{connection.id}",
        json.dumps({"api_key": "sk-the-same-or-a-new-key-123"}),
        content_type="application/json",
    )

    assert response.status_code == 200
    assert board.skip_reason(key, "m1", 0, 2.0) is None
