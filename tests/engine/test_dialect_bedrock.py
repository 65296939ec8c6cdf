"""The Bedrock dialect (spec 10 §1, §3), pure: Converse translation, SigV4 signing
with a fixed clock, the event-stream decoder and translator, errors, embeddings and
the model lists."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from types import MappingProxyType

import pytest

from gateway.dialects import REGISTRY, join_embeddings
from gateway.dialects import embeddings_unsent as dialects_embeddings_unsent
from gateway.dialects.base import BadUpstreamResponse, StreamErrorEvent
from gateway.dialects.bedrock import (
    AwsKey,
    BedrockDialect,
    check_connection,
    check_provider,
    control_url,
    embeddings_unsent,
    sign_request,
    unsent,
)
from gateway.kernel.errors import (
    FailureDetail,
    FailureReason,
    classify_status,
    classify_stream_error,
)
from gateway.kernel.types import Auth
from providers.mock_upstream.wire_bedrock import event, exception, frame, verify

BASE_URL = "https://bedrock-runtime.us-east-1.amazonaws.com"
MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
CREATED = 1_700_000_000
#: 2026-12-02T06:00:00Z
NOW = 1_796_191_200.0
KEY_ID = "AKIAMOCKBEDROCK00001"
SECRET = "mock/bedrock+secret/key/0000000000000000"
AUTH = Auth(
    kind="bedrock",
    secrets=MappingProxyType(
        {"aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}
    ),
    settings=MappingProxyType({"region": "us-east-1"}),
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

dialect = BedrockDialect()


def _build(body: dict, *, stream: bool = False, auth: Auth | None = AUTH):
    return dialect.build_request(
        base_url=BASE_URL,
        api_key=None,
        model=MODEL,
        body=body,
        stream=stream,
        auth=auth,
    )


def test_the_kind_is_registered_with_its_credential_shape():
    assert REGISTRY["bedrock"] is not None
    shape = REGISTRY["bedrock"].credentials
    assert shape.api_key is False
    assert set(shape.secrets) == {
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    }
    assert set(shape.settings) == {"region", "use_default_credentials"}
    assert REGISTRY["bedrock"].needs_base_url is False


# --- request --------------------------------------------------------------------------


def test_a_chat_request_becomes_a_converse_request():
    body = {
        "model": "x",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
            {"role": "user", "content": [{"type": "text", "text": "again"}]},
            {"role": "developer", "content": "No lists."},
        ],
        "max_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "stop": "END",
        "user": "u1",
        "response_format": {"type": "json_object"},
    }
    before = copy.deepcopy(body)
    call = _build(body)
    assert body == before  # never mutated
    assert call.url == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    )
    assert call.headers == {
        "content-type": "application/json",
        "accept": "application/json",
    }
    assert call.body == {
        "messages": [
            {"role": "user", "content": [{"text": "hello"}, {"text": "again"}]}
        ],
        "system": [{"text": "Be brief."}, {"text": "No lists."}],
        "inferenceConfig": {
            "maxTokens": 50,
            "temperature": 0.2,
            "topP": 0.9,
            "stopSequences": ["END"],
        },
        "additionalModelRequestFields": {"top_k": 40},
    }
    assert call.sign is not None
    assert SECRET not in repr(call)


def test_a_stream_goes_to_converse_stream_and_accepts_event_streams():
    call = _build({"messages": [{"role": "user", "content": "hi"}]}, stream=True)
    assert call.url.endswith("/converse-stream")
    assert call.headers["accept"] == "application/vnd.amazon.eventstream"


def test_tools_calls_and_results_are_translated():
    body = {
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "tooluse_1",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city": "Oslo"}',
                        },
                    },
                    {
                        "id": "tooluse_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "not json"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "tooluse_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "tooluse_2", "content": ""},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [WEATHER],
        "tool_choice": "required",
    }
    sent = _build(body).body
    assert sent["messages"] == [
        {"role": "user", "content": [{"text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                },
                {
                    "toolUse": {
                        "toolUseId": "tooluse_2",
                        "name": "get_weather",
                        "input": {},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "content": [{"text": "sunny"}],
                    }
                },
                {"toolResult": {"toolUseId": "tooluse_2", "content": [{"json": {}}]}},
                {"text": "thanks"},
            ],
        },
    ]
    assert sent["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "The weather of a city",
                    "inputSchema": {"json": WEATHER["function"]["parameters"]},
                }
            }
        ],
        "toolChoice": {"any": {}},
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"auto": {}}),
        ({"type": "function", "function": {"name": "f"}}, {"tool": {"name": "f"}}),
        ("none", None),
        (None, None),
    ],
)
def test_tool_choices(choice, expected):
    tool = {"type": "function", "function": {"name": "f"}}
    body = {"messages": [{"role": "user", "content": "x"}], "tools": [tool]}
    if choice is not None:
        body["tool_choice"] = choice
    config = _build(body).body["toolConfig"]
    assert config.get("toolChoice") == expected
    # a tool without parameters gets an empty object schema
    assert config["tools"][0]["toolSpec"]["inputSchema"] == {
        "json": {"type": "object", "properties": {}}
    }


def test_images_from_data_urls_become_image_blocks():
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            }
        ]
    }
    assert _build(body).body["messages"][0]["content"] == [
        {"text": "what is this?"},
        {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
    ]


def test_images_it_cannot_send_are_named():
    body = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "s"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                    {"type": "image_url", "image_url": "data:image/bmp;base64,Qk0="},
                ],
            },
            {"role": "assistant", "content": "a bare string"},
        ]
    }
    assert unsent(body) == ("messages[1].content[2]", "messages[1].content[3]")
    assert REGISTRY["bedrock"].kind == "bedrock"
    assert unsent({"messages": [{"role": "user", "content": "hi"}]}) == ()
    assert unsent({"input": "embed me"}) == ()


def test_system_only_becomes_the_user_turn():
    body = {"messages": [{"role": "system", "content": "Say hi."}]}
    assert _build(body).body == {
        "messages": [{"role": "user", "content": [{"text": "Say hi."}]}]
    }


def test_the_endpoint_follows_the_region_unless_a_base_url_is_given():
    auth = Auth(kind="bedrock", settings=MappingProxyType({"region": "eu-west-3"}))
    assert dialect.connection_base_url("", auth) == (
        "https://bedrock-runtime.eu-west-3.amazonaws.com"
    )
    assert dialect.connection_base_url("http://127.0.0.1:9", auth) is None
    assert control_url("https://bedrock-runtime.eu-west-3.amazonaws.com") == (
        "https://bedrock.eu-west-3.amazonaws.com"
    )
    assert control_url("http://127.0.0.1:9/") == "http://127.0.0.1:9"


# --- signing --------------------------------------------------------------------------


def _reference_signature(
    *, method, path, query, headers, body, stamp, region, secret
) -> str:
    """SigV4 computed from the published algorithm, without botocore."""
    names = sorted(headers)
    canonical = "\n".join(
        [
            method,
            path,
            query,
            "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{stamp[:8]}/{region}/bedrock/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            stamp,
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = f"AWS4{secret}".encode()
    for part in (stamp[:8], region, "bedrock", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_signing_is_sigv4_over_the_exact_bytes_at_the_given_time():
    call = _build({"messages": [{"role": "user", "content": "hi"}]})
    body = json.dumps(call.body).encode()
    added = call.sign(
        method="POST", url=call.url, headers=call.headers, body=body, now=NOW
    )
    assert added["X-Amz-Date"] == "20261202T060000Z"
    assert "X-Amz-Security-Token" not in added
    expected = _reference_signature(
        method="POST",
        # the path's own encoding, encoded once more (every service but S3)
        path="/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse",
        query="",
        headers={
            "accept": "application/json",
            "content-type": "application/json",
            "host": "bedrock-runtime.us-east-1.amazonaws.com",
            "x-amz-date": "20261202T060000Z",
        },
        body=body,
        stamp="20261202T060000Z",
        region="us-east-1",
        secret=SECRET,
    )
    assert added["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20261202/us-east-1/bedrock/"
        "aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, "
        f"Signature={expected}"
    )
    # the same bytes at the same time: the same signature; other bytes: another
    again = call.sign(
        method="POST", url=call.url, headers=call.headers, body=body, now=NOW
    )
    assert again == added
    other = call.sign(
        method="POST", url=call.url, headers=call.headers, body=body + b" ", now=NOW
    )
    assert other["Authorization"] != added["Authorization"]


def test_a_session_token_is_sent_and_signed():
    added = sign_request(
        method="GET",
        url="https://bedrock.us-east-1.amazonaws.com/inference-profiles?maxResults=1000",
        headers={"accept": "application/json"},
        body=b"",
        now=NOW,
        key=AwsKey("us-east-1", KEY_ID, SECRET, "session-token-1"),
    )
    assert added["X-Amz-Security-Token"] == "session-token-1"
    assert "x-amz-security-token" in added["Authorization"]
    assert "session-token-1" not in repr(AwsKey("us-east-1", KEY_ID, SECRET, "t"))


def test_the_mock_verifies_what_the_dialect_signs():
    call = _build({"messages": [{"role": "user", "content": "hi"}]})
    body = json.dumps(call.body).encode()
    added = call.sign(
        method="POST", url=call.url, headers=call.headers, body=body, now=NOW
    )
    received = {
        "host": "bedrock-runtime.us-east-1.amazonaws.com",
        "user-agent": "omniroute/test",  # not signed
        **{k.lower(): v for k, v in {**call.headers, **added}.items()},
    }
    path = call.url.removeprefix(BASE_URL)
    assert verify("POST", path, received, body, now=NOW) is None
    # a decoded path (an ASGI runner) verifies the same
    decoded = path.replace("%3A", ":")
    assert verify("POST", decoded, received, body, now=NOW) is None
    refused = verify("POST", path, received, body + b"x", now=NOW)
    assert refused is not None
    assert refused[0] == "InvalidSignatureException"
    late = verify("POST", path, received, body, now=NOW + 3600)
    assert late is not None
    assert late[0] == "InvalidSignatureException"
    assert verify("POST", path, {}, body, now=NOW)[0] == (
        "MissingAuthenticationTokenException"
    )


def test_no_keys_no_signature():
    auth = Auth(kind="bedrock", settings=MappingProxyType({"region": "us-east-1"}))
    assert _build({"messages": []}, auth=auth).sign is None


# --- replies --------------------------------------------------------------------------


def test_a_converse_reply_becomes_a_completion():
    payload = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Hmm."}}},
                    {"text": "Hello"},
                    {"text": " there."},
                ],
            }
        },
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 400,
            "outputTokens": 20,
            "totalTokens": 1120,
            "cacheReadInputTokens": 600,
            "cacheWriteInputTokens": 100,
        },
    }
    completion = dialect.parse_completion(payload, created=CREATED)
    choice = completion["choices"][0]
    assert choice["message"] == {
        "role": "assistant",
        "content": "Hello there.",
        "reasoning_content": "Hmm.",
    }
    assert choice["finish_reason"] == "stop"
    assert completion["usage"] == {
        "prompt_tokens": 1100,
        "completion_tokens": 20,
        "total_tokens": 1120,
        "prompt_tokens_details": {"cached_tokens": 600},
        "cache_creation_input_tokens": 100,
    }


def test_a_tool_use_reply_becomes_tool_calls():
    payload = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_a",
                            "name": "get_weather",
                            "input": {"city": "Oslo"},
                        }
                    }
                ],
            }
        },
        "stopReason": "tool_use",
    }
    choice = dialect.parse_completion(payload, created=CREATED)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "tooluse_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        }
    ]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("something_new", "stop"),
    ],
)
def test_stop_reasons(reason, finish):
    payload = {
        "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}},
        "stopReason": reason,
    }
    choice = dialect.parse_completion(payload, created=CREATED)["choices"][0]
    assert choice["finish_reason"] == finish


@pytest.mark.parametrize("payload", [[], {}, {"output": {"message": {}}}])
def test_unusable_replies_are_bad_responses(payload):
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_completion(payload, created=CREATED)


# --- streams --------------------------------------------------------------------------


def _frames() -> bytes:
    return b"".join(
        [
            event("messageStart", {"role": "assistant"}),
            event(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hm"}}},
            ),
            event(
                "contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Hi"}}
            ),
            event("contentBlockStop", {"contentBlockIndex": 1}),
            event(
                "contentBlockStart",
                {
                    "contentBlockIndex": 2,
                    "start": {"toolUse": {"toolUseId": "tu_1", "name": "get_weather"}},
                },
            ),
            event(
                "contentBlockDelta",
                {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"city":'}}},
            ),
            event(
                "contentBlockDelta",
                {"contentBlockIndex": 2, "delta": {"toolUse": {"input": ' "Oslo"}'}}},
            ),
            event("contentBlockStop", {"contentBlockIndex": 2}),
            event("messageStop", {"stopReason": "tool_use"}),
            event(
                "metadata",
                {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 5,
                        "totalTokens": 15,
                        "cacheReadInputTokens": 2,
                    },
                    "metrics": {"latencyMs": 9},
                },
            ),
        ]
    )


def _translate(raw: bytes, step: int):
    decoder = dialect.stream_decoder()
    translator = dialect.stream_translator(created=CREATED)
    chunks = []
    for start in range(0, len(raw), step):
        for item in decoder.feed(raw[start : start + step]):
            chunks += translator.translate(item.event, json.loads(item.data))
    assert decoder.flush() == []
    return chunks, translator


@pytest.mark.parametrize("step", [1, 7, 100_000])
def test_an_event_stream_becomes_chunks_whatever_the_read_sizes(step):
    chunks, translator = _translate(_frames(), step)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert {"reasoning_content": "Hm"} in deltas
    assert {"content": "Hi"} in deltas
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0] == {
        "index": 0,
        "id": "tu_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    arguments = "".join(c["function"]["arguments"] for c in calls[1:])
    assert json.loads(arguments) == {"city": "Oslo"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 12
    assert chunks[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}
    assert translator.finished
    assert translator.partial_usage()["completion_tokens"] == 5


def test_an_exception_frame_raises_a_classified_stream_error():
    raw = event("messageStart", {"role": "assistant"}) + exception(
        "throttlingException", "Too many tokens, please wait."
    )
    decoder = dialect.stream_decoder()
    translator = dialect.stream_translator(created=CREATED)
    items = decoder.feed(raw)
    translator.translate(items[0].event, json.loads(items[0].data))
    with pytest.raises(StreamErrorEvent) as caught:
        translator.translate(items[1].event, json.loads(items[1].data))
    error = caught.value.error
    assert (error.code, error.type) == ("ThrottlingException", "rate_limit_error")
    assert error.message == "Too many tokens, please wait."
    assert classify_stream_error(error).reason is FailureReason.RATE_LIMIT


def test_an_error_frame_names_its_code_in_headers():
    raw = frame(
        (
            (":message-type", "error"),
            (":error-code", "InternalFailure"),
            (":error-message", "boom"),
        ),
        b"",
    )
    item = dialect.stream_decoder().feed(raw)[0]
    translator = dialect.stream_translator(created=CREATED)
    with pytest.raises(StreamErrorEvent) as caught:
        translator.translate(item.event, json.loads(item.data))
    assert caught.value.error.message == "boom"


def test_a_corrupt_frame_is_a_bad_response():
    raw = bytearray(event("messageStart", {"role": "assistant"}))
    raw[-1] ^= 0xFF  # the message CRC no longer matches
    with pytest.raises(BadUpstreamResponse):
        dialect.stream_decoder().feed(bytes(raw))


def test_a_raw_translator_carries_each_event():
    translator = dialect.stream_translator(created=CREATED, raw=True)
    chunks = translator.translate("messageStart", {"role": "assistant"})
    assert chunks[0] == {"_raw": ("messageStart", {"role": "assistant"})}


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "name", "message", "reason", "detail"),
    [
        (429, "ThrottlingException", "Too many requests", "rate_limit", None),
        (400, "ServiceQuotaExceededException", "quota", "rate_limit", None),
        (429, "ModelNotReadyException", "not ready", "server_error", None),
        (503, "ServiceUnavailableException", "down", "server_error", None),
        (500, "InternalServerException", "oops", "server_error", None),
        (400, "ValidationException", "Malformed input", "invalid_request", None),
        (
            400,
            "ValidationException",
            "Input is too long for requested model.",
            "context_length",
            None,
        ),
        (
            400,
            "ValidationException",
            "The provided model identifier is invalid.",
            "server_error",
            "model_not_found",
        ),
        (403, "AccessDeniedException", "denied", "server_error", "auth_failed"),
        (403, "UnrecognizedClientException", "bad key", "server_error", "auth_failed"),
        (404, "ResourceNotFoundException", "gone", "server_error", "model_not_found"),
    ],
)
def test_errors_are_classified_as_the_spec_says(status, name, message, reason, detail):
    headers = {"X-Amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/"}
    error = dialect.parse_error({"message": message}, "", headers)
    assert error.code in (name, "model_not_found")
    assert error.message == message
    found = classify_status(status, error)
    assert found.reason is FailureReason(reason)
    assert found.detail == (FailureDetail(detail) if detail else None)


def test_the_error_type_may_come_from_the_body():
    error = dialect.parse_error(
        {
            "__type": "com.amazon.coral.service#UnrecognizedClientException",
            "Message": "The security token included in the request is invalid.",
        },
        "",
        None,
    )
    assert error.code == "UnrecognizedClientException"
    assert error.type == "authentication_error"
    assert error.message.startswith("The security token")
    bare = dialect.parse_error(None, "Service Unavailable", {})
    assert (bare.code, bare.message) == (None, "Service Unavailable")


# --- embeddings and model lists -------------------------------------------------------


def test_titan_embeddings_go_to_invoke():
    call = dialect.embeddings_request(
        base_url=BASE_URL,
        api_key=None,
        model="amazon.titan-embed-text-v2:0",
        body={"input": "hello", "dimensions": 256},
        auth=AUTH,
    )
    assert call.url.endswith("/model/amazon.titan-embed-text-v2%3A0/invoke")
    assert call.operation == "embeddings"
    assert call.body == {"inputText": "hello", "dimensions": 256, "normalize": True}
    assert dialect.parse_embeddings(
        {"embedding": [0.1, 0.2], "inputTextTokenCount": 3}
    ) == {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }


def test_titan_embeds_several_inputs_as_one_signed_call_each():
    """Titan's ``inputText`` is one string: three inputs are three parts, in input
    order, each with the same options and signer; the call's own fields are the
    first part's."""
    call = dialect.embeddings_request(
        base_url=BASE_URL,
        api_key=None,
        model="amazon.titan-embed-text-v2:0",
        body={"input": ["a", "b", "c"], "dimensions": 512},
        auth=AUTH,
    )
    assert [part.body for part in call.parts] == [
        {"inputText": text, "dimensions": 512, "normalize": True}
        for text in ("a", "b", "c")
    ]
    assert {part.url for part in call.parts} == {
        f"{BASE_URL}/model/amazon.titan-embed-text-v2%3A0/invoke"
    }
    assert all(p.operation == "embeddings" and p.sign for p in call.parts)
    assert all(not part.parts for part in call.parts)
    assert (call.url, call.body) == (call.parts[0].url, call.parts[0].body)
    single = dialect.embeddings_request(
        base_url=BASE_URL,
        api_key=None,
        model="amazon.titan-embed-text-v2:0",
        body={"input": ["only"]},
        auth=AUTH,
    )
    assert (single.body, single.parts) == ({"inputText": "only"}, ())


