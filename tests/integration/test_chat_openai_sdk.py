"""Chat completions through the gateway with the official ``openai`` SDK."""

from __future__ import annotations

import json

import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration


@pytest.fixture
def sdk(gateway):
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=KEY_ALL, max_retries=0)


def test_non_streaming_completion_is_served_with_the_omniroute_object(sdk, upstream):
    completion = sdk.chat.completions.create(
        model="pa/m1", messages=[{"role": "user", "content": "hello"}]
    )
    assert completion.model == "pa/m1"
    assert completion.choices[0].message.content == "Hello from mock m1."
    omni = completion.model_extra["omniroute"]
    assert omni == {
        "requested_model": "pa/m1",
        "served_model": "pa/m1",
        "provider": "pa",
        "connection": "main",
        "route": "direct",
        "strategy": None,
    }
    sent = upstream.requests()[-1]
    assert sent["model"] == "m1"
    assert sent["headers"]["authorization"] == "Bearer sk-upstream-secret-pa-1234567890"


def test_streaming_completion_yields_tokens_and_the_report_on_the_finish(sdk, upstream):
    stream = sdk.chat.completions.create(
        model="pa/m1", stream=True, messages=[{"role": "user", "content": "hello"}]
    )
    chunks = list(stream)
    # spec 09 §7: a naive client indexes choices[0] on every chunk
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Hello from mock m1."
    assert all(c.model == "pa/m1" for c in chunks)
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["omniroute"]["served_model"] == "pa/m1"
    assert upstream.requests()[-1]["body"]["stream_options"] == {"include_usage": True}


def test_usage_chunk_is_forwarded_only_when_the_client_asked(sdk, upstream):
    plain = list(
        sdk.chat.completions.create(
            model="pa/m1", stream=True, messages=[{"role": "user", "content": "x"}]
        )
    )
    asked = list(
        sdk.chat.completions.create(
            model="pa/m1",
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "x"}],
        )
    )
    assert not any(c.usage for c in plain)
    assert any(c.usage and c.usage.completion_tokens for c in asked)


def test_anthropic_upstream_is_translated_both_ways(sdk, upstream):
    completion = sdk.chat.completions.create(
        model="pc/m3",
        max_tokens=50,
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "Hello from mock m3."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens > 0
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/messages")
    assert sent["body"]["system"] == "be brief"
    assert sent["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]
    assert sent["headers"]["x-api-key"] == "sk-ant-upstream-secret-pc-123456"


def test_anthropic_stream_arrives_as_openai_chunks(sdk, upstream):
    chunks = list(
        sdk.chat.completions.create(
            model="pc/m3", stream=True, messages=[{"role": "user", "content": "hi"}]
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from mock m3."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert "stop" in finishes
    assert chunks[-1].model_extra["omniroute"]["provider"] == "pc"


def test_anthropic_tool_calls_come_back_as_openai_tool_calls(sdk, upstream):
    upstream.add(
        "m3", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    completion = sdk.chat.completions.create(
        model="pc/m3",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                    },
                },
            }
        ],
    )
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"city": "Oslo"}' or (
        call.function.arguments.replace(" ", "") == '{"city":"Oslo"}'
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    sent = upstream.requests()[-1]["body"]
    assert sent["tools"][0]["name"] == "get_weather"
    assert "input_schema" in sent["tools"][0]


def test_models_endpoint_lists_models_combos_and_auto_ids(sdk):
    ids = {m.id for m in sdk.models.list()}
    assert {"pa/m1", "pb/m2", "pc/m3", "team", "auto", "auto/coding"} <= ids


def test_combo_serves_through_its_first_target(sdk, upstream):
    completion = sdk.chat.completions.create(
        model="team", messages=[{"role": "user", "content": "hi"}]
    )
    omni = completion.model_extra["omniroute"]
    assert omni["route"] == "combo:team"
    assert omni["strategy"] == "priority"
    assert omni["served_model"] == "pa/m1"


def test_models_retrieve_returns_one_entry_or_404(sdk):
    assert sdk.models.retrieve("pa/m1").id == "pa/m1"
    with pytest.raises(openai.NotFoundError):
        sdk.models.retrieve("pa/nope")


def test_unknown_v1_path_is_a_json_404(gateway):
    import httpx

    response = httpx.get(f"{gateway.url}/v1/embeddingz")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_trailing_slash_on_the_chat_path_is_served(gateway, upstream):
    import httpx

    from tests.integration.conftest import KEY_ALL

    response = httpx.post(
        f"{gateway.url}/v1/chat/completions/",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": "pa/m1", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 200
    assert response.json()["omniroute"]["served_model"] == "pa/m1"


NO_ARGUMENTS_TOOL = {
    "type": "function",
    "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize(("model", "arguments"), [("pc/m3", {}), ("pa/m1", "")])
def test_a_streamed_tool_call_without_arguments_says_an_empty_object(
    sdk, upstream, model, arguments
):
    """Spec 09 §7, whatever the upstream dialect: Anthropic streams an empty
    ``partial_json``, an OpenAI-compatible server may stream ``""``."""
    upstream.add(
        model.split("/")[1], tool_calls=[{"name": "now", "arguments": arguments}]
    )
    chunks = list(
        sdk.chat.completions.create(
            model=model,
            stream=True,
            messages=[{"role": "user", "content": "time?"}],
            tools=[NO_ARGUMENTS_TOOL],
        )
    )
    sent = "".join(
        call.function.arguments or ""
        for chunk in chunks
        for call in chunk.choices[0].delta.tool_calls or ()
    )
    assert json.loads(sent) == {}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_tool_call_without_arguments_says_an_empty_object(sdk, upstream):
    upstream.add("m1", tool_calls=[{"name": "now", "arguments": ""}])
    completion = sdk.chat.completions.create(
        model="pa/m1",
        messages=[{"role": "user", "content": "time?"}],
        tools=[NO_ARGUMENTS_TOOL],
    )
    assert completion.choices[0].message.tool_calls[0].function.arguments == "{}"


def test_the_stream_helper_parses_a_tool_call_without_arguments(sdk, upstream):
    upstream.add("m3", tool_calls=[{"name": "now", "arguments": {}}])
    with sdk.chat.completions.stream(
        model="pc/m3",
        messages=[{"role": "user", "content": "time?"}],
        tools=[NO_ARGUMENTS_TOOL],
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls[0].function.arguments == "{}"
