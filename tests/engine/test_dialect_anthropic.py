import copy
import json

import pytest

from gateway.dialects.anthropic import AnthropicDialect, build_messages_body
from gateway.dialects.base import BadUpstreamResponse, StreamErrorEvent
from gateway.kernel.errors import UpstreamError
from gateway.kernel.sse import DONE

BASE_URL = "https://api.anthropic.com/v1"
MODEL = "claude-sonnet-4-5"
CREATED = 1_700_000_000


@pytest.fixture
def dialect():
    return AnthropicDialect()


@pytest.fixture
def build(dialect):
    """Builder: an OpenAI body (plus overrides) -> the Anthropic request body."""

    def _build(messages=None, *, stream=False, **fields):
        body = {"messages": messages or [{"role": "user", "content": "Hi"}], **fields}
        call = dialect.build_request(
            base_url=BASE_URL, api_key="sk-ant", model=MODEL, body=body, stream=stream
        )
        return call.body

    return _build


# --- build_request: envelope ----------------------------------------------------


def test_request_posts_to_messages_with_version_and_api_key_headers(dialect):
    call = dialect.build_request(
        base_url=BASE_URL + "/",
        api_key="sk-ant",
        model=MODEL,
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=False,
    )

    assert call.url == "https://api.anthropic.com/v1/messages"
    assert call.headers == {
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": "sk-ant",
    }


def test_request_without_api_key_sends_no_key_header(dialect):
    call = dialect.build_request(
        base_url=BASE_URL,
        api_key=None,
        model=MODEL,
        body={"messages": [{"role": "user", "content": "Hi"}]},
        stream=False,
    )

    assert "x-api-key" not in call.headers
    assert "authorization" not in call.headers


def test_simple_request_becomes_minimal_messages_body(build):
    body = build([{"role": "user", "content": "Hi"}], model="client-alias")

    assert body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_tokens": 4096,
    }


def test_build_request_does_not_mutate_its_body(dialect):
    body = {
        "model": "alias",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "user", "content": "more"},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "stop": "END",
        "user": "u1",
        "stream": True,
    }
    before = copy.deepcopy(body)

    dialect.build_request(
        base_url=BASE_URL, api_key="k", model=MODEL, body=body, stream=True
    )

    assert body == before


# --- build_request: messages ----------------------------------------------------


def test_system_messages_become_top_level_system(build):
    body = build(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
            {"role": "user", "content": "Again"},
        ]
    )

    assert body["system"] == "You are terse.\n\nNo emoji."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Hi"},
                {"type": "text", "text": "Again"},
            ],
        }
    ]


def test_system_with_cache_control_stays_a_list_of_text_blocks(build):
    body = build(
        [
            {
                "role": "system",
                "content": [
                    {
                        "type": "text",
                        "text": "Long context",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
            {"role": "user", "content": "Hi"},
        ]
    )

    assert body["system"] == [
        {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
    ]


def test_request_without_system_messages_has_no_system_field(build):
    assert "system" not in build([{"role": "user", "content": "Hi"}])


def test_consecutive_messages_of_the_same_role_are_merged(build):
    body = build(
        [
            {"role": "user", "content": "one"},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
            {"role": "assistant", "content": "three"},
            {"role": "assistant", "content": "four"},
            {"role": "user", "content": "five"},
        ]
    )

    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "three"},
                {"type": "text", "text": "four"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "five"}]},
    ]


def test_empty_assistant_turn_is_dropped_and_neighbours_merge(build):
    body = build(
        [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "two"},
        ]
    )

    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
            ],
        }
    ]


def test_image_data_url_becomes_base64_image_block(build):
    body = build(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/jpeg;base64,/9j/4AAQ",
                            "detail": "high",
                        },
                    },
                ],
            }
        ]
    )

    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/jpeg",
                "data": "/9j/4AAQ",
            },
        },
    ]


def test_image_http_url_becomes_url_image_block(build):
    body = build(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.png"},
                    }
                ],
            }
        ]
    )

    assert body["messages"][0]["content"] == [
        {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/cat.png"},
        }
    ]


def test_percent_encoded_data_url_is_base64_encoded(build):
    body = build(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/svg+xml,%3Csvg%3E"},
                    }
                ],
            }
        ]
    )

    assert body["messages"][0]["content"][0]["source"] == {
        "type": "base64",
        "media_type": "image/svg+xml",
        "data": "PHN2Zz4=",
    }


def test_assistant_tool_calls_become_tool_use_blocks(build):
    body = build(
        [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city": "Paris"}',
                        },
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{not json"},
                    },
                ],
            },
        ]
    )

    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
        ],
    }