def test_join_embeddings_reindexes_the_parts_and_sums_their_usage():
    parts = [
        dialect.parse_embeddings({"embedding": [float(i)], "inputTextTokenCount": i})
        for i in (1, 2, 3)
    ]
    joined = join_embeddings(parts)
    assert joined == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [float(i + 1)]}
            for i in range(3)
        ],
        "usage": {"prompt_tokens": 6, "total_tokens": 6},
    }
    # a part without a count: no sum that would under-bill, the estimate applies
    partial = join_embeddings([parts[0], dialect.parse_embeddings({"embedding": [0]})])
    assert "usage" not in partial
    assert [item["index"] for item in partial["data"]] == [0, 1]


@pytest.mark.parametrize(
    ("model", "dimensions", "named"),
    [
        ("amazon.titan-embed-text-v2:0", 256, False),
        ("amazon.titan-embed-text-v2:0", 1024, False),
        ("amazon.titan-embed-text-v2:0", 300, True),
        ("us.amazon.titan-embed-text-v2:0", 4, True),
        ("amazon.titan-embed-text-v1", 1536, False),  # its own size
        ("amazon.titan-embed-text-v1", 256, True),
        ("cohere.embed-english-v3", 256, True),
        ("cohere.embed-multilingual-v3", 1024, False),  # its own size
        (
            "arn:aws:bedrock:us-east-1::foundation-model/cohere.embed-english-v3",
            8,
            True,
        ),
    ],
)
def test_a_dimensions_the_model_cannot_make_is_named_and_not_sent(
    model, dimensions, named
):
    body = {"input": ["a", "b"], "dimensions": dimensions}
    assert embeddings_unsent(model, body) == (("dimensions",) if named else ())
    call = dialect.embeddings_request(
        base_url=BASE_URL, api_key=None, model=model, body=body, auth=AUTH
    )
    sent = [part.body for part in call.parts] or [call.body]
    assert all(
        ("dimensions" in b) == (not named and "titan-embed-text-v2" in model)
        for b in sent
    )


