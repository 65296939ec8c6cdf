"""The Vertex AI dialect (spec 10 §1, §3), pure: URLs per publisher and region, the
bearer token, the Claude body, errors of both envelopes, embeddings, the model list,
the credential's checks and the wire a model id picks."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from gateway.dialects import REGISTRY, WIRES, dialect_for, model_wire
from gateway.dialects.base import BadUpstreamResponse
from gateway.dialects.vertex import (
    ANTHROPIC_VERSION,
    VertexAnthropicDialect,
    VertexDialect,
    api_root,
    host_url,
)
from gateway.dialects.vertex_credential import check_connection
from gateway.kernel.errors import (
    FailureDetail,
    FailureReason,
    UpstreamError,
    classify_status,
    classify_stream_error,
)
from gateway.kernel.types import Auth
from gateway.planning.strategies.inputs import target_parts

CREATED = 1_700_000_000
GOOGLE = VertexDialect()
CLAUDE = VertexAnthropicDialect()
SA_JSON = json.dumps(
    {
        "type": "service_account",
        "client_email": "a@p.iam.gserviceaccount.com",
        # a placeholder, not a key: only its PEM framing is checked at save
        "private_key": "-----BEGIN " + "PRIVATE KEY-----\nAAAA\n-----END",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
)


def auth(
    region: str = "us-central1", token: str | None = "ya29.tok", **more: str
) -> Auth:
    return Auth(
        kind="vertex",
        settings=MappingProxyType({"project": "my-proj", "region": region, **more}),
        token=token,
    )


def base(region: str = "us-central1") -> str:
    url = GOOGLE.connection_base_url("", auth(region))
    assert url is not None
    return url


# --- registry and wires --------------------------------------------------------------


def test_the_kind_is_registered_with_a_messages_wire_for_claude() -> None:
    assert REGISTRY["vertex"] is not None
    assert isinstance(WIRES[("vertex", "chat")], VertexDialect)
    assert isinstance(WIRES[("vertex", "messages")], VertexAnthropicDialect)
    assert dialect_for("vertex", "messages").surfaces == frozenset({"messages"})
    assert REGISTRY["vertex"].needs_base_url is False


@pytest.mark.parametrize(
    ("model_id", "wire"),
    [
        ("claude-sonnet-4@20250514", "messages"),
        ("Claude-3-5-haiku@20241022", "messages"),
        ("gemini-2.5-flash", None),
        ("text-embedding-005", None),
    ],
)
def test_a_claude_id_picks_anthropics_publisher(model_id: str, wire: str) -> None:
    assert model_wire("vertex", model_id) == wire
    assert model_wire("gemini", model_id) is None


def test_a_target_key_splits_at_its_last_at_sign() -> None:
    assert target_parts("vx/claude-sonnet-4@20250514@main") == (
        "vx",
        "vx/claude-sonnet-4@20250514",
        "main",
    )
    assert target_parts("vx/claude-sonnet-4@20250514@*") == (
        "vx",
        "vx/claude-sonnet-4@20250514",
        None,
    )
    assert target_parts("pa/m1@main") == ("pa", "pa/m1", "main")


# --- URLs -----------------------------------------------------------------------------


def test_the_region_names_the_host_and_global_has_no_prefix() -> None:
    assert base("europe-west4") == "https://europe-west4-aiplatform.googleapis.com"
    assert base("global") == "https://aiplatform.googleapis.com"
    assert host_url("us-east5") == "https://us-east5-aiplatform.googleapis.com"
    # a provider's own base URL wins (a private endpoint, the mock)
    assert GOOGLE.connection_base_url("http://127.0.0.1:9/v1", auth()) is None


@pytest.mark.parametrize(
    ("given", "root"),
    [
        (
            "https://x-aiplatform.googleapis.com",
            "https://x-aiplatform.googleapis.com/v1",
        ),
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("http://127.0.0.1:9/v1beta1/", "http://127.0.0.1:9/v1"),
        ("https://psc.example/vertex", "https://psc.example/vertex/v1"),
    ],
)
def test_the_api_root_has_one_version(given: str, root: str) -> None:
    assert api_root(given) == root


def test_a_gemini_call_goes_to_googles_publisher_with_the_token() -> None:
    call = GOOGLE.build_request(
        base_url=base("global"),
        api_key=None,
        model="gemini-2.5-flash",
        body={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
        stream=True,
        auth=auth("global", quota_project_id="billing-proj"),
    )
    assert call.url == (
        "https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global"
        "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert call.headers == {
        "content-type": "application/json",
        "authorization": "Bearer ya29.tok",
        "x-goog-user-project": "billing-proj",
    }
    assert call.body == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 5},
    }


def test_a_claude_call_has_the_version_in_the_body_and_no_model() -> None:
    call = CLAUDE.build_request(
        base_url=base(),
        api_key=None,
        model="claude-sonnet-4@20250514",
        body={
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ]
        },
        stream=False,
        auth=auth(),
    )
    assert call.url == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations"
        "/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict"
    )
    assert call.headers["authorization"] == "Bearer ya29.tok"
    assert "x-api-key" not in call.headers
    assert "anthropic-version" not in call.headers
    assert call.body == {
        "anthropic_version": ANTHROPIC_VERSION,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "max_tokens": 4096,
    }
    streamed = CLAUDE.build_request(
        base_url=base(), api_key=None, model="claude-x", body={}, stream=True
    )
    assert streamed.url.endswith("/claude-x:streamRawPredict")
    assert streamed.body["stream"] is True


def test_a_messages_passthrough_keeps_the_body_but_model_and_beta_header() -> None:
    body = {"model": "vx/claude-x", "max_tokens": 9, "messages": [], "stream": False}
    call = CLAUDE.passthrough_request(
        base_url=base(),
        api_key=None,
        model="claude-x",
        body=body,
        stream=True,
        forward=(("anthropic-version", "2023-06-01"), ("anthropic-beta", "b1")),
        auth=auth(),
    )
    assert call.passthrough is True
    assert call.body == {
        "max_tokens": 9,
        "messages": [],
        "stream": True,
        "anthropic_version": ANTHROPIC_VERSION,
    }
    assert call.headers["anthropic-beta"] == "b1"
    assert "anthropic-version" not in call.headers
    assert body["model"] == "vx/claude-x"  # never mutated


def test_count_tokens_names_the_model_in_the_body() -> None:
    call = CLAUDE.count_tokens_request(
        base_url=base(),
        api_key=None,
        model="claude-x@1",
        body={"model": "vx/claude-x@1", "messages": []},
        forward=(),
        auth=auth(),
    )
    assert call.url.endswith("/publishers/anthropic/models/count-tokens:rawPredict")
    assert call.body == {
        "model": "claude-x@1",
        "messages": [],
        "anthropic_version": ANTHROPIC_VERSION,
    }
    assert call.operation == "count_tokens"


# --- replies --------------------------------------------------------------------------


def test_replies_of_each_publisher_are_read_by_its_own_translation() -> None:
    gemini = GOOGLE.parse_completion(
        {
            "candidates": [
                {"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "cachedContentTokenCount": 4,
                "candidatesTokenCount": 2,
            },
        },
        created=CREATED,
    )
    assert gemini["choices"][0]["message"]["content"] == "ok"
    assert gemini["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}
    claude = CLAUDE.parse_completion(
        {
            "id": "msg_1",
            "type": "message",
            "content": [{"type": "text", "text": "hey"}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 3,
                "cache_read_input_tokens": 5,
                "cache_creation_input_tokens": 2,
                "output_tokens": 1,
            },
        },
        created=CREATED,
    )
    assert claude["choices"][0]["message"]["content"] == "hey"
    assert claude["usage"]["prompt_tokens"] == 10
    assert claude["usage"]["cache_creation_input_tokens"] == 2


def test_a_claude_stream_is_read_as_anthropics() -> None:
    translator = CLAUDE.stream_translator(created=CREATED)
    chunks = translator.translate(
        "message_start",
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 2}}},
    )
    chunks += translator.translate(
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
    )
    chunks += translator.translate("message_stop", {"type": "message_stop"})
    assert [c["choices"][0]["delta"] for c in chunks if c["choices"]] == [
        {"role": "assistant", "content": ""},
        {"content": "x"},
    ]
    assert translator.finished


@pytest.mark.parametrize(
    ("payload", "status", "reason", "detail"),
    [
        (
            {"error": {"code": 429, "message": "Q", "status": "RESOURCE_EXHAUSTED"}},
            429,
            FailureReason.RATE_LIMIT,
            None,
        ),
        (
            {"error": {"code": 401, "message": "bad", "status": "UNAUTHENTICATED"}},
            401,
            FailureReason.SERVER_ERROR,
            FailureDetail.AUTH_FAILED,
        ),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            529,
            FailureReason.SERVER_ERROR,
            None,
        ),
    ],
)
def test_errors_of_both_envelopes_are_classified(
    payload: dict, status: int, reason: FailureReason, detail: FailureDetail | None
) -> None:
    for dialect in (GOOGLE, CLAUDE):
        error = dialect.parse_error(payload, json.dumps(payload))
        assert error.message
        found = classify_status(status, error)
        assert (found.reason, found.detail) == (reason, detail)


def test_error_codes_come_from_the_envelope() -> None:
    google = CLAUDE.parse_error(
        [{"error": {"code": 429, "message": "q", "status": "RESOURCE_EXHAUSTED"}}], ""
    )
    assert google == UpstreamError(
        message="q", code="RESOURCE_EXHAUSTED", type="rate_limit_error"
    )
    claude = CLAUDE.parse_error(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, ""
    )
    assert classify_stream_error(claude).reason is FailureReason.RATE_LIMIT


def test_a_gemini_model_counts_tokens_at_count_tokens() -> None:
    assert GOOGLE.counts_tokens
    call = GOOGLE.count_tokens_request(
        base_url=base(),
        api_key=None,
        model="gemini-2.5-flash",
        body={
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hello"},
            ],
            "max_tokens": 10,
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": "auto",
        },
        forward=(),
        auth=auth(),
    )
    assert call.url.endswith("/publishers/google/models/gemini-2.5-flash:countTokens")
    assert call.headers["authorization"] == "Bearer ya29.tok"
    assert (call.operation, call.count_field) == ("count_tokens", "totalTokens")
    assert call.body == {
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "f"}]}],
    }


def test_embeddings_go_to_predict_and_count_tokens() -> None:
    call = GOOGLE.embeddings_request(
        base_url=base(),
        api_key=None,
        model="text-embedding-005",
        body={"input": ["a", "b"], "dimensions": 4},
        auth=auth(),
    )
    assert call.url.endswith("/publishers/google/models/text-embedding-005:predict")
    assert call.body == {
        "instances": [{"content": "a"}, {"content": "b"}],
        "parameters": {"outputDimensionality": 4},
    }
    reply = GOOGLE.parse_embeddings(
        {
            "predictions": [
                {"embeddings": {"values": [0.1], "statistics": {"token_count": 2}}},
                {"embeddings": {"values": [0.2], "statistics": {"token_count": 3}}},
            ]
        }
    )
    assert [d["embedding"] for d in reply["data"]] == [[0.1], [0.2]]
    assert reply["usage"] == {"prompt_tokens": 5, "total_tokens": 5}
    with pytest.raises(BadUpstreamResponse):
        GOOGLE.parse_embeddings({"predictions": []})


def test_the_model_list_is_the_publishers() -> None:
    call = CLAUDE.list_models_request(
        base_url="http://127.0.0.1:9/v1", api_key=None, auth=auth()
    )
    assert call.url == (
        "http://127.0.0.1:9/v1beta1/publishers/anthropic/models?pageSize=1000"
    )
    assert call.method == "GET"
    assert call.headers == {"authorization": "Bearer ya29.tok"}
    ids = GOOGLE.parse_model_list(
        {"publisherModels": [{"name": "publishers/google/models/gemini-2.5-pro"}]}
    )
    assert ids == ["gemini-2.5-pro"]
    with pytest.raises(BadUpstreamResponse):
        GOOGLE.parse_model_list({})


# --- the credential -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connection", "provider", "problems"),
    [
        (
            {"service_account_json": SA_JSON, "project": "my-proj"},
            {"region": "us-east5"},
            [],
        ),
        ({"use_default_credentials": True}, {"project": "p-1234", "region": "eu"}, []),
        ({"service_account_json": "env:SA"}, {"project": "p-123", "region": "x1"}, []),
        (
            {"service_account_json": "{not json"},
            {"project": "p-123", "region": "x1"},
            ["service_account_json"],
        ),
        (
            {"service_account_json": json.dumps({"type": "service_account"})},
            {"project": "p-123", "region": "x1"},
            ["service_account_json"],
        ),
        ({"service_account_json": SA_JSON}, {}, ["project", "region"]),
        # none given: an edit keeping the stored key (the mint refuses a bare one)
        ({}, {"project": "p-123", "region": "x1"}, []),
        ({"service_account_json": "***"}, {"project": "p-123", "region": "x1"}, []),
        (
            {"service_account_json": SA_JSON, "use_default_credentials": True},
            {"project": "p-123", "region": "x1"},
            ["use_default_credentials"],
        ),
        (
            {"service_account_json": SA_JSON, "region": "evil.com/#"},
            {"project": "p-123"},
            ["region"],
        ),
    ],
)
def test_the_credential_is_checked_naming_the_field(
    connection: dict, provider: dict, problems: list[str]
) -> None:
    found = check_connection(connection, provider)
    assert [field for field, _ in found] == problems


def test_a_google_retry_info_on_vertex_is_the_error_s_retry_after():
    payload = {
        "error": {
            "code": 429,
            "message": "Resource exhausted",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": "45s",
                }
            ],
        }
    }
    error = REGISTRY["vertex"].parse_error(payload, "")
    assert (error.code, error.retry_after_s) == ("RESOURCE_EXHAUSTED", 45.0)
