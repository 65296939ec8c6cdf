"""``kind: bedrock`` (spec 10 §1, §3, §6 example 2) through a real gateway process and
the mock's Bedrock wire, which verifies every SigV4 signature with the secret it
knows: chat and streams (text and tool calls, AWS event-stream framing) with the
openai SDK, the Messages and Responses surfaces translated to Converse, embeddings
through invoke, usage and cost with cache reads and writes, each failure class (a
``ThrottlingException`` cools the connection like a 429; a wrong secret is a 403
that auth-disables it), failover, Test connection and model discovery."""

from __future__ import annotations

import base64
import json
import os
import time

import anthropic
import httpx
import openai
import pytest

from gateway.dialects.bedrock import AwsKey, sign_request
from providers.mock_upstream.wire_bedrock import (
    TEST_ACCESS_KEY_ID,
    TEST_SECRET_ACCESS_KEY,
)
from tests.integration.conftest import KEY_ALL

pytestmark = pytest.mark.integration

#: the gateway process inherits this at start (collection runs before the session
#: gateway starts): the secret is configured as an ``env:`` reference
SECRET_ENV = "BEDROCK_IT_SECRET_ACCESS_KEY"
os.environ.setdefault(SECRET_ENV, TEST_SECRET_ACCESS_KEY)
#: and AWS's default chain finds the mock's key in the environment (the
#: ``use_default_credentials`` connection), never a metadata endpoint
os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY_ID
os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_ACCESS_KEY
os.environ.pop("AWS_SESSION_TOKEN", None)
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

CLAUDE = "anthropic.claude-mock-v1:0"
CLAUDE_PATH = "/model/anthropic.claude-mock-v1%3A0"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _root(mock) -> str:
    """The mock's origin: a Bedrock endpoint has no path."""
    return mock.url.removesuffix("/v1")


@pytest.fixture(scope="module")
def bedrock(gateway, mock):
    root = _root(mock)
    result = gateway.apply(f"""
providers:
  - slug: br
    preset: bedrock
    base_url: {root}
    region: us-east-1
    connections:
      - name: main
        aws_access_key_id: {TEST_ACCESS_KEY_ID}
        aws_secret_access_key: env:{SECRET_ENV}
    models:
      - id: {CLAUDE}
        input_cost: 3.0
        output_cost: 15.0
        cache_read_cost: 0.3
        cache_write_cost: 3.75
      - id: amazon.titan-embed-text-v2:0
        input_cost: 0.02
        capabilities: [embeddings]
      - id: cohere.embed-english-v3
        capabilities: [embeddings]
      - id: cohere.embed-v4:0
        capabilities: [embeddings]
  - slug: brbad
    kind: bedrock
    base_url: {root}
    connections:
      - name: main
        region: us-west-2
        aws_access_key_id: {TEST_ACCESS_KEY_ID}
        aws_secret_access_key: not-the-secret-the-mock-knows
    models:
      - id: bbad
  - slug: brdef
    kind: bedrock
    base_url: {root}
    connections:
      - name: main
        region: eu-west-1
        use_default_credentials: true
    models:
      - id: ddef
  - slug: brfb
    kind: openai
    base_url: {mock.url}
    connections:
      - name: main
        api_key: sk-upstream-secret-brfb-1234567890
    models:
      - id: bfb
""")
    assert result.returncode == 0, result.stderr
    return gateway


@pytest.fixture
def oai(bedrock):
    return openai.OpenAI(base_url=f"{bedrock.url}/v1", api_key=KEY_ALL, max_retries=0)


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


def _refused_under_strict(gateway, upstream, body: dict, param: str) -> None:
    """A chat request with ``X-OmniRoute-Strict: true``: a 400 naming ``param``,
    before any upstream call."""
    calls = len(upstream.requests())
    refused = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json=body,
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "unsupported_parameter"
    assert error["param"] == param
    assert len(upstream.requests()) == calls  # before any call


def _api(gateway, path: str) -> httpx.Response:
    return httpx.post(
        f"{gateway.url}/api/{path}",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=30,
    )


def _assert_signed(sent: dict, region: str = "us-east-1") -> None:
    authorization = sent["headers"]["authorization"]
    assert authorization.startswith(
        f"AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY_ID}/"
    )
    assert f"/{region}/bedrock/aws4_request" in authorization
    assert sent["headers"]["x-amz-date"]
    assert TEST_SECRET_ACCESS_KEY not in json.dumps(sent)


# --- chat -----------------------------------------------------------------------------