def test_embeddings_fields_that_ask_nothing_are_never_named():
    """``encoding_format`` is carried by the wire (base64 of the floats), ``user``
    changes nothing, an absent ``dimensions`` asks for nothing."""
    body = {"input": "a", "encoding_format": "base64", "user": "u-1"}
    for model in ("cohere.embed-english-v3", "amazon.titan-embed-text-v2:0"):
        assert embeddings_unsent(model, body) == ()
        assert embeddings_unsent(model, {**body, "dimensions": None}) == ()
    # the registry: only Bedrock's embeddings request leaves anything out
    asked = {"input": "a", "dimensions": 7, "encoding_format": "base64", "user": "u"}
    for kind in ("openai", "azure", "gemini", "vertex", "mock"):
        assert dialects_embeddings_unsent(REGISTRY[kind], "m", asked) == ()
    assert dialects_embeddings_unsent(
        REGISTRY["bedrock"], "cohere.embed-english-v3", asked
    ) == ("dimensions",)


def test_cohere_embeddings_send_every_text():
    call = dialect.embeddings_request(
        base_url=BASE_URL,
        api_key=None,
        model="cohere.embed-english-v3",
        body={"input": ["a", "b"]},
        auth=AUTH,
    )
    assert call.body == {
        "texts": ["a", "b"],
        "input_type": "search_document",
        "embedding_types": ["float"],
    }
    parsed = dialect.parse_embeddings({"embeddings": {"float": [[1.0], [2.0]]}})
    assert [d["embedding"] for d in parsed["data"]] == [[1.0], [2.0]]
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_embeddings({"embeddings": []})


