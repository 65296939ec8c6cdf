"""The Responses wire (spec 09 §3) through a real gateway process, driven by the
official openai SDK: answers, streams, tools (function and custom), stored responses
and ``previous_response_id`` across providers, errors and failover, translated to an
OpenAI-kind (Chat Completions) upstream and to an Anthropic-kind one."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL, KEY_DISABLED, KEY_PA_ONLY

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def oai(gateway):
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=KEY_ALL, max_retries=0)


def _events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines.get("event", ""), json.loads(lines["data"])))
    return events


def _post(gateway, body: dict, key: str = KEY_ALL, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/responses",
        headers={"Authorization": f"Bearer {key}", **headers},
        json=body,
        timeout=30,
    )


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_response_is_answered_with_the_report(oai, upstream, model):
    raw = oai.responses.with_raw_response.create(
        model=model, input="hello", instructions="Be brief.", store=False
    )
    response = raw.parse()
    assert response.object == "response"
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.model == model
    assert response.output_text == f"Hello from mock {model[3:]}."
    assert response.instructions == "Be brief."
    assert response.usage.output_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.input_tokens + response.usage.output_tokens
    )
    body = json.loads(raw.http_response.text)
    assert body["omniroute"]["served_model"] == model
    assert raw.http_response.headers["x-omniroute-served-model"] == model
    sent = upstream.requests()[-1]
    if model == "pa/m1":
        assert sent["path"].endswith("/chat/completions")
        assert sent["body"]["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ]
    else:
        assert sent["path"].endswith("/messages")
        assert sent["body"]["system"] == "Be brief."


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_streamed_response_reads_with_the_sdk_stream_helper(oai, upstream, model):
    with oai.responses.stream(model=model, input="hi", store=False) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == f"Hello from mock {model[3:]}."
    assert final.output_text == "".join(deltas)
    assert final.status == "completed"
    assert final.model == model
    assert final.usage.output_tokens > 0


def test_a_stream_has_the_event_sequence_numbers_and_the_report(gateway, upstream):
    response = _post(gateway, {"model": "pa/m1", "input": "hi", "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "[DONE]" not in response.text
    events = _events(response.text)
    names = [name for name, _ in events]
    assert names[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert all(data["type"] == name for name, data in events)
    final = events[-1][1]["response"]
    assert final["omniroute"]["served_model"] == "pa/m1"
    assert final["usage"]["output_tokens"] > 0
    assert final["output"][0]["content"][0]["text"] == "Hello from mock m1."


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_function_tool_round_trip(oai, upstream, model, stream):
    calls = [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    upstream.add(model[3:], tool_calls=calls, times=1)
    if stream:
        with oai.responses.stream(
            model=model, input="weather in Paris?", tools=[WEATHER], store=False
        ) as s:
            for _ in s:
                pass
            first = s.get_final_response()
    else:
        first = oai.responses.create(
            model=model, input="weather in Paris?", tools=[WEATHER], store=False
        )
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    second = oai.responses.create(
        model=model,
        tools=[WEATHER],
        store=False,
        input=[
            {"role": "user", "content": "weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": "sunny",
            },
        ],
    )
    assert second.output_text == f"Hello from mock {model[3:]}."
    sent = upstream.requests()[-1]["body"]
    if model == "pa/m1":
        assert sent["tools"][0]["function"]["name"] == "get_weather"
        assert sent["messages"][1]["tool_calls"][0]["id"] == call.call_id
        assert sent["messages"][2] == {
            "role": "tool",
            "tool_call_id": call.call_id,
            "content": "sunny",
        }
    else:
        assert sent["messages"][1]["content"][0]["type"] == "tool_use"
        assert sent["messages"][2]["content"][0]["type"] == "tool_result"


@pytest.mark.parametrize("stream", [False, True])
def test_a_custom_tool_call_comes_back_as_a_custom_tool_call(gateway, upstream, stream):
    patch = "*** Begin Patch\n*** End Patch"
    upstream.add(
        "m1",
        tool_calls=[{"name": "apply_patch", "arguments": json.dumps({"input": patch})}],
        times=1,
    )
    tool = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Apply a patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    }
    response = _post(
        gateway,
        {"model": "pa/m1", "input": "patch it", "tools": [tool], "stream": stream},
    )
    assert response.status_code == 200
    if stream:
        events = _events(response.text)
        final = events[-1][1]["response"]
        names = [name for name, _ in events]
        assert "response.custom_tool_call_input.done" in names
    else:
        final = response.json()
    [item] = [i for i in final["output"] if i["type"] == "custom_tool_call"]
    assert item["name"] == "apply_patch"
    assert item["input"] == patch
    sent = upstream.requests()[-1]["body"]
    function = sent["tools"][0]["function"]
    assert function["name"] == "apply_patch"
    assert function["parameters"]["required"] == ["input"]
    assert "start: /.+/" in function["description"]


def test_what_translation_cannot_carry_is_named_and_logged(gateway, upstream):
    response = _post(
        gateway,
        {
            "model": "pa/m1",
            "input": "hi",
            "tools": [WEATHER, {"type": "web_search"}],
            "text": {"verbosity": "low"},
            "future_field": 1,
        },
    )
    assert response.status_code == 200
    assert (
        response.headers["x-omniroute-dropped"]
        == "tools[1],text.verbosity,future_field"
    )
    sent = upstream.requests()[-1]["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert "future_field" not in sent
    row = gateway.requests_log()[-1]
    assert row["endpoint"] == "responses"
    (attempt,) = gateway.attempts_log(row["id"])
    assert not attempt["passthrough"]
    assert json.loads(attempt["dropped"]) == [
        "tools[1]",
        "text.verbosity",
        "future_field",
    ]


def test_previous_response_id_carries_the_conversation_across_providers(
    gateway, oai, upstream
):
    """Spec 09 §8 example 5."""
    first = oai.responses.create(model="pa/m1", input="hi", instructions="Be brief.")
    second = oai.responses.create(
        model="pc/m3", input="again", previous_response_id=first.id
    )
    assert second.previous_response_id == first.id
    assert second.output_text == "Hello from mock m3."
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/messages")
    assert "system" not in sent["body"]  # instructions are not inherited
    assert [m["role"] for m in sent["body"]["messages"]] == [
        "user",
        "assistant",
        "user",
    ]
    assert sent["body"]["messages"][1]["content"][0]["text"] == "Hello from mock m1."
    third = oai.responses.create(
        model="pa/m1", input="once more", previous_response_id=second.id
    )
    assert len(upstream.requests()[-1]["body"]["messages"]) == 5
    # the chain's first response names the session of every turn
    rows = gateway.requests_log()[-3:]
    assert rows[1]["session_id"] == rows[2]["session_id"] == first.id
    assert rows[2]["session_source"] == "body:previous_response_id"
    assert oai.responses.retrieve(third.id).output_text == "Hello from mock m1."
    other = openai.OpenAI(
        base_url=f"{gateway.url}/v1", api_key=KEY_PA_ONLY, max_retries=0
    )
    with pytest.raises(openai.NotFoundError) as caught:
        other.responses.retrieve(first.id)
    assert caught.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError) as caught:
        other.responses.create(model="pa/m1", input="x", previous_response_id=first.id)
    assert caught.value.body["param"] == "previous_response_id"


def test_stored_responses_are_read_listed_and_deleted(oai, upstream):
    first = oai.responses.create(
        model="pa/m1",
        input=[
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
        ],
    )
    got = oai.responses.retrieve(first.id)
    assert got.id == first.id
    assert got.output_text == first.output_text
    items = oai.responses.input_items.list(first.id)
    assert [item.content[0].text for item in items.data] == ["two", "one"]
    ascending = oai.responses.input_items.list(first.id, order="asc", limit=1)
    assert [item.content[0].text for item in ascending.data] == ["one"]
    assert ascending.has_more
    after = oai.responses.input_items.list(
        first.id, order="asc", after=ascending.data[0].id
    )
    assert [item.content[0].text for item in after.data] == ["two"]
    oai.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.delete(first.id)


def test_a_streamed_response_is_stored_before_its_final_event(oai, upstream):
    with oai.responses.stream(model="pa/m1", input="hi") as stream:
        for event in stream:
            if event.type == "response.completed":
                # the client has the final event: any worker can read it now
                assert oai.responses.retrieve(event.response.id).status == "completed"
        final = stream.get_final_response()
    follow = oai.responses.create(
        model="pa/m1", input="more", previous_response_id=final.id
    )
    assert follow.status == "completed"


def test_store_false_stores_nothing(oai, upstream):
    response = oai.responses.create(model="pa/m1", input="hi", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(response.id)


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        ({"model": "pa/m1"}, 400, "missing_parameter", "input"),
        ({"model": "pa/m1", "input": 3}, 400, "invalid_type", "input"),
        (
            {"model": "pa/m1", "input": "x", "background": True},
            400,
            "unsupported_parameter",
            "background",
        ),
        (
            {"model": "pa/m1", "input": "x", "conversation": "conv_1"},
            400,
            "unsupported_parameter",
            "conversation",
        ),
        (
            {"model": "pa/m1", "input": "x", "max_output_tokens": 0},
            400,
            "invalid_value",
            "max_output_tokens",
        ),
        (
            {"model": "pa/m1", "input": [{"role": "robot", "content": "x"}]},
            400,
            "invalid_value",
            "input[0].role",
        ),
        (
            {"model": "pa/m1", "input": "x", "previous_response_id": "resp_nope"},
            404,
            "response_not_found",
            "previous_response_id",
        ),
        ({"model": "pa/nope", "input": "x"}, 404, "model_not_found", "model"),
    ],
)
def test_bad_requests_name_the_field(gateway, upstream, body, status, code, param):
    response = _post(gateway, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)
    assert upstream.requests() == []


def test_a_disabled_key_is_an_authentication_error(gateway):
    client = openai.OpenAI(
        base_url=f"{gateway.url}/v1", api_key=KEY_DISABLED, max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as caught:
        client.responses.create(model="pa/m1", input="hi")
    assert caught.value.body["code"] == "key_disabled"


def test_a_length_stop_is_incomplete(oai, upstream):
    upstream.add(
        "m1",
        body={
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": 1,
            "model": "m1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "cut"},
                    "finish_reason": "length",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        times=1,
    )
    response = oai.responses.create(
        model="pa/m1", input="hi", max_output_tokens=1, store=False
    )
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert upstream.requests()[-1]["body"]["max_tokens"] == 1


def test_a_stream_fails_over_before_its_first_content_event(gateway, upstream):
    """Spec 09 §2.7: the client sees one clean stream."""
    upstream.add("m1", reset="before_headers", times=1)
    response = _post(
        gateway,
        {"models": ["pa/m1", "pb/m2"], "input": "hi", "stream": True, "store": False},
    )
    events = _events(response.text)
    names = [name for name, _ in events]
    assert names.count("response.created") == 1
    assert names[-1] == "response.completed"
    final = events[-1][1]["response"]
    assert final["model"] == "pb/m2"
    attempts = final["omniroute"]["failover"]["attempts"]
    assert [a["model"] for a in attempts] == ["pa/m1", "pb/m2"]


def test_a_stream_broken_after_commit_ends_with_response_failed(gateway, upstream):
    upstream.add("m1", drop_after_tokens=2, times=1)
    response = _post(
        gateway, {"model": "pa/m1", "input": "hi", "stream": True, "store": False}
    )
    events = _events(response.text)
    name, data = events[-1]
    assert name == "response.failed"
    assert data["response"]["status"] == "failed"
    assert data["response"]["error"]["code"] == "stream_interrupted"
    assert data["response"]["omniroute"]["served_model"] == "pa/m1"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
