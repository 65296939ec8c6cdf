"""The Azure OpenAI dialect (spec 10 §1, §3), pure: both URL forms, key and Entra
auth, error classification, the deployments list and the Entra token request."""

from __future__ import annotations

from types import MappingProxyType
from urllib.parse import parse_qs

import pytest

from gateway.dialects import REGISTRY, WIRES, dialect_of, wires_of
from gateway.dialects.azure import (
    AZURE_CREDENTIALS,
    ENTRA_SCOPE,
    AzureDialect,
    AzureResponsesDialect,
    token_form,
    token_url,
    uses_entra,
)
from gateway.kernel.errors import (
    FailureDetail,
    FailureReason,
    classify_status,
)
from gateway.kernel.types import Auth, ConnectionInfo, ModelInfo, ProviderInfo, Target

KEY = "az-key-1234"
BODY = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5}


def _auth(token: str | None = None, **settings) -> Auth:
    secrets = {}
    for name in ("tenant_id", "client_id", "client_secret"):
        if name in settings:
            secrets[name] = settings.pop(name)
    return Auth(
        kind="azure",
        secrets=MappingProxyType(secrets),
        settings=MappingProxyType({"resource": "contoso", **settings}),
        token=token,
    )


def test_azure_is_a_kind_with_a_chat_and_a_responses_wire():
    assert isinstance(REGISTRY["azure"], AzureDialect)
    assert isinstance(WIRES[("azure", "responses")], AzureResponsesDialect)
    assert wires_of("azure") == ("chat", "responses")
    dialect = REGISTRY["azure"]
    assert dialect.embeddings is True
    assert dialect.needs_base_url is False
    assert dialect.surfaces == frozenset({"chat"})
    assert WIRES[("azure", "responses")].surfaces == frozenset({"responses"})


def test_without_api_version_a_chat_goes_to_the_v1_api_with_the_deployment_as_model():
    call = AzureDialect().build_request(
        base_url="", api_key=KEY, model="prod-4o", body=BODY, stream=True, auth=_auth()
    )
    assert call.url == "https://contoso.openai.azure.com/openai/v1/chat/completions"
    assert call.headers == {"content-type": "application/json", "api-key": KEY}
    assert call.body["model"] == "prod-4o"
    assert call.body["stream_options"] == {"include_usage": True}
    assert BODY.get("model") is None  # the given body is not mutated


def test_with_api_version_a_chat_goes_to_the_deployment_form():
    auth = _auth(api_version="2024-10-21")
    call = AzureDialect().build_request(
        base_url="", api_key=KEY, model="prod 4o", body=BODY, stream=False, auth=auth
    )
    assert call.url == (
        "https://contoso.openai.azure.com/openai/deployments/prod%204o"
        "/chat/completions?api-version=2024-10-21"
    )


def test_a_base_url_replaces_the_resource_host_whatever_its_openai_suffix():
    for base in (
        "http://127.0.0.1:9",
        "http://127.0.0.1:9/openai/",
        "http://127.0.0.1:9/openai/v1",
    ):
        call = AzureDialect().build_request(
            base_url=base, api_key=KEY, model="d", body=BODY, stream=False, auth=_auth()
        )
        assert call.url == "http://127.0.0.1:9/openai/v1/chat/completions"


def test_a_connection_without_a_provider_base_url_gets_its_resource_host():
    dialect = AzureDialect()
    assert (
        dialect.connection_base_url("", _auth(resource="west"))
        == "https://west.openai.azure.com"
    )
    assert dialect.connection_base_url("http://gateway.example", _auth()) is None


def test_a_minted_entra_token_is_sent_as_bearer_and_no_key_header():
    auth = _auth(token="tok-1", tenant_id="t", client_id="c", client_secret="s")
    call = AzureDialect().build_request(
        base_url="", api_key=None, model="d", body=BODY, stream=False, auth=auth
    )
    assert call.headers["authorization"] == "Bearer tok-1"
    assert "api-key" not in call.headers
    assert uses_entra(auth)
    assert not uses_entra(_auth())


def test_responses_go_to_v1_responses_or_the_versioned_responses_path():
    dialect = AzureResponsesDialect()
    call = dialect.build_request(
        base_url="", api_key=KEY, model="d", body=BODY, stream=False, auth=_auth()
    )
    assert call.url == "https://contoso.openai.azure.com/openai/v1/responses"
    assert call.body["model"] == "d"
    assert (
        call.body["input"] == [{"role": "user", "content": "Hi"}] or call.body["input"]
    )
    assert call.body["max_output_tokens"] == 5
    assert call.headers["api-key"] == KEY
    versioned = dialect.passthrough_request(
        base_url="",
        api_key=KEY,
        model="d",
        body={"input": "hello"},
        stream=True,
        forward=(),
        surface="responses",
        auth=_auth(api_version="2025-04-01-preview"),
    )
    assert versioned.url == (
        "https://contoso.openai.azure.com/openai/responses"
        "?api-version=2025-04-01-preview"
    )
    assert versioned.passthrough is True
    assert versioned.body == {
        "input": "hello",
        "model": "d",
        "store": False,
        "stream": True,
    }


def test_embeddings_take_the_same_two_forms():
    dialect = AzureDialect()
    v1 = dialect.embeddings_request(
        base_url="", api_key=KEY, model="emb", body={"input": "x"}, auth=_auth()
    )
    assert v1.url == "https://contoso.openai.azure.com/openai/v1/embeddings"
    assert v1.body == {"input": "x", "model": "emb"}
    assert v1.operation == "embeddings"
    versioned = dialect.embeddings_request(
        base_url="",
        api_key=KEY,
        model="emb",
        body={"input": "x"},
        auth=_auth(api_version="2024-10-21"),
    )
    assert versioned.url.endswith(
        "/openai/deployments/emb/embeddings?api-version=2024-10-21"
    )


