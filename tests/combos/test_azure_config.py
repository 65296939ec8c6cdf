"""``kind: azure`` in the configuration (spec 10 §2, §3, §5): the preset, resource,
api_version, a model's deployment, key or Entra credentials (encrypted, ``env:``
references), validation naming the field, export and the routing table."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from combos.config_export import export_yaml
from gateway.config.snapshot import build_table
from providers.models import Connection, Provider, ProviderModel

pytestmark = pytest.mark.django_db

ENTRA_SECRET = "entra-client-secret-value-123"


def azure(**over: Any) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "slug": "az",
        "preset": "azure",
        "resource": "contoso",
        "api_version": "2024-10-21",
        "connections": [
            {"name": "key", "api_key": "az-key-literal-4321"},
            {
                "name": "entra",
                "tenant_id": "contoso.onmicrosoft.com",
                "client_id": "env:AZ_CLIENT_ID",
                "client_secret": ENTRA_SECRET,
                "resource": "contoso-west",
            },
        ],
        "models": [
            {"id": "gpt-4o", "deployment": "prod-4o"},
            {"id": "text-embedding-3-small"},
        ],
    }
    provider.update(over)
    return {"providers": [provider]}


def test_an_azure_provider_is_stored_with_its_settings_deployments_and_secrets(
    import_problems: Callable[..., list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert import_problems(azure()) == []

    provider = Provider.objects.get(slug="az")
    assert (provider.kind, provider.base_url, provider.preset) == ("azure", "", "azure")
    assert provider.settings == {
        "models_dev_id": "azure",
        "resource": "contoso",
        "api_version": "2024-10-21",
    }
    assert ProviderModel.objects.get(model_id="gpt-4o").deployment == "prod-4o"
    entra = Connection.objects.get(name="entra")
    assert ENTRA_SECRET not in entra.secrets_encrypted
    assert entra.secret_refs == {"client_id": "env:AZ_CLIENT_ID"}
    assert entra.settings == {"resource": "contoso-west"}

    monkeypatch.setenv("AZ_CLIENT_ID", "app-id")
    table = build_table()
    info = table.providers["az"]
    assert info.models["gpt-4o"].upstream_id == "prod-4o"
    assert info.models["text-embedding-3-small"].upstream_id == "text-embedding-3-small"
    by_name = {c.name: c for c in info.connections}
    assert by_name["key"].base_url == "https://contoso.openai.azure.com"
    assert by_name["entra"].base_url == "https://contoso-west.openai.azure.com"
    auth = by_name["entra"].auth
    assert auth is not None
    assert dict(auth.secrets) == {
        "tenant_id": "contoso.onmicrosoft.com",
        "client_id": "app-id",
        "client_secret": ENTRA_SECRET,
    }
    assert auth.settings["api_version"] == "2024-10-21"
    assert auth.settings["resource"] == "contoso-west"


def test_the_export_masks_the_secrets_and_imports_back_unchanged(
    import_problems: Callable[..., list[str]],
) -> None:
    assert import_problems(azure()) == []
    text = export_yaml()
    assert ENTRA_SECRET not in text
    assert "az-key-literal-4321" not in text
    exported = yaml.safe_load(text)["providers"][0]
    assert exported["resource"] == "contoso"
    assert exported["models"][0]["deployment"] == "prod-4o"
    entra = next(c for c in exported["connections"] if c["name"] == "entra")
    assert entra["client_secret"] == "***"
    assert entra["client_id"] == "env:AZ_CLIENT_ID"

    assert import_problems(text) == []
    connection = Connection.objects.get(name="entra")
    assert connection.stored_secrets()["client_secret"] == ENTRA_SECRET


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        (
            {"resource": None},
            "providers[0].connections[0].resource: is required for kind 'azure'"
            " (on the provider or here)",
        ),
        (
            {"api_version": "2024-1-1"},
            "providers[0].api_version: must look like 2024-10-21 or 2025-04-01-preview",
        ),
        (
            {"resource": "contoso.openai.azure.com"},
            "providers[0].resource: must be the resource name",
        ),
        (
            {"models": [{"id": "m", "deployment": "has space"}]},
            "providers[0].models[0].deployment: 'has space' is not allowed here",
        ),
        (
            {
                "connections": [
                    {"name": "e", "tenant_id": "t", "client_id": "c"},
                ]
            },
            "providers[0].connections[0].client_secret: is required with tenant_id"
            " and client_id (Entra credential)",
        ),
        (
            {
                "connections": [
                    {
                        "name": "e",
                        "api_key": "k",
                        "tenant_id": "t",
                        "client_id": "c",
                        "client_secret": "s",
                    },
                ]
            },
            "providers[0].connections[0].api_key: give api_key or an Entra credential",
        ),
        (
            {"authority_host": "login.example"},
            "providers[0].authority_host: must be an http or https URL",
        ),
    ],
)
def test_an_unusable_azure_setting_is_refused_naming_the_field(
    import_problems: Callable[..., list[str]], over: dict[str, Any], problem: str
) -> None:
    problems = import_problems(azure(**over))
    assert any(p.startswith(problem) for p in problems), problems
    assert not Provider.objects.exists()


def test_a_deployment_on_another_kind_and_azure_fields_elsewhere_are_refused(
    import_problems: Callable[..., list[str]],
) -> None:
    data = {
        "providers": [
            {
                "slug": "oa",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "api_version": "2024-10-21",
                "connections": [{"name": "m", "api_key": "k", "tenant_id": "t"}],
                "models": [{"id": "m1", "deployment": "d1"}],
            }
        ]
    }
    assert sorted(import_problems(data)) == [
        "providers[0].api_version: not a setting of kind 'openai'",
        "providers[0].connections[0].tenant_id: not a credential of kind 'openai'",
        "providers[0].models[0].deployment: not a setting of kind 'openai'",
    ]


def test_an_unquoted_api_version_is_read_as_the_text_written(
    import_problems: Callable[..., list[str]],
) -> None:
    text = """