def test_the_model_lists_are_the_control_planes():
    call = dialect.list_models_request(base_url=BASE_URL, api_key=None, auth=AUTH)
    assert call.method == "GET"
    assert call.url == "https://bedrock.us-east-1.amazonaws.com/foundation-models"
    assert [c.url for c in call.also] == [
        "https://bedrock.us-east-1.amazonaws.com/inference-profiles?maxResults=1000"
    ]
    assert call.sign is not None
    assert dialect.parse_model_list(
        {
            "modelSummaries": [
                {"modelId": "a", "inferenceTypesSupported": ["ON_DEMAND"]},
                {"modelId": "b", "inferenceTypesSupported": ["INFERENCE_PROFILE"]},
                {"modelId": "c"},
            ]
        }
    ) == ["a", "c"]
    assert dialect.parse_model_list(
        {
            "inferenceProfileSummaries": [
                {"inferenceProfileId": "us.b", "status": "ACTIVE"},
                {"inferenceProfileId": "us.old", "status": "INACTIVE"},
            ]
        }
    ) == ["us.b"]
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_model_list({})


# --- credentials ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connection", "provider", "problems"),
    [
        (
            {"aws_access_key_id": "A", "aws_secret_access_key": "S"},
            {"region": "us-east-1"},
            [],
        ),
        (
            {"use_default_credentials": True, "region": "eu-central-1"},
            {},
            [],
        ),
        (
            {"aws_access_key_id": "A", "aws_secret_access_key": "S"},
            {},
            [("region", "is required for kind 'bedrock'")],
        ),
        (
            {"aws_access_key_id": "A", "region": "mars"},
            {},
            [
                ("region", "must be an AWS region such as us-east-1"),
                (
                    "aws_secret_access_key",
                    "is required for kind 'bedrock' (or use_default_credentials: true)",
                ),
            ],
        ),
        (
            {
                "use_default_credentials": True,
                "aws_access_key_id": "A",
                "region": "us-east-1",
            },
            {},
            [("aws_access_key_id", "not used with use_default_credentials: true")],
        ),
    ],
)
def test_credential_checks_name_the_field(connection, provider, problems):
    assert check_connection(connection, provider) == problems