def test_tool_messages_become_one_user_turn_of_tool_results(build):
    body = build(
        [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "w", "arguments": "{}"},
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "w", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
            {
                "role": "tool",
                "tool_call_id": "toolu_2",
                "content": [{"type": "text", "text": "rainy"}],
            },
            {"role": "user", "content": "Thanks"},
        ]
    )

    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "rainy"},
            {"type": "text", "text": "Thanks"},
        ],
    }
    assert len(body["messages"]) == 3


def test_tool_results_go_first_in_a_merged_user_turn(build):
    body = build(
        [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "w", "arguments": "{}"},
                    }
                ],
            },
            {"role": "user", "content": "note"},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "done"},
        ]
    )

    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"},
        {"type": "text", "text": "note"},
    ]


# --- build_request: tools and sampling ------------------------------------------


def test_function_tools_become_anthropic_tools(build):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = build(
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": schema,
                    "strict": True,
                },
            },
            {"type": "function", "function": {"name": "now"}},
        ]
    )

    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather",
            "input_schema": schema,
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "tool", "name": "get_weather"},
        ),
    ],
)
def test_tool_choice_is_translated(build, tool_choice, expected):
    tools = [{"type": "function", "function": {"name": "get_weather"}}]

    body = build(tools=tools, tool_choice=tool_choice)

    assert body["tool_choice"] == expected


def test_parallel_tool_calls_false_disables_parallel_tool_use(build):
    tools = [{"type": "function", "function": {"name": "f"}}]

    assert build(tools=tools, tool_choice="required", parallel_tool_calls=False)[
        "tool_choice"
    ] == {"type": "any", "disable_parallel_tool_use": True}
    assert build(tools=tools, parallel_tool_calls=False)["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }
    assert build(tools=tools, tool_choice="none", parallel_tool_calls=False)[
        "tool_choice"
    ] == {"type": "none"}


def test_tool_choice_without_tools_is_dropped(build):
    body = build(tool_choice="auto", parallel_tool_calls=False)

    assert "tool_choice" not in body
    assert "tools" not in body


def test_max_tokens_defaults_to_4096(build):
    assert build()["max_tokens"] == 4096


def test_max_completion_tokens_wins_over_max_tokens(build):
    assert build(max_completion_tokens=100, max_tokens=50)["max_tokens"] == 100
    assert build(max_tokens=50)["max_tokens"] == 50


def test_sampling_stop_stream_and_user_are_translated(build):
    body = build(
        stream=True,
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        stop="END",
        user="user-42",
    )

    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["top_k"] == 40
    assert body["stop_sequences"] == ["END"]
    assert body["stream"] is True
    assert body["metadata"] == {"user_id": "user-42"}


def test_stop_list_becomes_stop_sequences(build):
    assert build(stop=["a", "b"])["stop_sequences"] == ["a", "b"]


def test_temperature_above_anthropic_maximum_is_capped(build):
    assert build(temperature=1.7)["temperature"] == 1.0


def test_openai_only_fields_are_dropped(build):
    body = build(
        response_format={"type": "json_object"},
        n=2,
        seed=7,
        logprobs=True,
        frequency_penalty=0.5,
        presence_penalty=0.5,
        stream_options={"include_usage": True},
        stream=False,
    )

    assert set(body) == {"model", "messages", "max_tokens"}


# --- parse_completion -----------------------------------------------------------


def _message(**fields):
    payload = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    payload.update(fields)
    return payload


def test_text_message_becomes_chat_completion(dialect):
    completion = dialect.parse_completion(_message(), created=CREATED)

    assert completion == {
        "id": "chatcmpl-msg_01",
        "object": "chat.completion",
        "created": CREATED,
        "model": "claude-sonnet-4-5-20250929",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello!"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 0},
            "cache_creation_input_tokens": 0,
        },
    }


def test_tool_use_only_message_has_null_content_and_tool_calls(dialect):
    payload = _message(
        content=[
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            }
        ],
        stop_reason="tool_use",
    )

    choice = dialect.parse_completion(payload, created=CREATED)["choices"][0]

    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert choice["finish_reason"] == "tool_calls"