def test_a_chat_request_is_translated_to_converse_and_signed(oai, upstream):
    answer = oai.chat.completions.create(
        model=f"br/{CLAUDE}",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        max_tokens=50,
        temperature=0.2,
        stop=["END"],
    )
    assert answer.choices[0].message.content == f"Hello from mock {CLAUDE}."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == f"br/{CLAUDE}"
    assert answer.usage.completion_tokens > 0
    sent = upstream.requests()[-1]
    assert sent["path"] == f"{CLAUDE_PATH}/converse"
    assert sent["outcome"] == "completed"
    _assert_signed(sent)
    assert sent["body"] == {
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {
            "maxTokens": 50,
            "temperature": 0.2,
            "stopSequences": ["END"],
        },
    }


def test_identical_replies_have_their_own_ids(oai, upstream):
    ids = {
        oai.chat.completions.create(
            model=f"br/{CLAUDE}", messages=[{"role": "user", "content": "same"}]
        ).id
        for _ in range(2)
    }
    assert len(ids) == 2
    assert all(i.startswith("chatcmpl-") for i in ids)


_IMAGES = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}},
        ],
    }
]


def test_images_bedrock_cannot_take_are_named_or_refused_under_strict(
    bedrock, upstream
):
    answer = _chat(bedrock, model=f"br/{CLAUDE}", messages=_IMAGES)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-omniroute-dropped"] == (
        "messages[0].content[1],messages[0].content[2]"
    )
    assert upstream.requests()[-1]["body"]["messages"] == [
        {"role": "user", "content": [{"text": "what is this?"}]}
    ]
    _refused_under_strict(
        bedrock,
        upstream,
        {"model": f"br/{CLAUDE}", "messages": _IMAGES},
        "messages[0].content[1]",
    )


def test_a_field_converse_cannot_express_is_named_or_refused_under_strict(
    bedrock, upstream
):
    """Spec 09 §2.6: ``response_format`` has no Converse counterpart."""
    json_mode = {"type": "json_object"}
    answer = _chat(
        bedrock, model=f"br/{CLAUDE}", response_format=json_mode, n=1, logprobs=False
    )
    assert answer.status_code == 200, answer.text
    # n: 1 and logprobs: false ask for nothing: only the JSON mode is named
    assert answer.headers["x-omniroute-dropped"] == "response_format"
    sent = upstream.requests()[-1]["body"]
    assert "json_object" not in json.dumps(sent)
    row = bedrock.requests_log()[-1]
    assert [a["dropped"] for a in bedrock.attempts_log(row["id"])] == [
        '["response_format"]'
    ]
    _refused_under_strict(
        bedrock,
        upstream,
        {
            "model": f"br/{CLAUDE}",
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": json_mode,
        },
        "response_format",
    )
    plain = _chat(bedrock, model=f"br/{CLAUDE}", response_format={"type": "text"})
    assert plain.status_code == 200
    assert "x-omniroute-dropped" not in plain.headers


def test_the_paths_named_are_the_clients_own(bedrock, upstream):
    """A Responses client's JSON mode is ``text.format``; a Messages client's single
    tool call per turn is ``tool_choice.disable_parallel_tool_use``."""
    responses = httpx.post(
        f"{bedrock.url}/v1/responses",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"br/{CLAUDE}",
            "input": "hi",
            "store": False,
            "text": {"format": {"type": "json_object"}},
        },
        timeout=30,
    )
    assert responses.status_code == 200, responses.text
    assert responses.headers["x-omniroute-dropped"] == "text.format"
    refused = httpx.post(
        f"{bedrock.url}/v1/responses",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json={
            "model": f"br/{CLAUDE}",
            "input": "hi",
            "store": False,
            "text": {"format": {"type": "json_object"}},
        },
        timeout=30,
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "text.format"
    messages = httpx.post(
        f"{bedrock.url}/v1/messages",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"br/{CLAUDE}",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [
                {
                    "name": "get_weather",
                    "input_schema": {"type": "object", "properties": {}},
                }
            ],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        },
        timeout=30,
    )
    assert messages.status_code == 200, messages.text
    assert messages.headers["x-omniroute-dropped"] == (
        "tool_choice.disable_parallel_tool_use"
    )


_PDF = base64.b64encode(b"%PDF-1.4 mock").decode()


