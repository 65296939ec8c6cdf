"""Extended thinking on Anthropic's wire: budgets with room for the answer, tool
turns that lost their thinking, and signed blocks round-tripped through a Chat
Completions conversation (gateway.dialects.anthropic_thinking)."""

import pytest

from gateway.dialects.anthropic import (
    UNSENT,
    AnthropicDialect,
    build_messages_body,
    signed_thinking_only,
)
from gateway.dialects.anthropic_thinking import thinking_fit

SIGNED = {"type": "thinking", "thinking": "Weather needs a tool.", "signature": "c2ln"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5j"}
CALL = {
    "id": "toolu_1",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
}


def _tool_turn(**assistant):
    return [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], **assistant},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "-3 C"},
    ]


@pytest.mark.parametrize(
    ("effort", "fit"),
    [
        ("minimal", (1024, 5120)),
        ("high", (16384, 20480)),
        ("xhigh", (27904, 32000)),  # within every Claude model's output limit
    ],
)
def test_without_max_tokens_the_answer_keeps_the_default_room(effort, fit):
    body = {"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": effort}
    assert thinking_fit(body) == fit
    out = build_messages_body(body, model="m", stream=False)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": fit[0]}
    assert out["max_tokens"] == fit[1]
    assert UNSENT(body) == ()


@pytest.mark.parametrize("max_tokens", [1024, 1500, 2047])
def test_no_room_for_the_minimum_budget_sends_no_thinking_and_names_it(max_tokens):
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "high",
        "max_tokens": max_tokens,
    }
    out = build_messages_body(body, model="m", stream=False)
    assert "thinking" not in out
    assert out["max_tokens"] == max_tokens
    assert UNSENT(body) == ("reasoning_effort",)


def test_no_effort_or_none_names_nothing():
    messages = _tool_turn()
    assert UNSENT({"messages": messages}) == ()
    assert UNSENT({"messages": messages, "reasoning_effort": "none"}) == ()


def test_a_tool_turn_without_its_thinking_is_sent_without_thinking():
    body = {"messages": _tool_turn(), "reasoning_effort": "high"}
    out = build_messages_body(body, model="m", stream=False)
    assert "thinking" not in out
    assert [b["type"] for b in out["messages"][1]["content"]] == ["tool_use"]
    assert UNSENT(body) == ("reasoning_effort",)


@pytest.mark.parametrize("blocks", [[SIGNED], [REDACTED], [REDACTED, SIGNED]])
def test_a_tool_turn_with_its_signed_thinking_keeps_thinking(blocks):
    body = {"messages": _tool_turn(thinking_blocks=blocks), "reasoning_effort": "high"}
    out = build_messages_body(body, model="m", stream=False)
    assert out["thinking"]["type"] == "enabled"
    content = out["messages"][1]["content"]
    assert content[: len(blocks)] == blocks
    assert content[len(blocks)]["type"] == "tool_use"
    assert UNSENT(body) == ()


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "thinking", "thinking": "x", "signature": ""}],
        [{"type": "thinking", "thinking": "x"}],
        [{"type": "redacted_thinking"}],
        ["thinking"],
        "thinking",
    ],
)
def test_unsigned_or_malformed_thinking_blocks_are_left_out(blocks):
    body = {"messages": _tool_turn(thinking_blocks=blocks), "reasoning_effort": "high"}
    out = build_messages_body(body, model="m", stream=False)
    assert "thinking" not in out
    assert [b["type"] for b in out["messages"][1]["content"]] == ["tool_use"]


def test_a_new_user_turn_after_an_unthought_tool_turn_may_think():
    messages = [
        *_tool_turn(),
        {"role": "assistant", "content": "It is -3 C."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    body = {"messages": messages, "reasoning_effort": "low"}
    out = build_messages_body(body, model="m", stream=False)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_the_first_assistant_message_of_the_turn_is_the_one_that_must_think():
    second = {**CALL, "id": "toolu_2"}
    messages = [
        *_tool_turn(thinking_blocks=[SIGNED]),
        {"role": "assistant", "content": None, "tool_calls": [second]},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "-5 C"},
    ]
    out = build_messages_body(
        {"messages": messages, "reasoning_effort": "high"}, model="m", stream=False
    )
    assert out["thinking"]["type"] == "enabled"


def _messages_body(assistant_content, thinking=None):
    body = {
        "model": "claude",
        "max_tokens": 8000,
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": assistant_content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3"}
                ],
            },
        ],
    }
    if thinking is not None:
        body["thinking"] = thinking
    return body