def test_a_provider_region_is_checked():
    assert check_provider({"region": "us-west-2"}) == []
    assert check_provider({"region": "US"}) == [
        ("region", "must be an AWS region such as us-east-1")
    ]


def test_an_auto_pool_counts_a_connection_by_its_aws_credential():
    from gateway.auto.engine.pool import usable
    from gateway.kernel.types import ConnectionInfo, ProviderInfo

    provider = ProviderInfo(slug="br", kind="bedrock", base_url="")
    assert usable(provider, ConnectionInfo(provider="br", name="main", auth=AUTH))
    assert not usable(provider, ConnectionInfo(provider="br", name="main"))


def test_ids_are_left_to_the_gateway():
    payload = {
        "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}},
        "stopReason": "end_turn",
    }
    # an id derived from the reply would repeat for identical replies (#14, D6)
    assert "id" not in dialect.parse_completion(payload, created=CREATED)
    chunks = dialect.stream_translator(created=CREATED).translate(
        "messageStart", {"role": "assistant"}
    )
    assert "id" not in chunks[0]


def test_botocore_is_imported_on_first_use_only():
    import subprocess
    import sys

    script = (
        "import sys, gateway.dialects, providers.credential_sources\n"
        "print('botocore' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def test_a_cache_control_marker_becomes_a_cache_point():
    marked = {"type": "text", "text": "long", "cache_control": {"type": "ephemeral"}}
    body = {
        "messages": [
            {"role": "system", "content": [marked]},
            {"role": "user", "content": [marked, {"type": "text", "text": "q"}]},
        ]
    }
    sent = _build(body).body
    assert sent["system"] == [{"text": "long"}, {"cachePoint": {"type": "default"}}]
    assert sent["messages"][0]["content"] == [
        {"text": "long"},
        {"cachePoint": {"type": "default"}},
        {"text": "q"},
    ]


def _history(call_id: str = "tooluse_1") -> list[dict]:
    return [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "sunny"},
        {"role": "user", "content": "and now?"},
    ]


