"""Spec 02 §11: an interrupted stream without usage bills what was delivered."""

from __future__ import annotations

from gateway.pipeline.stream import delivered_chars


def test_every_delivered_text_field_counts_towards_the_estimate():
    delta = {
        "role": "assistant",
        "content": "abcd",
        "reasoning_content": "ef",
        "refusal": None,
    }
    assert delivered_chars(delta) == 6


def test_tool_call_names_and_arguments_count_towards_the_estimate():
    delta = {
        "tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "get", "arguments": '{"a"'}},
            {"index": 0, "function": {"arguments": ": 1}"}},
        ]
    }
    assert delivered_chars(delta) == len("get") + len('{"a"') + len(": 1}")


def test_a_role_only_delta_delivers_nothing():
    assert delivered_chars({"role": "assistant", "content": ""}) == 0
