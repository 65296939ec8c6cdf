"""What the client wires refuse before routing (spec 01, 09 §2.3): a malformed message,
tool, reasoning setting, tool-result id or ``model`` is a 400 naming the client's own
path, where a translated attempt used to lose it without a word; valid OpenAI,
Responses and Messages shapes keep passing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.dialects.anthropic import UNSENT as ANTHROPIC_UNSENT
from gateway.dialects.gemini import UNSENT as GEMINI_UNSENT
from gateway.dialects.openai_responses import UNSENT as RESPONSES_UNSENT
from gateway.inbound.chat import EFFORTS, parse_chat_request
from gateway.inbound.completions import parse_completions_request
from gateway.inbound.embeddings import parse_embeddings_request
from gateway.inbound.messages import parse_messages_request
from gateway.inbound.responses import Exchange, parse_responses_request
from gateway.kernel.exchange import RequestError

USER = {"role": "user", "content": "hi"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"q": "x"}'},
}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {}}}


def _raw(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def chat(**fields: Any) -> Any:
    return parse_chat_request(_raw({"model": "pa/m1", **fields}))


def responses(**fields: Any) -> Any:
    return parse_responses_request(
        _raw({"model": "pa/m1", **fields}), Exchange(response_id="resp_1")
    )


def messages(**fields: Any) -> Any:
    body = {"model": "pa/m1", "max_tokens": 64, **fields}
    return parse_messages_request(_raw(body), {})


def refused(parse: Any, **fields: Any) -> tuple[str, str | None]:
    with pytest.raises(RequestError) as caught:
        parse(**fields)
    error = caught.value
    assert (error.status, error.error_type) == (400, "invalid_request_error")
    assert error.param
    assert error.param in error.message
    return error.code, error.param


# --- Chat Completions: messages ------------------------------------------------------


@pytest.mark.parametrize(
    ("conversation", "code", "param"),
    [
        ([{"role": "user", "content": 5}], "invalid_type", "messages[0].content"),
        (
            [USER, {"role": "user", "content": {"text": "hi"}}],
            "invalid_type",
            "messages[1].content",
        ),
        ([{"role": "user"}], "missing_parameter", "messages[0].content"),
        (
            [{"role": "system", "content": None}, USER],
            "missing_parameter",
            "messages[0].content",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": 5}]}],
            "invalid_type",
            "messages[0].content[0].text",
        ),
        (
            [{"role": "user", "content": [{"type": "text"}]}],
            "missing_parameter",
            "messages[0].content[0].text",
        ),
        (
            [{"role": "user", "content": [{"text": "hi"}]}],
            "missing_parameter",
            "messages[0].content[0].type",
        ),
        (
            [{"role": "user", "content": [5]}],
            "invalid_type",
            "messages[0].content[0]",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": 5}}],
                }
            ],
            "invalid_type",
            "messages[0].content[0].image_url.url",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url"}]}],
            "missing_parameter",
            "messages[0].content[0].image_url",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"format": "wav"}}
                    ],
                }
            ],
            "missing_parameter",
            "messages[0].content[0].input_audio.data",
        ),
        (
            [{"role": "user", "content": [{"type": "file", "file": {"file_id": 3}}]}],
            "invalid_type",
            "messages[0].content[0].file.file_id",
        ),
        (
            [{"role": "user", "content": "hi", "name": 5}],
            "invalid_type",
            "messages[0].name",
        ),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": "42"},
            ],
            "missing_parameter",
            "messages[2].tool_call_id",
        ),
        (
            [
                USER,
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1"},
            ],
            "missing_parameter",
            "messages[2].content",
        ),
        (
            [USER, {"role": "assistant", "tool_calls": {"id": "call_1"}}],
            "invalid_type",
            "messages[1].tool_calls",
        ),
        (
            [
                USER,
                {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]},
            ],
            "missing_parameter",
            "messages[1].tool_calls[0].function",
        ),
        (
            [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": 5}}],
                },
            ],
            "invalid_type",
            "messages[1].tool_calls[0].function.name",
        ),
    ],
)
def test_a_malformed_message_is_refused_naming_its_path(conversation, code, param):
    assert refused(chat, messages=conversation) == (code, param)


@pytest.mark.parametrize(
    "arguments", ["{not json", '{"q": "x"', "[1, 2]", "5", "null", "  "]
)
def test_history_tool_call_arguments_that_are_no_json_object_pass_and_are_named(
    arguments,
):
    """OpenAI takes them, and a model's truncated call replayed by an agent must
    not stop its conversation; a translation that makes them ``{}`` names them, a
    Responses upstream carries the string as sent."""
    call = {**CALL, "function": {"name": "lookup", "arguments": arguments}}
    conversation = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL, call]},
    ]

    body = chat(messages=conversation).body
    assert body["messages"][1]["tool_calls"][1]["function"]["arguments"] == arguments
    path = "messages[1].tool_calls[1].function.arguments"
    assert ANTHROPIC_UNSENT(body) == (path,)
    assert GEMINI_UNSENT(body) == (path,)
    assert RESPONSES_UNSENT(body) == ()
    assert (
        ANTHROPIC_UNSENT(
            chat(messages=[USER, {**conversation[1], "tool_calls": [CALL]}]).body
        )
        == ()
    )


def test_history_tool_call_arguments_of_another_type_are_invalid_type():
    call = {**CALL, "function": {"name": "lookup", "arguments": 5}}
    conversation = [USER, {"role": "assistant", "tool_calls": [call]}]

    assert refused(chat, messages=conversation) == (
        "invalid_type",
        "messages[1].tool_calls[0].function.arguments",
    )


def test_valid_openai_conversations_keep_passing():
    conversation = [
        {"role": "developer", "content": "be brief"},
        {"role": "system", "content": [{"type": "text", "text": "you help"}]},
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                {"type": "image_url", "image_url": "https://x/b.png"},
                {
                    "type": "input_audio",
                    "input_audio": {"data": "AAA", "format": "wav"},
                },
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,AA"},
                },
                {"type": "file", "file": {"file_id": "file-1"}},
                "a bare string part",
                {"type": "vendor_part", "anything": 1},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                CALL,
                {**CALL, "id": "call_2", "function": {"name": "now", "arguments": ""}},
                {**CALL, "id": "call_3", "function": {"name": "t", "arguments": {}}},
                {
                    "id": "call_4",
                    "type": "custom",
                    "custom": {"name": "sh", "input": "ls"},
                },
            ],
            "vendor_extra": {"kept": True},
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": "t"}],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "assistant", "content": "", "refusal": "no", "name": "bot"},
        {"role": "function", "name": "legacy", "content": None},
        {"role": "assistant", "function_call": {"name": "legacy", "arguments": "{}"}},
        USER,
    ]

    request = chat(
        messages=conversation, tools=[TOOL, {"type": "custom", "custom": {}}]
    )

    assert request.body["messages"] == conversation
    assert request.body["messages"][3]["vendor_extra"] == {"kept": True}


# --- Chat Completions: tools ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "code", "param"),
    [
        ([{"type": "function"}], "missing_parameter", "tools[0].function"),
        (
            [TOOL, {"type": "function", "function": 5}],
            "invalid_type",
            "tools[1].function",
        ),
        (
            [{"type": "function", "function": {"name": 5}}],
            "invalid_type",
            "tools[0].function.name",
        ),
        (
            [{"type": "function", "function": {"name": ""}}],
            "missing_parameter",
            "tools[0].function.name",
        ),
        (
            [{"type": "function", "function": {"parameters": {}}}],
            "missing_parameter",
            "tools[0].function.name",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
            "invalid_type",
            "tools[0].function.parameters",
        ),
        (["lookup"], "invalid_type", "tools[0]"),
        ([{"type": 5, "function": {"name": "f"}}], "invalid_type", "tools[0].type"),
    ],
)
def test_a_malformed_tool_is_refused_naming_its_path(tools, code, param):
    assert refused(chat, messages=[USER], tools=tools) == (code, param)


# --- reasoning settings --------------------------------------------------------------


@pytest.mark.parametrize(
    ("effort", "code"),
    [("bogus", "invalid_value"), ("HIGH", "invalid_value"), (5, "invalid_type")],
)
def test_a_chat_reasoning_effort_outside_the_levels_is_refused(effort, code):
    assert refused(chat, messages=[USER], reasoning_effort=effort) == (
        code,
        "reasoning_effort",
    )


@pytest.mark.parametrize("effort", [*EFFORTS, None])
def test_every_known_effort_is_accepted_on_chat_and_responses(effort):
    chat(messages=[USER], reasoning_effort=effort)
    responses(input="hi", reasoning={"effort": effort, "summary": "auto"})


def test_the_effort_levels_are_openais_and_the_classifiers():
    assert set(EFFORTS) == {"none", "minimal", "low", "medium", "high", "xhigh", "max"}


@pytest.mark.parametrize(
    ("effort", "code"), [("bogus", "invalid_value"), (["high"], "invalid_type")]
)
def test_a_responses_reasoning_effort_outside_the_levels_is_refused(effort, code):
    assert refused(responses, input="hi", reasoning={"effort": effort}) == (
        code,
        "reasoning.effort",
    )


@pytest.mark.parametrize(
    ("thinking", "code", "param"),
    [
        (
            {"type": "enabled", "budget_tokens": "lots"},
            "invalid_type",
            "thinking.budget_tokens",
        ),
        (
            {"type": "enabled", "budget_tokens": 0},
            "invalid_value",
            "thinking.budget_tokens",
        ),
        ({"type": "on"}, "invalid_value", "thinking.type"),
        ({"budget_tokens": 2048}, "missing_parameter", "thinking.type"),
        ("on", "invalid_type", "thinking"),
    ],
)
def test_a_malformed_thinking_setting_is_refused(thinking, code, param):
    assert refused(messages, messages=[USER], thinking=thinking) == (code, param)


@pytest.mark.parametrize(
    "thinking",
    [
        {"type": "enabled", "budget_tokens": 31999},
        {"type": "enabled"},
        {"type": "adaptive"},
        {"type": "disabled"},
        None,
    ],
)
def test_the_thinking_settings_claude_code_sends_pass(thinking):
    messages(messages=[USER], thinking=thinking)


# --- tool-result ids -----------------------------------------------------------------


def _result(**fields: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "ok"}, {"type": "tool_result", **fields}],
    }


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"content": "42"}, "missing_parameter"),
        ({"tool_use_id": "", "content": "42"}, "missing_parameter"),
        ({"tool_use_id": 7, "content": "42"}, "invalid_type"),
    ],
)
def test_a_tool_result_without_its_tool_use_id_is_refused(fields, code):
    conversation = [
        USER,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
            ],
        },
        _result(**fields),
    ]

    assert refused(messages, messages=conversation) == (
        code,
        "messages[2].content[1].tool_use_id",
    )


def test_a_tool_result_with_its_id_passes():
    request = messages(messages=[USER, _result(tool_use_id="toolu_1", content="42")])

    assert request.body["messages"][1]["tool_call_id"] == "toolu_1"


@pytest.mark.parametrize("kind", ["function_call_output", "custom_tool_call_output"])
@pytest.mark.parametrize(
    ("call_id", "code"),
    [(None, "missing_parameter"), ("", "missing_parameter"), (5, "invalid_type")],
)
def test_a_responses_tool_output_without_its_call_id_is_refused(kind, call_id, code):
    output: dict[str, Any] = {"type": kind, "output": "42"}
    if call_id is not None:
        output["call_id"] = call_id
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        output,
    ]

    assert refused(responses, input=items) == (code, "input[2].call_id")


# --- model of the wrong type ---------------------------------------------------------


@pytest.mark.parametrize("model", [123, ["x"], {"id": "x"}])
def test_a_model_of_the_wrong_type_is_invalid_type_on_every_wire(model):
    bodies = [
        (parse_chat_request, {"messages": [USER]}),
        (parse_completions_request, {"prompt": "hi"}),
        (parse_embeddings_request, {"input": "hi"}),
    ]
    for parse, body in bodies:
        with pytest.raises(RequestError) as caught:
            parse(_raw({**body, "model": model}))
        assert (caught.value.code, caught.value.param) == ("invalid_type", "model")
    for wire in (responses, messages):
        with pytest.raises(RequestError) as caught:
            wire(model=model, input="hi", messages=[USER])
        assert (caught.value.code, caught.value.param) == ("invalid_type", "model")


@pytest.mark.parametrize("model", [None, ""])
def test_an_absent_model_is_still_missing_parameter(model):
    with pytest.raises(RequestError) as caught:
        responses(model=model, input="hi")
    assert (caught.value.code, caught.value.param) == ("missing_parameter", "model")


@pytest.mark.parametrize("arguments", ["{not json", "[1]"])
def test_a_responses_function_call_with_arguments_no_json_object_passes(
    arguments,
):
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ]

    body = responses(input=items).body
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == arguments


def test_a_responses_tool_round_trip_passes():
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "sh", "input": "ls"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "a.txt"},
    ]

    request = responses(input=items)

    assert [m["role"] for m in request.body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


# --- tool call ids and names (re-audit) ----------------------------------------------


@pytest.mark.parametrize(
    ("call", "code", "param"),
    [
        ({k: v for k, v in CALL.items() if k != "id"}, "missing_parameter", "id"),
        ({**CALL, "id": ""}, "missing_parameter", "id"),
        ({**CALL, "id": None}, "missing_parameter", "id"),
        ({**CALL, "id": 7}, "invalid_type", "id"),
    ],
)
def test_a_chat_tool_call_needs_its_id(call, code, param):
    conversation = [USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    assert refused(chat, messages=conversation) == (
        code,
        f"messages[1].tool_calls[0].{param}",
    )


@pytest.mark.parametrize(
    ("item", "code", "param"),
    [
        (
            {"type": "function_call", "name": "f", "arguments": "{}"},
            "missing_parameter",
            "call_id",
        ),
        (
            {"type": "function_call", "call_id": 5, "name": "f"},
            "invalid_type",
            "call_id",
        ),
        (
            {"type": "function_call", "call_id": "c1", "arguments": "{}"},
            "missing_parameter",
            "name",
        ),
        (
            {"type": "custom_tool_call", "call_id": "c1", "input": "ls"},
            "missing_parameter",
            "name",
        ),
    ],
)
def test_a_responses_call_needs_its_call_id_and_name(item, code, param):
    items = [{"role": "user", "content": "hi"}, item]
    assert refused(responses, input=items) == (code, f"input[1].{param}")


USE = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}


@pytest.mark.parametrize(
    ("block", "code", "param"),
    [
        ({k: v for k, v in USE.items() if k != "id"}, "missing_parameter", "id"),
        ({**USE, "id": 3}, "invalid_type", "id"),
        ({k: v for k, v in USE.items() if k != "name"}, "missing_parameter", "name"),
        ({**USE, "input": [1]}, "invalid_type", "input"),
        ({**USE, "input": "{}"}, "invalid_type", "input"),
    ],
)
def test_a_messages_tool_use_needs_its_id_name_and_an_object_input(block, code, param):
    conversation = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [block]},
    ]
    assert refused(messages, messages=conversation) == (
        code,
        f"messages[1].content[0].{param}",
    )


@pytest.mark.parametrize(
    ("tool", "code", "param"),
    [
        ({"input_schema": {"type": "object"}}, "missing_parameter", "tools[0].name"),
        ({"name": 5, "input_schema": {}}, "invalid_type", "tools[0].name"),
        ({"name": "f", "input_schema": "{}"}, "invalid_type", "tools[0].input_schema"),
    ],
)
def test_a_messages_tool_needs_a_name_and_an_object_schema(tool, code, param):
    assert refused(
        messages, messages=[{"role": "user", "content": "hi"}], tools=[tool]
    ) == (
        code,
        param,
    )


def test_well_formed_calls_keep_passing_on_every_wire():
    chat(messages=[USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}])
    responses(
        input=[
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    )
    messages(
        messages=[
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [USE, {**USE, "id": "toolu_2", "input": None}],
            },
        ],
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    )


def test_a_responses_clients_bad_arguments_are_named_in_its_own_terms():
    request = responses(
        input=[
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{x"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    )
    [path] = GEMINI_UNSENT(request.body)
    assert path == "messages[1].tool_calls[0].function.arguments"
    assert request.client_path(path) == "input[1].arguments"