def test_text_blocks_are_joined_and_thinking_becomes_reasoning_content(dialect):
    payload = _message(
        content=[
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
            {"type": "text", "text": "Hello, "},
            {"type": "text", "text": "world."},
        ]
    )

    message = dialect.parse_completion(payload, created=CREATED)["choices"][0][
        "message"
    ]

    assert message == {
        "role": "assistant",
        "content": "Hello, world.",
        "reasoning_content": "Let me think.",
        # signed: the client sends it back to keep a tool turn's thinking
        "thinking_blocks": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig"}
        ],
    }


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "stop"),
        (None, "stop"),
    ],
)
def test_stop_reason_maps_to_finish_reason(dialect, stop_reason, finish_reason):
    payload = _message(stop_reason=stop_reason)

    choice = dialect.parse_completion(payload, created=CREATED)["choices"][0]

    assert choice["finish_reason"] == finish_reason


def test_usage_counts_cache_reads_and_writes_as_prompt_tokens(dialect):
    payload = _message(
        usage={
            "input_tokens": 12,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 200,
            "output_tokens": 30,
        }
    )

    usage = dialect.parse_completion(payload, created=CREATED)["usage"]

    assert usage == {
        "prompt_tokens": 1212,
        "completion_tokens": 30,
        "total_tokens": 1242,
        "prompt_tokens_details": {"cached_tokens": 1000},
        "cache_creation_input_tokens": 200,
    }


@pytest.mark.parametrize(
    "payload",
    [
        None,
        "Hello",
        [],
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
        {"error": {"type": "api_error", "message": "boom"}},
        {"id": "msg_01", "type": "message", "model": "m"},
        {"id": "msg_01", "type": "message", "content": "Hello"},
    ],
)
def test_unusable_completion_raises_bad_upstream_response(dialect, payload):
    with pytest.raises(BadUpstreamResponse):
        dialect.parse_completion(payload, created=CREATED)


# --- stream_translator ----------------------------------------------------------

MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 25,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 50,
            "output_tokens": 1,
        },
    },
}


def _block_start(index, block):
    data = {"type": "content_block_start", "index": index, "content_block": block}
    return ("content_block_start", data)


def _block_delta(index, delta):
    data = {"type": "content_block_delta", "index": index, "delta": delta}
    return ("content_block_delta", data)


def _text(text):
    return {"type": "text_delta", "text": text}


def _json(partial):
    return {"type": "input_json_delta", "partial_json": partial}


REALISTIC_STREAM = [
    ("message_start", MESSAGE_START),
    _block_start(0, {"type": "text", "text": ""}),
    ("ping", {"type": "ping"}),
    _block_delta(0, _text("Let me ")),
    _block_delta(0, _text("check.")),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    _block_start(
        1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    ),
    _block_delta(1, _json("")),
    _block_delta(1, _json('{"city": "Pa')),
    _block_delta(1, _json('ris"}')),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


def _chunk(delta, finish_reason=None):
    return {
        "id": "chatcmpl-msg_01",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "claude-sonnet-4-5-20250929",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _run(translator, events):
    chunks = []
    for event, data in events:
        chunks.extend(translator.translate(event, data))
    return chunks


def test_realistic_stream_becomes_openai_chunks(dialect):
    translator = dialect.stream_translator(created=CREATED)

    chunks = _run(translator, REALISTIC_STREAM)

    tool_start = {
        "index": 0,
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert chunks == [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Let me "}),
        _chunk({"content": "check."}),
        _chunk({"tool_calls": [tool_start]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}),
        _chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Pa'}}]}
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ris"}'}}]}),
        _chunk({}, "tool_calls"),
        {
            "id": "chatcmpl-msg_01",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "claude-sonnet-4-5-20250929",
            "choices": [],
            "usage": {
                "prompt_tokens": 175,
                "completion_tokens": 42,
                "total_tokens": 217,
                "prompt_tokens_details": {"cached_tokens": 100},
                "cache_creation_input_tokens": 50,
            },
        },
    ]
    assert translator.finished is True


def test_stream_is_not_finished_before_message_stop(dialect):
    translator = dialect.stream_translator(created=CREATED)

    _run(translator, REALISTIC_STREAM[:-1])

    assert translator.finished is False


def test_stream_event_type_is_read_from_data_when_event_name_is_missing(dialect):
    translator = dialect.stream_translator(created=CREATED)

    chunks = _run(translator, [(None, data) for _, data in REALISTIC_STREAM])

    assert chunks == _run(dialect.stream_translator(created=CREATED), REALISTIC_STREAM)
    assert translator.finished is True


def test_second_tool_use_block_gets_tool_index_one(dialect):
    translator = dialect.stream_translator(created=CREATED)
    events = [
        ("message_start", MESSAGE_START),
        _block_start(0, {"type": "text", "text": ""}),
        _block_start(1, {"type": "tool_use", "id": "toolu_a", "name": "a"}),
        _block_start(2, {"type": "tool_use", "id": "toolu_b", "name": "b"}),
        _block_delta(2, _json("{}")),
    ]

    chunks = _run(translator, events)

    assert chunks[2]["choices"][0]["delta"]["tool_calls"][0]["index"] == 1
    assert chunks[2]["choices"][0]["delta"]["tool_calls"][0]["id"] == "toolu_b"
    assert chunks[3]["choices"][0]["delta"] == {
        "tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]
    }


def test_thinking_delta_becomes_reasoning_content_and_signature_is_hidden(dialect):
    translator = dialect.stream_translator(created=CREATED)
    events = [
        ("message_start", MESSAGE_START),
        _block_start(0, {"type": "thinking", "thinking": ""}),
        _block_delta(0, {"type": "thinking_delta", "thinking": "Hmm."}),
        _block_delta(0, {"type": "signature_delta", "signature": "EqQB"}),
    ]

    chunks = _run(translator, events)

    assert chunks[1:] == [_chunk({"reasoning_content": "Hmm."})]


def test_message_delta_maps_max_tokens_to_length(dialect):
    translator = dialect.stream_translator(created=CREATED)
    translator.translate("message_start", MESSAGE_START)

    chunks = translator.translate(
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}},
    )

    assert chunks == [_chunk({}, "length")]


@pytest.mark.parametrize("data", [DONE, "not json", None, 3])
def test_done_marker_and_non_objects_yield_nothing(dialect, data):
    translator = dialect.stream_translator(created=CREATED)

    assert translator.translate(None, data) == []
    assert translator.finished is False


@pytest.mark.parametrize("error_type", ["overloaded_error", "rate_limit_error"])
def test_error_event_raises_stream_error_with_its_type(dialect, error_type):
    translator = dialect.stream_translator(created=CREATED)
    translator.translate("message_start", MESSAGE_START)
    data = {"type": "error", "error": {"type": error_type, "message": "Try later"}}

    with pytest.raises(StreamErrorEvent) as caught:
        translator.translate("error", data)

    assert caught.value.error == UpstreamError(message="Try later", type=error_type)


def test_error_event_without_event_name_is_detected_from_data(dialect):
    translator = dialect.stream_translator(created=CREATED)
    data = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }

    with pytest.raises(StreamErrorEvent) as caught:
        translator.translate(None, data)

    assert caught.value.error.type == "overloaded_error"


