"""``wire: responses`` (spec 10 §5, 09 §2.5): an OpenAI-kind provider or model
spoken to over the Responses API, through a real gateway process and the mock's
Responses wire.  Chat and Messages requests translate to it; a Responses request
goes to it by passthrough (encrypted reasoning survives, ``store`` is false, a
``previous_response_id`` conversation arrives rebuilt)."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

WEATHER_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def responses_providers(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pr
    kind: openai
    wire: responses
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pr-1234567890
    models:
      - id: r1
        input_cost: 1.0
        output_cost: 2.0
        cache_read_cost: 0.5
  - slug: pw
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pw-1234567890
    models:
      - id: c1
      - id: ro
        wire: responses
combos:
  - name: resp-first
    strategy: priority
    targets: [{{model: pr/r1}}, {{model: pw/c1}}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(responses_providers):
    return openai.OpenAI(
        base_url=f"{responses_providers.url}/v1", api_key=KEY_ALL, max_retries=0
    )


def _events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines.get("event", ""), json.loads(lines["data"])))
    return events


def test_a_chat_request_is_translated_to_the_responses_api(oai, upstream):
    answer = oai.chat.completions.create(
        model="pr/r1",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        max_tokens=50,
        temperature=0.2,
    )
    assert answer.choices[0].message.content == "Hello from mock r1."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "pr/r1"
    assert answer.usage.completion_tokens > 0
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/responses")
    assert sent["headers"]["authorization"] == "Bearer sk-upstream-secret-pr-1234567890"
    body = sent["body"]
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"type": "message", "role": "user", "content": "hello"}]
    assert body["max_output_tokens"] == 50
    assert body["temperature"] == 0.2
    assert body["store"] is False
    assert "messages" not in body


def test_a_streamed_chat_reads_with_the_sdk(oai, upstream):
    stream = oai.chat.completions.create(
        model="pr/r1", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = ""
    finish = None
    for chunk in stream:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    assert text == "Hello from mock r1."
    assert finish == "stop"
    assert upstream.requests()[-1]["body"]["stream"] is True


def test_tool_calls_round_trip_in_both_directions(oai, upstream):
    upstream.add(
        "r1", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    answer = oai.chat.completions.create(
        model="pr/r1",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER_CHAT],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    call = answer.choices[0].message.tool_calls[0]
    assert answer.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    sent = upstream.requests()[-1]["body"]
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather of a city",
            "parameters": WEATHER_CHAT["function"]["parameters"],
            "strict": False,
        }
    ]
    assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}
    upstream.reset()
    oai.chat.completions.create(
        model="pr/r1",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER_CHAT],
    )
    assert upstream.requests()[-1]["body"]["input"][1:] == [
        {
            "type": "function_call",
            "call_id": call.id,
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {"type": "function_call_output", "call_id": call.id, "output": "sunny"},
    ]


def test_a_streamed_tool_call_parses_with_the_sdk_stream_helper(oai, upstream):
    upstream.add(
        "r1", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with oai.chat.completions.stream(
        model="pr/r1",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER_CHAT],
    ) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert final.choices[0].finish_reason == "tool_calls"


def test_a_responses_request_goes_through_unchanged(oai, upstream, responses_providers):
    raw = oai.responses.with_raw_response.create(
        model="pr/r1",
        input="hello",
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        text={"verbosity": "low"},
        store=False,
    )
    response = raw.parse()
    assert response.output_text == "Hello from mock r1."
    assert response.model == "pr/r1"
    reasoning = [item for item in response.output if item.type == "reasoning"]
    assert reasoning[0].encrypted_content.startswith("enc-mock-")
    assert "x-omniroute-dropped" not in raw.http_response.headers
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/responses")
    assert sent["body"] == {
        "model": "r1",
        "input": "hello",
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "text": {"verbosity": "low"},
        "store": False,
    }
    body = json.loads(raw.http_response.text)
    assert body["omniroute"]["served_model"] == "pr/r1"
    row = responses_providers.requests_log()[-1]
    assert row["endpoint"] == "responses"
    attempt = responses_providers.attempts_log(row["id"])[-1]
    assert attempt["passthrough"] == 1


def test_a_streamed_passthrough_relays_the_upstream_events(
    responses_providers, upstream
):
    response = httpx.post(
        f"{responses_providers.url}/v1/responses",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": "pr/r1", "input": "hi", "stream": True, "store": False},
        timeout=30,
    )
    events = _events(response.text)
    names = [name for name, _ in events]
    assert names[0] == "response.created"
    assert names[-1] == "response.completed"
    numbers = [data["sequence_number"] for _, data in events]
    assert numbers == sorted(numbers)
    deltas = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert "".join(deltas) == "Hello from mock r1."
    final = events[-1][1]["response"]
    assert final["model"] == "pr/r1"
    assert final["omniroute"]["served_model"] == "pr/r1"


def test_a_conversation_reaches_the_responses_upstream_rebuilt(oai, upstream):
    first = oai.responses.create(model="pr/r1", input="one")
    oai.responses.create(model="pr/r1", input="two", previous_response_id=first.id)
    sent = upstream.requests()[-1]["body"]
    assert "previous_response_id" not in sent
    assert sent["store"] is False
    texts = json.dumps(sent["input"])
    assert "one" in texts
    assert "Hello from mock r1." in texts
    assert "two" in texts


def test_a_messages_request_is_translated_to_the_responses_api(
    responses_providers, upstream
):
    client = anthropic.Anthropic(
        base_url=responses_providers.url, api_key=KEY_ALL, max_retries=0
    )
    message = client.messages.create(
        model="pr/r1",
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].text == "Hello from mock r1."
    assert message.stop_reason == "end_turn"
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("/responses")
    assert sent["body"]["instructions"] == "Be brief."
    assert sent["body"]["max_output_tokens"] == 64


def test_a_model_may_override_its_providers_wire(oai, upstream):
    oai.chat.completions.create(
        model="pw/ro", messages=[{"role": "user", "content": "hi"}]
    )
    oai.chat.completions.create(
        model="pw/c1", messages=[{"role": "user", "content": "hi"}]
    )
    paths = [r["path"] for r in upstream.requests()]
    assert paths[0].endswith("/responses")
    assert paths[1].endswith("/chat/completions")


def test_a_failed_responses_upstream_fails_over_to_a_chat_one(oai, upstream):
    upstream.add("r1", status=500, times=1)
    answer = oai.responses.create(model="resp-first", input="hi")
    assert answer.model == "pw/c1"
    assert answer.output_text == "Hello from mock c1."
    paths = [r["path"] for r in upstream.requests()]
    assert paths[0].endswith("/responses")
    assert paths[1].endswith("/chat/completions")


def test_an_error_event_before_commit_fails_over(oai, upstream):
    upstream.add(
        "r1",
        stream_error={"type": "server_error", "code": "server_error", "message": "x"},
    )
    stream = oai.chat.completions.create(
        model="resp-first", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from mock c1."


def test_usage_reaches_the_bill_with_cached_and_reasoning_tokens(
    responses_providers, upstream
):
    upstream.add(
        "r1",
        body={
            "id": "resp_x",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "r1",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                }
            ],
            "usage": {
                "input_tokens": 1000,
                "input_tokens_details": {"cached_tokens": 600},
                "output_tokens": 100,
                "output_tokens_details": {"reasoning_tokens": 40},
                "total_tokens": 1100,
            },
        },
    )
    answer = httpx.post(
        f"{responses_providers.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": "pr/r1", "messages": [{"role": "user", "content": "x"}]},
        timeout=30,
    ).json()
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 600
    assert answer["usage"]["completion_tokens_details"]["reasoning_tokens"] == 40
    # 400 fresh at 1.0, 600 cached at 0.5, 100 out (reasoning included) at 2.0
    row = responses_providers.requests_log()[-1]
    assert float(row["cost_usd"]) == pytest.approx(
        (400 * 1.0 + 600 * 0.5 + 100 * 2.0) / 1e6
    )


def test_the_wire_setting_is_validated_per_kind(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: pbad
    kind: anthropic
    wire: responses
    base_url: {mock.url}
""")
    assert result.returncode != 0
    assert "wire" in result.stderr + result.stdout
