"""Anthropic's extended thinking through the Chat Completions and Responses wires
(gateway.dialects.anthropic_thinking), with the openai SDK against a real gateway
and the mock's Anthropic wire: a tool turn's signed thinking goes back to
Anthropic, and a tool turn without it is sent without ``thinking`` (which Anthropic
would refuse) and named."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

MODEL = "pth/claude-thinks"
SIGNED = {"type": "thinking", "thinking": "The tool knows.", "signature": "U0lHTkVE"}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
RESPONSES_TOOL = {"type": "function", **TOOL["function"]}
REPLY = {
    "id": "msg_think",
    "type": "message",
    "role": "assistant",
    "model": "claude-thinks",
    "content": [
        SIGNED,
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 5},
}


@pytest.fixture(scope="module")
def thinker(gateway: Any, mock: Any) -> Any:
    result = gateway.apply(f"""
providers:
  - slug: pth
    kind: anthropic
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-ant-upstream-secret-pth-123456}}]
    models: [{{id: claude-thinks, capabilities: [reasoning, tools]}}]
  - slug: ptr
    kind: openai
    wire: responses
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-secret-ptr-1234567890}}]
    models: [{{id: gpt-thinks, capabilities: [reasoning, tools]}}]
  - slug: ptc
    kind: openai
    base_url: {mock.url}
    connections: [{{name: main, api_key: sk-upstream-secret-ptc-1234567890}}]
    models: [{{id: gpt-chat, capabilities: [reasoning, tools]}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def client(thinker: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{thinker.url}/v1", api_key=KEY_ALL, max_retries=0)


def _sent(upstream: Any) -> dict[str, Any]:
    return upstream.requests()[-1]["body"]


def _assistant_turns(body: dict[str, Any]) -> list[list[str]]:
    return [
        [block["type"] for block in m["content"]]
        for m in body["messages"]
        if m["role"] == "assistant"
    ]


def test_chat_clients_get_the_signed_block_and_send_it_back(client, upstream):
    upstream.add("claude-thinks", times=1, body=REPLY)
    first = client.chat.completions.create(
        model=MODEL,
        reasoning_effort="high",
        tools=[TOOL],
        messages=[{"role": "user", "content": "Weather?"}],
    )
    message = first.choices[0].message
    assert message.reasoning_content == "The tool knows."  # type: ignore[attr-defined]
    assert message.thinking_blocks == [SIGNED]  # type: ignore[attr-defined]

    # the SDK sends the message back as it came, thinking_blocks included
    client.chat.completions.create(
        model=MODEL,
        reasoning_effort="high",
        tools=[TOOL],
        messages=[
            {"role": "user", "content": "Weather?"},
            message,  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny"},
        ],
    )
    sent = _sent(upstream)
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][1]["content"][0] == SIGNED
    assert _assistant_turns(sent) == [["thinking", "tool_use"]]


def test_a_chat_tool_turn_without_its_thinking_goes_without_and_says_so(
    client, upstream
):
    reply = client.chat.completions.with_raw_response.create(
        model=MODEL,
        reasoning_effort="high",
        tools=[TOOL],
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_01",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny"},
        ],
    )
    assert reply.http_response.status_code == 200
    assert "reasoning_effort" in reply.headers["x-omniroute-dropped"]
    sent = _sent(upstream)
    assert "thinking" not in sent
    assert _assistant_turns(sent) == [["tool_use"]]


def test_no_room_for_the_answer_sends_no_thinking_and_says_so(client, upstream):
    reply = client.chat.completions.with_raw_response.create(
        model=MODEL,
        reasoning_effort="high",
        max_tokens=1500,
        messages=[{"role": "user", "content": "hi"}],
    )
    assert "reasoning_effort" in reply.headers["x-omniroute-dropped"]
    assert "thinking" not in _sent(upstream)
    client.chat.completions.create(
        model=MODEL,
        reasoning_effort="high",
        messages=[{"role": "user", "content": "hi"}],
    )
    sent = _sent(upstream)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert sent["max_tokens"] == 16384 + 4096


def test_responses_clients_carry_it_in_encrypted_content(client, upstream):
    upstream.add("claude-thinks", times=1, body=REPLY)
    first = client.responses.create(
        model=MODEL,
        reasoning={"effort": "high"},
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        input="Weather?",
        store=False,
        include=["reasoning.encrypted_content"],
    )
    items = [item.model_dump(exclude_none=True) for item in first.output]
    [reasoning] = [item for item in items if item["type"] == "reasoning"]
    assert reasoning["encrypted_content"]
    [call] = [item for item in items if item["type"] == "function_call"]

    client.responses.create(
        model=MODEL,
        reasoning={"effort": "high"},
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        store=False,
        input=[
            {"role": "user", "content": "Weather?"},
            *items,
            {"type": "function_call_output", "call_id": call["call_id"], "output": "9"},
        ],
    )
    sent = _sent(upstream)
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][1]["content"][0] == SIGNED


def test_a_stored_response_keeps_its_thinking_for_the_next_turn(client, upstream):
    upstream.add("claude-thinks", times=1, body=REPLY)
    first = client.responses.create(
        model=MODEL,
        reasoning={"effort": "high"},
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        input="Weather?",
    )
    [call] = [item for item in first.output if item.type == "function_call"]
    client.responses.create(
        model=MODEL,
        reasoning={"effort": "high"},
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        previous_response_id=first.id,
        input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": "9"}
        ],
    )
    sent = _sent(upstream)
    assert sent["thinking"]["type"] == "enabled"
    assert json.dumps(sent["messages"][1]["content"][0]) == json.dumps(SIGNED)


@pytest.mark.parametrize("model", ["ptr/gpt-thinks", "ptc/gpt-chat"])
def test_another_upstream_never_gets_anthropics_thinking(client, upstream, model):
    """The next turn of a conversation Anthropic began goes to an OpenAI model
    (a failover, or the client's choice): the Responses upstream would refuse
    the gateway's ``encrypted_content``, and a chat upstream has no
    ``thinking_blocks`` field."""
    upstream.add("claude-thinks", times=1, body=REPLY)
    first = client.responses.create(
        model=MODEL,
        reasoning={"effort": "high"},
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        input="Weather?",
        store=False,
        include=["reasoning.encrypted_content"],
    )
    items = [item.model_dump(exclude_none=True) for item in first.output]
    [call] = [item for item in items if item["type"] == "function_call"]
    client.responses.create(
        model=model,
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        store=False,
        input=[
            {"role": "user", "content": "Weather?"},
            *items,
            {"type": "function_call_output", "call_id": call["call_id"], "output": "9"},
        ],
    )
    sent = json.dumps(_sent(upstream))
    assert "omniroute.thinking.v1:" not in sent
    assert "thinking_blocks" not in sent
    assert "U0lHTkVE" not in sent  # the signature stays with Anthropic
