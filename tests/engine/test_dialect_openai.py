"""The OpenAI dialect: pass-through body, forced stream usage, error shapes."""

import copy

import pytest

from gateway.dialects import REGISTRY
from gateway.dialects.base import BadUpstreamResponse, StreamErrorEvent
from gateway.dialects.openai import OpenAIDialect, error_from_payload
from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import DONE

BASE_URL = "https://api.openai.com/v1"
CREATED = 1_700_000_000


@pytest.fixture
def dialect():
    return OpenAIDialect()


@pytest.fixture
def build(dialect):
    """Builder: body fields -> the UpstreamCall for model ``gpt-4o``."""

    def _build(*, stream=False, api_key="sk-up", **fields):
        body = {
            "model": "client-alias",
            "messages": [{"role": "user", "content": "Hi"}],
        }
        return dialect.build_request(
            base_url=BASE_URL + "/",
            api_key=api_key,
            model="gpt-4o",
            body={**body, **fields},
            stream=stream,
        )

    return _build


def test_request_posts_the_body_with_only_the_model_replaced(build):
    call = build(temperature=0.2, user="u")

    assert call.url == "https://api.openai.com/v1/chat/completions"
    assert call.headers == {
        "content-type": "application/json",
        "authorization": "Bearer sk-up",
    }
    assert call.body == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.2,
        "user": "u",
    }


def test_request_without_api_key_sends_no_authorization(build):
    assert "authorization" not in build(api_key=None).headers


def test_streaming_request_forces_include_usage_and_keeps_other_options(build):
    call = build(stream=True, stream_options={"include_obfuscation": False})

    assert call.body["stream_options"] == {
        "include_obfuscation": False,
        "include_usage": True,
    }


def test_streaming_request_adds_stream_options_when_absent_or_malformed(build):
    assert build(stream=True).body["stream_options"] == {"include_usage": True}
    assert build(stream=True, stream_options="x").body["stream_options"] == {
        "include_usage": True
    }


def test_non_streaming_request_leaves_stream_options_alone(build):
    assert "stream_options" not in build().body


def test_build_request_does_not_mutate_its_body(dialect):
    body = {
        "model": "alias",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream_options": {"include_usage": False},
    }
    before = copy.deepcopy(body)

    dialect.build_request(
        base_url=BASE_URL, api_key="k", model="gpt-4o", body=body, stream=True
    )

    assert body == before


def test_completion_with_choices_is_returned_with_its_created(dialect):
    payload = {"id": "c1", "created": 5, "choices": [{"index": 0}]}

    assert dialect.parse_completion(payload, created=CREATED) == payload


def test_completion_without_created_is_stamped(dialect):
    payload = {"id": "c1", "choices": [{"index": 0}]}

    assert dialect.parse_completion(payload, created=CREATED)["created"] == CREATED


@pytest.mark.parametrize(
    "payload",
    [
        [],
        "text",
        {},
        {"choices": []},
        {"choices": {}},
        {"choices": [{}], "error": {"message": "boom"}},
    ],
)
def test_unusable_completion_is_a_bad_response(dialect, payload):
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_completion(payload, created=CREATED)


@pytest.mark.parametrize(
    ("payload", "text", "expected"),
    [
        (
            {
                "error": {
                    "message": "Invalid 'temperature'",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "invalid_value",
                }
            },
            "",
            UpstreamError(
                message="Invalid 'temperature'",
                type="invalid_request_error",
                param="temperature",
                code="invalid_value",
            ),
        ),
        ({"error": "plain message"}, "", UpstreamError(message="plain message")),
        (
            {"message": "bare", "code": 42, "param": ["x"]},
            "",
            UpstreamError(message="bare", code="42"),
        ),
        (None, "Bad Gateway", UpstreamError(message="Bad Gateway")),
        ({"error": None}, "raw", UpstreamError(message="raw")),
        (None, "x" * 3000, UpstreamError(message="x" * 2000)),
    ],
)
def test_error_shapes_are_read_into_an_upstream_error(payload, text, expected):
    assert error_from_payload(payload, text) == expected
    assert OpenAIDialect().parse_error(payload, text) == expected


def test_stream_chunks_pass_through_until_done(dialect):
    translator = dialect.stream_translator(created=CREATED)
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"delta": {"content": "a"}}],
    }

    assert translator.translate(None, chunk) == [chunk]
    assert translator.finished is False
    assert translator.translate(None, "not an object") == []
    assert translator.translate(None, DONE) == []
    assert translator.finished is True


def test_stream_error_event_raises_with_the_upstream_error(dialect):
    translator = dialect.stream_translator(created=CREATED)

    with pytest.raises(StreamErrorEvent) as caught:
        translator.translate(
            None, {"error": {"type": "rate_limit_error", "message": "slow"}}
        )

    assert caught.value.error == UpstreamError(message="slow", type="rate_limit_error")


def test_registry_maps_every_provider_kind_to_a_dialect():
    # each kind's own tests check it is registered (test_dialect_vertex, ...)
    assert {"anthropic", "gemini", "mock", "openai"} <= set(REGISTRY)
    assert isinstance(REGISTRY["openai"], OpenAIDialect)
    assert isinstance(REGISTRY["mock"], OpenAIDialect)


def test_openai_upstreams_get_object_arguments_as_a_string():
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": {"city": "Oslo"}},
    }
    body = {"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]}
    sent = (
        OpenAIDialect()
        .build_request(
            base_url="http://u/v1", api_key="k", model="gpt", body=body, stream=False
        )
        .body
    )
    arguments = sent["messages"][0]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"city": "Oslo"}'
    assert body["messages"][0]["tool_calls"][0] is call  # the canonical body is kept