def test_documents_go_as_converse_document_blocks_and_audio_is_named(bedrock, upstream):
    """A PDF from each client wire becomes a ``document`` block (the mock refuses
    a bad name or format as Bedrock does); what Converse cannot take is named."""
    answer = _chat(
        bedrock,
        model=f"br/{CLAUDE}",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "summarize both"},
                    {
                        "type": "file",
                        "file": {
                            "file_data": f"data:application/pdf;base64,{_PDF}",
                            "filename": "Q3 report (final)!.pdf",
                        },
                    },
                    {
                        "type": "file",
                        "file": {"file_data": "data:text/plain,two%20words"},
                    },
                    {"type": "file", "file": {"file_id": "file-abc"}},
                    {
                        "type": "input_audio",
                        "input_audio": {"data": "UklG", "format": "wav"},
                    },
                ],
            }
        ],
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-omniroute-dropped"] == (
        "messages[0].content[3],messages[0].content[4]"
    )
    blocks = upstream.requests()[-1]["body"]["messages"][0]["content"]
    assert blocks[0] == {"text": "summarize both"}
    pdf, text = blocks[1]["document"], blocks[2]["document"]
    assert pdf["format"] == "pdf"
    assert pdf["source"] == {"bytes": _PDF}
    assert pdf["name"].startswith("Q3 report (final)-")
    assert text["format"] == "txt"
    assert base64.b64decode(text["source"]["bytes"]) == b"two words"
    assert text["name"].startswith("document-")

    messages = httpx.post(
        f"{bedrock.url}/v1/messages",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"br/{CLAUDE}",
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": _PDF,
                            },
                        },
                        {"type": "text", "text": "summarize"},
                    ],
                }
            ],
        },
        timeout=30,
    )
    assert messages.status_code == 200, messages.text
    assert "x-omniroute-dropped" not in messages.headers
    sent = upstream.requests()[-1]["body"]["messages"][0]["content"]
    assert sent[0]["document"]["format"] == "pdf"
    assert sent[0]["document"]["source"] == {"bytes": _PDF}


def test_a_messages_image_bedrock_cannot_take_is_named_at_its_block(bedrock, upstream):
    """The canonical form puts the system and each tool result in messages of
    their own; the name is still the client's block."""
    answer = httpx.post(
        f"{bedrock.url}/v1/messages",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"br/{CLAUDE}",
            "max_tokens": 64,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": "at what?"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "this"},
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://x.test/a.png"},
                        },
                    ],
                },
            ],
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-omniroute-dropped"] == "messages[2].content[1]"
    row = bedrock.requests_log()[-1]
    assert [a["dropped"] for a in bedrock.attempts_log(row["id"])] == [
        '["messages[2].content[1]"]'
    ]


def test_a_streamed_chat_reads_the_event_stream(oai, upstream):
    stream = oai.chat.completions.create(
        model=f"br/{CLAUDE}",
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
    assert text == f"Hello from mock {CLAUDE}."
    assert finish == "stop"
    assert usage is not None
    assert usage.completion_tokens == 4
    sent = upstream.requests()[-1]
    assert sent["path"] == f"{CLAUDE_PATH}/converse-stream"
    assert sent["stream"] is True
    assert sent["outcome"] == "completed"
    _assert_signed(sent)


def _sse_ids(gateway, path: str, body: dict) -> list[str | None]:
    """The ``id`` of every JSON chunk of a stream (``[DONE]`` aside)."""
    ids = []
    with httpx.stream(
        "POST",
        f"{gateway.url}{path}",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={**body, "stream": True},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                ids.append(json.loads(line[len("data: ") :]).get("id"))
    return ids


def test_every_converse_stream_chunk_carries_the_request_s_id(oai, bedrock, upstream):
    chunk_ids = {
        chunk.id
        for chunk in oai.chat.completions.create(
            model=f"br/{CLAUDE}",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
    }
    assert len(chunk_ids) == 1
    (only,) = chunk_ids
    assert only is not None
    assert only.startswith("chatcmpl-")
    assert len(only) > len("chatcmpl-")
    legacy = _sse_ids(
        bedrock, "/v1/completions", {"model": f"br/{CLAUDE}", "prompt": "hi"}
    )
    assert len(legacy) > 1
    assert len(set(legacy)) == 1
    assert legacy[0].startswith("cmpl-")
    assert len(legacy[0]) > len("cmpl-")


def test_a_streamed_tool_call_round_trips_with_the_sdk_stream_helper(oai, upstream):
    upstream.add(
        CLAUDE, tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    with oai.chat.completions.stream(
        model=f"br/{CLAUDE}",
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
    assert call.id.startswith("tooluse_mock")
    sent = upstream.requests()[-1]["body"]
    assert sent["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "The weather of a city",
                    "inputSchema": {"json": WEATHER["function"]["parameters"]},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "get_weather"}},
    }
    upstream.reset()
    answer = oai.chat.completions.create(
        model=f"br/{CLAUDE}",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER],
    )
    assert answer.choices[0].message.content == f"Hello from mock {CLAUDE}."
    assert upstream.requests()[-1]["body"]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": call.id,
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": call.id, "content": [{"text": "sunny"}]}}
            ],
        },
    ]


