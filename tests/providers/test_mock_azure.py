"""The mock's Azure OpenAI wire over loopback, driven by the openai SDK's own Azure
client: both path forms, key and Entra auth, the deployments list, faults."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from providers.mock_upstream import RunningMock, start_in_thread
from providers.mock_upstream.wire_azure import API_KEY, CLIENT_SECRET, SCOPE

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


def _origin(mock: RunningMock) -> str:
    return mock.url.removesuffix("/v1")


def _azure(mock: RunningMock, **auth: str) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=_origin(mock),
        api_version="2024-10-21",
        max_retries=0,
        timeout=5.0,
        **auth,
    )


def _token(mock: RunningMock, secret: str = CLIENT_SECRET) -> httpx.Response:
    return httpx.post(
        f"{_origin(mock)}/contoso.onmicrosoft.com/oauth2/v2.0/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "app-1",
            "client_secret": secret,
            "scope": SCOPE,
        },
        timeout=5.0,
    )


def test_the_azure_sdk_chats_and_streams_on_the_deployment_form(
    mock: RunningMock,
) -> None:
    client = _azure(mock, api_key=API_KEY)
    answer = client.chat.completions.create(model="prod-4o", messages=MESSAGES)
    assert answer.choices[0].message.content == "Hello from mock prod-4o."
    stream = client.chat.completions.create(
        model="prod-4o", messages=MESSAGES, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from mock prod-4o."
    sent = mock.state.requests()
    assert sent[0]["path"] == (
        "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    )
    assert sent[0]["model"] == "prod-4o"
    assert sent[0]["headers"]["api-key"] == API_KEY


def test_the_v1_api_serves_chat_responses_and_embeddings(mock: RunningMock) -> None:
    client = openai.OpenAI(
        base_url=f"{_origin(mock)}/openai/v1",
        api_key="unused",
        default_headers={"api-key": API_KEY},
        max_retries=0,
        timeout=5.0,
    )
    chat = client.chat.completions.create(model="dep", messages=MESSAGES)
    assert chat.model == "dep"
    response = client.responses.create(model="dep", input="hi")
    assert response.output_text == "Hello from mock dep."
    vectors = client.embeddings.create(model="emb", input=["a", "b"])
    assert len(vectors.data) == 2
    paths = [r["path"] for r in mock.state.requests()]
    assert paths == [
        "/openai/v1/chat/completions",
        "/openai/v1/responses",
        "/openai/v1/embeddings",
    ]


def test_a_wrong_key_or_no_credential_is_azures_401(mock: RunningMock) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        _azure(mock, api_key="wrong").chat.completions.create(
            model="d", messages=MESSAGES
        )
    assert caught.value.body["code"] == "401"
    bearer = httpx.post(
        f"{_origin(mock)}/openai/v1/chat/completions",
        headers={"authorization": "Bearer forged.token.value"},
        json={"model": "d", "messages": MESSAGES},
    )
    assert bearer.status_code == 401


def test_an_entra_token_minted_by_the_mock_is_accepted_as_bearer(
    mock: RunningMock,
) -> None:
    minted = _token(mock)
    assert minted.status_code == 200
    token = minted.json()["access_token"]
    assert minted.json()["expires_in"] == 3600
    client = _azure(mock, azure_ad_token=token)
    answer = client.chat.completions.create(model="d", messages=MESSAGES)
    assert answer.choices[0].finish_reason == "stop"
    record = mock.state.requests()[0]
    assert record["path"] == "/contoso.onmicrosoft.com/oauth2/v2.0/token"
    assert record["body"]["client_secret"] == "***"
    refused = _token(mock, secret="not-the-secret")
    assert refused.status_code == 401
    assert refused.json()["error"] == "invalid_client"


def test_the_deployments_are_listed_for_discovery(mock: RunningMock) -> None:
    mock.state.add("my-deployment", content="x")
    listed = httpx.get(
        f"{_origin(mock)}/openai/deployments?api-version=2023-03-15-preview",
        headers={"api-key": API_KEY},
    ).json()
    ids = [d["id"] for d in listed["data"]]
    assert "my-deployment" in ids
    assert listed["data"][0]["status"] == "succeeded"
    missing = httpx.post(
        f"{_origin(mock)}/openai/deployments/d/chat/completions",
        headers={"api-key": API_KEY},
        json={"messages": MESSAGES},
    )
    assert missing.status_code == 404  # the deployment form names its api-version


def test_scripted_faults_apply_to_a_deployment(mock: RunningMock) -> None:
    mock.state.add("busy", status=429, headers={"retry-after": "7"})
    with pytest.raises(openai.RateLimitError) as caught:
        _azure(mock, api_key=API_KEY).chat.completions.create(
            model="busy", messages=MESSAGES
        )
    assert caught.value.response.headers["retry-after"] == "7"
