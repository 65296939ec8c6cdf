"""Pure pieces of fusion and pipeline (spec 03 §6-7)."""

from __future__ import annotations

import pytest

from gateway.kernel import composite as c

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "ls"}}]


@pytest.mark.parametrize(
    ("min_panel", "size", "expected"),
    [(2, 3, 2), (1, 3, 2), (3, 3, 3), (5, 3, 3), (2, 1, 1), (16, 16, 16)],
)
def test_quorum_is_at_least_two_and_at_most_the_panel(min_panel, size, expected):
    assert c.quorum(min_panel, size) == expected


def test_fusion_tuning_defaults_and_overrides():
    assert c.fusion_tuning({}) == c.FusionTuning(
        min_panel=2, straggler_grace_ms=8000, panel_hard_timeout_ms=90000
    )
    tuned = c.fusion_tuning({"fusionTuning": {"minPanel": 3, "stragglerGraceMs": 0}})
    assert (tuned.min_panel, tuned.straggler_grace_ms) == (3, 0)


def test_panel_body_drops_tools_and_streaming_without_touching_the_original():
    body = {
        "model": "x",
        "messages": MESSAGES,
        "stream": True,
        "tools": TOOLS,
        "tool_choice": "none",
        "parallel_tool_calls": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
    }
    assert c.panel_body(body) == {
        "model": "x",
        "messages": MESSAGES,
        "stream": False,
        "temperature": 0.2,
    }
    assert body["stream"] is True
    assert "tools" in body


@pytest.mark.parametrize(
    ("body", "bypass"),
    [
        ({"tools": TOOLS}, True),
        ({"tools": TOOLS, "tool_choice": "auto"}, True),
        ({"tools": TOOLS, "tool_choice": "none"}, False),
        ({"tools": []}, False),
        ({}, False),
    ],
)
def test_tools_bypass(body, bypass):
    assert c.tools_bypass(body) is bypass


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("  an answer \n", "an answer"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        ("   ", None),
        (None, None),
    ],
)
def test_answer_text(content, text):
    completion = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    assert c.answer_text(completion) == text


def test_answer_text_without_choices_is_none():
    assert c.answer_text({"choices": []}) is None
    assert c.answer_text(None) is None


def test_judge_body_appends_labelled_sources_in_order_and_keeps_stream():
    body = {"model": "team", "messages": MESSAGES, "stream": True}
    judged = c.judge_body(body, ["alpha", "beta"])
    assert judged["stream"] is True
    assert judged["messages"][:-1] == MESSAGES
    last = judged["messages"][-1]
    assert last["role"] == "user"
    assert last["content"].startswith(c.FUSION_DIRECTIVE)
    assert last["content"].index("Source 1:\nalpha") < last["content"].index(
        "Source 2:\nbeta"
    )
    assert body["messages"] == MESSAGES


def test_directive_names_no_model():
    text = c.FUSION_DIRECTIVE.lower()
    for name in ("gpt", "claude", "gemini", "openai", "anthropic"):
        assert name not in text


def test_first_stage_gets_the_prompt_as_leading_system_message():
    body = {"messages": MESSAGES, "stream": True, "tools": TOOLS, "tool_choice": "auto"}
    stage = c.stage_body(body, index=0, count=2, prompt="summarise", previous=None)
    assert stage == {
        "messages": [{"role": "system", "content": "summarise"}, *MESSAGES],
        "stream": False,
    }


def test_last_stage_keeps_stream_and_tools_and_gets_the_previous_answer():
    body = {"messages": MESSAGES, "stream": True, "tools": TOOLS, "tool_choice": "auto"}
    stage = c.stage_body(body, index=1, count=2, prompt="translate", previous="sum")
    assert stage["messages"] == [
        {"role": "system", "content": "translate"},
        {"role": "user", "content": "sum"},
    ]
    assert (stage["stream"], stage["tools"], stage["tool_choice"]) == (
        True,
        TOOLS,
        "auto",
    )


def test_single_stage_without_prompt_is_the_original_body():
    body = {"messages": MESSAGES, "stream": True}
    assert c.stage_body(body, index=0, count=1, prompt=None, previous=None) == body


def test_stage_prompt_lookup():
    config = {"stagePrompts": ["a", None]}
    assert [c.stage_prompt(config, i) for i in range(3)] == ["a", None, None]
    assert c.stage_prompt({}, 0) is None


def test_sum_usage():
    assert c.sum_usage(
        [{"prompt_tokens": 3, "completion_tokens": 4}, None, {"prompt_tokens": 1}]
    ) == {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}
    assert c.sum_usage([None, {}]) is None