def test_the_default_credential_chain_signs_too(bedrock, upstream):
    response = _chat(bedrock, model="brdef/ddef")
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == (
        "Hello from mock ddef."
    )
    _assert_signed(upstream.requests()[-1], region="eu-west-1")


def test_a_non_streamed_tool_call(oai, upstream):
    upstream.add(
        CLAUDE, tool_calls=[{"name": "get_weather", "arguments": {"city": "Rome"}}]
    )
    answer = oai.chat.completions.create(
        model=f"br/{CLAUDE}",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {
        "city": "Rome"
    }


def test_usage_reaches_the_bill_with_cache_reads_and_writes(bedrock, upstream):
    upstream.add(
        CLAUDE,
        body={
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {
                "inputTokens": 300,
                "outputTokens": 100,
                "totalTokens": 1400,
                "cacheReadInputTokens": 600,
                "cacheWriteInputTokens": 400,
            },
        },
    )
    answer = _chat(bedrock, model=f"br/{CLAUDE}").json()
    assert answer["usage"]["prompt_tokens"] == 1300
    assert answer["usage"]["completion_tokens"] == 100
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 600
    row = bedrock.requests_log()[-1]
    # 300 fresh at 3.0, 600 cache reads at 0.3, 400 cache writes at 3.75, 100 out at 15
    assert float(row["cost_usd"]) == pytest.approx(
        (300 * 3.0 + 600 * 0.3 + 400 * 3.75 + 100 * 15.0) / 1e6
    )


# --- the other surfaces ---------------------------------------------------------------


def test_a_messages_request_is_translated_to_converse(bedrock, upstream):
    client = anthropic.Anthropic(base_url=bedrock.url, api_key=KEY_ALL, max_retries=0)
    message = client.messages.create(
        model=f"br/{CLAUDE}",
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello"}],
    )
    assert message.content[0].text == f"Hello from mock {CLAUDE}."
    assert message.stop_reason == "end_turn"
    sent = upstream.requests()[-1]
    assert sent["path"] == f"{CLAUDE_PATH}/converse"
    assert sent["body"]["system"] == [{"text": "Be brief."}]
    assert sent["body"]["inferenceConfig"]["maxTokens"] == 64


def test_messages_caching_top_k_and_a_failed_tool_result_reach_converse(
    bedrock, upstream
):
    """#14: what a chat client gets on Bedrock, a Messages client gets too."""
    marker = {"type": "ephemeral"}
    client = anthropic.Anthropic(base_url=bedrock.url, api_key=KEY_ALL, max_retries=0)
    raw = client.messages.with_raw_response.create(
        model=f"br/{CLAUDE}",
        max_tokens=64,
        system=[{"type": "text", "text": "Long rules.", "cache_control": marker}],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "weather?", "cache_control": marker}
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": "station offline",
                        "is_error": True,
                    }
                ],
            },
        ],
        tools=[
            {
                "name": "get_weather",
                "input_schema": WEATHER["function"]["parameters"],
            }
        ],
        extra_body={"top_k": 5},
    )
    assert raw.parse().content[0].text == f"Hello from mock {CLAUDE}."
    assert "x-omniroute-dropped" not in raw.headers
    sent = upstream.requests()[-1]["body"]
    assert sent["system"] == [
        {"text": "Long rules."},
        {"cachePoint": {"type": "default"}},
    ]
    assert sent["messages"][0]["content"] == [
        {"text": "weather?"},
        {"cachePoint": {"type": "default"}},
    ]
    assert sent["messages"][2]["content"] == [
        {
            "toolResult": {
                "toolUseId": "toolu_01",
                "content": [{"text": "station offline"}],
                "status": "error",
            }
        }
    ]
    assert sent["additionalModelRequestFields"] == {"top_k": 5}


