"""The Gemini dialect (spec 10 §1), pure: request translation, replies, streams,
errors, embeddings and the model list."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from gateway.dialects import REGISTRY, WIRES
from gateway.dialects.base import BadUpstreamResponse, StreamErrorEvent
from gateway.dialects.gemini import (
    GeminiDialect,
    call_id,
    gemini_schema,
    model_url,
    signature_of,
)
from gateway.kernel.errors import (
    FailureDetail,
    FailureReason,
    UpstreamError,
    classify_status,
    classify_stream_error,
)

BASE_URL = "https://generativelanguage.googleapis.com"
MODEL = "gemini-2.5-flash"
CREATED = 1_700_000_000
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


@pytest.fixture
def dialect() -> GeminiDialect:
    return GeminiDialect()


def build(messages=None, *, stream=False, **fields):
    body = {"messages": messages or [{"role": "user", "content": "Hi"}], **fields}
    return (
        GeminiDialect()
        .build_request(
            base_url=BASE_URL, api_key="g-key", model=MODEL, body=body, stream=stream
        )
        .body
    )


def _call(ident: str, name: str, arguments: str = "{}") -> dict:
    return {
        "id": ident,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# --- declarations and the registry ---------------------------------------------


def test_the_kind_is_registered_with_its_declarations():
    dialect = REGISTRY["gemini"]
    assert WIRES[("gemini", "chat")] is dialect
    assert (
        dialect.label,
        dialect.needs_base_url,
        dialect.catalog,
        dialect.reasoning_effort,
        dialect.in_process,
        dialect.surfaces,
        dialect.wire,
        dialect.embeddings,
        dialect.counts_tokens,
    ) == (
        "Google Gemini API",
        True,
        False,
        False,
        False,
        frozenset(),
        "chat",
        True,
        True,
    )


# --- the envelope ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "stream", "url"),
    [
        (BASE_URL, False, f"{BASE_URL}/v1beta/models/{MODEL}:generateContent"),
        (
            BASE_URL + "/",
            True,
            f"{BASE_URL}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        ),
        (
            BASE_URL + "/v1beta",
            False,
            f"{BASE_URL}/v1beta/models/{MODEL}:generateContent",
        ),
        (
            BASE_URL + "/v1beta/",
            True,
            f"{BASE_URL}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        ),
        (
            "https://proxy.example/google/v1",
            False,
            "https://proxy.example/google/v1beta/models/gemini-2.5-flash:generateContent",
        ),
        (
            "https://proxy.example/google/v1alpha/",
            False,
            "https://proxy.example/google/v1alpha/models/gemini-2.5-flash:generateContent",
        ),
        (
            "https://proxy.example/google",
            False,
            "https://proxy.example/google/v1beta/models/gemini-2.5-flash:generateContent",
        ),
        (
            "http://127.0.0.1:9100",
            True,
            "http://127.0.0.1:9100/v1beta/models/gemini-2.5-flash"
            ":streamGenerateContent?alt=sse",
        ),
    ],
)
def test_the_url_carries_the_model_and_the_method(dialect, base_url, stream, url):
    call = dialect.build_request(
        base_url=base_url,
        api_key="g-key",
        model=MODEL,
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=stream,
    )
    assert call.url == url
    assert "g-key" not in call.url


def test_the_key_goes_in_the_goog_header_only(dialect):
    call = dialect.build_request(
        base_url=BASE_URL,
        api_key="g-key",
        model=MODEL,
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=False,
    )
    assert call.headers == {
        "content-type": "application/json",
        "x-goog-api-key": "g-key",
    }
    assert "g-key" not in json.dumps(call.body)
    without = dialect.build_request(
        base_url=BASE_URL,
        api_key=None,
        model=MODEL,
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=False,
    )
    assert "x-goog-api-key" not in without.headers


def test_a_models_prefix_is_not_doubled(dialect):
    call = dialect.build_request(
        base_url=BASE_URL,
        api_key=None,
        model="models/gemini-pro",
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=False,
    )
    assert call.url == f"{BASE_URL}/v1beta/models/gemini-pro:generateContent"


def test_a_simple_request_is_minimal():
    assert build([{"role": "user", "content": "Hi"}], model="alias", stream=True) == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]
    }


def test_build_request_does_not_mutate_its_body(dialect):
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f")]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"schema": {"type": "object", "$schema": "x"}},
        },
        "stop": ["a"],
    }
    before = copy.deepcopy(body)
    dialect.build_request(
        base_url=BASE_URL, api_key="k", model=MODEL, body=body, stream=True
    )
    assert body == before


# --- messages ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "system", "contents"),
    [
        pytest.param(
            [
                {"role": "system", "content": "One."},
                {"role": "user", "content": "Hi"},
                {"role": "developer", "content": [{"type": "text", "text": "Two."}]},
            ],
            [{"text": "One."}, {"text": "Two."}],
            [{"role": "user", "parts": [{"text": "Hi"}]}],
            id="system and developer become the system instruction",
        ),
        pytest.param(
            [
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b"},
                {"role": "assistant", "content": "c"},
                {"role": "assistant", "content": "d"},
            ],
            None,
            [
                {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
                {"role": "model", "parts": [{"text": "c"}, {"text": "d"}]},
            ],
            id="same-role turns are merged, assistant is model",
        ),
        pytest.param(
            [
                {"role": "user", "content": ""},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": [{"type": "text", "text": ""}, "x"]},
            ],
            None,
            [{"role": "user", "parts": [{"text": "x"}]}],
            id="empty parts and empty turns are dropped",
        ),
        pytest.param(
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/jpeg;base64,QUJD"},
                        },
                        {"type": "image_url", "image_url": "https://x.test/cat.PNG"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://x.test/image?id=1"},
                        },
                        {"type": "image_url", "image_url": {"url": "data:,hi%20there"}},
                    ],
                }
            ],
            None,
            [
                {
                    "role": "user",
                    "parts": [
                        {"inlineData": {"mimeType": "image/jpeg", "data": "QUJD"}},
                        {
                            "fileData": {
                                "fileUri": "https://x.test/cat.PNG",
                                "mimeType": "image/png",
                            }
                        },
                        {"fileData": {"fileUri": "https://x.test/image?id=1"}},
                        {
                            "inlineData": {
                                "mimeType": "image/png",
                                "data": base64.b64encode(b"hi there").decode(),
                            }
                        },
                    ],
                }
            ],
            id="images: data URLs inline, other URLs as file data",
        ),
        pytest.param(
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "file",
                            "file": {"file_data": "data:application/pdf;base64,UEQ="},
                        },
                        {"type": "file", "file": {"file_id": "file-123"}},
                        {
                            "type": "input_audio",
                            "input_audio": {"data": "UklG", "format": "mp3"},
                        },
                    ],
                }
            ],
            None,
            [
                {
                    "role": "user",
                    "parts": [
                        {"inlineData": {"mimeType": "application/pdf", "data": "UEQ="}},
                        {"inlineData": {"mimeType": "audio/mp3", "data": "UklG"}},
                    ],
                }
            ],
            id="files and audio inline, a file id dropped",
        ),
        pytest.param(
            [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": "Looking.",
                    "reasoning_content": "hmm",
                    "tool_calls": [
                        _call("c1", "get_weather", '{"city": "Oslo"}'),
                        _call("c2", "get_time", "not json"),
                    ],
                },
                {"role": "tool", "tool_call_id": "c2", "content": '{"time": "noon"}'},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "user", "content": "thanks"},
            ],
            None,
            [
                {"role": "user", "parts": [{"text": "weather?"}]},
                {
                    "role": "model",
                    "parts": [
                        {"text": "Looking."},
                        {
                            "functionCall": {
                                "name": "get_weather",
                                "args": {"city": "Oslo"},
                            }
                        },
                        {"functionCall": {"name": "get_time", "args": {}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": "get_weather",
                                "response": {"result": "sunny"},
                            }
                        },
                        {
                            "functionResponse": {
                                "name": "get_time",
                                "response": {"time": "noon"},
                            }
                        },
                        {"text": "thanks"},
                    ],
                },
            ],
            id="tool calls and results: names by id, results in call order",
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call("", "first"), _call("", "second")],
                },
                {"role": "tool", "content": "1"},
                {"role": "tool", "tool_call_id": "unknown", "content": "2"},
                {"role": "tool", "name": "named", "content": "3"},
            ],
            None,
            [
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "first", "args": {}}},
                        {"functionCall": {"name": "second", "args": {}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": "first",
                                "response": {"result": "1"},
                            }
                        },
                        {
                            "functionResponse": {
                                "name": "second",
                                "response": {"result": "2"},
                            }
                        },
                        {
                            "functionResponse": {
                                "name": "named",
                                "response": {"result": "3"},
                            }
                        },
                    ],
                },
            ],
            id="without ids the names come by order, else the message's name",
        ),
    ],
)
def test_messages_become_contents(messages, system, contents):
    body = build(messages)
    assert body["contents"] == contents
    assert body.get("systemInstruction") == (
        {"parts": system} if system is not None else None
    )


def test_system_messages_alone_become_the_user_turn():
    assert build([{"role": "system", "content": "Say hi."}]) == {
        "contents": [{"role": "user", "parts": [{"text": "Say hi."}]}]
    }


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("gemini-2.5-flash", "models/gemini-2.5-flash"),
        ("models/gemini-pro", "models/gemini-pro"),
        ("tunedModels/my-tune", "tunedModels/my-tune"),
        ("a/b", "models/a%2Fb"),
        ("../../v1/files", "models/..%2F..%2Fv1%2Ffiles"),
        ("..", "models/%2E%2E"),
        ("models/..", "models/%2E%2E"),
        ("odd name?", "models/odd%20name%3F"),
    ],
)
def test_the_model_id_is_one_encoded_path_segment(model, path):
    assert model_url(BASE_URL, model, "generateContent") == (
        f"{BASE_URL}/v1beta/{path}:generateContent"
    )


def test_a_signature_in_the_call_id_goes_back_on_its_call():
    signature = base64.b64encode(b"\x00\xffsig+/").decode()
    ident = call_id(0, signature)
    body = build(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [_call(ident, "f")]},
            {"role": "tool", "tool_call_id": ident, "content": "ok"},
        ]
    )
    assert body["contents"][1]["parts"] == [
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": signature}
    ]
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "f"


@pytest.mark.parametrize(
    ("signature", "ident"),
    [(None, "call_3"), ("", "call_3"), ("not base64!", "call_3")],
)
def test_a_call_without_a_usable_signature_has_a_plain_id(signature, ident):
    assert call_id(3, signature) == ident
    assert signature_of(ident) is None


def test_call_ids_differ_from_one_reply_to_the_next(dialect):
    def ids(payload, created=CREATED):
        completion = dialect.parse_completion(payload, created=created)
        return [c["id"] for c in completion["choices"][0]["message"]["tool_calls"]]

    call = [{"functionCall": {"name": "f", "args": {}}}]
    assert ids(_reply(call)) == ["call_r1_0"]
    assert ids(_reply(call, responseId="r-2")) == ["call_r2_0"]
    anonymous = _reply(call)
    del anonymous["responseId"]
    assert ids(anonymous) == [f"call_{CREATED:x}_0"]
    assert ids(anonymous, CREATED + 1) == [f"call_{CREATED + 1:x}_0"]
    # the id with a tag still answers its call by id, and by order
    tagged = call_id(0, tag="r2")
    body = build(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [_call(tagged, "f")]},
            {"role": "tool", "tool_call_id": tagged, "content": "ok"},
        ]
    )
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "f"
    assert signature_of(tagged) is None


def test_a_signature_id_is_url_safe_and_round_trips():
    signature = base64.b64encode(bytes(range(256))).decode()
    ident = call_id(1, signature)
    assert ident.startswith("call_1_ts_")
    assert all(c.isalnum() or c in "_-" for c in ident)
    assert signature_of(ident) == signature


# --- tools, choice, generation config ---------------------------------------------


def test_tools_become_function_declarations():
    body = build(
        tools=[
            WEATHER,
            {"type": "function", "function": {"name": "ping"}},
            {
                "type": "function",
                "function": {
                    "name": "empty",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
            {"type": "web_search"},
            {"type": "function", "function": {"description": "no name"}},
        ]
    )
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "The weather of a city",
                    "parameters": WEATHER["function"]["parameters"],
                },
                {"name": "ping"},
                {"name": "empty"},
            ]
        }
    ]
    assert "toolConfig" not in body


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"mode": "ANY", "allowedFunctionNames": ["get_weather"]},
        ),
        ("bogus", None),
    ],
)
def test_tool_choice_becomes_the_function_calling_config(choice, config):
    body = build(tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False)
    expected = {"functionCallingConfig": config} if config else None
    assert body.get("toolConfig") == expected


def test_tool_choice_without_tools_is_not_sent():
    assert "toolConfig" not in build(tool_choice="required")


@pytest.mark.parametrize(
    ("fields", "config"),
    [
        ({"max_tokens": 50}, {"maxOutputTokens": 50}),
        ({"max_completion_tokens": 60, "max_tokens": 50}, {"maxOutputTokens": 60}),
        (
            {"temperature": 1.5, "top_p": 0.9, "top_k": 40, "seed": 7},
            {"temperature": 1.5, "topP": 0.9, "topK": 40, "seed": 7},
        ),
        (
            {"presence_penalty": 0.5, "frequency_penalty": -0.5, "n": 2},
            {"presencePenalty": 0.5, "frequencyPenalty": -0.5, "candidateCount": 2},
        ),
        ({"stop": "END"}, {"stopSequences": ["END"]}),
        (
            {"stop": ["a", "", "b", "c", "d", "e", "f"]},
            {"stopSequences": ["a", "b", "c", "d", "e"]},
        ),
        (
            {"response_format": {"type": "json_object"}},
            {"responseMimeType": "application/json"},
        ),
        ({"response_format": {"type": "text"}}, None),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "answer",
                        "strict": True,
                        "schema": {
                            "type": "object",
                            "properties": {"n": {"type": "integer"}},
                            "required": ["n"],
                            "additionalProperties": False,
                        },
                    },
                }
            },
            {
                "responseMimeType": "application/json",
                "responseSchema": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                },
            },
        ),
        (
            {"reasoning_effort": "medium"},
            {"thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True}},
        ),
        (
            {"reasoning_effort": "high", "max_tokens": 4000},
            {
                "maxOutputTokens": 4000,
                # the answer keeps 1 024 tokens (a quarter of 4 000 is less)
                "thinkingConfig": {"thinkingBudget": 2976, "includeThoughts": True},
            },
        ),
        ({"reasoning_effort": "low", "max_tokens": 100}, {"maxOutputTokens": 100}),
        (
            {"reasoning_effort": "high", "max_tokens": 1500},
            {
                "maxOutputTokens": 1500,
                "thinkingConfig": {"thinkingBudget": 476, "includeThoughts": True},
            },
        ),
        ({"reasoning_effort": "high", "max_tokens": 1100}, {"maxOutputTokens": 1100}),
        ({"reasoning_effort": "none"}, None),
        (
            {"user": "u1", "metadata": {"a": "b"}, "logprobs": True, "n": 1},
            None,
        ),
        ({"temperature": True, "max_tokens": True}, None),
    ],
)
def test_generation_config(fields, config):
    assert build(**fields).get("generationConfig") == config


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": "x",
                "title": "T",
                "type": "object",
                "additionalProperties": False,
                "patternProperties": {"^a": {}},
                "properties": {"a": {"type": "string", "examples": ["x"]}},
                "required": ["a", "missing"],
                "strict": True,
            },
            {
                "title": "T",
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
            },
            id="unknown keys are stripped, required kept to properties",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "a": {"type": ["string", "null"]},
                    "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                    "c": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    "d": {"type": ["integer", "string"]},
                },
            },
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "nullable": True},
                    "b": {"type": "integer", "nullable": True},
                    "c": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "d": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                },
            },
            id="null types become nullable, oneOf anyOf",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "k": {"const": "fixed"},
                    "e": {"enum": ["x", "y"]},
                    "n": {"type": "integer", "enum": [1, 2]},
                    "m": {"type": "number", "exclusiveMinimum": 0, "minimum": 1},
                    "u": {"type": "array", "uniqueItems": True, "items": {}},
                    "z": {"type": "string", "default": None},
                },
            },
            {
                "type": "object",
                "properties": {
                    "k": {"type": "string", "enum": ["fixed"]},
                    "e": {"type": "string", "enum": ["x", "y"]},
                    "n": {"type": "integer"},
                    "m": {"type": "number", "minimum": 1},
                    "u": {"type": "array", "items": {}},
                    "z": {"type": "string"},
                },
            },
            id="const and enums as strings, unsupported bounds dropped",
        ),
        pytest.param(
            {
                "type": "object",
                "$defs": {
                    "City": {"type": "object", "properties": {"n": {"type": "string"}}}
                },
                "properties": {
                    "c": {"$ref": "#/$defs/City", "description": "where"},
                    "d": {"$ref": "#/definitions/Gone"},
                    "e": {"$ref": "https://remote/schema"},
                },
            },
            {
                "type": "object",
                "properties": {
                    "c": {
                        "type": "object",
                        "properties": {"n": {"type": "string"}},
                        "description": "where",
                    },
                    "d": {"type": "object"},
                    "e": {"type": "object"},
                },
            },
            id="local refs are inlined, others become objects",
        ),
    ],
)
def test_schemas_are_cut_to_what_gemini_takes(schema, expected):
    before = copy.deepcopy(schema)
    assert gemini_schema(schema) == expected
    assert schema == before


def test_a_recursive_ref_is_cut_off():
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
            }
        },
        "$ref": "#/$defs/Node",
    }
    text = json.dumps(gemini_schema(schema))
    assert text.count('"kids"') == 4
    assert "$ref" not in text


# --- replies -----------------------------------------------------------------------


def _reply(parts, finish="STOP", usage=None, **extra):
    payload = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish}
        ],
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "r-1",
        **extra,
    }
    if usage is not None:
        payload["usageMetadata"] = usage
    return payload


def test_a_text_reply_becomes_a_completion(dialect):
    completion = dialect.parse_completion(
        _reply(
            [{"text": "Hel"}, {"text": "lo"}],
            usage={
                "promptTokenCount": 10,
                "candidatesTokenCount": 3,
                "totalTokenCount": 13,
            },
        ),
        created=CREATED,
    )
    assert completion == {
        "id": "chatcmpl-r-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gemini-2.5-flash-001",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 3,
            "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def test_thoughts_calls_and_usage_counts(dialect):
    signature = base64.b64encode(b"sig").decode()
    completion = dialect.parse_completion(
        _reply(
            [
                {"text": "Let me see.", "thought": True},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": signature,
                },
                {"functionCall": {"name": "ping"}},
            ],
            usage={
                "promptTokenCount": 1000,
                "cachedContentTokenCount": 600,
                "toolUsePromptTokenCount": 5,
                "candidatesTokenCount": 20,
                "thoughtsTokenCount": 30,
            },
        ),
        created=CREATED,
    )
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] is None
    assert message["reasoning_content"] == "Let me see."
    calls = message["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "ping"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"city": "Oslo"},
        {},
    ]
    assert calls[1]["id"] == "call_r1_1"
    assert calls[0]["id"].startswith("call_r1_0_ts_")
    assert signature_of(calls[0]["id"]) == signature
    assert completion["usage"] == {
        "prompt_tokens": 1005,
        "completion_tokens": 50,
        "total_tokens": 1055,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("SPII", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "stop"),
        ("OTHER", "stop"),
        (None, "stop"),
    ],
)
def test_finish_reasons(dialect, reason, finish):
    completion = dialect.parse_completion(
        _reply([{"text": "x"}], finish=reason), created=CREATED
    )
    assert completion["choices"][0]["finish_reason"] == finish


def test_several_candidates_are_several_choices(dialect):
    payload = {
        "candidates": [
            {"content": {"parts": [{"text": "a"}]}, "finishReason": "STOP", "index": 0},
            {"content": {"parts": [{"text": "b"}]}, "finishReason": "STOP", "index": 1},
        ]
    }
    choices = dialect.parse_completion(payload, created=CREATED)["choices"]
    assert [(c["index"], c["message"]["content"]) for c in choices] == [
        (0, "a"),
        (1, "b"),
    ]


def test_a_candidate_without_content_is_an_empty_answer(dialect):
    completion = dialect.parse_completion(
        {"candidates": [{"finishReason": "SAFETY"}]}, created=CREATED
    )
    assert completion["choices"][0]["message"] == {"role": "assistant", "content": ""}
    assert completion["choices"][0]["finish_reason"] == "content_filter"


def test_a_blocked_prompt_is_a_content_filter_answer(dialect):
    completion = dialect.parse_completion(
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {}},
        created=CREATED,
    )
    assert completion["choices"][0]["finish_reason"] == "content_filter"


@pytest.mark.parametrize(
    "payload",
    [
        [],
        "text",
        {},
        {"candidates": []},
        {"error": {"code": 500, "message": "x", "status": "INTERNAL"}},
    ],
)
def test_unusable_replies_are_bad_responses(dialect, payload):
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_completion(payload, created=CREATED)


# --- streams -----------------------------------------------------------------------


def _event(parts, finish=None, usage=None, index=0):
    candidate = {"content": {"role": "model", "parts": parts}, "index": index}
    if finish:
        candidate["finishReason"] = finish
    event = {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "r-9",
    }
    if usage:
        event["usageMetadata"] = usage
    return event


def _deltas(chunks):
    return [
        c["choices"][0]["delta"] if c["choices"] else c.get("usage") for c in chunks
    ]


def test_a_text_stream_becomes_chunks(dialect):
    translator = dialect.stream_translator(created=CREATED)
    first = translator.translate(
        None, _event([{"text": "Hel"}], usage={"promptTokenCount": 5})
    )
    assert first[0] == {
        "id": "chatcmpl-r-9",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gemini-2.5-flash-001",
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
            }
        ],
    }
    assert _deltas(first[1:]) == [{"content": "Hel"}]
    assert not translator.finished
    assert translator.partial_usage()["prompt_tokens"] == 5
    thought = translator.translate(None, _event([{"text": "hm", "thought": True}]))
    assert _deltas(thought) == [{"reasoning_content": "hm"}]
    last = translator.translate(
        None,
        _event(
            [{"text": "lo"}],
            finish="STOP",
            usage={
                "promptTokenCount": 5,
                "candidatesTokenCount": 2,
                "thoughtsTokenCount": 1,
            },
        ),
    )
    assert translator.finished
    assert _deltas(last[:2]) == [{"content": "lo"}, {}]
    assert last[1]["choices"][0]["finish_reason"] == "stop"
    assert last[2]["choices"] == []
    assert last[2]["usage"]["completion_tokens"] == 3
    assert last[2]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}


def test_a_streamed_call_gives_its_start_and_its_whole_arguments(dialect):
    translator = dialect.stream_translator(created=CREATED)
    chunks = translator.translate(
        None,
        _event(
            [
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                {"functionCall": {"name": "ping"}},
            ]
        ),
    )
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[1:]]
    assert calls == [
        {
            "index": 0,
            "id": "call_r9_0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": '{"city": "Oslo"}'}},
        {
            "index": 1,
            "id": "call_r9_1",
            "type": "function",
            "function": {"name": "ping", "arguments": ""},
        },
        {"index": 1, "function": {"arguments": "{}"}},
    ]
    end = translator.translate(None, _event([{"text": ""}], finish="STOP"))
    assert end[0]["choices"][0]["finish_reason"] == "tool_calls"
    assert end[0]["choices"][0]["delta"] == {}


def test_a_stream_without_usage_sends_no_usage_chunk(dialect):
    translator = dialect.stream_translator(created=CREATED)
    assert translator.partial_usage() is None
    chunks = translator.translate(None, _event([{"text": "x"}], finish="MAX_TOKENS"))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert not any("usage" in chunk for chunk in chunks)
    assert translator.finished


def test_a_blocked_prompt_in_a_stream_finishes_it(dialect):
    translator = dialect.stream_translator(created=CREATED)
    chunks = translator.translate(None, {"promptFeedback": {"blockReason": "OTHER"}})
    assert translator.finished
    assert chunks[1]["choices"][0]["finish_reason"] == "content_filter"


def test_an_error_event_raises_with_the_classified_error(dialect):
    translator = dialect.stream_translator(created=CREATED)
    translator.translate(None, _event([{"text": "x"}]))
    with pytest.raises(StreamErrorEvent) as raised:
        translator.translate(
            None,
            {"error": {"code": 429, "message": "slow", "status": "RESOURCE_EXHAUSTED"}},
        )
    assert raised.value.error.message == "slow"
    assert classify_stream_error(raised.value.error).reason is FailureReason.RATE_LIMIT
    with pytest.raises(StreamErrorEvent) as other:
        translator.translate(
            None, {"error": {"code": 500, "message": "x", "status": "INTERNAL"}}
        )
    assert classify_stream_error(other.value.error).reason is (
        FailureReason.SERVER_ERROR
    )


def test_a_json_array_event_and_junk_are_read_safely(dialect):
    translator = dialect.stream_translator(created=CREATED)
    assert translator.translate(None, "[DONE]") == []
    assert translator.translate(None, 3) == []
    chunks = translator.translate(
        None, [_event([{"text": "a"}]), _event([{"text": "b"}], finish="STOP")]
    )
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == [
        "a",
        "b",
    ]
    assert translator.finished


def test_a_raw_translator_also_relays_the_events(dialect):
    translator = dialect.stream_translator(created=CREATED, raw=True)
    event = _event([{"text": "a"}])
    chunks = translator.translate(None, event)
    assert chunks[0] == {"_raw": (None, event)}


# --- errors --------------------------------------------------------------------------


def _gemini_error(code, status, message="boom"):
    return {"error": {"code": code, "message": message, "status": status}}


@pytest.mark.parametrize(
    ("http", "status", "message", "reason", "detail"),
    [
        (429, "RESOURCE_EXHAUSTED", "Quota exceeded", FailureReason.RATE_LIMIT, None),
        (
            503,
            "UNAVAILABLE",
            "The model is overloaded.",
            FailureReason.SERVER_ERROR,
            None,
        ),
        (500, "INTERNAL", "An internal error", FailureReason.SERVER_ERROR, None),
        (504, "DEADLINE_EXCEEDED", "Deadline", FailureReason.SERVER_ERROR, None),
        (
            400,
            "INVALID_ARGUMENT",
            "Invalid value at 'contents[0]'",
            FailureReason.INVALID_REQUEST,
            None,
        ),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens "
            "allowed (1048576).",
            FailureReason.CONTEXT_LENGTH,
            None,
        ),
        (
            403,
            "PERMISSION_DENIED",
            "Permission denied",
            FailureReason.SERVER_ERROR,
            FailureDetail.AUTH_FAILED,
        ),
        (
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials.",
            FailureReason.SERVER_ERROR,
            FailureDetail.AUTH_FAILED,
        ),
        (
            404,
            "NOT_FOUND",
            "models/nope is not found for API version v1beta",
            FailureReason.SERVER_ERROR,
            FailureDetail.MODEL_NOT_FOUND,
        ),
    ],
)
def test_errors_are_classified_as_spec_10_says(
    dialect, http, status, message, reason, detail
):
    error = dialect.parse_error(_gemini_error(http, status, message), "")
    assert error.message == message
    assert error.code == status
    classified = classify_status(http, error)
    assert (classified.reason, classified.detail) == (reason, detail)


@pytest.mark.parametrize(
    ("payload", "text", "expected"),
    [
        (
            [_gemini_error(429, "RESOURCE_EXHAUSTED", "q")],
            "",
            UpstreamError(
                message="q", code="RESOURCE_EXHAUSTED", type="rate_limit_error"
            ),
        ),
        (
            {"error": {"code": 418, "status": "WEIRD"}},
            "raw text",
            UpstreamError(message="raw text", code="WEIRD"),
        ),
        ({"error": "plain"}, "", UpstreamError(message="plain")),
        (
            None,
            "<html>bad gateway</html>",
            UpstreamError(message="<html>bad gateway</html>"),
        ),
    ],
)
def test_error_shapes(dialect, payload, text, expected):
    assert dialect.parse_error(payload, text) == expected


# --- embeddings and the model list ----------------------------------------------------


@pytest.mark.parametrize(
    ("body", "requests"),
    [
        (
            {"input": "hello"},
            [{"model": f"models/{MODEL}", "content": {"parts": [{"text": "hello"}]}}],
        ),
        (
            {"input": ["a", "b"], "dimensions": 256, "encoding_format": "float"},
            [
                {
                    "model": f"models/{MODEL}",
                    "content": {"parts": [{"text": "a"}]},
                    "outputDimensionality": 256,
                },
                {
                    "model": f"models/{MODEL}",
                    "content": {"parts": [{"text": "b"}]},
                    "outputDimensionality": 256,
                },
            ],
        ),
        (
            {"input": [1, 2, 3]},
            [
                {
                    "model": f"models/{MODEL}",
                    "content": {"parts": [{"text": "[1, 2, 3]"}]},
                }
            ],
        ),
    ],
)
def test_embeddings_request(dialect, body, requests):
    call = dialect.embeddings_request(
        base_url=BASE_URL, api_key="g-key", model=MODEL, body=body
    )
    assert call.url == f"{BASE_URL}/v1beta/models/{MODEL}:batchEmbedContents"
    assert call.headers["x-goog-api-key"] == "g-key"
    assert call.operation == "embeddings"
    assert call.body == {"requests": requests}


def test_embeddings_reply_becomes_the_openai_list(dialect):
    answer = dialect.parse_embeddings(
        {"embeddings": [{"values": [0.1, 0.2]}, {"values": [0.3, 0.4]}]}
    )
    assert answer == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": [0.1, 0.2]},
            {"object": "embedding", "index": 1, "embedding": [0.3, 0.4]},
        ],
    }
    counted = dialect.parse_embeddings(
        {"embeddings": [{"values": [1.0]}], "usageMetadata": {"promptTokenCount": 4}}
    )
    assert counted["usage"] == {"prompt_tokens": 4, "total_tokens": 4}


@pytest.mark.parametrize(
    "payload", [{}, {"embeddings": []}, {"embeddings": [{"nope": 1}]}, []]
)
def test_unusable_embeddings_are_bad_responses(dialect, payload):
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_embeddings(payload)


def test_the_model_list(dialect):
    call = dialect.list_models_request(base_url=BASE_URL + "/v1beta", api_key="k")
    assert call.url == f"{BASE_URL}/v1beta/models?pageSize=1000"
    assert (call.method, call.operation) == ("GET", "models")
    assert call.headers == {"x-goog-api-key": "k"}
    ids = dialect.parse_model_list(
        {"models": [{"name": "models/gemini-2.5-pro"}, {"name": "models/embedding"}]}
    )
    assert ids == ["gemini-2.5-pro", "embedding"]
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_model_list({"data": []})


def test_count_tokens_sends_the_translated_request_to_count_tokens(dialect):
    body = {
        "model": "ignored",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        "tools": [WEATHER],
        "max_tokens": 100,
        "reasoning_effort": "high",
    }
    call = dialect.count_tokens_request(
        base_url=BASE_URL,
        api_key="gm-key",
        model=MODEL,
        body=body,
        forward=(("anthropic-beta", "x"),),
    )
    assert call.url == f"{BASE_URL}/v1beta/models/{MODEL}:countTokens"
    assert call.headers == {
        "content-type": "application/json",
        "x-goog-api-key": "gm-key",
    }
    assert (call.method, call.operation, call.count_field) == (
        "POST",
        "count_tokens",
        "totalTokens",
    )
    inner = call.body["generateContentRequest"]
    assert inner["model"] == f"models/{MODEL}"
    assert inner["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert inner["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert inner["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert "generationConfig" not in inner  # changes no input token
    assert list(call.body) == ["generateContentRequest"]


def test_count_tokens_keeps_a_model_path_as_given(dialect):
    call = dialect.count_tokens_request(
        base_url=f"{BASE_URL}/v1",
        api_key=None,
        model="tunedModels/mine",
        body={"messages": [{"role": "user", "content": "x"}]},
        forward=(),
    )
    assert call.url == f"{BASE_URL}/v1beta/tunedModels/mine:countTokens"
    assert call.body["generateContentRequest"]["model"] == "tunedModels/mine"
    assert "x-goog-api-key" not in call.headers


def test_the_count_of_a_count_tokens_reply_is_total_tokens():
    from gateway.pipeline.upstream import _token_count

    assert _token_count(
        {"totalTokens": 31, "cachedContentTokenCount": 4}, "totalTokens"
    ) == {"input_tokens": 31}
    for bad in (
        {},
        {"totalTokens": -1},
        {"totalTokens": True},
        {"input_tokens": 3},
        [],
    ):
        with pytest.raises(BadUpstreamResponse):
            _token_count(bad, "totalTokens")


def test_passthrough_is_not_offered(dialect):
    with pytest.raises(NotImplementedError):
        dialect.passthrough_request(
            base_url=BASE_URL,
            api_key=None,
            model=MODEL,
            body={},
            stream=False,
            forward=(),
            surface="messages",
        )


def test_a_wrong_key_400_is_an_auth_failure():
    from gateway.dialects.gemini import GeminiDialect
    from gateway.kernel.errors import FailureDetail, classify_status

    payload = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                }
            ],
        }
    }
    error = GeminiDialect().parse_error(payload, "")
    assert error.code == "API_KEY_INVALID"
    assert classify_status(400, error).detail is FailureDetail.AUTH_FAILED


@pytest.mark.parametrize(
    ("delay", "seconds"), [("120s", 120.0), ("1.5s", 1.5), ("soon", None)]
)
def test_a_retry_info_delay_is_the_error_s_retry_after(dialect, delay, seconds):
    payload = _gemini_error(429, "RESOURCE_EXHAUSTED", "q")
    payload["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    ]
    assert dialect.parse_error(payload, "").retry_after_s == seconds
