"""Entra tokens for azure connections (spec 10 §3), minted from the mock's token
endpoint over loopback: cached and reused, a refused secret is ``auth``, an
unreachable endpoint ``connection_error``; no secret in any message."""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType

import pytest

from gateway.kernel.types import Auth
from providers import credential_sources
from providers.credential_sources import CredentialUnavailable
from providers.entra import EntraMinter
from providers.mock_upstream import RunningMock, start_in_thread
from providers.mock_upstream.wire_azure import CLIENT_SECRET, token_valid

TOKEN_PATH = "/tenant-1/oauth2/v2.0/token"


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    credential_sources.forget()
    yield
    credential_sources.forget()


def entra(authority: str, secret: str = CLIENT_SECRET) -> Auth:
    return Auth(
        kind="azure",
        secrets=MappingProxyType(
            {"tenant_id": "tenant-1", "client_id": "app-1", "client_secret": secret}
        ),
        settings=MappingProxyType({"resource": "r", "authority_host": authority}),
    )


def _origin(mock: RunningMock) -> str:
    return mock.url.removesuffix("/v1")


def test_the_azure_minter_is_registered_and_wants_only_entra_credentials() -> None:
    minter = credential_sources.MINTERS["azure"]
    assert isinstance(minter, EntraMinter)
    keyed = Auth(kind="azure", settings=MappingProxyType({"resource": "r"}))
    assert credential_sources.needs_minting(keyed) is False
    assert credential_sources.needs_minting(entra("http://x")) is True


async def test_a_token_is_minted_with_the_client_credentials_grant(
    mock: RunningMock,
) -> None:
    minted = await EntraMinter(clock=lambda: 1_000.0).mint(entra(_origin(mock)), None)

    assert minted.auth.token is not None
    assert token_valid(minted.auth.token)
    assert minted.expires_at == 1_000.0 + 3600
    [record] = mock.state.requests()
    assert record["path"] == TOKEN_PATH
    assert record["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert record["body"] == {
        "grant_type": "client_credentials",
        "client_id": "app-1",
        "client_secret": "***",  # the mock masks it in its own log
        "scope": "https://cognitiveservices.azure.com/.default",
    }


async def test_the_token_is_cached_and_reused(mock: RunningMock) -> None:
    auth = entra(_origin(mock))
    first = await credential_sources.ready(auth)
    second = await credential_sources.ready(auth)

    assert first is not None
    assert second is not None
    assert first.token == second.token
    assert [r["path"] for r in mock.state.requests()] == [TOKEN_PATH]


async def test_a_refused_secret_is_an_auth_failure_without_the_secret(
    mock: RunningMock,
) -> None:
    with pytest.raises(CredentialUnavailable) as caught:
        await credential_sources.ready(entra(_origin(mock), secret="wrong-secret-42"))

    assert caught.value.reason == "auth"
    assert str(caught.value) == (
        "Entra refused the azure client credential (HTTP 401, invalid_client)"
    )
    assert "wrong-secret-42" not in str(caught.value)


async def test_an_unreachable_token_endpoint_is_a_connection_error() -> None:
    with pytest.raises(CredentialUnavailable) as caught:
        await credential_sources.ready(entra("http://127.0.0.1:9"))

    assert caught.value.reason == "connection_error"
    assert "secret" not in str(caught.value)
