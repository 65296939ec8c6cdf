"""The Messages wire (spec 09 §4) through a real gateway process, driven by the
official anthropic SDK: answers, streams, tools, errors and failover, translated to an
OpenAI-kind upstream and to an Anthropic-kind one."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from tests.integration.conftest import KEY_ALL, KEY_DISABLED, KEY_PA_ONLY

WEATHER = {
    "name": "get_weather",
    "description": "The weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def claude(gateway):
    return anthropic.Anthropic(base_url=gateway.url, api_key=KEY_ALL, max_retries=0)


def _sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines.get("event", ""), json.loads(lines["data"])))
    return events


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_message_is_answered_with_the_report(claude, upstream, model):
    raw = claude.messages.with_raw_response.create(
        model=model,
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello"}],
    )
    message = raw.parse()
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.model == model
    assert message.content[0].text == f"Hello from mock {model[3:]}."
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    body = json.loads(raw.http_response.text)
    assert body["omniroute"]["served_model"] == model
    assert raw.http_response.headers["x-omniroute-served-model"] == model
    sent = upstream.requests()[-1]
    if model == "pa/m1":  # translated to Chat Completions
        assert sent["path"].endswith("/chat/completions")
        assert sent["body"]["messages"][0] == {
            "role": "system",
            "content": "Be brief.",
        }
        assert sent["body"]["max_tokens"] == 64
    else:
        assert sent["path"].endswith("/messages")
        assert sent["body"]["system"] == "Be brief."


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_streamed_message_reads_with_the_sdk_stream_helper(claude, upstream, model):
    with claude.messages.stream(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == f"Hello from mock {model[3:]}."
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.model == model


def test_a_stream_has_the_event_sequence_and_the_report_on_message_delta(
    gateway, upstream
):
    response = httpx.post(
        f"{gateway.url}/v1/messages?beta=true",
        headers={"x-api-key": KEY_ALL, "anthropic-version": "2023-06-01"},
        json={
            "model": "pa/m1",
            "max_tokens": 32,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[1] == "content_block_start"
    assert set(names[2:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert names.count("message_start") == 1
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 0
    assert delta["omniroute"]["served_model"] == "pa/m1"


@pytest.mark.parametrize("model", ["pa/m1", "pc/m3"])
def test_a_tool_round_trip(claude, upstream, model):
    calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    upstream.add(model[3:], tool_calls=calls, times=1)
    first = claude.messages.create(
        model=model,
        max_tokens=64,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "weather in Oslo?"}],
    )
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.name, use.input) == ("get_weather", {"city": "Oslo"})
    second = claude.messages.create(
        model=model,
        max_tokens=64,
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "weather in Oslo?"},
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"},
                ],
            },
        ],
    )
    assert second.stop_reason == "end_turn"
    sent = upstream.requests()[-1]["body"]
    if model == "pa/m1":
        assert sent["tools"][0]["function"]["name"] == "get_weather"
        assert sent["messages"][1]["tool_calls"][0]["id"] == use.id
        assert sent["messages"][2] == {
            "role": "tool",
            "tool_call_id": use.id,
            "content": "sunny",
        }
    else:
        assert sent["messages"][2]["content"][0]["type"] == "tool_result"


def test_a_streamed_tool_call_without_arguments_gets_an_empty_object(claude, upstream):
    upstream.add("m1", tool_calls=[{"name": "now", "arguments": ""}])
    tool = {"name": "now", "input_schema": {"type": "object", "properties": {}}}
    with claude.messages.stream(
        model="pa/m1",
        max_tokens=32,
        tools=[tool],
        messages=[{"role": "user", "content": "time?"}],
    ) as stream:
        final = stream.get_final_message()
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert use.input == {}
    assert final.stop_reason == "tool_use"


def test_a_disabled_key_is_an_authentication_error_with_the_gateway_code(gateway):
    claude = anthropic.Anthropic(
        base_url=gateway.url, api_key=KEY_DISABLED, max_retries=0
    )
    with pytest.raises(anthropic.AuthenticationError) as caught:
        claude.messages.create(
            model="pa/m1", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    error = caught.value.body["error"]
    assert (error["type"], error["code"]) == ("authentication_error", "key_disabled")


def test_max_tokens_is_required(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={"x-api-key": KEY_ALL},
        json={"model": "pa/m1", "messages": [{"role": "user", "content": "x"}]},
        timeout=30,
    )
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    error = body["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "missing_parameter",
        "max_tokens",
    )


def test_an_unknown_model_is_not_found_in_the_anthropic_envelope(claude, upstream):
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(
            model="nope/none", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body["error"]["type"] == "not_found_error"
    assert caught.value.body["error"]["code"] == "model_not_found"


def test_every_attempt_failing_answers_with_the_attempts(claude, upstream):
    upstream.add("m1", status=500)
    with pytest.raises(anthropic.InternalServerError) as caught:
        claude.messages.create(
            model="pa/m1", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    error = caught.value.body["error"]
    assert (error["type"], error["code"]) == ("api_error", "all_models_failed")
    assert error["attempts"][0]["model"] == "pa/m1"


def test_a_stream_fails_over_before_its_first_content(claude, upstream):
    """Spec 09 §8 example 4: one clean stream, both attempts in the report."""
    upstream.add("m1", status=500)
    with claude.messages.stream(
        model="pa/m1",
        max_tokens=32,
        messages=[{"role": "user", "content": "hi"}],
        extra_body={"models": ["pa/m1", "pb/m2"]},
    ) as stream:
        events = list(stream)
    starts = [e for e in events if e.type == "message_start"]
    assert len(starts) == 1
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "Hello from mock m2."


def test_what_translation_cannot_carry_is_named(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={"x-api-key": KEY_ALL},
        json={
            "model": "pa/m1",
            "max_tokens": 32,
            "top_k": 5,
            "tools": [WEATHER, {"type": "web_search_20250305", "name": "web_search"}],
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["x-omniroute-dropped"] == "tools[1],top_k"
    sent = upstream.requests()[-1]["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert "top_k" not in sent
    row = gateway.requests_log()[-1]
    assert row["endpoint"] == "messages"
    (attempt,) = gateway.attempts_log(row["id"])
    assert not attempt["passthrough"]
    assert json.loads(attempt["dropped"]) == ["tools[1]", "top_k"]


def test_claude_codes_session_id_is_the_session(gateway, upstream):
    user_id = json.dumps({"session_id": "s-0123456789abcdef", "device_id": "d"})
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={"x-api-key": KEY_ALL},
        json={
            "model": "pa/m1",
            "max_tokens": 32,
            "metadata": {"user_id": user_id},
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    assert response.status_code == 200
    row = gateway.requests_log()[-1]
    assert row["session_source"] == "body:metadata.user_id"
    assert row["endpoint"] == "messages"


def test_the_models_list_in_the_anthropic_shape(claude, upstream):
    models = claude.models.list()
    ids = [m.id for m in models.data]
    assert {"pa/m1", "pc/m3", "team", "auto"} <= set(ids)
    assert all(m.type == "model" for m in models.data)
    assert claude.models.retrieve("pa/m1").id == "pa/m1"


def test_count_tokens_estimates_locally_for_a_model_the_key_may_use(
    claude, gateway, upstream
):
    counted = claude.messages.with_raw_response.count_tokens(
        model="pa/m1", messages=[{"role": "user", "content": "hello " * 100}]
    )
    assert counted.parse().input_tokens > 100
    assert counted.http_response.headers["x-omniroute-token-count"] == "estimated"
    assert upstream.requests() == []  # nothing was called
    narrow = anthropic.Anthropic(
        base_url=gateway.url, api_key=KEY_PA_ONLY, max_retries=0
    )
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        narrow.messages.count_tokens(
            model="pb/m2", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body["error"]["code"] == "model_not_allowed"


def test_an_anthropic_upstream_gets_the_clients_own_body_and_betas(gateway, upstream):
    """Spec 09 §2.5 and §8 example 2: a passthrough carries what translation cannot."""
    body = {
        "model": "pc/m3",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "top_k": 5,
        "system": [
            {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": "hi"}],
        "models": ["pc/m3", "pa/m1"],
    }
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={
            "x-api-key": KEY_ALL,
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "interleaved-thinking-2025-05-14",
        },
        json=body,
        timeout=30,
    )
    assert response.status_code == 200
    assert "x-omniroute-dropped" not in response.headers
    sent = upstream.requests()[-1]
    assert sent["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    expected = {k: v for k, v in body.items() if k != "models"}
    assert sent["body"] == {**expected, "model": "m3"}
    answer = response.json()
    assert answer["id"].startswith("msg_mock_")  # the upstream's own message
    assert answer["model"] == "pc/m3"
    assert answer["omniroute"]["served_model"] == "pc/m3"
    row = gateway.requests_log()[-1]
    (attempt,) = gateway.attempts_log(row["id"])
    assert attempt["passthrough"]
    assert json.loads(attempt["dropped"]) == []


def test_a_passthrough_stream_relays_the_upstreams_events(gateway, upstream):
    response = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={"x-api-key": KEY_ALL},
        json={
            "model": "pc/m3",
            "max_tokens": 32,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=30,
    )
    events = _sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_mock_")
    assert start["model"] == "pc/m3"
    assert events[-2][1]["omniroute"]["served_model"] == "pc/m3"
    text = "".join(
        data["delta"]["text"] for name, data in events if name == "content_block_delta"
    )
    assert text == "Hello from mock m3."
    assert upstream.requests()[-1]["body"]["stream"] is True


def test_a_passthrough_that_fails_over_to_an_openai_upstream_translates(
    claude, upstream
):
    upstream.add("m3", status=500)
    message = claude.messages.create(
        model="pc/m3",
        max_tokens=32,
        messages=[{"role": "user", "content": "hi"}],
        extra_body={"models": ["pc/m3", "pa/m1"]},
    )
    assert message.model == "pa/m1"
    assert message.content[0].text == "Hello from mock m1."
    paths = [r["path"] for r in upstream.requests()]
    assert paths[0].endswith("/messages")
    assert paths[1].endswith("/chat/completions")
