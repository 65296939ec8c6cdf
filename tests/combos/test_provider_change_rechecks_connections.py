"""A change to a provider re-checks the connections it keeps (issue #14, D1).

A REST ``PATCH``/``PUT`` of a provider, the admin's provider form and an import
naming a provider without its connections must refuse a kind or settings under which
a stored connection is unusable (spec 10 §3), naming the field as an import of the
same result would; moving a connection to another provider is checked against that
provider's kind, its stored ``api_key`` included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from combos.config_export import export_yaml
from providers.models import Connection, Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
REGION_MISSING = "is required for kind 'bedrock' (stored connection 'main')"


def patch(client: Client, url: str, body: Any) -> Any:
    return client.patch(url, json.dumps(body), content_type="application/json")


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def bedrock(import_data: Callable[..., Any]) -> Provider:
    """``br``: the region on the provider, connection ``main`` without its own."""
    import_data(
        {
            "providers": [
                {
                    "slug": "br",
                    "preset": "bedrock",
                    "region": "us-east-1",
                    "connections": [
                        {
                            "name": "main",
                            "aws_access_key_id": KEY_ID,
                            "aws_secret_access_key": SECRET,
                        }
                    ],
                    "models": [{"id": "us.anthropic.claude-sonnet-4-5-v1:0"}],
                }
            ]
        }
    )
    return Provider.objects.get(slug="br")


@pytest.fixture
def groq(superuser_client: Client) -> Provider:
    """``groq`` (preset groq) with connection ``main`` holding only an api_key."""
    made = post(superuser_client, "/api/providers", {"slug": "groq", "preset": "groq"})
    assert made.status_code == 201, made.content
    conn = post(
        superuser_client,
        "/api/connections",
        {"provider": "groq", "name": "main", "api_key": "gsk-test-1234"},
    )
    assert conn.status_code == 201, conn.content
    return Provider.objects.get(slug="groq")


def test_patching_away_the_region_a_bedrock_connection_needs_is_refused(
    bedrock: Provider, superuser_client: Client
) -> None:
    version = config_version()

    response = patch(superuser_client, f"/api/providers/{bedrock.pk}", {"region": None})

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["connections[0].region"] == [REGION_MISSING]
    assert body["error"]["param"] == "connections[0].region"
    assert body["error"]["code"] == "invalid_config"
    bedrock.refresh_from_db()
    assert bedrock.settings["region"] == "us-east-1"
    assert config_version() == version


def test_the_region_may_go_when_the_connection_has_its_own(
    bedrock: Provider, superuser_client: Client
) -> None:
    Connection.objects.filter(provider=bedrock).update(settings={"region": "eu-west-1"})

    response = patch(superuser_client, f"/api/providers/{bedrock.pk}", {"region": None})

    assert response.status_code == 200, response.content
    bedrock.refresh_from_db()
    assert "region" not in bedrock.settings
    # and what it leaves exports and imports again
    assert yaml.safe_load(export_yaml())["providers"][0]["connections"][0][
        "region"
    ] == ("eu-west-1")


def test_a_put_naming_the_connection_with_its_own_region_is_accepted(
    bedrock: Provider, superuser_client: Client
) -> None:
    body = {
        "slug": "br",
        "preset": "bedrock",
        "connections": [
            {
                "name": "main",
                "region": "eu-west-1",
                "aws_access_key_id": KEY_ID,
                "aws_secret_access_key": SECRET,
            }
        ],
    }

    response = superuser_client.put(
        f"/api/providers/{bedrock.pk}",
        json.dumps(body),
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    assert Connection.objects.get(provider=bedrock).settings == {"region": "eu-west-1"}


def test_patching_a_groq_provider_into_vertex_is_refused_for_its_connection(
    groq: Provider, superuser_client: Client
) -> None:
    response = patch(
        superuser_client,
        f"/api/providers/{groq.pk}",
        {"kind": "vertex", "project": "proj-a", "region": "us-east5"},
    )

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["connections[0].api_key"] == [
        "not a credential of kind 'vertex' (stored connection 'main')"
    ]
    assert body["error"]["param"] == "connections[0].api_key"
    groq.refresh_from_db()
    assert groq.kind == "openai"


def test_a_patch_keeping_kind_and_settings_does_not_recheck_the_connections(
    groq: Provider, superuser_client: Client
) -> None:
    # a connection stored before a check existed does not block an unrelated edit
    Connection.objects.filter(provider=groq).update(settings={"region": "us-east-1"})

    response = patch(
        superuser_client,
        f"/api/providers/{groq.pk}",
        {"base_url": "https://api.groq.com/openai/v1"},
    )

    assert response.status_code == 200, response.content


def test_moving_a_connection_to_a_provider_of_another_kind_checks_its_key(
    groq: Provider, superuser_client: Client
) -> None:
    made = post(
        superuser_client,
        "/api/providers",
        {"slug": "vx", "kind": "vertex", "project": "proj-a", "region": "us-east5"},
    )
    assert made.status_code == 201, made.content
    connection = Connection.objects.get(provider=groq)

    response = patch(
        superuser_client,
        f"/api/connections/{connection.pk}",
        {"provider": "vx", "use_default_credentials": True},
    )

    assert response.status_code == 400, response.content
    assert response.json()["error"]["param"] == "api_key"
    assert "not a credential of kind 'vertex'" in response.json()["error"]["message"]
    connection.refresh_from_db()
    assert connection.provider_id == groq.pk


def test_moving_a_connection_without_a_region_to_bedrock_is_refused(
    groq: Provider, bedrock: Provider, superuser_client: Client
) -> None:
    connection = Connection.objects.get(provider=groq)

    response = patch(
        superuser_client,
        f"/api/connections/{connection.pk}",
        {"provider": "br", "api_key": ""},
    )

    assert response.status_code == 400, response.content
    assert "aws_access_key_id" in response.json()


def test_updating_a_connection_in_place_keeps_its_stored_key(
    groq: Provider, superuser_client: Client
) -> None:
    connection = Connection.objects.get(provider=groq)

    response = patch(
        superuser_client, f"/api/connections/{connection.pk}", {"priority": 5}
    )

    assert response.status_code == 200, response.content
    connection.refresh_from_db()
    assert connection.priority == 5
    assert connection.has_api_key


def test_an_import_keeping_a_stored_connection_checks_it(
    bedrock: Provider, import_problems: Callable[..., list[str]]
) -> None:
    file = {"providers": [{"slug": "br", "preset": "bedrock"}]}

    assert import_problems(file) == [
        f"providers[0].connections[0].region: {REGION_MISSING}"
    ]
    assert import_problems(file, prune=True) == []  # prune drops the connection


def test_the_admin_refuses_a_kind_its_stored_connections_cannot_use(
    bedrock: Provider, superuser_client: Client
) -> None:
    version = config_version()

    response = superuser_client.post(
        reverse("admin:providers_provider_change", args=[bedrock.pk]),
        {
            "slug": "br",
            "kind": "openai",
            "base_url": "http://127.0.0.1:8/v1",
            "wire": "chat",
            "connections-TOTAL_FORMS": "0",
            "connections-INITIAL_FORMS": "0",
            "models-TOTAL_FORMS": "0",
            "models-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 200  # the form again, with the problem
    page = response.content.decode()
    assert "connections[0].aws_access_key_id" in page
    assert "stored connection &#x27;main&#x27;" in page
    bedrock.refresh_from_db()
    assert bedrock.kind == "bedrock"
    assert config_version() == version


def _connection_form(provider: Provider, **fields: str) -> dict[str, str]:
    return {
        "provider": str(provider.pk),
        "name": "main",
        "api_key": "",
        "tier": "standard",
        "default_model": "",
        "active": "on",
        "priority": "0",
        "max_concurrency": "0",
        "quota_remaining_percent": "",
        "quota_reset_interval_seconds": "",
        **fields,
    }


def test_the_admin_checks_a_moved_connection_s_stored_key_against_its_new_kind(
    groq: Provider, superuser_client: Client
) -> None:
    made = post(
        superuser_client,
        "/api/providers",
        {"slug": "vx", "kind": "vertex", "project": "proj-a", "region": "us-east5"},
    )
    assert made.status_code == 201, made.content
    vertex = Provider.objects.get(slug="vx")
    connection = Connection.objects.get(provider=groq)
    url = reverse("admin:providers_connection_change", args=[connection.pk])

    refused = superuser_client.post(url, _connection_form(vertex))

    assert refused.status_code == 200  # the form again, with the problem
    assert "not a credential of kind &#x27;vertex&#x27;" in refused.content.decode()
    connection.refresh_from_db()
    assert connection.provider_id == groq.pk

    moved = superuser_client.post(url, _connection_form(vertex, clear_api_key="on"))

    assert moved.status_code == 302
    connection.refresh_from_db()
    assert connection.provider_id == vertex.pk
    assert not connection.has_api_key


def test_the_admin_edits_a_connection_in_place_with_its_stored_key(
    groq: Provider, superuser_client: Client
) -> None:
    connection = Connection.objects.get(provider=groq)
    url = reverse("admin:providers_connection_change", args=[connection.pk])

    saved = superuser_client.post(url, _connection_form(groq, priority="3"))

    assert saved.status_code == 302
    connection.refresh_from_db()
    assert (connection.priority, connection.has_api_key) == (3, True)