def test_a_converse_stream_arrives_as_a_messages_stream(bedrock, upstream):
    """Spec 10 §6 example 2."""
    client = anthropic.Anthropic(base_url=bedrock.url, api_key=KEY_ALL, max_retries=0)
    with client.messages.stream(
        model=f"br/{CLAUDE}",
        max_tokens=64,
        messages=[{"role": "user", "content": "hello"}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == f"Hello from mock {CLAUDE}."
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4
    sent = upstream.requests()[-1]
    assert sent["path"] == f"{CLAUDE_PATH}/converse-stream"
    _assert_signed(sent)


def test_a_streamed_messages_tool_call_comes_from_bedrock(bedrock, upstream):
    upstream.add(
        CLAUDE, tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    client = anthropic.Anthropic(base_url=bedrock.url, api_key=KEY_ALL, max_retries=0)
    with client.messages.stream(
        model=f"br/{CLAUDE}",
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


def test_a_responses_request_is_translated_to_converse(oai, upstream):
    response = oai.responses.create(
        model=f"br/{CLAUDE}", input="hello", instructions="Be brief.", store=False
    )
    assert response.output_text == f"Hello from mock {CLAUDE}."
    assert response.status == "completed"
    sent = upstream.requests()[-1]
    assert sent["path"] == f"{CLAUDE_PATH}/converse"
    assert sent["body"]["system"] == [{"text": "Be brief."}]
    with oai.responses.stream(model=f"br/{CLAUDE}", input="hi", store=False) as stream:
        final = stream.get_final_response()
    assert final.output_text == f"Hello from mock {CLAUDE}."
    assert upstream.requests()[-1]["path"] == f"{CLAUDE_PATH}/converse-stream"


# --- embeddings -----------------------------------------------------------------------


def test_titan_embeddings_go_to_invoke(oai, upstream, bedrock):
    answer = oai.embeddings.create(
        model="br/amazon.titan-embed-text-v2:0", input="hello", dimensions=256
    )
    assert len(answer.data) == 1
    assert len(answer.data[0].embedding) == 256
    assert answer.usage.prompt_tokens >= 1
    sent = upstream.requests()[-1]
    assert sent["path"] == "/model/amazon.titan-embed-text-v2%3A0/invoke"
    assert sent["body"] == {
        "inputText": "hello",
        "dimensions": 256,
        "normalize": True,
    }
    _assert_signed(sent)
    row = bedrock.requests_log()[-1]
    assert row["endpoint"] == "embeddings"
    assert row["usage_source"] == "upstream"
    raw = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": "br/amazon.titan-embed-text-v2:0", "input": "hello"},
        timeout=30,
    ).json()
    assert "id" not in raw  # OpenAI's embeddings list has none
    assert raw["object"] == "list"


TITAN = "amazon.titan-embed-text-v2:0"


def _invokes(upstream) -> list[dict]:
    return [r for r in upstream.requests() if r["path"].endswith("/invoke")]


def test_titan_embeds_several_inputs_with_one_call_each(oai, upstream, bedrock):
    """Titan takes one ``inputText`` (the mock refuses a list as Bedrock does): the
    gateway sends one signed invoke per input and answers one list, in input order,
    with Titan's counts summed (the mock counts a token per four characters)."""
    texts = ["a" * 40, "b" * 8, "c"]
    answer = oai.embeddings.create(model=f"br/{TITAN}", input=texts, dimensions=512)
    assert [item.index for item in answer.data] == [0, 1, 2]
    assert all(len(item.embedding) == 512 for item in answer.data)
    assert len({tuple(item.embedding) for item in answer.data}) == 3
    assert answer.usage.prompt_tokens == 10 + 2 + 1
    assert answer.usage.total_tokens == 13
    sent = _invokes(upstream)
    assert sorted(r["body"]["inputText"] for r in sent) == sorted(texts)
    assert all(r["body"]["dimensions"] == 512 for r in sent)
    for request in sent:
        _assert_signed(request)
    # each vector is its own input's: the same text alone gives the same vector
    alone = oai.embeddings.create(model=f"br/{TITAN}", input="b" * 8, dimensions=512)
    assert alone.data[0].embedding == answer.data[1].embedding
    row = bedrock.requests_log()[-2]
    assert (row["endpoint"], row["usage_source"]) == ("embeddings", "upstream")


def test_a_failed_titan_part_fails_the_attempt_over(oai, upstream):
    """One of the three invokes answers 503: the attempt fails as a whole (no
    partial list) and the chain's next model answers every input."""
    upstream.add(TITAN, status=503, times=1)
    response = oai.embeddings.with_raw_response.create(
        model=f"br/{TITAN}",
        input=["a", "b", "c"],
        extra_body={"fallback_models": ["brfb/bfb"]},
    )
    answer = response.parse()
    assert answer.model == "brfb/bfb"
    assert [item.index for item in answer.data] == [0, 1, 2]
    report = json.loads(response.text)["omniroute"]
    first = report["failover"]["attempts"][0]
    assert (first["model"], first["reason"], first["http_status"]) == (
        f"br/{TITAN}",
        "server_error",
        503,
    )


def test_a_failed_titan_part_alone_is_the_classified_error(bedrock, upstream):
    upstream.add(TITAN, status=429, times=1)
    response = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={"model": f"br/{TITAN}", "input": ["a", "b", "c"]},
        timeout=30,
    )
    assert response.status_code == 429, response.text
    body = response.json()
    assert "data" not in body
    error = body["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "all_models_failed")
    assert error["message"].endswith(f"br/{TITAN} \u2014 rate_limit)")


def test_a_dimensions_cohere_cannot_make_is_named_and_strict_refuses_it(
    bedrock, upstream
):
    """Spec 09 §2.6 on the embeddings surface: Cohere's invoke body has no
    ``dimensions``; the vectors come at the model's size and the header names the
    field; under ``X-OmniRoute-Strict: true`` a 400 names it before any call."""
    body = {"model": "br/cohere.embed-english-v3", "input": ["a"], "dimensions": 256}
    answered = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json=body,
        timeout=30,
    )
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-omniroute-dropped"] == "dimensions"
    assert "dimensions" not in _invokes(upstream)[-1]["body"]
    calls = len(upstream.requests())
    refused = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json=body,
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "unsupported_parameter",
        "dimensions",
        "invalid_request_error",
    )
    assert len(upstream.requests()) == calls  # before any call
    # Titan V2 makes 256: nothing is named, even under Strict
    titan = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}", "X-OmniRoute-Strict": "true"},
        json={**body, "model": f"br/{TITAN}"},
        timeout=30,
    )
    assert titan.status_code == 200, titan.text
    assert "x-omniroute-dropped" not in titan.headers
    # a size Titan V2 does not make is left out and named, as Cohere's
    other = httpx.post(
        f"{bedrock.url}/v1/embeddings",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={**body, "model": f"br/{TITAN}", "dimensions": 300},
        timeout=30,
    )
    assert other.status_code == 200, other.text
    assert other.headers["x-omniroute-dropped"] == "dimensions"
    assert _invokes(upstream)[-1]["body"] == {"inputText": "a"}