providers:
  - slug: az
    kind: azure
    resource: contoso
    api_version: 2024-10-21
    connections:
      - name: main
        api_key: k
        api_version: 2025-04-01-preview
"""
    assert import_problems(text) == []
    provider = Provider.objects.get(slug="az")
    assert provider.settings["api_version"] == "2024-10-21"
    assert Connection.objects.get(name="main").settings == {
        "api_version": "2025-04-01-preview"
    }


def _connection_form(provider: Provider, **fields: str) -> dict[str, str]:
    return {
        "provider": str(provider.pk),
        "name": "key",
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


def test_the_admin_edits_an_azure_connection_credential_write_only(
    import_problems: Callable[..., list[str]], superuser_client: Client
) -> None:
    assert import_problems(azure()) == []
    provider = Provider.objects.get(slug="az")
    connection = Connection.objects.get(name="key")
    url = reverse("admin:providers_connection_change", args=[connection.pk])

    page = superuser_client.get(url).content.decode()
    assert 'name="tenant_id"' in page
    assert 'name="api_version"' in page
    assert 'name="region"' not in page  # another kind's field is not offered

    partial = superuser_client.post(
        url, _connection_form(provider, tenant_id="t", client_id="c")
    )
    errors = partial.context["adminform"].form.errors
    assert "client_secret" in str(errors)

    saved = superuser_client.post(
        url,
        _connection_form(
            provider,
            clear_api_key="on",
            tenant_id="contoso.onmicrosoft.com",
            client_id="app-2",
            client_secret="admin-entered-secret-99",
            api_version="2025-04-01-preview",
        ),
    )
    assert saved.status_code == 302
    connection.refresh_from_db()
    assert connection.api_key_encrypted == ""
    assert connection.stored_secrets()["client_secret"] == "admin-entered-secret-99"
    assert "admin-entered-secret-99" not in connection.secrets_encrypted
    assert connection.settings == {"api_version": "2025-04-01-preview"}
    assert "admin-entered-secret-99" not in superuser_client.get(url).content.decode()

    models = superuser_client.get(
        reverse("admin:providers_provider_change", args=[provider.pk])
    ).content.decode()
    assert 'value="prod-4o"' in models  # the model inline shows the deployment


def test_rest_creates_an_azure_provider_and_an_entra_connection_write_only(
    superuser_client: Client,
) -> None:
    provider = superuser_client.post(
        "/api/providers",
        json.dumps(
            {
                "slug": "az",
                "preset": "azure",
                "resource": "contoso",
                "api_version": "2024-10-21",
                "models": [{"id": "gpt-4o", "deployment": "prod-4o"}],
            }
        ),
        content_type="application/json",
    )
    assert provider.status_code == 201, provider.content
    assert provider.json()["models"] == [{"id": "gpt-4o", "deployment": "prod-4o"}]

    body = {
        "provider": "az",
        "name": "app",
        "tenant_id": "contoso.onmicrosoft.com",
        "client_id": "app-3",
        "client_secret": "rest-entered-secret-77",
    }
    created = superuser_client.post(
        "/api/connections", json.dumps(body), content_type="application/json"
    )
    assert created.status_code == 201, created.content
    assert "rest-entered-secret-77" not in created.content.decode()
    stored = Connection.objects.get(name="app").stored_secrets()
    assert stored["client_secret"] == "rest-entered-secret-77"

    refused = superuser_client.post(
        "/api/connections",
        json.dumps({"provider": "az", "name": "half", "tenant_id": "t"}),
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] in ("client_id", "client_secret")

    bad = superuser_client.post(
        "/api/providers",
        json.dumps({"slug": "az2", "kind": "azure", "api_version": "v1"}),
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "api_version"


def test_pointing_entra_elsewhere_needs_the_secrets_permission(
    import_problems: Callable[..., list[str]],
    operator_client: Client,
    superuser_client: Client,
) -> None:
    assert import_problems(azure()) == []
    entra = Connection.objects.get(name="entra")
    body = {
        "provider": "az",
        "name": "entra",
        "tenant_id": "***",
        "client_id": "***",
        "client_secret": "***",
        "resource": "contoso-west",
        "authority_host": "https://collector.example",
    }
    url = f"/api/connections/{entra.pk}"

    refused = operator_client.put(
        url, json.dumps(body), content_type="application/json"
    )
    assert refused.status_code == 403
    unchanged = {**body, "authority_host": None}
    allowed = operator_client.put(
        url, json.dumps(unchanged), content_type="application/json"
    )
    assert allowed.status_code == 200, allowed.content
    moved = superuser_client.put(url, json.dumps(body), content_type="application/json")
    assert moved.status_code == 200, moved.content
    entra.refresh_from_db()
    assert entra.settings["authority_host"] == "https://collector.example"
    assert entra.stored_secrets()["client_secret"] == ENTRA_SECRET

    page = operator_client.get(
        reverse("admin:providers_connection_change", args=[entra.pk])
    ).content.decode()
    assert 'name="authority_host"' not in page
    assert 'name="resource"' in page