USE = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}
GEMINI_THOUGHT = {"type": "thinking", "thinking": "from Gemini", "signature": ""}


@pytest.mark.parametrize("kind", ["enabled", "adaptive"])
def test_passthrough_of_a_tool_turn_another_model_served_drops_thinking(kind):
    thinking = {"type": kind, "budget_tokens": 4000}
    body = _messages_body([GEMINI_THOUGHT, USE], thinking)
    signed_thinking_only(body)
    assert "thinking" not in body
    assert body["messages"][1]["content"] == [USE]


def test_passthrough_of_a_signed_tool_turn_keeps_thinking():
    thinking = {"type": "enabled", "budget_tokens": 4000}
    body = _messages_body([SIGNED, USE], thinking)
    signed_thinking_only(body)
    assert body["thinking"] == thinking
    assert body["messages"][1]["content"] == [SIGNED, USE]


def test_passthrough_without_thinking_or_outside_a_tool_turn_is_unchanged():
    body = _messages_body([USE])
    signed_thinking_only(body)
    assert "thinking" not in body
    fresh = {
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "messages": [{"role": "user", "content": "hi"}],
    }
    signed_thinking_only(fresh)
    assert fresh["thinking"]["type"] == "enabled"


def _events(*blocks):
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 5}},
    }
    events = [("message_start", start)]
    for index, (block, deltas) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(
            ("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def test_a_stream_hands_each_signed_block_over_whole_when_it_ends():
    translator = AnthropicDialect().stream_translator(created=1)
    events = _events(
        (REDACTED, []),
        (
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": "Weather needs "},
                {"type": "thinking_delta", "thinking": "a tool."},
                {"type": "signature_delta", "signature": "c2"},
                {"type": "signature_delta", "signature": "ln"},
            ],
        ),
        (USE, []),
    )
    deltas = [
        chunk["choices"][0]["delta"]
        for event, data in events
        for chunk in translator.translate(event, data)
        if chunk.get("choices")
    ]
    handed = [d["thinking_blocks"] for d in deltas if "thinking_blocks" in d]
    assert handed == [[REDACTED], [SIGNED]]
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert reasoning == "Weather needs a tool."


def test_an_unsigned_streamed_thought_is_not_handed_over():
    translator = AnthropicDialect().stream_translator(created=1)
    events = _events(
        (
            {"type": "thinking", "thinking": ""},
            [{"type": "thinking_delta", "thinking": "x"}],
        )
    )
    chunks = [c for e, d in events for c in translator.translate(e, d)]
    assert not any("thinking_blocks" in c["choices"][0]["delta"] for c in chunks[:-1])


def test_openai_upstreams_never_get_the_signed_blocks():
    from gateway.dialects.openai import OpenAIDialect

    body = {"messages": _tool_turn(thinking_blocks=[SIGNED]), "model": "x"}
    call = OpenAIDialect().build_request(
        base_url="http://u/v1", api_key="k", model="gpt", body=body, stream=False
    )
    assert all("thinking_blocks" not in m for m in call.body["messages"])
    assert "thinking_blocks" in body["messages"][1]  # the canonical body is kept


def test_responses_upstreams_never_get_the_gateways_encrypted_content():
    from gateway.dialects.anthropic_thinking import encode_blocks
    from gateway.dialects.openai_responses import OpenAIResponsesDialect

    ours = {
        "type": "reasoning",
        "summary": [],
        "encrypted_content": encode_blocks([SIGNED]),
    }
    theirs = {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-openai"}
    items = [{"role": "user", "content": "hi"}, ours, theirs]
    call = OpenAIResponsesDialect().passthrough_request(
        base_url="http://u/v1",
        api_key="k",
        model="gpt",
        body={"model": "x", "input": items},
        stream=False,
        forward=(),
    )
    assert call.body["input"] == [items[0], theirs]
    assert items[1] is ours  # the client's list is not changed


def test_the_sampling_fields_thinking_refuses_are_named():
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "low",
        "temperature": 0.2,
        "top_p": 0.5,
        "top_k": 5,
    }
    assert UNSENT(body) == ("temperature", "top_k", "top_p")
    out = build_messages_body(body, model="m", stream=False)
    assert not {"temperature", "top_p", "top_k"} & set(out)
    kept = {**body, "temperature": 1, "top_p": 0.97, "top_k": None}
    assert UNSENT(kept) == ()
    assert build_messages_body(kept, model="m", stream=False)["top_p"] == 0.97
    # without thinking nothing of them is named
    assert UNSENT({**body, "reasoning_effort": "none"}) == ()
