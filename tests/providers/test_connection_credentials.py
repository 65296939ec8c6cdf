"""Per-kind credentials (spec 10 §3): storage, references, validation, the
OpenAI kind's ``auth_header`` (spec 10 §1)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from gateway.config.snapshot import _env_secret
from gateway.dialects import REGISTRY
from gateway.kernel.types import Auth
from providers.models import Connection, Provider
from providers.validation import Checker, validate_provider


def problems(**fields: object) -> list[str]:
    data = {"slug": "pa", "kind": "openai", "base_url": "http://x/v1", **fields}
    check = Checker("providers[0]")
    validate_provider(data, check)
    return [str(p) for p in check.problems]


def test_secret_fields_are_encrypted_kept_as_references_or_masked() -> None:
    connection = Connection(provider=Provider(slug="p"), name="c")

    assert connection.set_secrets(
        {"aws_secret_access_key": "wJalr-s3cret", "aws_session_token": "env:AWS_TOK"}
    )
    stored = connection.secrets_encrypted
    assert "wJalr" not in stored
    assert connection.secret_refs == {"aws_session_token": "env:AWS_TOK"}
    assert connection.stored_secrets() == {"aws_secret_access_key": "wJalr-s3cret"}
    # "***" keeps, the same literal again changes nothing (no re-encryption)
    assert not connection.set_secrets({"aws_secret_access_key": "***"})
    assert not connection.set_secrets({"aws_secret_access_key": "wJalr-s3cret"})
    assert connection.secrets_encrypted == stored
    # a reference replaces a literal, "" removes a field
    assert connection.set_secrets({"aws_secret_access_key": "env:AWS_SECRET"})
    assert connection.set_secrets({"aws_session_token": ""})
    assert connection.stored_secrets() == {}
    assert connection.secret_refs == {"aws_secret_access_key": "env:AWS_SECRET"}
    assert connection.secret_names() == ["aws_secret_access_key"]


def test_an_env_reference_reads_the_variable_or_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    monkeypatch.setenv("OMNI_T_DIRECT", "direct")
    monkeypatch.delenv("OMNI_T_FILED", raising=False)
    monkeypatch.setenv("OMNI_T_FILED_FILE", str(secret))
    monkeypatch.setenv("OMNI_T_BROKEN_FILE", str(tmp_path / "missing"))

    assert _env_secret("env:OMNI_T_DIRECT") == "direct"
    assert _env_secret("env:OMNI_T_FILED") == "from-a-file"
    assert _env_secret("env:OMNI_T_BROKEN") is None
    assert _env_secret("env:OMNI_T_UNSET") is None


@pytest.mark.parametrize(
    ("auth_header", "expected"),
    [
        (None, {"authorization": "Bearer sk-1"}),
        ("api-key", {"api-key": "sk-1"}),
        ("X-Api-Key", {"x-api-key": "sk-1"}),
        ("Authorization", {"authorization": "Bearer sk-1"}),
        ("none", {}),
    ],
)
def test_the_openai_kind_sends_its_key_where_auth_header_says(
    auth_header: str | None, expected: dict[str, str]
) -> None:
    auth = (
        Auth(kind="openai", settings=MappingProxyType({"auth_header": auth_header}))
        if auth_header
        else None
    )
    dialect = REGISTRY["openai"]
    calls = [
        dialect.build_request(
            base_url="http://u/v1",
            api_key="sk-1",
            model="m",
            body={"messages": []},
            stream=False,
            auth=auth,
        ),
        dialect.embeddings_request(
            base_url="http://u/v1", api_key="sk-1", model="m", body={}, auth=auth
        ),
        dialect.list_models_request(base_url="http://u/v1", api_key="sk-1", auth=auth),
    ]
    for call in calls:
        sent = {k: v for k, v in call.headers.items() if k != "content-type"}
        assert sent == expected


def test_auth_header_is_checked_and_belongs_to_the_openai_kind() -> None:
    assert problems(auth_header="api-key") == []
    assert problems(auth_header="bad header") == [
        "providers[0].auth_header: must be a header name, or none"
    ]
    assert problems(
        kind="anthropic", base_url="https://a.example", auth_header="api-key"
    ) == ["providers[0].auth_header: not a setting of kind 'anthropic'"]


def test_a_credential_field_of_another_kind_is_named() -> None:
    found = problems(
        connections=[{"name": "main", "api_key": "k", "region": "us-east-1"}]
    )
    # a field no kind declares is unknown; one another kind declares is named
    assert len(found) == 1
    assert found[0].startswith("providers[0].connections[0].region:")
