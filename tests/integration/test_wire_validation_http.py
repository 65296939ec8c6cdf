"""Malformed input is refused before any upstream call, in each wire's own envelope
with the client's path in ``param`` (spec 01, 09 §2.3), through a real gateway process
and the mock upstream: ``pc/m3`` is an Anthropic-kind model, so a Chat request to it
is a translated attempt that used to lose such input without a word."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

USER = {"role": "user", "content": "hi"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"q": "x"}'},
}
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


def _post(gateway, path: str, body: dict) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}{path}",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json=body,
        timeout=30,
    )


def _openai_error(response: httpx.Response, code: str, param: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        code,
        param,
    )
    assert param in error["message"]


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        (
            {"messages": [USER, {"role": "user", "content": 5}]},
            "invalid_type",
            "messages[1].content",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "invalid_type",
            "messages[0].content[0].text",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": 5}}],
                    }
                ]
            },
            "invalid_type",
            "messages[0].content[0].image_url.url",
        ),
        (
            {
                "messages": [
                    USER,
                    {"role": "assistant", "content": None, "tool_calls": [CALL]},
                    {"role": "tool", "content": "42"},
                ]
            },
            "missing_parameter",
            "messages[2].tool_call_id",
        ),
        (
            {"messages": [USER], "tools": [{"type": "function"}]},
            "missing_parameter",
            "tools[0].function",
        ),
        (
            {
                "messages": [USER],
                "tools": [{"type": "function", "function": {"name": 5}}],
            },
            "invalid_type",
            "tools[0].function.name",
        ),
        (
            {"messages": [USER], "reasoning_effort": "bogus"},
            "invalid_value",
            "reasoning_effort",
        ),
        (
            {"messages": [USER], "reasoning_effort": 5},
            "invalid_type",
            "reasoning_effort",
        ),
    ],
)
def test_a_malformed_chat_body_to_a_translated_target_is_refused(
    gateway, upstream, fields, code, param
):
    response = _post(gateway, "/v1/chat/completions", {"model": "pc/m3", **fields})

    _openai_error(response, code, param)
    assert upstream.requests() == []


def test_a_valid_tool_conversation_still_reaches_the_translated_target(
    gateway, upstream
):
    oai = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=KEY_ALL, max_retries=0)

    answer = oai.chat.completions.create(
        model="pc/m3",
        messages=[
            {"role": "developer", "content": "be brief"},
            {
                "role": "user",
                "name": "ann",
                "content": [{"type": "text", "text": "q?"}],
            },
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        ],
        tools=[LOOKUP],
        reasoning_effort="xhigh",
    )

    assert answer.choices[0].message.content
    sent = upstream.requests()[-1]["body"]
    call = sent["messages"][1]["content"][0]
    assert (call["type"], call["name"], call["input"]) == (
        "tool_use",
        "lookup",
        {"q": "x"},
    )


TRUNCATED = [
    USER,
    {
        "role": "assistant",
        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": '{"q": "x'}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "cut short"},
]


def test_a_truncated_tool_call_in_history_is_sent_and_named_where_translated(
    gateway, upstream
):
    """A model's call cut short, replayed by an agent: the OpenAI-compatible
    upstream gets it as sent; Anthropic's wire (whose input is an object) gets
    ``{}`` and the header names it; under Strict that is a 400."""
    relayed = _post(
        gateway, "/v1/chat/completions", {"model": "pa/m1", "messages": TRUNCATED}
    )
    assert relayed.status_code == 200, relayed.text
    assert "x-omniroute-dropped" not in relayed.headers
    sent = upstream.requests()[-1]["body"]
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"q": "x'

    path = "messages[1].tool_calls[0].function.arguments"
    translated = _post(
        gateway, "/v1/chat/completions", {"model": "pc/m3", "messages": TRUNCATED}
    )
    assert translated.status_code == 200, translated.text
    assert translated.headers["x-omniroute-dropped"] == path
    assert upstream.requests()[-1]["body"]["messages"][1]["content"][0]["input"] == {}

    strict = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json={"model": "pc/m3", "messages": TRUNCATED},
        timeout=30,
    )
    _openai_error(strict, "unsupported_parameter", path)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [USER]}),
        ("/v1/responses", {"input": "hi"}),
        ("/v1/embeddings", {"input": "hi"}),
        ("/v1/completions", {"prompt": "hi"}),
    ],
)
@pytest.mark.parametrize("model", [123, ["pa/m1"]])
def test_a_model_of_the_wrong_type_is_invalid_type(gateway, path, body, model):
    _openai_error(
        _post(gateway, path, {**body, "model": model}), "invalid_type", "model"
    )


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        (
            {
                "input": [
                    USER,
                    {
                        "type": "function_call",
                        "call_id": "c1",
                        "name": "f",
                        "arguments": "{}",
                    },
                    {"type": "function_call_output", "output": "42"},
                ]
            },
            "missing_parameter",
            "input[2].call_id",
        ),
        (
            {"input": "hi", "reasoning": {"effort": "bogus"}},
            "invalid_value",
            "reasoning.effort",
        ),
    ],
)
def test_a_malformed_responses_body_is_refused(gateway, upstream, fields, code, param):
    _openai_error(
        _post(gateway, "/v1/responses", {"model": "pa/m1", **fields}), code, param
    )
    assert upstream.requests() == []


@pytest.fixture
def claude(gateway):
    return anthropic.Anthropic(base_url=gateway.url, api_key=KEY_ALL, max_retries=0)


def _anthropic_error(caught: pytest.ExceptionInfo, param: str) -> dict:
    assert caught.value.status_code == 400
    body = caught.value.response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param
    return body["error"]


def test_a_messages_tool_result_without_its_id_is_refused(claude, upstream):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="pa/m1",
            max_tokens=32,
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "content": "sunny"}],
                },
            ],
        )

    error = _anthropic_error(caught, "messages[2].content[0].tool_use_id")
    assert error["code"] == "missing_parameter"
    assert upstream.requests() == []


@pytest.mark.parametrize(
    ("thinking", "param"),
    [
        ({"type": "enabled", "budget_tokens": "lots"}, "thinking.budget_tokens"),
        ({"type": "sometimes"}, "thinking.type"),
    ],
)
def test_a_malformed_thinking_setting_is_refused(gateway, upstream, thinking, param):
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={"x-api-key": KEY_ALL, "anthropic-version": "2023-06-01"},
        content=json.dumps(
            {
                "model": "pa/m1",
                "max_tokens": 32,
                "messages": [USER],
                "thinking": thinking,
            }
        ),
        timeout=30,
    )

    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert upstream.requests() == []


def test_claude_codes_adaptive_thinking_still_passes(claude, upstream):
    answer = claude.messages.create(
        model="pa/m1",
        max_tokens=32,
        messages=[USER],
        thinking={"type": "adaptive"},
    )

    assert answer.content