def test_tool_history_without_tools_declares_the_tools_it_called():
    sent = _build({"messages": _history()}).body
    assert sent["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": (
                        "Called earlier in this conversation; not offered for new "
                        "calls."
                    ),
                    "inputSchema": {"json": {"type": "object", "properties": {}}},
                }
            }
        ]
    }
    assert sent["messages"][1]["content"][0]["toolUse"]["name"] == "get_weather"


def test_the_mock_refuses_tool_blocks_without_a_tool_config_as_bedrock_does():
    from providers.mock_upstream.wire_bedrock import converse_problem

    sent = _build({"messages": _history()}).body
    assert converse_problem(json.dumps(sent).encode()) is None
    del sent["toolConfig"]
    assert converse_problem(json.dumps(sent).encode()) == (
        "The toolConfig field must be defined when using toolUse and toolResult "
        "content blocks."
    )


def test_a_failed_tool_result_gets_the_error_status():
    messages = _history()
    messages[2] = {**messages[2], "content": "Error: offline", "is_error": True}
    sent = _build({"messages": messages}).body
    assert sent["messages"][2]["content"][0] == {
        "toolResult": {
            "toolUseId": "tooluse_1",
            "content": [{"text": "offline"}],
            "status": "error",
        }
    }


def test_document_names_are_what_converse_accepts_and_unique_per_document():
    from gateway.dialects.bedrock import document_name
    from providers.mock_upstream.wire_bedrock import DOCUMENT_NAME

    cases = ["Q3 report (final)!.pdf", "", "....", "a  b\tc.txt", "é" * 300, "x[1].md"]
    for filename in cases:
        name = document_name(filename, "AAAA")
        assert DOCUMENT_NAME.fullmatch(name), name
    assert document_name("Q3 report (final)!.pdf", "AAAA").startswith(
        "Q3 report (final)-"
    )
    assert document_name("", "AAAA") != document_name("", "BBBB")
    assert document_name("a.pdf", "AAAA") == document_name("a.pdf", "AAAA")


def test_the_same_document_twice_gets_names_converse_accepts():
    from gateway.dialects.bedrock import converse_body
    from providers.mock_upstream.wire_bedrock import converse_problem

    pdf = {
        "type": "file",
        "file": {
            "file_data": "data:application/pdf;base64,JVBERi0=",
            "filename": "a.pdf",
        },
    }
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read"}, pdf, pdf]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": [{"type": "text", "text": "again"}, pdf]},
        ]
    }
    sent = converse_body(body)
    names = [
        block["document"]["name"]
        for message in sent["messages"]
        for block in message["content"]
        if "document" in block
    ]
    assert len(names) == 3
    assert len(set(names)) == 3
    assert names[1] == f"{names[0]} [2]"
    assert names[2] == f"{names[0]} [3]"
    assert converse_problem(json.dumps(sent).encode()) is None
