"""The OpenAI Responses dialect (``wire: responses``): canonical chat -> Responses
request, response object -> chat completion, typed events -> chat chunks, and the
wire registry.  Pure: no I/O."""

from __future__ import annotations

import json

import pytest

from gateway.dialects import (
    RAW,
    REGISTRY,
    WIRES,
    StreamErrorEvent,
    dialect_for,
    dialect_of,
    wires_of,
)
from gateway.dialects.base import BadUpstreamResponse
from gateway.dialects.openai_responses import (
    OpenAIResponsesDialect,
    parse_response,
    responses_body,
)
from gateway.kernel.types import ConnectionInfo, ModelInfo, ProviderInfo, Target

DIALECT = OpenAIResponsesDialect()


# --- registry ------------------------------------------------------------------------


def test_every_kind_has_its_own_chat_wire_and_openai_a_responses_one():
    for kind, dialect in REGISTRY.items():
        assert WIRES[(kind, "chat")] is dialect
        assert wires_of(kind)[0] == "chat"
    assert wires_of("openai") == ("chat", "responses")
    assert wires_of("anthropic") == ("chat",)
    assert dialect_for("openai", "responses").surfaces == frozenset({"responses"})
    assert dialect_for("openai", None) is REGISTRY["openai"]
    assert dialect_for("anthropic", "responses") is REGISTRY["anthropic"]


def _target(provider_wire: str, model_wire: str | None) -> Target:
    model = ModelInfo(provider="p", model_id="m", wire=model_wire)
    provider = ProviderInfo(
        slug="p", kind="openai", base_url="http://x", wire=provider_wire
    )
    return Target(
        provider=provider,
        model=model,
        connection=ConnectionInfo(provider="p", name="main"),
        via="direct",
    )


@pytest.mark.parametrize(
    ("provider_wire", "model_wire", "surfaces"),
    [
        ("chat", None, {"chat"}),
        ("responses", None, {"responses"}),
        ("chat", "responses", {"responses"}),
        ("responses", "chat", {"chat"}),
    ],
)
def test_a_models_wire_overrides_its_providers(provider_wire, model_wire, surfaces):
    assert dialect_of(_target(provider_wire, model_wire)).surfaces >= surfaces


# --- request -------------------------------------------------------------------------


def test_a_chat_body_becomes_a_responses_body():
    body = {
        "model": "ignored",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use SI."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/png;base64,AA",
                            "detail": "low",
                        },
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"x":1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
            {"role": "system", "content": "Now answer."},
        ],
        "max_completion_tokens": 99,
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": ["x"],
        "n": 1,
        "seed": 3,
        "user": "u1",
        "tools": [
            {
                "type": "function",
                "function": {"name": "look", "parameters": {"type": "object"}},
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "out",
                "schema": {"type": "object"},
                "strict": True,
            },
        },
        "reasoning_effort": "high",
        "stream_options": {"include_usage": True},
    }
    out = responses_body(body, model="m", stream=True)
    assert out == {
        "model": "m",
        "store": False,
        "stream": True,
        "instructions": "Be brief.\n\nUse SI.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AA",
                        "detail": "low",
                    },
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me look."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "look",
                "arguments": '{"x":1}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "a cat"},
            {"type": "message", "role": "system", "content": "Now answer."},
        ],
        "max_output_tokens": 99,
        "temperature": 0.5,
        "top_p": 0.9,
        "user": "u1",
        "parallel_tool_calls": False,
        "tools": [
            {
                "type": "function",
                "name": "look",
                "parameters": {"type": "object"},
                "strict": False,
            }
        ],
        "tool_choice": "required",
        "text": {
            "format": {
                "type": "json_schema",
                "name": "out",
                "schema": {"type": "object"},
                "strict": True,
            }
        },
        "reasoning": {"effort": "high"},
    }
    assert "messages" in body  # never mutated


def test_the_request_goes_to_responses_with_the_bearer_key():
    call = DIALECT.build_request(
        base_url="https://api.example.com/v1",
        api_key="sk-1",
        model="m",
        body={"messages": [{"role": "user", "content": "hi"}]},
        stream=False,
    )
    assert call.url == "https://api.example.com/v1/responses"
    assert call.headers["authorization"] == "Bearer sk-1"
    assert call.body["input"] == [{"type": "message", "role": "user", "content": "hi"}]
    assert "stream" not in call.body


def test_a_passthrough_keeps_the_body_and_never_stores():
    body = {"input": "hi", "include": ["reasoning.encrypted_content"], "store": True}
    call = DIALECT.passthrough_request(
        base_url="http://h/v1",
        api_key=None,
        model="m",
        body=body,
        stream=True,
        forward=(),
        surface="responses",
    )
    assert call.passthrough
    assert call.body == {
        "input": "hi",
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "model": "m",
        "stream": True,
    }
    assert "authorization" not in call.headers


# --- reply ---------------------------------------------------------------------------


def _response(output, **extra):
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700,
        "status": "completed",
        "model": "m",
        "output": output,
        **extra,
    }


