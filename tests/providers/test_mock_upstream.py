"""The mock LLM provider over loopback (socket server) and in process (ASGI)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from providers.mock_upstream import (
    MockConnectionReset,
    RunningMock,
    build_app,
    start_in_thread,
)

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
PROMPT_TOKENS = len(orjson.dumps(MESSAGES)) // 4


@pytest.fixture
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture
def sdk(mock: RunningMock) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=mock.url, api_key="x", max_retries=0, timeout=2.0)
    yield client
    client.close()


@pytest.fixture
def http(mock: RunningMock) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mock.url, timeout=2.0) as client:
        yield client


def chat(model: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, **extra}


def sse_data(lines: list[str]) -> list[Any]:
    return [
        line[len("data: ") :] if line == "data: [DONE]" else orjson.loads(line[6:])
        for line in lines
        if line.startswith("data: ")
    ]


def test_openai_sdk_gets_default_answer_with_usage(
    mock: RunningMock, sdk: openai.OpenAI
) -> None:
    completion = sdk.chat.completions.create(model="m1", messages=MESSAGES)

    assert completion.model == "m1"
    assert completion.choices[0].message.content == "Hello from mock m1."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == PROMPT_TOKENS
    assert completion.usage.completion_tokens == 4
    [record] = mock.requests()
    assert record["path"] == "/v1/chat/completions"
    assert record["model"] == "m1"
    assert record["body"] == chat()
    assert record["headers"]["authorization"] == "Bearer x"
    assert record["stream"] is False
    assert record["outcome"] == "completed"
    assert record["finished_at"] >= record["started_at"]


def test_openai_sdk_stream_has_role_tokens_finish_and_usage(
    mock: RunningMock, sdk: openai.OpenAI
) -> None:
    mock.add("m1", content="one two three")

    chunks = list(
        sdk.chat.completions.create(
            model="m1",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert chunks[0].choices[0].delta.role == "assistant"
    text = [c.choices[0].delta.content for c in chunks[1:4]]
    assert text == ["one", " two", " three"]
    assert chunks[4].choices[0].finish_reason == "stop"
    assert chunks[5].choices == []
    assert chunks[5].usage is not None
    assert chunks[5].usage.completion_tokens == 3
    assert len(chunks) == 6
    assert mock.requests()[0]["stream"] is True


def test_raw_openai_stream_is_chunked_and_ends_with_done(http: httpx.Client) -> None:
    with http.stream("POST", "/chat/completions", json=chat(stream=True)) as response:
        lines = list(response.iter_lines())

    assert response.headers["transfer-encoding"] == "chunked"
    assert response.headers["content-type"] == "text/event-stream"
    events = sse_data(lines)
    assert events[-1] == "[DONE]"
    assert "usage" not in str(events)  # not asked for with stream_options
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


def test_paths_without_v1_prefix_and_model_list(mock: RunningMock) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{mock.port}") as client:
        reply = client.post("/chat/completions", json=chat("bare"))
        models = client.get("/v1/models").json()

    assert reply.json()["choices"][0]["message"]["content"] == "Hello from mock bare."
    assert [m["id"] for m in models["data"]] == ["mock-small", "mock-large"]


def test_anthropic_message_has_content_blocks_and_usage(http: httpx.Client) -> None:
    reply = http.post(
        "/messages", json={"model": "claude-x", "max_tokens": 10, "messages": MESSAGES}
    )

    body = reply.json()
    assert reply.status_code == 200
    assert body["type"] == "message"
    assert body["model"] == "claude-x"
    assert body["content"] == [{"type": "text", "text": "Hello from mock claude-x."}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"] == {"input_tokens": PROMPT_TOKENS, "output_tokens": 4}


def test_anthropic_stream_sends_the_messages_event_sequence(http: httpx.Client) -> None:
    request = {"model": "claude-x", "messages": MESSAGES, "stream": True}
    with http.stream("POST", "/messages", json=request) as response:
        lines = list(response.iter_lines())

    events = [line[len("event: ") :] for line in lines if line.startswith("event: ")]
    assert events == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    data = sse_data(lines)
    text = "".join(
        d["delta"]["text"] for d in data if d["type"] == "content_block_delta"
    )
    assert text == "Hello from mock claude-x."
    assert data[-2]["delta"]["stop_reason"] == "end_turn"
    assert data[-2]["usage"] == {"output_tokens": 4}


def test_503_returns_openai_error_and_records_error(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", status=503)

    reply = http.post("/chat/completions", json=chat(stream=True))

    assert reply.status_code == 503
    assert reply.json()["error"]["type"] == "overloaded_error"
    assert mock.requests()[0]["outcome"] == "error"


def test_429_carries_retry_after_to_the_sdk(
    mock: RunningMock, sdk: openai.OpenAI
) -> None:
    mock.add(status=429, headers={"Retry-After": "7"})

    with pytest.raises(openai.RateLimitError) as raised:
        sdk.chat.completions.create(model="any", messages=MESSAGES)

    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.body == {
        "message": "Mock upstream error: 429 Too Many Requests.",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_reset_before_headers_is_a_transport_error(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", reset="before_headers")

    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        http.post("/chat/completions", json=chat())

    assert mock.requests()[0]["outcome"] == "reset"


def test_drop_after_tokens_truncates_the_stream(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", content="a b c d e", drop_after_tokens=2, token_delay_ms=5)
    lines: list[str] = []

    with (
        pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)),
        http.stream("POST", "/chat/completions", json=chat(stream=True)) as response,
    ):
        lines.extend(response.iter_lines())

    deltas = [c["choices"][0]["delta"].get("content") for c in sse_data(lines)]
    assert deltas == ["", "a", " b"]
    assert mock.requests()[0]["outcome"] == "reset"


def test_stream_error_event_follows_the_tokens(
    mock: RunningMock, http: httpx.Client
) -> None:
    error = {"type": "rate_limit_error", "message": "slow down"}
    mock.add("m1", drop_after_tokens=1, stream_error=error)

    with http.stream("POST", "/chat/completions", json=chat(stream=True)) as response:
        events = sse_data(list(response.iter_lines()))

    assert events[1]["choices"][0]["delta"] == {"content": "Hello"}
    assert events[2:] == [{"error": error}]
    assert mock.requests()[0]["outcome"] == "error"


def test_ttft_delays_the_first_token_after_the_role_chunk(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", ttft_ms=300)
    seen: list[float] = []

    with http.stream("POST", "/chat/completions", json=chat(stream=True)) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen.append(time.monotonic())

    assert seen[1] - seen[0] >= 0.28
    assert seen[-1] - seen[1] < 0.1


def test_hang_until_client_timeout_records_cancelled(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", hang=True)

    with pytest.raises(httpx.ReadTimeout):
        http.post("/chat/completions", json=chat(), timeout=0.2)

    [record] = mock.wait_for("cancelled", timeout_seconds=1.0)
    assert record["finished_at"] is not None


def test_role_then_hang_then_disconnect_records_cancelled(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", role_then_hang=True)

    with http.stream("POST", "/chat/completions", json=chat(stream=True)) as response:
        first = next(response.iter_lines())

    assert orjson.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
    mock.wait_for("cancelled", timeout_seconds=1.0)


def test_counted_behaviours_play_in_order_then_fall_back(
    mock: RunningMock, http: httpx.Client
) -> None:
    mock.add("m1", status=503, times=2)
    mock.add("m1", status=429, times=1)
    mock.add(status=500)  # permanent catch-all
    mock.add("m2", content="two")

    statuses = [http.post("/chat/completions", json=chat()).status_code for _ in "1234"]
    other = http.post("/chat/completions", json=chat("m2")).json()

    assert statuses == [503, 503, 429, 500]
    assert other["choices"][0]["message"]["content"] == "two"


def test_control_endpoints_add_list_and_reset(http: httpx.Client) -> None:
    added = http.post(
        "/_mock/behaviours",
        json=[{"model": "m1", "raw_body": "not json", "times": 1}, {"tokens": 3}],
    )
    broken = http.post("/chat/completions", json=chat())
    filler = http.post("/chat/completions", json=chat("m9")).json()
    recorded = http.get("/_mock/requests").json()
    http.post("/_mock/reset")

    assert added.json() == {"added": 2}
    assert broken.text == "not json"
    assert filler["choices"][0]["message"]["content"] == "Hello from mock"
    assert [r["model"] for r in recorded] == ["m1", "m9"]
    assert http.get("/_mock/requests").json() == []
    unknown = http.post("/_mock/behaviours", json={"colour": "red"})
    assert unknown.status_code == 400


def test_tool_calls_answer_with_function_calls(
    mock: RunningMock, sdk: openai.OpenAI
) -> None:
    mock.add(tool_calls=[{"name": "lookup", "arguments": {"q": "x"}}])

    completion = sdk.chat.completions.create(model="m1", messages=MESSAGES)

    [call] = completion.choices[0].message.tool_calls or []
    assert completion.choices[0].finish_reason == "tool_calls"
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "lookup"
    assert orjson.loads(call.function.arguments) == {"q": "x"}


def test_keep_alive_serves_pipelined_requests_on_one_connection(
    mock: RunningMock,
) -> None:
    mock.add(body={"weird": True})
    body = orjson.dumps(chat())
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )

    with socket.create_connection(("127.0.0.1", mock.port), timeout=2) as sock:
        sock.sendall(request * 3)
        received = b""
        while received.count(b'{"weird":true}') < 3:
            received += sock.recv(65536)

    assert received.count(b"HTTP/1.1 200 OK\r\n") == 3
    assert len(mock.requests()) == 3


@pytest.mark.asyncio
async def test_asgi_app_answers_in_process() -> None:
    mock_app = build_app()
    transport = httpx.ASGITransport(app=mock_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mock/v1") as c:
        reply = await c.post("/chat/completions", json=chat())
        stream = await c.post("/messages", json=chat("claude", stream=True))

    assert reply.json()["choices"][0]["message"]["content"] == "Hello from mock m1."
    assert stream.text.endswith(
        'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert [r["outcome"] for r in mock_app.state.requests()] == ["completed"] * 2


@pytest.mark.asyncio
async def test_asgi_app_hang_is_cancelled_and_reset_raises() -> None:
    mock_app = build_app()
    mock_app.state.add("slow", hang=True)
    mock_app.state.add("broken", reset="mid_body")
    transport = httpx.ASGITransport(app=mock_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mock/v1") as c:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(c.post("/chat/completions", json=chat("slow")), 0.1)
        with pytest.raises(MockConnectionReset):
            await c.post("/chat/completions", json=chat("broken"))

    outcomes = [r["outcome"] for r in mock_app.state.requests()]
    assert outcomes == ["cancelled", "reset"]
