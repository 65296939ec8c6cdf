"""A Messages body passed through to Anthropic (or Vertex's Claude) leaves out the
``thinking`` blocks without a signature: a Gemini model's thoughts shown to a
Messages client come back in its history, and Anthropic refuses an unsigned block."""

from __future__ import annotations

import copy

from gateway.dialects.anthropic import AnthropicDialect, signed_thinking_only
from gateway.dialects.vertex import VertexAnthropicDialect

HISTORY = {
    "model": "m",
    "max_tokens": 64,
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "from gemini", "signature": ""},
                {"type": "text", "text": "hello"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "from claude", "signature": "c2ln"},
                {"type": "text", "text": "again"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "more"}]},
        "not a message",
    ],
}


def test_unsigned_thinking_is_left_out_and_the_rest_kept():
    body = copy.deepcopy(HISTORY)
    original = copy.deepcopy(HISTORY)
    signed_thinking_only(body)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "hello"}]
    assert body["messages"][2:] == original["messages"][2:]
    assert body["messages"][0] == original["messages"][0]


def test_a_body_without_unsigned_thinking_is_not_copied():
    body = copy.deepcopy(HISTORY)
    del body["messages"][1]
    messages = body["messages"]
    signed_thinking_only(body)
    assert body["messages"] is messages


def test_both_passthroughs_send_only_signed_thinking():
    client_body = copy.deepcopy(HISTORY)
    for dialect in (AnthropicDialect(), VertexAnthropicDialect()):
        call = dialect.passthrough_request(
            base_url="https://upstream.test/v1",
            api_key="k",
            model="claude-x",
            body=client_body,
            stream=False,
            forward=(),
        )
        sent = call.body["messages"][1]["content"]
        assert sent == [{"type": "text", "text": "hello"}]
    assert client_body == HISTORY  # the client's body is not changed