def test_a_response_becomes_a_chat_completion():
    payload = _response(
        [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
            {
                "type": "message",
                "content": [
                    {"type": "output_text", "text": "Hel"},
                    {"type": "output_text", "text": "lo"},
                ],
            },
        ],
        usage={
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 17,
        },
    )
    completion = parse_response(payload, created=5)
    assert completion["created"] == 1700
    assert completion["choices"] == [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hello",
                "reasoning_content": "hm",
            },
            "finish_reason": "stop",
        }
    ]
    assert completion["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 7,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }


def test_function_and_custom_calls_become_tool_calls():
    payload = _response(
        [
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
            {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "ls"},
        ]
    )
    message = parse_response(payload, created=0)["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    assert message["message"]["content"] is None
    calls = message["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", '{"input": "ls"}']
    assert [c["id"] for c in calls] == ["c1", "c2"]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter")],
)
def test_an_incomplete_response_maps_its_reason(reason, finish):
    payload = _response([], status="incomplete", incomplete_details={"reason": reason})
    assert parse_response(payload, created=0)["choices"][0]["finish_reason"] == finish


@pytest.mark.parametrize(
    "payload",
    [[], {"status": "failed", "output": []}, {"output": "x"}, {"error": {"m": 1}}],
)
def test_an_unusable_response_is_a_bad_response(payload):
    with pytest.raises(BadUpstreamResponse):
        parse_response(payload, created=0)


# --- stream --------------------------------------------------------------------------


def _run(events, raw=False):
    translator = DIALECT.stream_translator(created=9, raw=raw)
    chunks = []
    for name, data in events:
        chunks += translator.translate(name, {"type": name, **data})
    return translator, chunks


def _deltas(chunks):
    return [c["choices"][0]["delta"] for c in chunks if c.get("choices")]


def test_text_events_become_content_chunks_ending_with_usage():
    translator, chunks = _run(
        [
            ("response.created", {"response": {"id": "r1", "model": "m"}}),
            ("response.in_progress", {"response": {"id": "r1"}}),
            ("response.output_text.delta", {"delta": "Hi"}),
            ("response.reasoning_summary_text.delta", {"delta": "think"}),
            ("response.output_text.done", {"text": "Hi"}),
            (
                "response.completed",
                {"response": {"status": "completed", "usage": {"input_tokens": 2}}},
            ),
        ]
    )
    assert translator.finished
    assert _deltas(chunks) == [
        {"role": "assistant", "content": ""},
        {"content": "Hi"},
        {"reasoning_content": "think"},
        {},
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 2
    assert {c["id"] for c in chunks} == {"chatcmpl-r1"}


def test_function_call_events_become_numbered_tool_call_chunks():
    _, chunks = _run(
        [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {"type": "reasoning"}},
            ),
            (
                "response.output_item.added",
                {
                    "output_index": 1,
                    "item": {
                        "type": "function_call",
                        "id": "fc1",
                        "call_id": "c1",
                        "name": "f",
                    },
                },
            ),
            (
                "response.function_call_arguments.delta",
                {"item_id": "fc1", "delta": '{"a"'},
            ),
            (
                "response.function_call_arguments.delta",
                {"output_index": 1, "delta": ":1}"},
            ),
            (
                "response.output_item.added",
                {
                    "output_index": 2,
                    "item": {
                        "type": "function_call",
                        "id": "fc2",
                        "call_id": "c2",
                        "name": "g",
                    },
                },
            ),
            (
                "response.output_item.done",
                {
                    "output_index": 2,
                    "item": {
                        "type": "function_call",
                        "id": "fc2",
                        "arguments": '{"b":2}',
                    },
                },
            ),
            ("response.completed", {"response": {"status": "completed"}}),
        ]
    )
    calls = [d["tool_calls"][0] for d in _deltas(chunks) if "tool_calls" in d]
    assert calls[0] == {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    assert [c["function"]["arguments"] for c in calls[1:3]] == ['{"a"', ":1}"]
    assert calls[3]["index"] == 1
    assert calls[4] == {"index": 1, "function": {"arguments": '{"b":2}'}}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    args = "".join(c["function"]["arguments"] for c in calls if c["index"] == 0)
    assert json.loads(args) == {"a": 1}


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("error", {"code": "rate_limit_exceeded", "message": "slow down"}),
        (
            "response.failed",
            {"response": {"error": {"code": "server_error", "message": "boom"}}},
        ),
    ],
)
def test_error_events_raise_the_upstream_error(name, data):
    with pytest.raises(StreamErrorEvent) as caught:
        _run([(name, data)])
    assert caught.value.error.code in ("rate_limit_exceeded", "server_error")
    assert caught.value.error.message in ("slow down", "boom")


def test_a_passthrough_translator_also_carries_each_event_raw():
    _, chunks = _run(
        [("response.output_text.delta", {"delta": "x", "sequence_number": 4})], raw=True
    )
    assert chunks[0] == {
        RAW: (
            "response.output_text.delta",
            {"type": "response.output_text.delta", "delta": "x", "sequence_number": 4},
        )
    }
    assert chunks[1]["choices"][0]["delta"] == {"content": "x"}


def test_an_incomplete_stream_ends_with_length():
    translator, chunks = _run(
        [
            (
                "response.incomplete",
                {
                    "response": {
                        "status": "incomplete",
                        "incomplete_details": {"reason": "max_output_tokens"},
                    }
                },
            )
        ]
    )
    assert translator.finished
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