def test_cohere_v4_makes_the_asked_dimensions(oai, upstream):
    """Embed v4 takes ``output_dimension`` (256, 512, 1024 or 1536): ``dimensions``
    reaches it under that name and the vectors come at that size."""
    answer = oai.embeddings.with_raw_response.create(
        model="br/cohere.embed-v4:0", input=["a", "b"], dimensions=512
    )
    assert "x-omniroute-dropped" not in answer.headers
    vectors = answer.parse().data
    assert [len(item.embedding) for item in vectors] == [512, 512]
    assert upstream.requests()[-1]["body"]["output_dimension"] == 512


def test_cohere_embeddings_send_every_text(oai, upstream):
    answer = oai.embeddings.create(
        model="br/cohere.embed-english-v3", input=["a", "b", "c"]
    )
    assert [item.index for item in answer.data] == [0, 1, 2]
    assert answer.data[0].embedding != answer.data[1].embedding
    sent = upstream.requests()[-1]
    assert sent["path"] == "/model/cohere.embed-english-v3/invoke"
    assert sent["body"]["texts"] == ["a", "b", "c"]


def test_cohere_usage_is_the_input_token_count_header(oai, upstream, bedrock):
    """Cohere's invoke body has no count: ``X-Amzn-Bedrock-Input-Token-Count`` is
    the upstream's own (the mock counts a token per four characters, at least
    one per text)."""
    texts = ["a" * 40, "b" * 8, "c"]
    answer = oai.embeddings.create(model="br/cohere.embed-english-v3", input=texts)
    assert answer.usage.prompt_tokens == 10 + 2 + 1
    assert answer.usage.total_tokens == 13
    row = bedrock.requests_log()[-1]
    assert row["usage_source"] == "upstream"
    upstream.add(
        "cohere.embed-english-v3",
        headers={"X-Amzn-Bedrock-Input-Token-Count": "321"},
        times=1,
    )
    scripted = oai.embeddings.create(model="br/cohere.embed-english-v3", input="hi")
    assert scripted.usage.prompt_tokens == 321


# --- failures -------------------------------------------------------------------------


