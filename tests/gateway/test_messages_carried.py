"""What a Messages body carries only to the dialects that take it (#14): a text or
image block's ``cache_control``, ``top_k``, a tool result's ``is_error``; and how an
attempt to any other dialect leaves them out.  Pure: no server."""

from __future__ import annotations

import copy

from gateway.inbound.messages import CACHE_CONTROL, IS_ERROR_CARRIED, TOP_K, to_chat
from gateway.kernel.exchange import without_nested

MARKER = {"type": "ephemeral"}
BODY = {
    "model": "br/m",
    "max_tokens": 16,
    "top_k": 5,
    "system": [{"type": "text", "text": "rules", "cache_control": MARKER}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look", "cache_control": MARKER},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": "x",
                    },
                    "cache_control": MARKER,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "boom",
                    "is_error": True,
                    "cache_control": MARKER,
                }
            ],
        },
    ],
}


def test_markers_top_k_and_is_error_ride_in_the_canonical_body():
    chat, dropped, _, carried = to_chat(copy.deepcopy(BODY))
    system, user, _, tool = chat["messages"]
    assert system["content"] == [
        {"type": "text", "text": "rules", "cache_control": MARKER}
    ]
    assert [p["cache_control"] for p in user["content"]] == [MARKER, MARKER]
    assert tool == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "Error: boom",
        "is_error": True,
    }
    assert chat["top_k"] == 5
    # a tool result has no part to hold its marker: named at once
    assert dropped == ["messages[2].content[0].cache_control"]
    assert [(c.path, c.field) for c in carried] == [
        ("messages[0].content[0].cache_control", "cache_control"),
        ("messages[0].content[1].cache_control", "cache_control"),
        ("", "is_error"),
        ("system[0].cache_control", "cache_control"),
        ("top_k", "top_k"),
    ]
    assert all(c.dialects == CACHE_CONTROL for c in carried if c.nested and c.path)
    assert carried[2] is IS_ERROR_CARRIED
    assert carried[4] is TOP_K
    assert "bedrock/chat" in CACHE_CONTROL
    assert "openai/chat" not in CACHE_CONTROL
    assert TOP_K.dialects is not None
    assert "gemini/chat" in TOP_K.dialects
    assert "openai/chat" not in TOP_K.dialects


def test_an_attempt_elsewhere_gets_the_body_without_a_nested_field():
    chat, _, _, _ = to_chat(copy.deepcopy(BODY))
    before = copy.deepcopy(chat)
    plain = without_nested(without_nested(chat, "cache_control"), "is_error")
    assert chat == before  # the canonical body is shared by every attempt
    assert "cache_control" not in str(plain)
    assert "is_error" not in str(plain)
    assert plain["messages"][3]["content"] == "Error: boom"
    assert plain["messages"][2] is chat["messages"][2]  # untouched: shared
