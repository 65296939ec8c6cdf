"""``kind: gemini`` (spec 10 §1, §6 example 1) through a real gateway process and the
mock's Gemini wire: chat and streams (text and tool calls) with the openai SDK, the
Messages and Responses surfaces translated to it, embeddings, usage and cost, and
each failure class (a ``RESOURCE_EXHAUSTED`` cools the connection like a 429)."""

from __future__ import annotations

import base64
import json
import re
import struct
import time
from datetime import datetime

import anthropic
import httpx
import openai
import pytest

from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

GEMINI_KEY = "gm-upstream-secret-key-1234567890"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(scope="module")
def gemini(gateway, mock):
    result = gateway.apply(f"""
providers:
  - slug: gm
    kind: gemini
    base_url: {mock.url}
    connections:
      - name: main
        api_key: {GEMINI_KEY}
    models:
      - id: g1
        input_cost: 1.0
        output_cost: 2.0
        cache_read_cost: 0.25
      - id: gthink
        capabilities: [reasoning, tools]
      - id: gemini-2.5-flash
        capabilities: [reasoning, tools]
      - id: gemini-2.5-pro
        capabilities: [reasoning, tools]
      - id: gemb
        input_cost: 0.1
        capabilities: [embeddings]
  - slug: gmb
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-gmb-1234567890
    models:
      - id: gfb
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(gemini):
    return openai.OpenAI(base_url=f"{gemini.url}/v1", api_key=KEY_ALL, max_retries=0)


def _health(gateway, slug: str) -> dict:
    rows = httpx.get(
        f"{gateway.url}/api/connections",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=10,
    ).json()
    return next(r for r in rows if r["provider"] == slug)["health"]


def _chat(gateway, **body) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"messages": [{"role": "user", "content": "hi"}], **body},
        timeout=30,
    )


# --- chat -----------------------------------------------------------------------------


def test_a_chat_request_is_translated_to_generate_content(oai, upstream):
    answer = oai.chat.completions.create(
        model="gm/g1",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        max_tokens=50,
        temperature=0.2,
        stop=["END"],
    )
    assert answer.choices[0].message.content == "Hello from mock g1."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "gm/g1"
    assert answer.usage.completion_tokens > 0
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/g1:generateContent"
    assert sent["model"] == "g1"
    assert sent["headers"]["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in sent["headers"]
    assert sent["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "maxOutputTokens": 50,
            "temperature": 0.2,
            "stopSequences": ["END"],
        },
    }


def test_sampling_fields_go_to_generation_config_and_logprobs_are_named(
    gemini, upstream
):
    """Spec 09 §2.6: Gemini takes the seed and the penalties; the logprobs would
    not come back in the chat shape, so they are left out and named."""
    answer = _chat(
        gemini,
        model="gm/g1",
        seed=42,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        logprobs=True,
        top_logprobs=3,
        logit_bias={"50256": -100},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-omniroute-dropped"] == "logprobs,top_logprobs,logit_bias"
    config = upstream.requests()[-1]["body"]["generationConfig"]
    assert config == {"seed": 42, "presencePenalty": 0.5, "frequencyPenalty": 0.25}
    calls = len(upstream.requests())
    refused = httpx.post(
        f"{gemini.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json={
            "model": "gm/g1",
            "messages": [{"role": "user", "content": "hi"}],
            "seed": 42,
            "logprobs": True,
        },
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "unsupported_parameter"
    assert refused.json()["error"]["param"] == "logprobs"
    assert len(upstream.requests()) == calls
    carried = _chat(gemini, model="gm/g1", seed=7, logprobs=False, n=1)
    assert carried.status_code == 200
    assert "x-omniroute-dropped" not in carried.headers


def test_a_streamed_chat_reads_with_the_sdk(oai, upstream):
    stream = oai.chat.completions.create(
        model="gm/g1",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        usage = chunk.usage or usage
    assert text == "Hello from mock g1."
    assert finish == "stop"
    assert usage is not None
    assert usage.completion_tokens == 4
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/g1:streamGenerateContent?alt=sse"
    assert sent["stream"] is True
    assert sent["outcome"] == "completed"


def test_a_streamed_tool_call_round_trips_with_the_sdk_stream_helper(oai, upstream):
    upstream.add(
        "g1", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with oai.chat.completions.stream(
        model="gm/g1",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    call = choice.message.tool_calls[0]
    assert choice.finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert re.fullmatch(r"call_mock\d+_0", call.id)  # unique per reply (#14)
    sent = upstream.requests()[-1]["body"]
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "The weather of a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ]
    assert sent["toolConfig"] == {
        "functionCallingConfig": {
            "mode": "ANY",
            "allowedFunctionNames": ["get_weather"],
        }
    }
    upstream.reset()
    answer = oai.chat.completions.create(
        model="gm/g1",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER],
    )
    assert answer.choices[0].message.content == "Hello from mock g1."
    assert upstream.requests()[-1]["body"]["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"result": "sunny"},
                    }
                }
            ],
        },
    ]


def test_thoughts_and_their_signature_survive_a_tool_turn(oai, upstream):
    upstream.add("gthink", tool_calls=[{"name": "get_weather", "arguments": {}}])
    answer = oai.chat.completions.create(
        model="gm/gthink",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
        reasoning_effort="low",
    )
    message = answer.choices[0].message
    assert message.model_extra["reasoning_content"] == "Thinking."
    assert answer.usage.completion_tokens_details.reasoning_tokens == 1
    sent = upstream.requests()[-1]["body"]
    assert sent["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 1024,
        "includeThoughts": True,
    }
    call = message.tool_calls[0]
    assert re.match(r"call_mock\d+_0_ts_", call.id)
    oai.chat.completions.create(
        model="gm/gthink",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "rain"},
        ],
        tools=[WEATHER],
    )
    part = upstream.requests()[-1]["body"]["contents"][1]["parts"][0]
    assert base64.b64decode(part["thoughtSignature"]).startswith(b"sig-mock-")


def test_a_url_safe_signature_goes_back_as_it_came(gemini, upstream):
    """A signature in the URL-safe alphabet (``-``, ``_``: what some SDKs and
    proxies in front of Gemini write) rides in the ``tool_use`` id a Messages
    client sends back, and returns to Gemini unchanged."""
    signature = base64.urlsafe_b64encode(b"\xfb\xff\xbf sig" * 40).decode()
    assert "-" in signature
    assert "_" in signature
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
    upstream.add(
        "g1",
        body={
            "responseId": "rsafe1",
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{**call, "thoughtSignature": signature}],
                    },
                    "finishReason": "STOP",
                }
            ],
        },
    )
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    tools = [{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}]
    ask = [{"role": "user", "content": "weather?"}]
    first = client.messages.create(
        model="gm/g1", max_tokens=64, messages=ask, tools=tools
    )
    block = next(b for b in first.content if b.type == "tool_use")
    assert block.id.startswith("call_rsafe1_0_tu_")
    client.messages.create(
        model="gm/g1",
        max_tokens=64,
        tools=tools,
        messages=[
            *ask,
            {"role": "assistant", "content": [block.model_dump()]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": block.id, "content": "rain"}
                ],
            },
        ],
    )
    sent = upstream.requests()[-1]["body"]["contents"][1]["parts"][0]
    assert sent == {**call, "thoughtSignature": signature}


def test_a_conversation_with_signed_ids_fails_over_to_an_openai_upstream(
    gemini, mock, upstream
):
    """A real Gemini signature makes ids of hundreds of characters; OpenAI (and the
    mock) refuse ids over 40, so the OpenAI dialect sends a short digest, the same
    for the call and its result (#14)."""
    signed = "call_r1_0_ts_" + base64.urlsafe_b64encode(bytes(600)).decode()
    call = {
        "id": signed,
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
    }
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": signed, "content": "rain"},
    ]
    refused = httpx.post(
        f"{mock.url}/chat/completions",
        json={"model": "gfb", "messages": messages},
        timeout=10,
    )
    assert refused.status_code == 400
    assert "string too long" in refused.json()["error"]["message"]
    upstream.reset()
    upstream.add("g1", status=503, times=1)
    answer = _chat(gemini, models=["gm/g1", "gmb/gfb"], messages=messages)
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "gmb/gfb"
    sent = upstream.requests()[-1]["body"]["messages"]
    short = sent[1]["tool_calls"][0]["id"]
    assert len(short) <= 40
    assert sent[2]["tool_call_id"] == short
    gemini_sent = upstream.requests()[0]["body"]["contents"][1]["parts"][0]
    assert base64.b64decode(gemini_sent["thoughtSignature"]) == bytes(600)


def test_usage_reaches_the_bill_with_cached_and_thought_tokens(gemini, upstream):
    upstream.add(
        "g1",
        body={
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "ok"}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1000,
                "cachedContentTokenCount": 600,
                "candidatesTokenCount": 60,
                "thoughtsTokenCount": 40,
                "totalTokenCount": 1100,
            },
        },
    )
    answer = _chat(gemini, model="gm/g1").json()
    assert answer["usage"]["prompt_tokens"] == 1000
    assert answer["usage"]["completion_tokens"] == 100
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 600
    assert answer["usage"]["completion_tokens_details"]["reasoning_tokens"] == 40
    # 400 fresh at 1.0, 600 cached at 0.25, 100 out (thoughts included) at 2.0
    row = gemini.requests_log()[-1]
    assert float(row["cost_usd"]) == pytest.approx(
        (400 * 1.0 + 600 * 0.25 + 100 * 2.0) / 1e6
    )