def test_a_throttling_exception_cools_the_connection_like_a_429(bedrock, upstream):
    upstream.add(CLAUDE, status=429, times=1)
    first = _chat(bedrock, model=f"br/{CLAUDE}")
    assert first.status_code == 429
    assert upstream.requests()[-1]["outcome"] == "error"
    assert _health(bedrock, "br")["cooldown_until"] is not None
    again = _chat(bedrock, model=f"br/{CLAUDE}")
    assert again.status_code == 503
    assert again.json()["error"]["attempts"][0]["reason"] == "cooldown"
    assert len(upstream.requests()) == 1
    row = bedrock.requests_log()[-2]
    attempt = bedrock.attempts_log(row["id"])[-1]
    assert (attempt["reason"], attempt["http_status"]) == ("rate_limit", 429)
    assert attempt["cooldown_trigger"]


def test_the_mock_answers_a_429_as_a_throttling_exception(mock, upstream):
    upstream.add(CLAUDE, status=429, times=1)
    url = f"{_root(mock)}{CLAUDE_PATH}/converse"
    body = b'{"messages": [{"role": "user", "content": [{"text": "x"}]}]}'
    headers = {"content-type": "application/json"}
    headers |= sign_request(
        method="POST",
        url=url,
        headers=headers,
        body=body,
        now=time.time(),
        key=AwsKey("us-east-1", TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY),
    )
    response = httpx.post(url, content=body, headers=headers, timeout=10)
    assert response.status_code == 429
    assert response.headers["x-amzn-errortype"].startswith("ThrottlingException")
    assert response.json()["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"inputText": ["a", "b"]}, "inputText"),
        ({"inputText": "a", "dimensions": 300, "normalize": True}, "dimensions"),
    ],
)
def test_the_mock_refuses_what_titan_refuses(mock, upstream, body, field):
    """Titan embeds one string per call and V2 makes 256, 512 or 1024 wide vectors:
    the mock answers anything else with Bedrock's ``ValidationException``, so the
    gateway's one-invoke-per-input and ``dimensions`` handling are tested against
    the rule, not around it."""
    url = f"{_root(mock)}/model/{TITAN.replace(':', '%3A')}/invoke"
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    headers |= sign_request(
        method="POST",
        url=url,
        headers=headers,
        body=content,
        now=time.time(),
        key=AwsKey("us-east-1", TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY),
    )
    response = httpx.post(url, content=content, headers=headers, timeout=10)
    assert response.status_code == 400
    assert response.headers["x-amzn-errortype"].startswith("ValidationException")
    assert f"#/{field}" in response.json()["message"]


def test_a_wrong_secret_is_a_403_that_auth_disables_the_connection(bedrock, upstream):
    first = _chat(bedrock, models=["brbad/bbad", "brfb/bfb"])
    assert first.status_code == 200
    attempt = first.json()["omniroute"]["failover"]["attempts"][0]
    assert (attempt["model"], attempt["reason"], attempt["detail"]) == (
        "brbad/bbad",
        "server_error",
        "auth_failed",
    )
    assert attempt["http_status"] == 403
    refused = upstream.requests()[0]
    assert refused["path"] == "/model/bbad/converse"
    assert refused["outcome"] == "error"
    health = _health(bedrock, "brbad")
    assert health["auth_status"] == "auth_failed"
    assert health["auth_disabled_until"] is not None
    second = _chat(bedrock, models=["brbad/bbad", "brfb/bfb"])
    skipped = second.json()["omniroute"]["failover"]["attempts"][0]
    assert (skipped["status"], skipped["reason"]) == ("skipped", "auth_disabled")


