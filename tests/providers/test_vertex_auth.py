"""The ``vertex`` kind's token minting (spec 10 §1, §3) against the mock's token
endpoint on loopback: a JWT-bearer grant signed with a key made at test time, the
refusals and failures, default credentials, the cache, and the outbound policy."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from gateway.kernel.types import Auth
from providers import credential_sources, vertex_auth
from providers.credential_sources import CredentialUnavailable
from providers.mock_upstream import RunningMock, start_in_thread
from providers.mock_upstream.wire_vertex import authority
from providers.outbound_policy import ProviderOutbound
from tests.outbound_servers import ConnectProxy, loop_thread
from tests.vertex_accounts import ServiceAccount, make_account

SETTINGS = MappingProxyType({"project": "test-project", "region": "us-central1"})


@pytest.fixture(scope="module")
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture
def account(mock: RunningMock) -> ServiceAccount:
    made = make_account(mock.url.removesuffix("/v1") + "/token", "unit")
    authority(mock.state).register(made.client_email, made.public_pem)
    mock.reset()
    return made


def vertex(json_text: str | None = None, **settings: object) -> Auth:
    secrets = {"service_account_json": json_text} if json_text else {}
    return Auth(
        kind="vertex",
        secrets=MappingProxyType(secrets),
        settings=MappingProxyType({**SETTINGS, **settings}),
    )


def mint(auth: Auth, outbound: object = None) -> credential_sources.Minted:
    return asyncio.run(vertex_auth.MINTER.mint(auth, outbound))


def test_a_service_account_mints_a_token_the_mock_issued(
    mock: RunningMock, account: ServiceAccount
) -> None:
    minted = mint(vertex(account.json_text))

    assert minted.auth.token is not None
    assert minted.auth.token.startswith("ya29.mock-")
    assert minted.expires_at is not None
    assert abs(minted.expires_at - (time.time() + 3600)) < 60
    assert minted.auth.settings["project"] == "test-project"
    grant = mock.requests()[-1]
    assert grant["path"] == "/token"
    assert grant["body"] == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "iss": account.client_email,
    }
    assert grant["headers"]["user-agent"].startswith("omniroute/")


def test_the_credentials_quota_project_rides_along(mock: RunningMock) -> None:
    made = make_account(
        mock.url.removesuffix("/v1") + "/token", "quota", quota_project_id="bill-1"
    )
    authority(mock.state).register(made.client_email, made.public_pem)

    minted = mint(vertex(made.json_text))

    assert minted.auth.settings["quota_project_id"] == "bill-1"


def test_a_key_the_endpoint_does_not_know_is_refused_as_auth(
    mock: RunningMock,
) -> None:
    stranger = make_account(mock.url.removesuffix("/v1") + "/token", "stranger")

    with pytest.raises(CredentialUnavailable) as refused:
        mint(vertex(stranger.json_text))

    assert refused.value.reason == "auth"
    assert "invalid_grant" in str(refused.value)
    assert "PRIVATE" not in str(refused.value)


def test_a_malformed_json_is_refused_as_auth_without_a_call(
    mock: RunningMock,
) -> None:
    mock.reset()
    with pytest.raises(CredentialUnavailable) as refused:
        mint(vertex('{"type": "service_account"}'))

    assert refused.value.reason == "auth"
    assert mock.requests() == []


def test_an_unreachable_endpoint_is_a_connection_error() -> None:
    made = make_account("http://127.0.0.1:9/token", "nowhere")

    with pytest.raises(CredentialUnavailable) as failed:
        mint(vertex(made.json_text))

    assert failed.value.reason == "connection_error"


def test_default_credentials_come_from_the_environment(
    mock: RunningMock,
    account: ServiceAccount,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key_file = tmp_path / "sa.json"
    key_file.write_text(account.json_text)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))

    minted = mint(vertex(use_default_credentials=True))

    assert minted.auth.token is not None
    assert mock.requests()[-1]["body"]["iss"] == account.client_email


def test_no_default_credentials_is_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing"))

    with pytest.raises(CredentialUnavailable) as refused:
        mint(vertex(use_default_credentials=True))

    assert refused.value.reason == "auth"


def test_the_kind_is_registered_and_its_token_is_cached(
    mock: RunningMock, account: ServiceAccount
) -> None:
    assert credential_sources.MINTERS["vertex"] is vertex_auth.MINTER
    credential_sources.forget()
    auth = vertex(account.json_text)

    async def twice() -> tuple[Auth | None, Auth | None]:
        first = await credential_sources.ready(auth)
        return first, await credential_sources.ready(auth)

    try:
        first, second = asyncio.run(twice())
    finally:
        credential_sources.forget()

    assert first is not None
    assert first.token == second.token if second is not None else False
    assert [r["path"] for r in mock.requests()] == ["/token"]


def test_the_token_endpoint_is_reached_through_the_providers_proxy(
    mock: RunningMock, account: ServiceAccount
) -> None:
    with loop_thread() as thread:
        proxy = ConnectProxy(thread)
        try:
            minted = mint(
                vertex(account.json_text), ProviderOutbound(proxy_url=proxy.url)
            )
        finally:
            proxy.close()

    assert minted.auth.token is not None
    assert [(c.method, c.target) for c in proxy.log] == [
        ("POST", mock.url.removesuffix("/v1") + "/token")
    ]


def test_a_connection_without_a_credential_is_refused_as_auth() -> None:
    with pytest.raises(CredentialUnavailable) as refused:
        mint(vertex())

    assert refused.value.reason == "auth"
    assert "service_account_json" in str(refused.value)


def test_a_failing_token_endpoint_is_a_connection_error(
    mock: RunningMock, account: ServiceAccount
) -> None:
    authority(mock.state).token_status = 503
    try:
        with pytest.raises(CredentialUnavailable) as failed:
            mint(vertex(account.json_text))
    finally:
        authority(mock.state).token_status = None

    assert failed.value.reason == "connection_error"
    assert {r["path"] for r in mock.requests()} == {"/token"}
