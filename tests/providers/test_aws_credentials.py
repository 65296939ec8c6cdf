"""The AWS default credential chain of ``bedrock`` connections with
``use_default_credentials: true`` (spec 10 §3): resolved through botocore into the
``Auth``'s secrets, or refused as ``auth`` naming no secret."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import MappingProxyType

import pytest

from gateway.kernel.types import Auth
from providers import credential_sources
from providers.credential_sources import CredentialUnavailable

DEFAULT = Auth(
    kind="bedrock",
    settings=MappingProxyType({"region": "us-east-1", "use_default_credentials": True}),
)


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A chain with nothing in it: no variables, no files, no metadata endpoint."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    credential_sources.forget()


def test_the_chain_is_only_for_connections_that_ask_for_it() -> None:
    assert credential_sources.needs_minting(DEFAULT)
    keys = Auth(
        kind="bedrock",
        secrets=MappingProxyType({"aws_access_key_id": "A"}),
        settings=MappingProxyType({"region": "us-east-1"}),
    )
    assert not credential_sources.needs_minting(keys)


def test_the_chain_resolves_keys_from_the_environment(
    no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "chain-token")

    ready = asyncio.run(credential_sources.ready(DEFAULT))

    assert ready is not None
    assert dict(ready.secrets) == {
        "aws_access_key_id": "AKIACHAIN",
        "aws_secret_access_key": "chain-secret",
        "aws_session_token": "chain-token",
    }
    assert ready.setting("region") == "us-east-1"
    credential_sources.forget()


def test_an_empty_chain_is_refused_as_auth(no_aws: None) -> None:
    with pytest.raises(CredentialUnavailable) as caught:
        asyncio.run(credential_sources.ready(DEFAULT))

    assert caught.value.reason == "auth"
    assert "found no credentials" in str(caught.value)