# --- the other surfaces ---------------------------------------------------------------


def test_a_messages_request_is_translated_to_gemini(gemini, upstream):
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    message = client.messages.create(
        model="gm/g1",
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].text == "Hello from mock g1."
    assert message.stop_reason == "end_turn"
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/g1:generateContent"
    assert sent["body"]["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["body"]["generationConfig"]["maxOutputTokens"] == 64


def test_a_messages_top_k_reaches_gemini_and_its_cache_marker_is_named(
    gemini, upstream
):
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="gm/g1",
        max_tokens=64,
        system=[
            {
                "type": "text",
                "text": "Be brief.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        messages=[{"role": "user", "content": "hello"}],
        extra_body={"top_k": 5},
    )
    assert raw.parse().content[0].text == "Hello from mock g1."
    # Gemini has no prompt-cache marker: only that is left out
    assert raw.headers["x-omniroute-dropped"] == "system[0].cache_control"
    sent = upstream.requests()[-1]["body"]
    assert sent["generationConfig"]["topK"] == 5
    assert "cache_control" not in json.dumps(sent)


def test_a_streamed_messages_tool_call_comes_from_gemini(gemini, upstream):
    upstream.add(
        "g1", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    with client.messages.stream(
        model="gm/g1",
        max_tokens=64,
        messages=[{"role": "user", "content": "weather?"}],
        tools=[
            {
                "name": "get_weather",
                "input_schema": WEATHER["function"]["parameters"],
            }
        ],
    ) as stream:
        final = stream.get_final_message()
    block = next(b for b in final.content if b.type == "tool_use")
    assert (block.name, block.input) == ("get_weather", {"city": "Oslo"})
    assert final.stop_reason == "tool_use"
    assert upstream.requests()[-1]["path"].endswith(":streamGenerateContent?alt=sse")


def test_a_messages_thinking_budget_reaches_gemini_exactly(gemini, upstream):
    """Claude Code's ``budget_tokens`` is Gemini's ``thinkingBudget`` as it is, not
    the budget of an effort level (20000 would be ``high``: 24576)."""
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    message = client.messages.create(
        model="gm/gemini-2.5-flash",
        max_tokens=21000,  # the SDK streams anything longer
        thinking={"type": "enabled", "budget_tokens": 20000},
        messages=[{"role": "user", "content": "hello"}],
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "Thinking."
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent["body"]["generationConfig"] == {
        "maxOutputTokens": 21000,
        "thinkingConfig": {"thinkingBudget": 20000, "includeThoughts": True},
    }


def test_a_streamed_thinking_budget_is_clamped_to_the_model_s_range(gemini, upstream):
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    with client.messages.stream(
        model="gm/gemini-2.5-pro",
        max_tokens=64000,
        thinking={"type": "enabled", "budget_tokens": 50000},
        messages=[{"role": "user", "content": "hello"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "thinking"
    sent = upstream.requests()[-1]
    assert sent["path"].endswith("gemini-2.5-pro:streamGenerateContent?alt=sse")
    # Gemini 2.5 Pro thinks at most 32768 tokens
    assert sent["body"]["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 32768,
        "includeThoughts": True,
    }


def test_messages_thinking_disabled_turns_gemini_flash_thinking_off(gemini, upstream):
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="gm/gemini-2.5-flash",
        max_tokens=64,
        thinking={"type": "disabled"},
        messages=[{"role": "user", "content": "hello"}],
    )
    assert [b.type for b in raw.parse().content] == ["text"]
    assert "x-omniroute-dropped" not in raw.headers
    sent = upstream.requests()[-1]["body"]
    assert sent["generationConfig"] == {
        "maxOutputTokens": 64,
        "thinkingConfig": {"thinkingBudget": 0},
    }


def test_the_exact_budget_stays_out_of_an_openai_attempt(gemini, upstream):
    """Only Gemini's dialects get the canonical ``thinking_budget``; an OpenAI
    upstream would refuse the unknown field."""
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="gmb/gfb",
        max_tokens=2000,
        thinking={"type": "enabled", "budget_tokens": 1500},
        messages=[{"role": "user", "content": "hello"}],
    )
    assert raw.parse().content[0].type == "text"
    # the model's capabilities are unknown: its attempt leaves thinking out, named
    assert raw.headers["x-omniroute-dropped"] == "thinking"
    sent = upstream.requests()[-1]["body"]
    assert "thinking_budget" not in sent
    assert "reasoning_effort" not in sent


def test_count_tokens_asks_gemini_count_tokens(gemini, upstream):
    """Spec 09 §4.5 through a Gemini target: the Messages prompt is translated into
    a ``:countTokens`` request and its ``totalTokens`` is the answer."""
    from providers.mock_upstream.wire_gemini import count_of

    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    counted = client.messages.with_raw_response.count_tokens(
        model="gm/g1",
        system="Be brief.",
        messages=[{"role": "user", "content": "hello " * 50}],
        tools=[
            {
                "name": "get_weather",
                "description": "The weather of a city",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
            }
        ],
    )
    headers = counted.http_response.headers
    assert "x-omniroute-token-count" not in headers  # the upstream counted it
    assert headers["x-omniroute-served-model"] == "gm/g1"
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/g1:countTokens"
    assert sent["headers"]["x-goog-api-key"] == GEMINI_KEY
    inner = sent["body"]["generateContentRequest"]
    assert inner["model"] == "models/g1"
    assert inner["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert inner["contents"][0]["parts"][0]["text"].startswith("hello hello")
    assert inner["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert counted.parse().input_tokens == count_of(sent["body"])
    row = gemini.requests_log()[-1]
    assert (row["endpoint"], row["served_model"], row["cost_usd"]) == (
        "count_tokens",
        "gm/g1",
        None,
    )
    attempt = gemini.attempts_log(row["id"])[-1]
    assert (attempt["passthrough"], attempt["billable"]) == (0, 0)


def test_a_rate_limited_gemini_count_is_estimated_locally(gemini, upstream):
    upstream.add("g1", status=429, times=1)
    client = anthropic.Anthropic(base_url=gemini.url, api_key=KEY_ALL, max_retries=0)
    counted = client.messages.with_raw_response.count_tokens(
        model="gm/g1", messages=[{"role": "user", "content": "hello " * 50}]
    )
    assert counted.parse().input_tokens > 50
    assert counted.http_response.headers["x-omniroute-token-count"] == "estimated"
    assert upstream.requests()[-1]["path"] == "/v1beta/models/g1:countTokens"
    assert _health(gemini, "gm")["cooldown_until"] is None  # a count feeds no health


def test_a_responses_request_is_translated_to_gemini(oai, upstream):
    response = oai.responses.create(
        model="gm/g1", input="hello", instructions="Be brief.", store=False
    )
    assert response.output_text == "Hello from mock g1."
    assert response.status == "completed"
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/g1:generateContent"
    assert sent["body"]["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    with oai.responses.stream(model="gm/g1", input="hi", store=False) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Hello from mock g1."


# --- embeddings -----------------------------------------------------------------------


def test_embeddings_go_to_batch_embed_contents(oai, upstream, gemini):
    answer = oai.embeddings.create(model="gm/gemb", input=["a", "b", "c"])
    assert [item.index for item in answer.data] == [0, 1, 2]
    assert all(len(item.embedding) == 8 for item in answer.data)
    assert answer.data[0].embedding != answer.data[1].embedding
    assert answer.model == "gm/gemb"
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models/gemb:batchEmbedContents"
    assert sent["headers"]["x-goog-api-key"] == GEMINI_KEY
    assert [r["content"] for r in sent["body"]["requests"]] == [
        {"parts": [{"text": "a"}]},
        {"parts": [{"text": "b"}]},
        {"parts": [{"text": "c"}]},
    ]
    assert {r["model"] for r in sent["body"]["requests"]} == {"models/gemb"}
    sized = oai.embeddings.create(
        model="gm/gemb", input="a", dimensions=4, encoding_format="float"
    )
    assert len(sized.data[0].embedding) == 4
    row = gemini.requests_log()[-1]
    assert row["endpoint"] == "embeddings"
    attempt = gemini.attempts_log(row["id"])[-1]
    assert attempt["result"] == "success"


def test_embeddings_honour_base64_and_report_usage(gemini, upstream):
    def embed(fmt: str) -> dict:
        reply = httpx.post(
            f"{gemini.url}/v1/embeddings",
            headers={"Authorization": f"Bearer {KEY_ALL}"},
            json={"model": "gm/gemb", "input": ["a", "b"], "encoding_format": fmt},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        return reply.json()

    floats = embed("float")
    encoded = embed("base64")
    for plain, packed in zip(floats["data"], encoded["data"], strict=True):
        assert isinstance(packed["embedding"], str)
        vector = struct.unpack("<8f", base64.b64decode(packed["embedding"]))
        assert vector == pytest.approx(plain["embedding"], rel=1e-6)
    # Gemini reports no usage: the reply carries the estimate the log holds
    row = gemini.requests_log()[-1]
    assert encoded["usage"] == {
        "prompt_tokens": row["prompt_tokens"],
        "total_tokens": row["prompt_tokens"],
    }
    assert encoded["usage"]["prompt_tokens"] > 0


# --- failures -------------------------------------------------------------------------


def test_resource_exhausted_cools_the_connection(gemini, upstream):
    upstream.add("g1", status=429, times=1)
    first = _chat(gemini, model="gm/g1")
    assert first.status_code == 429
    assert upstream.requests()[-1]["outcome"] == "error"
    assert _health(gemini, "gm")["cooldown_until"] is not None
    again = _chat(gemini, model="gm/g1")
    assert again.status_code == 503
    assert again.json()["error"]["attempts"][0]["reason"] == "cooldown"
    assert len(upstream.requests()) == 1


def test_a_retry_info_delay_sets_the_cooldown_like_retry_after(gemini, upstream):
    """No Retry-After header, the delay in the body's RetryInfo (spec 03 §8.2,
    amended): the cooldown lasts 120 s, not the 30 s default."""
    upstream.add(
        "g1",
        status=429,
        times=1,
        error_body={
            "error": {
                "code": 429,
                "message": "Quota exceeded",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": "120s",
                    }
                ],
            }
        },
    )
    before = time.time()
    assert _chat(gemini, model="gm/g1").status_code == 429
    until = datetime.fromisoformat(_health(gemini, "gm")["cooldown_until"])
    assert before + 110 < until.timestamp() < time.time() + 130


def test_the_mock_answers_a_429_with_resource_exhausted(gemini, mock, upstream):
    upstream.add("g1", status=429, times=1)
    response = httpx.post(
        f"{mock.url}/v1beta/models/g1:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
        timeout=10,
    )
    assert response.status_code == 429
    assert response.json()["error"]["status"] == "RESOURCE_EXHAUSTED"


def test_unavailable_fails_over(gemini, upstream):
    upstream.add("g1", status=503, times=1)
    response = _chat(gemini, models=["gm/g1", "gmb/gfb"])
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "gmb/gfb"
    first = body["omniroute"]["failover"]["attempts"][0]
    assert (first["model"], first["reason"], first["http_status"]) == (
        "gm/g1",
        "server_error",
        503,
    )


def test_an_error_event_before_commit_fails_over(oai, upstream):
    upstream.add(
        "g1",
        stream_error={"code": 503, "message": "overloaded", "status": "UNAVAILABLE"},
    )
    stream = oai.chat.completions.create(
        model="gm/g1",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_body={"fallback_models": ["gmb/gfb"]},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from mock gfb."


def test_a_stream_cut_after_commit_is_interrupted(gemini, upstream):
    upstream.add("g1", drop_after_tokens=2)
    response = httpx.post(
        f"{gemini.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": "gm/g1",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
        },
        timeout=30,
    )
    chunks = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: {")
    ]
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )
    assert text == "Hello from"
    assert "stream_interrupted" in response.text
    row = gemini.requests_log()[-1]
    assert row["status"] == "interrupted"
    # billed from the usageMetadata that came before the cut (spec 02 §11)
    assert row["usage_source"] == "upstream"
    assert row["prompt_tokens"] > 0
    assert row["completion_tokens"] >= 2


def test_a_context_overflow_is_context_length(gemini, upstream):
    upstream.add(
        "g1",
        status=400,
        error_body={
            "error": {
                "code": 400,
                "message": "The input token count (1200000) exceeds the maximum "
                "number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        times=1,
    )
    response = _chat(gemini, models=["gm/g1", "gmb/gfb"], redundancy={"on": []})
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["http_status"]) == ("context_length", 400)


@pytest.mark.parametrize(
    ("status", "reason", "detail"),
    [
        (403, "server_error", "auth_failed"),
        (404, "server_error", "model_not_found"),
        (500, "server_error", None),
    ],
)
def test_other_statuses_are_classified(gemini, upstream, status, reason, detail):
    upstream.add("g1", status=status, times=1)
    response = _chat(gemini, models=["gm/g1", "gmb/gfb"])
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first.get("detail"), first["http_status"]) == (
        reason,
        detail,
        status,
    )


# --- the mock's other Gemini paths ---------------------------------------------------


def test_discovery_lists_the_gemini_models(gemini, upstream):
    upstream.add("gemini-new", content="x")  # the mock lists every scripted model
    answer = httpx.post(
        f"{gemini.url}/api/providers/gm/discover",
        headers={"Authorization": f"Bearer {gemini.admin_token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    ids = [m["id"] for m in answer.json()["models"]]
    assert "gemini-new" in ids
    assert "g1" not in ids
    sent = upstream.requests()[-1]
    assert sent["path"] == "/v1beta/models?pageSize=1000"
    assert sent["headers"]["x-goog-api-key"] == GEMINI_KEY
    assert GEMINI_KEY not in answer.text


def test_the_mock_counts_tokens_and_lists_models(mock, upstream):
    counted = httpx.post(
        f"{mock.url}/v1beta/models/g1:countTokens",
        json={"contents": [{"role": "user", "parts": [{"text": "hello there"}]}]},
        timeout=10,
    )
    assert counted.status_code == 200
    assert counted.json()["totalTokens"] >= 1
    listed = httpx.get(f"{mock.url}/v1beta/models", timeout=10).json()
    assert {"name": "models/mock-small"}.items() <= listed["models"][0].items()
    unknown = httpx.post(f"{mock.url}/v1beta/models/g1:nothing", json={}, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["status"] == "NOT_FOUND"
    wrong = httpx.get(f"{mock.url}/v1beta/models/g1:generateContent", timeout=10)
    assert wrong.status_code == 405