# --- parse_error ----------------------------------------------------------------


def test_anthropic_error_body_becomes_upstream_error(dialect):
    payload = {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-x"},
    }

    error = dialect.parse_error(payload, json.dumps(payload))

    assert error == UpstreamError(
        message="model: claude-x", code=None, type="not_found_error", param=None
    )


def test_non_json_error_falls_back_to_truncated_text(dialect):
    text = "<html>Bad Gateway</html>" + "x" * 3000

    error = dialect.parse_error(None, text)

    assert error == UpstreamError(message=text[:2000])
    assert len(error.message) == 2000


# --- reasoning_effort -> thinking (spec 09 §2.6) -------------------------------------


@pytest.mark.parametrize(
    ("effort", "max_tokens", "thinking"),
    [
        ("low", 8000, {"type": "enabled", "budget_tokens": 2048}),
        # the answer keeps a quarter of max_tokens (at least 1 024)
        ("medium", 8000, {"type": "enabled", "budget_tokens": 6000}),
        ("high", 20000, {"type": "enabled", "budget_tokens": 15000}),
        ("high", 40000, {"type": "enabled", "budget_tokens": 16384}),
        ("minimal", 1000, None),  # no room for the 1 024-token minimum
        ("minimal", 2047, None),  # 1 023 after the answer's 1 024
        ("none", 8000, None),
        ("bogus", 8000, None),
    ],
)
def test_reasoning_effort_becomes_a_thinking_budget_under_max_tokens(
    effort, max_tokens, thinking
):
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": effort,
        "max_tokens": max_tokens,
        "temperature": 0.2,
        "top_p": 0.5,
    }
    out = build_messages_body(body, model="m", stream=False)
    assert out.get("thinking") == thinking
    if thinking is not None:  # thinking refuses these
        assert "temperature" not in out
        assert "top_p" not in out
    else:
        assert out["temperature"] == 0.2


def test_a_flagged_tool_result_is_an_error_result(build):
    body = build(
        [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "w", "arguments": "{}"},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "toolu_1",
                "content": "Error: offline",
                "is_error": True,
            },
        ]
    )
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "offline",
            "is_error": True,
        }
    ]
