"""The pure parts of agentic orchestration (spec 03 §7)."""

from __future__ import annotations

import pytest

from gateway.kernel.agentic import (
    DECISION_PROMPT,
    decision_body,
    parse_decision,
    settings_of,
    tool_rounds,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"action": "tools", "instructions": "list files"}', ("tools", "list files")),
        ('Sure. {"action": "final"} done', ("final", None)),
        (
            'noise {bad json} then {"action": "tools", "instructions": "x"}',
            ("tools", "x"),
        ),
        ('{"action": "tools"}', ("final", None)),
        ("no json at all", ("final", None)),
        ("", ("final", None)),
        (None, ("final", None)),
    ],
)
def test_the_first_json_object_decides_and_garbage_means_final(text, expected):
    assert parse_decision(text) == expected


def test_rounds_count_tool_calls_after_the_last_user_message():
    call = {"role": "assistant", "tool_calls": [{"id": "1"}]}
    messages = [call, {"role": "user", "content": "go"}, call, {"role": "tool"}, call]
    assert tool_rounds(messages) == 2
    assert tool_rounds([{"role": "user", "content": "x"}]) == 0
    assert tool_rounds("nope") == 0


def test_decision_body_renders_tool_traffic_and_drops_tools():
    body = {
        "model": "x",
        "stream": True,
        "tools": [{}],
        "tool_choice": "auto",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "ls", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
    }
    decision = decision_body(body)
    assert "tools" not in decision
    assert "tool_choice" not in decision
    assert decision["stream"] is False
    assert decision["messages"][1] == {
        "role": "assistant",
        "content": "[tool call] ls({})",
    }
    assert decision["messages"][2] == {
        "role": "user",
        "content": "[tool result ls] a.txt",
    }
    assert decision["messages"][-1] == {"role": "system", "content": DECISION_PROMPT}
    assert body["stream"] is True  # the input is not mutated


def test_settings_default_to_off_and_eight_rounds():
    assert settings_of({}) == (False, 8)
    assert settings_of(
        {"agenticOrchestration": {"enabled": True, "maxToolRounds": 3}}
    ) == (True, 3)
