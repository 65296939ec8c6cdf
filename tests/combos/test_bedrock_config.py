"""A ``bedrock`` provider in the configuration (spec 10 §3, §5): the YAML import,
the REST API and the admin accept its AWS credential, store the secrets encrypted
(or as ``env:`` references), never show them, name every unusable field, and the
snapshot resolves them with the region's endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from combos.config_export import export_data, export_yaml
from gateway.config.snapshot import probe_info
from providers import crypto
from providers.models import Connection, Provider

pytestmark = pytest.mark.django_db

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"


def bedrock_yaml(**connection: str) -> str:
    fields = {
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
        **connection,
    }
    lines = "".join(f"        {k}: {v}\n" for k, v in fields.items() if v)
    return f"""
providers:
  - slug: bedrock-us
    preset: bedrock
    region: us-east-1
    connections:
      - name: main
{lines}    models:
      - id: us.anthropic.claude-sonnet-4-5-20250929-v1:0
"""


def test_the_spec_example_imports_and_resolves(
    import_data: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BR_TEST_SECRET", SECRET)
    import_data(bedrock_yaml(aws_secret_access_key="env:BR_TEST_SECRET"))

    provider = Provider.objects.get(slug="bedrock-us")
    assert (provider.kind, provider.base_url) == ("bedrock", "")
    assert provider.settings["models_dev_id"] == "amazon-bedrock"
    assert provider.settings["region"] == "us-east-1"
    connection = Connection.objects.get(provider=provider)
    assert connection.secret_refs == {"aws_secret_access_key": "env:BR_TEST_SECRET"}
    assert KEY_ID not in connection.secrets_encrypted
    assert connection.stored_secrets() == {"aws_access_key_id": KEY_ID}
    info = probe_info(provider).connections[0]
    assert info.base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert info.auth is not None
    assert dict(info.auth.secrets) == {
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
    }
    assert info.auth.setting("region") == "us-east-1"
    assert SECRET not in repr(info)


def test_literal_secrets_are_encrypted_and_exported_masked(
    import_data: Callable[..., Any],
) -> None:
    import_data(bedrock_yaml(aws_session_token="FQoGZXIvYXdzEXAMPLETOKEN"))

    connection = Connection.objects.get(name="main")
    assert SECRET not in connection.secrets_encrypted
    assert crypto.decrypt(connection.secrets_encrypted)  # a Fernet token
    exported = export_data()["providers"][0]["connections"][0]
    assert exported["aws_secret_access_key"] == "***"
    assert exported["aws_session_token"] == "***"
    text = export_yaml()
    assert SECRET not in text
    assert "FQoGZXIvYXdzEXAMPLETOKEN" not in text


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            bedrock_yaml().replace("    region: us-east-1\n", ""),
            "providers[0].connections[0].region: is required for kind 'bedrock'",
        ),
        (
            bedrock_yaml(aws_secret_access_key=""),
            "providers[0].connections[0].aws_secret_access_key: is required",
        ),
        (
            bedrock_yaml(api_key="sk-x"),
            "providers[0].connections[0].api_key: not a credential of kind 'bedrock'",
        ),
        (
            bedrock_yaml().replace("region: us-east-1", "region: nowhere"),
            "providers[0].region: must be an AWS region",
        ),
        (
            bedrock_yaml(use_default_credentials="true"),
            "providers[0].connections[0].aws_access_key_id: not used with",
        ),
    ],
)
def test_an_unusable_credential_is_refused_naming_the_field(
    import_problems: Callable[..., list[str]], yaml_text: str, expected: str
) -> None:
    problems = import_problems(yaml_text)

    assert any(p.startswith(expected) for p in problems), problems
    assert Provider.objects.count() == 0


def test_a_credential_of_bedrock_on_another_kind_is_named(
    import_problems: Callable[..., list[str]],
) -> None:
    problems = import_problems("""
providers:
  - slug: g
    kind: gemini
    base_url: https://generativelanguage.googleapis.com
    connections:
      - name: main
        aws_access_key_id: AKIA
""")

    assert problems == [
        "providers[0].connections[0].aws_access_key_id: not a credential of kind "
        "'gemini'"
    ]


def test_the_default_chain_needs_only_a_region(
    import_data: Callable[..., Any],
) -> None:
    import_data("""
providers:
  - slug: br
    kind: bedrock
    connections:
      - name: main
        use_default_credentials: true
        region: eu-central-1
""")

    info = probe_info(Provider.objects.get(slug="br")).connections[0]
    assert info.base_url == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert info.auth is not None
    assert info.auth.setting("use_default_credentials") is True


def test_the_rest_api_takes_the_credential_write_only(
    superuser_client: Client,
) -> None:
    created = superuser_client.post(
        "/api/providers",
        json.dumps(
            {
                "slug": "br",
                "preset": "bedrock",
                "region": "us-west-2",
                "connections": [
                    {
                        "name": "main",
                        "aws_access_key_id": KEY_ID,
                        "aws_secret_access_key": SECRET,
                    }
                ],
            }
        ),
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    listed = superuser_client.get("/api/connections")
    for response in (created, listed):
        assert SECRET not in response.content.decode()
    row = next(c for c in listed.json() if c["provider"] == "br")
    assert sorted(row["secrets_set"]) == ["aws_access_key_id", "aws_secret_access_key"]
    refused = superuser_client.post(
        "/api/connections",
        json.dumps({"provider": "br", "name": "two", "region": "us-west-2"}),
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert "aws_access_key_id" in refused.content.decode()


def test_the_admin_saves_a_bedrock_connection(superuser_client: Client) -> None:
    provider = Provider.objects.create(
        slug="br", kind="bedrock", base_url="", settings={"region": "us-east-1"}
    )
    connection = Connection.objects.create(provider=provider, name="main")
    url = reverse("admin:providers_connection_change", args=[connection.pk])

    page = superuser_client.get(url).content.decode()
    assert 'name="aws_secret_access_key"' in page
    assert 'name="service_account_json"' not in page  # another kind's field
    form = {
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
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
        "aws_session_token": "",
        "region": "",
        "use_default_credentials": "",
    }
    response = superuser_client.post(url, form)

    assert response.status_code == 302, response.content.decode()[:2000]
    connection.refresh_from_db()
    assert connection.stored_secrets() == {
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
    }
    assert SECRET not in superuser_client.get(url).content.decode()
    # saved again without the secrets: they are kept
    again = {
        **form,
        "aws_access_key_id": "",
        "aws_secret_access_key": "",
        "priority": "2",
    }
    assert superuser_client.post(url, again).status_code == 302
    connection.refresh_from_db()
    assert connection.priority == 2
    assert connection.stored_secrets()["aws_secret_access_key"] == SECRET


def test_a_rest_update_without_the_secrets_keeps_them(superuser_client: Client) -> None:
    provider = Provider.objects.create(
        slug="br", kind="bedrock", base_url="", settings={"region": "us-east-1"}
    )
    connection = Connection(provider=provider, name="main")
    connection.set_secrets(
        {"aws_access_key_id": KEY_ID, "aws_secret_access_key": "env:BR_SECRET"}
    )
    connection.save()

    for method in (superuser_client.patch, superuser_client.put):
        response = method(
            f"/api/connections/{connection.pk}",
            json.dumps({"provider": "br", "name": "main", "priority": 4}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
    connection.refresh_from_db()
    assert connection.priority == 4
    assert connection.stored_secrets() == {"aws_access_key_id": KEY_ID}
    assert connection.secret_refs == {"aws_secret_access_key": "env:BR_SECRET"}