def test_discovery_lists_the_deployments():
    dialect = AzureDialect()
    call = dialect.list_models_request(base_url="", api_key=KEY, auth=_auth())
    assert call.method == "GET"
    assert call.url == (
        "https://contoso.openai.azure.com/openai/deployments"
        "?api-version=2023-03-15-preview"
    )
    assert call.headers == {"api-key": KEY}
    payload = {"data": [{"id": "prod-4o", "model": "gpt-4o"}, {"id": "emb"}]}
    assert dialect.parse_model_list(payload) == ["prod-4o", "emb"]


def test_a_content_filter_refusal_is_the_clients_request_with_code_content_filter():
    payload = {
        "error": {
            "message": "The response was filtered due to the prompt triggering ...",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    error = AzureDialect().parse_error(payload, "")
    assert error.code == "content_filter"
    assert error.message.startswith("Azure content filter: The response was filtered")
    assert classify_status(400, error).reason is FailureReason.INVALID_REQUEST
    inner_only = {
        "error": {
            "message": "no",
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    assert AzureResponsesDialect().parse_error(inner_only, "").code == "content_filter"


@pytest.mark.parametrize(
    ("status", "code", "reason", "detail"),
    [
        (429, "429", FailureReason.RATE_LIMIT, None),
        (401, "401", FailureReason.SERVER_ERROR, FailureDetail.AUTH_FAILED),
        (403, "403", FailureReason.SERVER_ERROR, FailureDetail.AUTH_FAILED),
        (
            404,
            "DeploymentNotFound",
            FailureReason.SERVER_ERROR,
            FailureDetail.MODEL_NOT_FOUND,
        ),
        (400, "context_length_exceeded", FailureReason.CONTEXT_LENGTH, None),
    ],
)
def test_azure_errors_are_classified(status, code, reason, detail):
    error = AzureDialect().parse_error(
        {"error": {"code": code, "message": "something"}}, ""
    )
    assert error.code == code
    found = classify_status(status, error)
    assert (found.reason, found.detail) == (reason, detail)


def test_the_entra_token_request_is_a_client_credentials_grant():
    auth = _auth(
        tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s3"
    )
    assert token_url(auth) == (
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    )
    moved = _auth(
        tenant_id="t1",
        client_id="a",
        client_secret="s",
        authority_host="http://127.0.0.1:9/",
    )
    assert token_url(moved) == "http://127.0.0.1:9/t1/oauth2/v2.0/token"
    assert parse_qs(token_form(auth).decode()) == {
        "grant_type": ["client_credentials"],
        "client_id": ["app"],
        "client_secret": ["s3"],
        "scope": [ENTRA_SCOPE],
    }


def _problems(given, provider=None):
    return AZURE_CREDENTIALS.check_connection(
        given, {"resource": "r"} if provider is None else provider
    )


def test_credential_checks_name_the_field():
    assert _problems({"api_key": "k"}) == []
    assert _problems({"api_key": "k"}, {}) == [
        ("resource", "is required for kind 'azure' (on the provider or here)")
    ]
    assert _problems({"api_key": "k", "resource": "own"}, {}) == []
    assert [f for f, _ in _problems({"tenant_id": "t", "client_id": "c"})] == [
        "client_secret"
    ]
    assert [
        f
        for f, _ in _problems(
            {"tenant_id": "t", "client_id": "c", "client_secret": "s", "api_key": "k"}
        )
    ] == ["api_key"]
    assert [
        f
        for f, _ in _problems(
            {"tenant_id": "not a tenant!", "client_id": "c", "client_secret": "s"}
        )
    ] == ["tenant_id"]
    assert (
        _problems({"tenant_id": "env:T", "client_id": "c", "client_secret": "env:S"})
        == []
    )
    assert [
        f for f, _ in AZURE_CREDENTIALS.check_provider({"api_version": "2024-13-01"})
    ] == ["api_version"]
    assert AZURE_CREDENTIALS.check_provider({"api_version": "2025-04-01-preview"}) == []
    assert [f for f, _ in AZURE_CREDENTIALS.check_provider({"resource": "-bad-"})] == [
        "resource"
    ]
    assert [
        f for f, _ in AZURE_CREDENTIALS.check_provider({"authority_host": "ftp://x"})
    ] == ["authority_host"]


def test_a_target_sends_its_deployment_as_the_upstream_model():
    model = ModelInfo(provider="az", model_id="gpt-4o", deployment="prod-4o")
    assert model.upstream_id == "prod-4o"
    assert ModelInfo(provider="az", model_id="gpt-4o").upstream_id == "gpt-4o"
    target = Target(
        provider=ProviderInfo(slug="az", kind="azure", base_url="", wire="responses"),
        connection=ConnectionInfo(provider="az", name="main"),
        model=model,
    )
    assert isinstance(dialect_of(target), AzureResponsesDialect)


def test_the_prompt_filter_chunk_opening_a_stream_is_dropped():
    translator = AzureDialect().stream_translator(created=1)
    annotation = {
        "id": "",
        "object": "",
        "choices": [],
        "prompt_filter_results": [{"prompt_index": 0}],
    }
    assert translator.translate(None, annotation) == []
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {}}]}
    assert translator.translate(None, chunk) == [chunk]
    usage = {"choices": [], "usage": {"prompt_tokens": 1}}
    assert translator.translate(None, usage) == [usage]
    assert translator.translate(None, "[DONE]") == []
    assert translator.finished
