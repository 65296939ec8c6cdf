"""How a committed stream ends (spec 02 §6.1, §8, §11): a clean close after content
with neither a ``finish_reason`` nor an end marker is an interruption, not an answer;
an interrupted Anthropic stream keeps the usage its ``message_start`` reported."""

from __future__ import annotations

import httpx
import orjson

from gateway.dialects import REGISTRY, UpstreamCall
from gateway.kernel.errors import FailureReason
from gateway.pipeline.upstream import OpenStream, open_stream
from tests.gateway.test_stream_idle_bytes import _chunk, _serve

FINISH = (
    b"data: "
    + orjson.dumps(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m1",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    + b"\n\n"
)


async def _drain(parts: list[bytes | float], kind: str = "openai") -> OpenStream:
    server, url = await _serve(parts)
    async with server, httpx.AsyncClient() as client:
        stream = await open_stream(
            client,
            REGISTRY[kind],
            UpstreamCall(url=url, headers={}, body={"stream": True}),
            timeout_s=10,
            first_token_s=None,
            idle_timeout_s=5,
            created=1,
        )
        assert isinstance(stream, OpenStream)
        async for _ in stream.batches():
            pass
        await stream.aclose()
        return stream


async def test_a_stream_closed_after_content_without_an_end_is_interrupted():
    stream = await _drain([_chunk("Hi "), _chunk("there")])
    assert stream.interrupted is not None
    assert stream.interrupted.reason is FailureReason.CONNECTION_ERROR


async def test_a_finish_reason_without_done_is_a_complete_answer():
    stream = await _drain([_chunk("Hi"), FINISH])
    assert stream.interrupted is None


async def test_done_without_a_finish_reason_is_a_complete_answer():
    stream = await _drain([_chunk("Hi"), b"data: [DONE]\n\n"])
    assert stream.interrupted is None


def _event(name: str, data: dict) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def test_an_interrupted_anthropic_stream_keeps_the_reported_usage():
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "claude-x",
            "usage": {
                "input_tokens": 20,
                "cache_read_input_tokens": 10,
                "cache_creation_input_tokens": 5,
                "output_tokens": 1,
            },
        },
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "Hi"},
    }
    stream = await _drain(
        [
            _event("message_start", start),
            _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            _event("content_block_delta", delta),
        ],
        kind="anthropic",
    )
    assert stream.interrupted is not None  # no message_delta, no message_stop
    assert stream.result.partial_usage is not None
    usage = stream.result.partial_usage()
    assert (
        usage["prompt_tokens"],
        usage["prompt_tokens_details"]["cached_tokens"],
    ) == (
        35,
        10,
    )
