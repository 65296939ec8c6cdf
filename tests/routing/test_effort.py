"""Effort level and ``X-OmniRoute-Effort: auto``: spec 04 §5.3 and §11 example 13."""

import copy

import pytest

from gateway.auto.engine.effort import apply_effort, complexity_level, effort_level

REASONING = frozenset({"reasoning", "tools"})


def _msg(role, chars=0, text=None):
    return {"role": role, "content": text if text is not None else "x" * chars}


def _user(chars=0, text=None):
    return _msg("user", chars, text)


def _tool_call_turn():
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "run_tests", "arguments": "{}"},
            }
        ],
    }


def _tool(chars):
    return {"role": "tool", "tool_call_id": "call_1", "content": "x" * chars}


# --- §11 example 13 -----------------------------------------------------------------


def test_a_short_greeting_is_low():
    assert effort_level([_user(text="hi")]) == "low"


def test_a_single_user_message_of_5000_characters_is_high():
    assert effort_level([_user(5_000)]) == "high"


def test_a_system_prompt_and_a_500_character_question_are_medium():
    assert effort_level([_msg("system", 300), _user(500)]) == "medium"


def test_every_request_of_one_tool_loop_is_low():
    loop = [
        _user(text="fix the failing test"),
        _tool_call_turn(),
        _tool(80_000),
        _tool_call_turn(),
        _tool(80_000),
        _msg("assistant", text="All green now."),
    ]
    levels = [effort_level(loop[:n]) for n in range(1, len(loop) + 1)]

    assert levels == ["low"] * len(loop)


def test_a_body_that_already_sets_reasoning_effort_is_left_unchanged():
    body = {"messages": [_user(5_000)], "reasoning_effort": "high"}

    out = apply_effort(
        body, header="auto", provider_kind="openai", capabilities=REASONING
    )

    assert out is body
    assert out == {"messages": [_user(5_000)], "reasoning_effort": "high"}


# --- boundaries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "level"), [(0, "low"), (160, "low"), (161, "medium")]
)
def test_user_chars_boundary_of_low(chars, level):
    assert effort_level([_user(chars)]) == level


@pytest.mark.parametrize(("chars", "level"), [(3_999, "medium"), (4_000, "high")])
def test_user_chars_boundary_of_high(chars, level):
    assert effort_level([_user(chars)]) == level


@pytest.mark.parametrize(
    ("system_chars", "level"),
    [
        (15_840, "low"),  # 3960 + 40 = 4000 tokens
        (15_841, "medium"),  # 3961 + 40 = 4001 tokens
    ],
)
def test_ctx_tokens_boundary_of_low(system_chars, level):
    assert effort_level([_msg("system", system_chars), _user(160)]) == level


def test_ctx_tokens_round_up_per_message():
    # ceil(15841/4) + ceil(157/4) = 3961 + 40 = 4001, where ceil(15998/4) is 4000
    assert effort_level([_msg("system", 15_841), _user(157)]) == "medium"


@pytest.mark.parametrize(
    ("system_chars", "level"),
    [
        (239_836, "medium"),  # 59959 + 40 = 59999 tokens
        (239_840, "high"),  # 59960 + 40 = 60000 tokens
    ],
)
def test_ctx_tokens_boundary_of_high(system_chars, level):
    assert effort_level([_msg("system", system_chars), _user(160)]) == level


@pytest.mark.parametrize(
    ("results", "level"), [(1, "medium"), (5, "medium"), (6, "high")]
)
def test_tool_results_before_the_user_message(results, level):
    messages = [_user(text="go"), _tool_call_turn()]
    messages += [_tool(10) for _ in range(results)]
    messages.append(_user(text="and now?"))

    assert effort_level(messages) == level


# --- what is read -------------------------------------------------------------------


def test_nothing_after_the_last_user_message_is_read():
    messages = [_user(text="hi"), _msg("assistant", 1_000_000)]
    messages += [_tool(10) for _ in range(6)]

    assert effort_level(messages) == "low"


def test_without_a_user_message_the_last_message_is_b_and_user_chars_is_0():
    assert effort_level([_msg("system", 4_000)]) == "low"  # 1000 tokens, 0 user chars
    assert effort_level([_msg("assistant", 20_000)]) == "medium"  # 5000 tokens


def test_without_a_user_message_tool_results_are_counted_before_the_last_message():
    assert effort_level([_msg("system", 10), _tool(10)]) == "low"  # b is the tool
    assert effort_level([_tool(10) for _ in range(7)]) == "high"  # 6 before b
    assert effort_level([_tool(10) for _ in range(6)]) == "medium"  # 5 before b


def test_text_parts_count_with_their_joining_newlines():
    parts = [
        {"type": "text", "text": "a" * 80},
        {"type": "input_text", "text": "b" * 80},
    ]
    message = {"role": "user", "content": parts}

    assert effort_level([message]) == "medium"  # 80 + 1 + 80 = 161 characters


def test_images_and_tool_call_arguments_are_not_text():
    image = {"type": "image_url", "image_url": {"url": "data:," + "x" * 100_000}}
    call = _tool_call_turn()
    call["tool_calls"][0]["function"]["arguments"] = "x" * 300_000

    assert effort_level([call, {"role": "user", "content": [image]}]) == "low"


@pytest.mark.parametrize("messages", [None, [], "hello", 3, [None, "x"]])
def test_no_usable_messages_is_low(messages):
    assert effort_level(messages) == "low"


def test_complexity_level_is_the_effort_level():
    for messages in ([_user(5)], [_user(500)], [_user(5_000)]):
        assert complexity_level(messages) == effort_level(messages)


# --- apply_effort -------------------------------------------------------------------


def _body(**extra):
    return {"model": "auto", "messages": [_user(500)], **extra}


@pytest.mark.parametrize("header", ["auto", "AUTO", " Auto\t"])
@pytest.mark.parametrize("kind", ["openai", "mock"])
def test_apply_effort_sets_the_level_when_every_condition_holds(header, kind):
    body = _body()
    before = copy.deepcopy(body)

    out = apply_effort(body, header=header, provider_kind=kind, capabilities=REASONING)

    assert out == {**before, "reasoning_effort": "medium"}
    assert out is not body
    assert body == before  # never mutated


def test_apply_effort_uses_the_level_of_the_messages():
    body = {"messages": [_user(5_000)]}

    out = apply_effort(
        body, header="auto", provider_kind="openai", capabilities=REASONING
    )

    assert out["reasoning_effort"] == "high"


@pytest.mark.parametrize(
    ("body", "header", "kind", "capabilities"),
    [
        (_body(), None, "openai", REASONING),
        (_body(), "", "openai", REASONING),
        (_body(), "high", "openai", REASONING),
        (_body(), "automatic", "openai", REASONING),
        (_body(reasoning_effort="low"), "auto", "openai", REASONING),
        (_body(reasoning_effort=None), "auto", "openai", REASONING),
        (_body(reasoning={"effort": "low"}), "auto", "openai", REASONING),
        (_body(thinking={"type": "enabled"}), "auto", "openai", REASONING),
        (_body(), "auto", "anthropic", REASONING),
        (_body(), "auto", "gemini", REASONING),
        (_body(), "auto", "openai", None),
        (_body(), "auto", "openai", frozenset({"tools", "vision"})),
        (_body(), "auto", "openai", frozenset()),
    ],
)
def test_apply_effort_returns_the_body_itself_when_a_condition_fails(
    body, header, kind, capabilities
):
    before = copy.deepcopy(body)

    out = apply_effort(
        body, header=header, provider_kind=kind, capabilities=capabilities
    )

    assert out is body
    assert body == before