def test_a_service_unavailable_fails_over(bedrock, upstream):
    upstream.add(CLAUDE, status=503, times=1)
    response = _chat(bedrock, models=[f"br/{CLAUDE}", "brfb/bfb"])
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "brfb/bfb"
    first = body["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["http_status"]) == ("server_error", 503)


def test_an_exception_frame_before_commit_fails_over(oai, upstream):
    upstream.add(
        CLAUDE,
        stream_error={"__type": "throttlingException", "message": "slow down"},
    )
    stream = oai.chat.completions.create(
        model=f"br/{CLAUDE}",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_body={"fallback_models": ["brfb/bfb"]},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from mock bfb."


def test_a_stream_cut_after_commit_is_interrupted(bedrock, upstream):
    upstream.add(CLAUDE, drop_after_tokens=2)
    response = httpx.post(
        f"{bedrock.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY_ALL}"},
        json={
            "model": f"br/{CLAUDE}",
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
    row = bedrock.requests_log()[-1]
    assert row["status"] == "interrupted"
    # Bedrock reports usage only at the end: the gateway's estimate is billed
    assert row["usage_source"] == "estimated"


def test_a_context_overflow_is_context_length(bedrock, upstream):
    upstream.add(
        CLAUDE,
        status=400,
        error_body={"message": "Input is too long for requested model."},
        times=1,
    )
    response = _chat(bedrock, models=[f"br/{CLAUDE}", "brfb/bfb"])
    assert response.status_code == 200
    first = response.json()["omniroute"]["failover"]["attempts"][0]
    assert (first["reason"], first["http_status"]) == ("context_length", 400)


# --- Test connection and discovery ----------------------------------------------------


def _connection_id(gateway, provider: str) -> int:
    listed = httpx.get(
        f"{gateway.url}/api/connections",
        headers={"Authorization": f"Bearer {gateway.admin_token}"},
        timeout=10,
    ).json()
    return next(c["id"] for c in listed if c["provider"] == provider)


def test_discovery_lists_foundation_models_and_inference_profiles(bedrock, upstream):
    upstream.add("meta.llama-mock-v1:0", content="x")  # the mock lists scripted ids
    answer = _api(bedrock, "providers/br/discover")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True
    ids = [m["id"] for m in body["models"]]
    assert "meta.llama-mock-v1:0" in ids
    assert "us.meta.llama-mock-v1:0" in ids
    paths = [r["path"] for r in upstream.requests()]
    assert paths == ["/foundation-models", "/inference-profiles?maxResults=1000"]
    for sent in upstream.requests():
        _assert_signed(sent)
    assert TEST_SECRET_ACCESS_KEY not in answer.text


def test_test_connection_signs_and_reports_a_wrong_secret(bedrock, upstream):
    good = _api(bedrock, f"connections/{_connection_id(bedrock, 'br')}/test").json()
    assert (good["ok"], good["http_status"]) == (True, 200)
    bad = _api(bedrock, f"connections/{_connection_id(bedrock, 'brbad')}/test")
    body = bad.json()
    assert (body["ok"], body["http_status"]) == (False, 403)
    assert (body["reason"], body["detail"]) == ("server_error", "auth_failed")
    assert "signature" in body["message"].lower()
    assert "not-the-secret" not in bad.text
    # a probe feeds no health state
    assert _health(bedrock, "brbad")["auth_disabled_until"] is None


def test_the_mock_refuses_an_unsigned_request(mock, bedrock):
    response = httpx.post(
        f"{_root(mock)}{CLAUDE_PATH}/converse", json={"messages": []}, timeout=10
    )
    assert response.status_code == 403
    assert response.headers["x-amzn-errortype"].startswith(
        "MissingAuthenticationTokenException"
    )


def test_a_tool_history_without_tools_is_accepted_by_the_converse_wire(
    bedrock, upstream
):
    """Bedrock refuses tool blocks without a toolConfig (the mock too): the
    dialect declares the tools the history called."""
    call = {
        "id": "tooluse_hist_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    response = _chat(
        bedrock,
        model=f"br/{CLAUDE}",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "tooluse_hist_1", "content": "sunny"},
            {"role": "user", "content": "thanks, summarise"},
        ],
    )
    assert response.status_code == 200, response.text
    sent = upstream.requests()[-1]["body"]
    assert [t["toolSpec"]["name"] for t in sent["toolConfig"]["tools"]] == [
        "get_weather"
    ]
    url = f"{_root(upstream)}{CLAUDE_PATH}/converse"
    body = json.dumps({k: v for k, v in sent.items() if k != "toolConfig"}).encode()
    headers = {"content-type": "application/json"}
    headers |= _signed(url, headers, body)
    refused = httpx.post(url, content=body, headers=headers, timeout=10)
    assert refused.status_code == 400
    assert refused.headers["x-amzn-errortype"].startswith("ValidationException")
    assert "toolConfig field must be defined" in refused.json()["message"]


def _signed(url: str, headers: dict, body: bytes) -> dict:
    return sign_request(
        method="POST",
        url=url,
        headers=headers,
        body=body,
        now=time.time(),
        key=AwsKey("us-east-1", TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY),
    )


def test_cohere_embeds_more_than_96_texts_in_calls_of_96(oai, upstream):
    """Cohere takes at most 96 texts an invoke (the mock refuses more, as Bedrock
    does): 200 inputs are three calls, the vectors in input order."""
    inputs = [f"text {n}" for n in range(200)]
    answer = oai.embeddings.create(model="br/cohere.embed-english-v3", input=inputs)
    assert [item.index for item in answer.data] == list(range(200))
    single = oai.embeddings.create(
        model="br/cohere.embed-english-v3", input=inputs[150]
    )
    assert answer.data[150].embedding == single.data[0].embedding
    sizes = [len(r["body"]["texts"]) for r in _invokes(upstream)[-4:-1]]
    assert sizes == [96, 96, 8]
